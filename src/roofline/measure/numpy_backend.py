"""The CPU through numpy: BLAS matmuls on every core, streaming loops on one thread per core.

Bytes counted are the bytes a kernel's loops read and write (STREAM's convention: a store's
write-allocate read is not counted). numpy cannot fuse, so a multi-pass op (silu, softmax,
rmsnorm here) really moves several times the bytes of the fused single pass the roofline
counts: its low efficiency is the fusion gap, measured.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import RooflineError
from .backend import ROW, StreamCase, Unsupported, check_kernel
from .device import DeviceInfo, cpu_info
from .timing import Timer, WallTimer, threaded

_NP_DTYPES = {"fp64": np.float64, "fp32": np.float32}
# arrays per kernel, and bytes moved per call in units of one array
_STREAM = {"read": (1, 1.0), "copy": (2, 2.0), "triad": (3, 5.0)}


class NumpyBackend:
    name = "numpy"
    device = "cpu"
    matmul_dtypes: tuple[str, ...] = ("fp64", "fp32")
    elementwise_dtype = "fp32"
    multi_pass = ("silu", "softmax", "rmsnorm")  # numpy cannot fuse these

    def __init__(self) -> None:
        self.info: DeviceInfo = cpu_info()
        self._rng = np.random.default_rng(0)

    def timer(self) -> Timer:
        return WallTimer()

    def _dtype(self, dtype: str) -> Any:
        if dtype not in _NP_DTYPES:
            raise Unsupported(f"the numpy backend computes in {', '.join(_NP_DTYPES)}, "
                              f"not {dtype} (the torch backend has it)")
        return _NP_DTYPES[dtype]

    def _random(self, shape: tuple[int, ...], dtype: str) -> Any:
        return self._rng.standard_normal(shape).astype(self._dtype(dtype))

    def matmul(self, m: int, k: int, n: int, dtype: str) -> Callable[[], Any]:
        x, w = self._random((m, k), dtype), self._random((k, n), dtype)
        out = np.empty((m, n), dtype=self._dtype(dtype))
        return lambda: np.matmul(x, w, out=out)

    def matmul_method(self, dtype: str) -> str:
        return f"numpy.matmul {dtype} ({self.info.software}, all cores)"

    def stream(self, kernel: str, working_set_bytes: float,
               threads: int | None = None) -> StreamCase:
        """read: max-reduce a; copy: b = a; triad: a = s·c then a += b (numpy: two passes).

        One thread per core, each on its own contiguous chunk (aggregate bandwidth).
        """
        check_kernel(kernel)
        arrays, moved = _STREAM[kernel]
        threads = max(1, threads or self.info.units)
        elems = max(threads * 8, int(working_set_bytes // (arrays * 8)))
        a, b, c = (np.ones(elems) for _ in range(3))
        fns: list[Callable[[], Any]] = []
        bounds = [elems * i // threads for i in range(threads + 1)]
        for lo, hi in itertools.pairwise(bounds):
            sl = slice(lo, hi)
            ca, cb, cc = a[sl], b[sl], c[sl]
            fns.append(_stream_fn(kernel, ca, cb, cc))
        nbytes = elems * 8.0
        return StreamCase(kernel, threaded(fns), arrays * nbytes, moved * nbytes)

    def elementwise(self, kind: str, n: int, dtype: str) -> Callable[[], Any]:
        x = self._random((n,), dtype)
        out, tmp = np.empty_like(x), np.empty_like(x)
        if kind in ("add", "mul"):
            y = self._random((n,), dtype)
            ufunc = np.add if kind == "add" else np.multiply
            return lambda: ufunc(x, y, out=out)
        if kind == "relu":
            return lambda: np.maximum(x, 0, out=out)
        if kind == "silu":
            def silu() -> None:  # x / (1 + exp(-x)) in four passes
                np.negative(x, out=tmp)
                np.exp(tmp, out=tmp)
                np.add(tmp, 1, out=tmp)
                np.divide(x, tmp, out=out)
            return silu
        if kind in ("softmax", "rmsnorm"):
            if n % ROW:
                raise RooflineError(f"{kind}: n must be a multiple of the row length {ROW}")
            rows = (x.reshape(-1, ROW), out.reshape(-1, ROW), tmp.reshape(-1, ROW))
            return _softmax(*rows) if kind == "softmax" else _rmsnorm(*rows)
        raise Unsupported(f"the numpy backend has no {kind!r} kernel "
                          "(it has add, mul, relu, silu, softmax, rmsnorm)")

    def attention(self, batch: int, q_len: int, kv_len: int, heads: int, kv_heads: int,
                  head_dim: int, causal: bool, dtype: str) -> Callable[[], Any]:
        raise Unsupported("attention runs through torch's SDPA (the torch backend, on the "
                          "CPU or a GPU)")


def _stream_fn(kernel: str, a: Any, b: Any, c: Any) -> Callable[[], Any]:
    if kernel == "read":
        return lambda: np.maximum.reduce(a)
    if kernel == "copy":
        return lambda: np.copyto(b, a)

    def triad() -> None:  # a = 3·c + b in two passes (numpy cannot fuse)
        np.multiply(c, 3.0, out=a)
        np.add(a, b, out=a)
    return triad


def _softmax(x: Any, out: Any, tmp: Any) -> Callable[[], None]:
    def run() -> None:  # max, subtract, exp, sum, divide: five passes over the rows
        np.subtract(x, x.max(axis=1, keepdims=True), out=tmp)
        np.exp(tmp, out=tmp)
        np.divide(tmp, tmp.sum(axis=1, keepdims=True), out=out)
    return run


def _rmsnorm(x: Any, out: Any, tmp: Any) -> Callable[[], None]:
    weight = np.ones(x.shape[1], dtype=x.dtype)

    def run() -> None:  # square, mean, scale, weight: four passes
        np.square(x, out=tmp)
        scale = 1.0 / np.sqrt(tmp.mean(axis=1, keepdims=True) + 1e-6)
        np.multiply(x, scale.astype(x.dtype), out=out)
        np.multiply(out, weight, out=out)
    return run
