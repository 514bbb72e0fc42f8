"""roofline profile on Nsight Systems SQLite exports (issue 32): hand-built exports with the
tables and columns `nsys export --type sqlite` writes, checked by hand-calculated numbers, the
same analysis as the Kineto reader's, and hostile files."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from roofline.cli import main
from roofline.errors import RooflineError
from roofline.hardware import load_chip
from roofline.profile import profile
from roofline.profile.nsys import read_nsys

TID = 281474976710656 + 100  # nsys' globalTid packs the pid and the tid
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1"
ADD = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
       "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, "
       "at::detail::Array<char*, 3>)")
N = 2**24

SCHEMA = """
CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE TARGET_INFO_GPU (vmId INTEGER, id INTEGER, name TEXT, busLocation TEXT);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL,
  deviceId INTEGER, contextId INTEGER, streamId INTEGER, correlationId INTEGER,
  globalPid INTEGER, demangledName INTEGER, shortName INTEGER, mangledName INTEGER,
  gridX INTEGER, blockX INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL,
  eventClass INTEGER, globalTid INTEGER, correlationId INTEGER, nameId INTEGER,
  returnValue INTEGER, callchainId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL,
  deviceId INTEGER, contextId INTEGER, streamId INTEGER, correlationId INTEGER,
  globalPid INTEGER, value INTEGER, bytes INTEGER, memKind INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL,
  deviceId INTEGER, contextId INTEGER, streamId INTEGER, correlationId INTEGER,
  globalPid INTEGER, bytes INTEGER, copyKind INTEGER, srcKind INTEGER, dstKind INTEGER);
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,
  rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER,
  endGlobalTid INTEGER, textId INTEGER, domainId INTEGER, uint64Value INTEGER);
"""

# GPU times in ns from T0; CPU (NVTX, runtime) on the same clock, earlier
T0 = 1_000_000_000


def export(path: Path, kernels: list[tuple[Any, ...]] | None = None,
           nvtx: list[tuple[Any, ...]] | None = None) -> Path:
    """An export: mm 1024^3 bf16 (5 us), add of 2^24 fp32 (40 us), a 4 kB memset (1 us) and
    a kernel no NVTX range launched (2 us), inside ProfilerStep#3."""
    conn = sqlite3.connect(path)
    conn.executescript(SCHEMA)
    conn.executemany("INSERT INTO StringIds VALUES (?, ?)",
                     [(1, GEMM), (2, ADD), (3, "orphan_kernel"), (4, "cudaLaunchKernel"),
                      (5, "aten::add, seq = 1, op_id = 3, sizes = [[16777216], [16777216], "
                          "[]], input_op_ids = [(2, 0)]")])
    conn.execute("INSERT INTO TARGET_INFO_GPU VALUES (0, 0, 'NVIDIA H100 80GB HBM3', '0')")
    rows = kernels if kernels is not None else [
        (T0, T0 + 5_000, 0, 1, 7, 1, 1, 1, 1, 1, 8, 128),
        (T0 + 10_000, T0 + 50_000, 0, 1, 7, 2, 1, 2, 2, 2, 8, 128),
        (T0 + 70_000, T0 + 72_000, 0, 1, 7, 4, 1, 3, 3, 3, 8, 128)]
    conn.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES "
                     "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    conn.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (?, ?, 0, 1, 7, 3, 1, 0, 4096,"
                 " 1)", (T0 + 60_000, T0 + 61_000))
    conn.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, 0, ?, ?, 4, 0, 0)",
                     [(T0 - 900_000 + t, T0 - 900_000 + t + 10, TID, c)
                      for c, t in ((1, 150), (2, 450), (3, 600), (4, 700))])
    base = T0 - 900_000
    ranges = nvtx if nvtx is not None else [
        (base, base + 800, "ProfilerStep#3", None),
        (base + 50, base + 300, "aten::matmul, seq = 0, op_id = 1, sizes = [[1024, 1024], "
                                "[1024, 1024]]", None),
        (base + 100, base + 290, "aten::mm, seq = 0, op_id = 2, sizes = [[1024, 1024], "
                                 "[1024, 1024]], input_op_ids = [(0, 0), (1, 0)]", None),
        (base + 400, base + 500, None, 5)]  # the text in StringIds (textId), as newer nsys
    conn.executemany("INSERT INTO NVTX_EVENTS VALUES (?, ?, 59, NULL, NULL, NULL, ?, ?, NULL,"
                     " ?, 0, NULL)", [(s, e, t, TID, tid) for s, e, t, tid in ranges])
    conn.commit()
    conn.close()
    return path


