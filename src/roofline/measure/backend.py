"""Backends: the code that actually runs kernels on a device, behind one small interface.

`numpy` runs on the CPU (matmuls through the BLAS numpy links, elementwise loops on
threads); `torch` runs on CUDA (or on the CPU, which is how the CUDA code paths are tested
without a GPU). A backend hands out ready-to-run callables whose inputs are already
allocated, so a timed call does only the work.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import ParameterError, RooflineError
from .device import DeviceInfo
from .timing import Run, Timer

DEVICES = ("cpu", "cuda")
BACKENDS = ("numpy", "torch")
STREAM_KERNELS = ("read", "copy", "triad")
ROW = 4096  # row length of the row-wise ops (softmax, norms)


class Unsupported(RooflineError):
    """This backend or device cannot run that case (the message says why)."""


@dataclass(frozen=True)
class StreamCase:
    """A streaming kernel over a working set: run(calls), and the bytes one call moves."""

    kernel: str
    run: Run
    working_set_bytes: float
    bytes_moved: float


class Backend(Protocol):
    name: str  # "numpy" | "torch"
    device: str  # "cpu" | "cuda"
    info: DeviceInfo
    matmul_dtypes: tuple[str, ...]  # what `measure peaks` measures by default
    elementwise_dtype: str  # the dtype of the default elementwise cases

    def timer(self) -> Timer: ...

    def matmul(self, m: int, k: int, n: int, dtype: str) -> Callable[[], Any]: ...

    def matmul_method(self, dtype: str) -> str: ...

    def stream(self, kernel: str, working_set_bytes: float,
               threads: int | None = None) -> StreamCase: ...

    def elementwise(self, kind: str, n: int, dtype: str) -> Callable[[], Any]: ...

    def attention(self, batch: int, q_len: int, kv_len: int, heads: int, kv_heads: int,
                  head_dim: int, causal: bool, dtype: str) -> Callable[[], Any]: ...


def check_kernel(kernel: str) -> None:
    if kernel not in STREAM_KERNELS:
        raise RooflineError(f"unknown streaming kernel {kernel!r} "
                            f"(allowed: {', '.join(STREAM_KERNELS)})")


def get_backend(device: str = "cpu", backend: str | None = None) -> Backend:
    """The backend for a device: numpy on the CPU by default, torch on CUDA."""
    if device not in DEVICES:
        raise RooflineError(f"unknown device {device!r} (allowed: {', '.join(DEVICES)})")
    name = backend or ("numpy" if device == "cpu" else "torch")
    if name not in BACKENDS:
        raise RooflineError(f"unknown backend {name!r} (allowed: {', '.join(BACKENDS)})")
    if name == "numpy":
        if device != "cpu":
            raise ParameterError("device", f"{device}: the numpy backend runs on the CPU only "
                                 "(the torch backend runs on GPUs)")
        from .numpy_backend import NumpyBackend

        return NumpyBackend()
    from .torch_backend import TorchBackend

    return TorchBackend(device)
