"""CUDA (or CPU) through torch: cuBLAS / cuBLASLt matmuls per dtype, fused elementwise
kernels, SDPA attention.

- fp32 runs with TF32 off and tf32 with it on (`torch.backends.cuda.matmul.allow_tf32`,
  set on every call because it is a global switch).
- fp8 is `torch._scaled_mm` on e4m3 inputs with unit scales and a bf16 output (needs
  compute capability 8.9+); int8 is `torch._int_mm` (int32 output).
- Streaming kernels: read = sum(a), copy = b.copy_(a), triad = a = b + s·c (one fused pass).
- Attention: `scaled_dot_product_attention` on [B, H, L, d] tensors; GQA through
  `enable_gqa` (torch 2.5+). Causal masking in SDPA is top-left aligned, so causal cases
  are prefill (q_len = kv_len); a decode query (q_len = 1) sees every key, unmasked.
Every builder runs its kernel once, so an unsupported dtype or shape fails while building
(as `Unsupported`), not while timing.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..errors import RooflineError
from ._torch import require_cuda, require_torch, torch_dtype
from .backend import ROW, StreamCase, Unsupported, check_kernel
from .device import DeviceInfo, cpu_info, cuda_info
from .timing import CudaEventTimer, Timer, WallTimer, looped

_STREAM = {"read": (1, 1.0), "copy": (2, 2.0), "triad": (3, 3.0)}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


class TorchBackend:
    name = "torch"

    def __init__(self, device: str = "cuda") -> None:
        self.torch: Any = require_torch(f"--device {device}" if device == "cuda"
                                        else "--backend torch")
        self.device = device
        if device == "cuda":
            require_cuda(self.torch)
            self.info: DeviceInfo = cuda_info(self.torch, self.torch.cuda.current_device())
            major, minor = self.torch.cuda.get_device_capability()
            fp8 = ("fp8",) if (major, minor) >= (8, 9) else ()
            self.matmul_dtypes: tuple[str, ...] = ("fp64", "fp32", "tf32", "bf16", "fp16",
                                                   *fp8, "int8")
            self.elementwise_dtype = "bf16"
        else:
            info = cpu_info()
            threads = self.torch.get_num_threads()
            self.info = replace(info, software=f"torch {self.torch.__version__} "
                                               f"(CPU, {threads} threads)")
            self.matmul_dtypes = ("fp64", "fp32", "bf16")
            self.elementwise_dtype = "fp32"
        self.F: Any = importlib.import_module("torch.nn.functional")
        self._gen = self.torch.Generator(device=device).manual_seed(0)

    def timer(self) -> Timer:
        return CudaEventTimer(self.torch) if self.device == "cuda" else WallTimer()

    def _randn(self, *shape: int, dtype: str = "fp32") -> Any:
        t = self.torch.randn(*shape, device=self.device, generator=self._gen)
        return t.to(torch_dtype(self.torch, dtype))

    def _probe(self, fn: Callable[[], Any], what: str) -> Callable[[], Any]:
        try:
            fn()
            if self.device == "cuda":
                self.torch.cuda.synchronize()
        except Exception as exc:  # torch raises RuntimeError, NotImplementedError, ...
            raise Unsupported(f"{what} does not run here: {_first_line(exc)}") from None
        return fn

    def matmul(self, m: int, k: int, n: int, dtype: str) -> Callable[[], Any]:
        torch = self.torch
        if dtype == "fp8":
            a = self._randn(m, k, dtype="fp8")
            b = self._randn(n, k, dtype="fp8").t()  # column-major [k, n], as cuBLASLt wants
            one = torch.ones((), device=self.device, dtype=torch.float32)

            def fp8() -> Any:
                return torch._scaled_mm(a, b, scale_a=one, scale_b=one,
                                        out_dtype=torch.bfloat16)
            return self._probe(fp8, "fp8 matmul (torch._scaled_mm)")
        if dtype == "int8":
            ai = torch.randint(-8, 8, (m, k), device=self.device, dtype=torch.int8,
                               generator=self._gen)
            bi = torch.randint(-8, 8, (n, k), device=self.device, dtype=torch.int8,
                               generator=self._gen).t()
            return self._probe(lambda: torch._int_mm(ai, bi), "int8 matmul (torch._int_mm)")
        x, w = self._randn(m, k, dtype=dtype), self._randn(k, n, dtype=dtype)
        out = torch.empty(m, n, device=self.device, dtype=x.dtype)
        tf32 = dtype == "tf32"
        switch = torch.backends.cuda.matmul

        def mm() -> Any:
            switch.allow_tf32 = tf32  # global: set on every call (fp32 means TF32 off)
            return torch.matmul(x, w, out=out)
        return self._probe(mm, f"{dtype} matmul")

    def matmul_method(self, dtype: str) -> str:
        call = {"fp8": "torch._scaled_mm e4m3 -> bf16", "int8": "torch._int_mm -> int32",
                "tf32": "torch.matmul fp32 with allow_tf32", "fp32": "torch.matmul fp32, "
                "TF32 off"}.get(dtype, f"torch.matmul {dtype}")
        return f"{call} ({self.info.software})"

    def stream(self, kernel: str, working_set_bytes: float,
               threads: int | None = None) -> StreamCase:
        check_kernel(kernel)
        arrays, moved = _STREAM[kernel]
        elems = max(1024, int(working_set_bytes // (arrays * 4)))
        torch = self.torch
        a, b, c = (torch.ones(elems, device=self.device) for _ in range(3))
        fn: Callable[[], Any]
        if kernel == "read":
            fn = a.sum
        elif kernel == "copy":
            fn = lambda: b.copy_(a)  # noqa: E731
        else:
            fn = lambda: torch.add(b, c, alpha=3.0, out=a)  # noqa: E731
        nbytes = elems * 4.0
        return StreamCase(kernel, looped(fn), arrays * nbytes, moved * nbytes)

    def elementwise(self, kind: str, n: int, dtype: str) -> Callable[[], Any]:
        torch, F = self.torch, self.F
        aten = torch.ops.aten
        x = self._randn(n, dtype=dtype)
        out = torch.empty_like(x)
        simple: dict[str, Callable[[], Any]] = {
            "relu": lambda: torch.clamp_min(x, 0, out=out),
            "silu": lambda: aten.silu.out(x, out=out),
            "gelu": lambda: aten.gelu.out(x, approximate="tanh", out=out),
        }
        if kind in ("add", "mul"):
            y = self._randn(n, dtype=dtype)
            op = torch.add if kind == "add" else torch.mul
            return self._probe(lambda: op(x, y, out=out), kind)
        if kind in simple:
            return self._probe(simple[kind], kind)
        if kind in ("softmax", "rmsnorm", "layernorm"):
            if n % ROW:
                raise RooflineError(f"{kind}: n must be a multiple of the row length {ROW}")
            x2, out2 = x.view(-1, ROW), out.view(-1, ROW)
            weight = torch.ones(ROW, device=self.device, dtype=x.dtype)
            rows: dict[str, Callable[[], Any]] = {
                "softmax": lambda: aten._softmax.out(x2, -1, False, out=out2),
                "rmsnorm": lambda: F.rms_norm(x2, (ROW,), weight),
                "layernorm": lambda: F.layer_norm(x2, (ROW,), weight, weight),
            }
            return self._probe(rows[kind], kind)
        raise Unsupported(f"the torch backend has no {kind!r} kernel (it has add, mul, relu, "
                          "silu, gelu, softmax, rmsnorm, layernorm)")

    def attention(self, batch: int, q_len: int, kv_len: int, heads: int, kv_heads: int,
                  head_dim: int, causal: bool, dtype: str) -> Callable[[], Any]:
        if causal and 1 < q_len < kv_len:
            raise Unsupported("SDPA's causal mask is top-left aligned: causal cases need "
                              "q_len = kv_len (prefill) or q_len = 1 (decode)")
        q = self._randn(batch, heads, q_len, head_dim, dtype=dtype)
        k = self._randn(batch, kv_heads, kv_len, head_dim, dtype=dtype)
        v = self._randn(batch, kv_heads, kv_len, head_dim, dtype=dtype)
        extra = {"enable_gqa": True} if heads != kv_heads else {}
        is_causal = causal and q_len > 1
        sdpa = self.F.scaled_dot_product_attention
        return self._probe(lambda: sdpa(q, k, v, is_causal=is_causal, **extra),
                           f"SDPA attention ({dtype})")