def test_kernels_map_through_nvtx_ranges_by_hand(tmp_path: Path) -> None:
    path = export(tmp_path / "run.sqlite")
    before = path.read_bytes()
    p = profile(path)
    assert path.read_bytes() == before and sorted(x.name for x in tmp_path.iterdir()) == \
        ["run.sqlite"]  # read-only: no journal, no change
    assert p.hardware == "h100-sxm" and p.device == "NVIDIA H100 80GB HBM3"
    assert p.steps == ["ProfilerStep#3"]
    rows = {r.op_class: r for r in p.rows}
    gemm, add, fill = rows["gemm"], rows["elementwise"], rows["fill"]
    # the innermost range (aten::mm, not aten::matmul); dtype bf16 from the kernel's name;
    # 2 * 1024^3 FLOP at H100's 989.4 TFLOP/s bf16 = 2.170 us; its 6.3 MB stay in L2
    assert gemm.op == "mm 1024x1024x1024 bf16" and gemm.bound == "compute"
    assert gemm.bound_s == pytest.approx(2 * 1024**3 / 989.4e12)
    assert gemm.measured_s == pytest.approx(5e-6)
    # add(2^24 fp32, 2^24 fp32, scalar): 2 reads + 1 write of 64 MiB; the 50 MB L2 may hold
    # some: HBM carries 192 MiB - 50 MB at 3.35 TB/s = 45.2 us (measured 40 us: see below)
    chip = load_chip("h100")
    l2, hbm = chip.level("l2").capacity_bytes, chip.level("hbm").bandwidth_Bps
    assert add.op == f"add {N} fp32" and add.bytes == 3 * 4 * N
    assert add.bound_s == pytest.approx((3 * 4 * N - l2) / hbm)
    assert fill.op == "memset 4096 B" and fill.measured_s == pytest.approx(1e-6)
    (orphan,) = p.unmapped
    assert orphan.name == "orphan_kernel" and "no CPU op launched it" in orphan.reason
    s = p.summary
    # busy 5 + 40 + 1 + 2 = 48 us of a 72 us window; 46 us of it mapped
    assert (s.kernels, s.mapped) == (4, 3)
    assert s.window_s == pytest.approx(72e-6) and s.measured_s == pytest.approx(48e-6)
    assert s.idle_s == pytest.approx(24e-6) and s.exposed_comm_s == 0
    assert s.mapped_time_fraction == pytest.approx(46 / 48)
    # the memset's 4 kB sit in L2: memory-bound there, not compute-bound
    (gap,) = [g for g in p.gaps if g.op == "memset 4096 B"]
    assert gap.bound == "l2" and gap.levers[0].startswith("memory-bound")
    # the add ran faster than our bound: this hand-made one, not a real kernel
    assert [r.op for r in p.faster_than_bound] == [f"add {N} fp32"]


