"""A tiled matmul: the traffic a GEMM moves when its tiles live on chip (the JAX Scaling Book,
"All About Rooflines", matrix multiplication: https://jax-ml.github.io/scaling-book/roofline/).

X[M,K] x W[K,N] -> Y[M,N] computed in block tiles: each thread block owns a bm x bn tile of
Y and walks K in steps of bk, staging a bm x bk tile of X and a bk x bn tile of W in on-chip
SRAM (shared memory). Inside a block, each warp owns a wm x wn sub-tile of Y and reads its
wm x bk slice of the X tile and bk x wn slice of the W tile from SRAM into registers.

Counting conventions (a multiply-add is 2 FLOPs, so FLOPs = 2·M·N·K, as for `matmul`):

- Tile loads (from `level`, "hbm" or "l2"): every block column (ceil(N/bn) of them) reads all
  of X and every block row (ceil(M/bm)) reads all of W; Y is written once:
  bytes = M·K·s_x·ceil(N/bn) + K·N·s_w·ceil(M/bm) + M·N·s_o.
  Edge tiles count only the elements that exist (no padding is loaded). Nothing is assumed
  to be reused between blocks through a cache: this is what the tile schedule forces.
  When one tile covers the whole matrix (bm >= M, bn >= N) it is `matmul`'s untiled bytes.
  For M, N, K large multiples of the tile the intensity tends to bm·bn/((bm + bn)·s) for a
  single element size s, i.e. b/(2s) for square tiles: 64 / 128 / 256 FLOP/byte for bf16
  tiles of 128 / 256 / 512, the seed's numbers.
- With ``level="l2"`` the tile loads are served by L2, and HBM still sees each operand once
  (`matmul`'s untiled bytes, the compulsory traffic: L2 is assumed to catch every re-read).
- SRAM (``bytes["sram"]``): each staged tile is written into SRAM once (the same element
  counts as the tile loads) and read by the warps: every warp column (ceil(N/wn) of them
  over the whole matrix) reads all of X and every warp row (ceil(M/wm)) all of W:
  sram = (M·K·s_x·ceil(N/bn) + K·N·s_w·ceil(M/bm)) + (M·K·s_x·ceil(N/wn) + K·N·s_w·ceil(M/wm)).
  The output goes from registers to `level` (an epilogue staged through SRAM is not counted),
  and register-level reuse inside a warp tile is free.
  Warp tiles must divide block tiles (a block holds a whole number of warp tiles), which is
  what makes ceil(N/wn) exact when N is not a multiple of bn.
- bk sets the SRAM footprint per pipeline stage (bm·bk·s_x + bk·bn·s_w), not the traffic;
  it is validated but does not enter the byte counts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..cost import Cost
from ..derivation import Quantity, call, derived, steps, sym, value
from ..dtypes import DType, operand_dtypes
from ..errors import RooflineError
from ..opid import Gemm
from ._common import shown, size
from .params import OpDecl, Param, dtype_params

if TYPE_CHECKING:
    from ..hardware import Chip

LEVELS = ("hbm", "l2")


def _tile(symbol: str, given: Any) -> Quantity:
    """A tile size: a positive whole number (or an array of them)."""
    tile = size(symbol, given)
    arr = np.asarray(value(tile))
    if not np.all(arr == np.round(arr)):
        raise RooflineError(f"{symbol}: tile sizes must be whole numbers, got {shown(given)}")
    return tile


def _divides(inner_name: str, inner: Quantity, outer_name: str, outer: Quantity) -> None:
    a, b = np.asarray(value(inner)), np.asarray(value(outer))
    if np.any(a > b) or np.any(np.mod(b, a) != 0):
        raise RooflineError(
            f"{inner_name}: a warp tile must divide the block tile {outer_name} "
            f"(so {inner_name} <= {outer_name}), got {inner_name}={shown(a)}, "
            f"{outer_name}={shown(b)}"
        )


def _ceil(x: Quantity) -> Quantity:
    return call("ceil", np.ceil, x)


@derived
def tiled_matmul(
    m: object,
    k: object,
    n: object,
    bm: object = 128,
    bn: object = 128,
    bk: object = 64,
    wm: object = 64,
    wn: object = 64,
    dtype: str | DType = "bf16",
    weight_dtype: str | DType | None = None,
    out_dtype: str | DType | None = None,
    compute_dtype: str | DType | None = None,
    level: str = "hbm",
) -> Cost:
    """X[M,K] x W[K,N] with (bm, bn, bk) block tiles and (wm, wn) warp tiles; arrays broadcast.

    >>> from roofline import evaluate
    >>> c = tiled_matmul(8192, 8192, 8192, bm=128, bn=128)
    >>> round(evaluate(c, "h100").intensity["hbm"], 1)
    63.5
    >>> c.terms[1].expr.formula()
    'M·K·s_x·ceil(N / bn) + K·N·s_w·ceil(M / bm) + M·N·s_o'
    """
    if level not in LEVELS:
        raise RooflineError(f"level: the tiles are loaded from one of {', '.join(LEVELS)}; "
                            f"got {level!r}")
    x, w, o, c = operand_dtypes(dtype, weight_dtype, out_dtype, compute_dtype)
    M, K, N = size("M", m), size("K", k), size("N", n)
    BM, BN, _BK = _tile("bm", bm), _tile("bn", bn), _tile("bk", bk)
    WM, WN = _tile("wm", wm), _tile("wn", wn)
    _divides("wm", WM, "bm", BM)
    _divides("wn", WN, "bn", BN)
    sx, sw, so = sym("s_x", x.bytes), sym("s_w", w.bytes), sym("s_o", o.bytes)

    flops = 2 * M * N * K
    x_loads = M * K * sx * _ceil(N / BN)  # X re-read once per block column
    w_loads = K * N * sw * _ceil(M / BM)  # W re-read once per block row
    tiles = x_loads + w_loads + M * N * so
    warp_reads = M * K * sx * _ceil(N / WN) + K * N * sw * _ceil(M / WM)
    sram = x_loads + w_loads + warp_reads  # staged tiles written once, then read by warps
    label = level.upper()
    byte_counts = {level: value(tiles), "sram": value(sram)}
    compulsory: list[tuple[str, Quantity]] = []
    if level != "hbm":
        hbm = M * K * sx + K * N * sw + M * N * so
        byte_counts = {"hbm": value(hbm), **byte_counts}
        compulsory.append(("HBM bytes", hbm))
    return Cost(
        flops={c.peak: value(flops)},
        bytes=byte_counts,
        steps=steps(("FLOPs", flops), *compulsory, (f"{label} bytes", tiles),
                    ("SRAM bytes", sram)),
        name="tiled_matmul",
        op=Gemm(value(M), value(N), value(K), w.name),
    )


def tiles_fit(kwargs: dict[str, Any], chip: Chip) -> dict[str, Any]:
    """One pipeline stage of X and W tiles must fit in one SM's SRAM (when the chip says how
    much): larger tiles cannot run, and their traffic count would flatter the kernel."""
    sram = next((lv for lv in chip.memory if lv.name == "sram"), None)
    if sram is None or sram.unit_capacity_bytes is None:
        return kwargs
    x, w, _, _ = operand_dtypes(kwargs.get("dtype", "bf16"), kwargs.get("weight_dtype"),
                                kwargs.get("out_dtype"), kwargs.get("compute_dtype"))
    stage = np.asarray(kwargs["bk"]) * (np.asarray(kwargs["bm"]) * x.bytes
                                        + np.asarray(kwargs["bn"]) * w.bytes)
    if np.any(stage > sram.unit_capacity_bytes):
        worst = float(np.max(stage))
        raise RooflineError(f"tiles need {worst:.4g} B of SRAM per block for one stage "
                            f"(bk·(bm·s_x + bn·s_w)), more than the {sram.unit_capacity_bytes:.4g}"
                            f" B one SM of {chip.id} has; use smaller tiles")
    return kwargs


TILED_MATMUL = OpDecl(
    "tiled-matmul", "matmul with (bm, bn, bk) block tiles in SRAM and (wm, wn) warp tiles",
    tiled_matmul, (
        Param("m", "rows of X (tokens)", required=True),
        Param("k", "contraction dimension", required=True),
        Param("n", "columns of W", required=True),
        Param("bm", "block tile rows", default=128),
        Param("bn", "block tile columns", default=128),
        Param("bk", "block tile depth", default=64),
        Param("wm", "warp tile rows", default=64), Param("wn", "warp tile columns", default=64),
        Param("level", "memory level the tiles are loaded from", "choice", "hbm",
              choices=LEVELS),
        *dtype_params("dtype", "weight", "out", "compute")), tiles_fit)