def test_same_analysis_as_kineto(tmp_path: Path) -> None:
    """The same kernels through the Kineto reader give the same rows (one mapping)."""
    from test_profile import _launch, _trace

    events = (_launch(1, 100, "aten::mm", [[1024, 1024], [1024, 1024]],
                      ["c10::BFloat16", "c10::BFloat16"], GEMM, 0, 5)
              + _launch(2, 400, "aten::add", [[N], [N], []], ["float", "float", "Scalar"],
                        ADD, 10, 40))
    kineto = profile(_trace(tmp_path, events))
    nsys = profile(export(tmp_path / "run.sqlite", kernels=[
        (T0, T0 + 5_000, 0, 1, 7, 1, 1, 1, 1, 1, 8, 128),
        (T0 + 10_000, T0 + 50_000, 0, 1, 7, 2, 1, 2, 2, 2, 8, 128)]))
    fill = [r for r in nsys.rows if r.op_class == "fill"]
    assert len(fill) == 1
    pick = ("op", "op_class", "bound_s", "expected_s", "bound", "flops", "bytes", "measured_s")
    assert [[getattr(r, k) for k in pick] for r in kineto.rows] == \
        [[pytest.approx(getattr(r, k)) if isinstance(getattr(r, k), float) else getattr(r, k)
          for k in pick] for r in nsys.rows if r.op_class != "fill"]


def test_step_and_no_dtype_in_kernel_name(tmp_path: Path) -> None:
    base = T0 - 900_000
    path = export(tmp_path / "run.sqlite", kernels=[
        (T0, T0 + 5_000, 0, 1, 7, 1, 1, 3, 3, 3, 8, 128)],  # named 'orphan_kernel'
        nvtx=[(base + 100, base + 290, "aten::mm, seq = 0, op_id = 2, sizes = [[8, 8], [8, 8]]",
               None)])
    (row,) = [r for r in profile(path, hw="h100").rows if r.op_class != "fill"]
    assert row.op == "aten::mm" and "no floating-point input type" in row.reason
    assert profile(export(tmp_path / "b.sqlite"), step=3).step == "ProfilerStep#3"
    with pytest.raises(RooflineError, match="no ProfilerStep#4"):
        profile(tmp_path / "b.sqlite", step=4)


def test_cli_reads_sqlite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = export(tmp_path / "run.sqlite")
    assert main(["profile", str(path), "--on", "b200"]) == 0
    out = capsys.readouterr().out
    assert "mapped 3 of 4 kernels" in out and "on b200" in out


# --- hostile files: one line, exit 2 ----------------------------------------------------------


def _err(capsys: pytest.CaptureFixture[str], path: Path) -> str:
    assert main(["profile", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("roofline: error:")
    return err


def test_hostile_sqlite_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corrupt = tmp_path / "corrupt.sqlite"
    corrupt.write_bytes(b"SQLite format 3\x00" + b"\xff" * 5000)
    assert "not a readable Nsight Systems export" in _err(capsys, corrupt)
    empty = tmp_path / "empty.sqlite"
    sqlite3.connect(empty).execute("CREATE TABLE t (x)").connection.commit()
    assert "no CUPTI_ACTIVITY_KIND_KERNEL table" in _err(capsys, empty)
    # a view under the kernel table's name (running its SQL would never end) is not read
    view = tmp_path / "view.sqlite"
    conn = sqlite3.connect(view)
    conn.execute("CREATE VIEW CUPTI_ACTIVITY_KIND_KERNEL AS WITH RECURSIVE c(x) AS (SELECT 1 "
                 "UNION ALL SELECT x + 1 FROM c) SELECT x AS start FROM c")
    conn.commit()
    conn.close()
    assert "no CUPTI_ACTIVITY_KIND_KERNEL table" in _err(capsys, view)
    bad = export(tmp_path / "bad.sqlite", kernels=[
        ("soon", T0, 0, 1, 7, 1, 1, 1, 1, 1, 8, 128)])
    assert "start must be a non-negative integer" in _err(capsys, bad)
    backwards = export(tmp_path / "back.sqlite", kernels=[
        (T0 + 5, T0, 0, 1, 7, 1, 1, 1, 1, 1, 8, 128)])
    assert "before it starts" in _err(capsys, backwards)
    text = tmp_path / "text.sqlite"
    text.write_text("not a database")
    assert "not a JSON trace" in _err(capsys, text)


def test_read_nsys_missing(tmp_path: Path) -> None:
    with pytest.raises(RooflineError, match="not found"):
        read_nsys(tmp_path / "none.sqlite")
