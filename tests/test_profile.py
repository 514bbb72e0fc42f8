"""roofline profile (issue 32): real traces (tests/data/profile, see its README), hand-built
traces with hand-calculated bounds, and bad input."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from roofline import evaluate
from roofline.cli import main
from roofline.errors import RooflineError
from roofline.hardware import load_chip
from roofline.ops.collectives import collective
from roofline.profile import profile
from roofline.profile.devices import chip_for_device
from roofline.profile.render import profile_page

DATA = Path(__file__).parent / "data" / "profile"
# file -> (chip forced with --hw or None, kernels, mapped kernels)
REAL = {
    "a100_40gb_recsys_rank3_step1010.json.gz": (None, 1575, 1245),
    "a100_80gb_rank0_step551.json.gz": (None, 1375, 1108),
    "a100_40gb_resnet_nccl_step5.json.gz": (None, 1258, 365),
    "mi250_minitoy_train.json.gz": ("mi250x", 16, 8),
}


@pytest.fixture(scope="module", params=sorted(REAL))
def real(request: pytest.FixtureRequest) -> Any:
    hw, kernels, mapped = REAL[request.param]
    return profile(DATA / request.param, hw=hw), kernels, mapped


def test_real_traces_map_and_no_kernel_beats_its_bound(real: Any) -> None:
    p, kernels, mapped = real
    s = p.summary
    assert (s.kernels, s.mapped) == (kernels, mapped)
    # a kernel faster than its bound is a wrong mapping or a wrong roof: none in the data
    assert p.faster_than_bound == []
    for r in p.rows:
        if r.mapped:
            assert r.expected_s is not None and r.bound_s is not None
            assert r.expected_s >= r.bound_s * (1 - 1e-12)
        else:
            assert r.reason  # every unmapped kernel says why


def test_real_trace_step_relations(real: Any) -> None:
    s = real[0].summary
    assert 0 < s.measured_s <= s.window_s + 1e-12
    assert s.idle_s == pytest.approx(s.window_s - s.measured_s)
    assert s.measured_s <= s.kernel_time_s + 1e-12  # streams overlap: the union is no larger
    assert 0 <= s.exposed_comm_s <= s.measured_s
    assert 0 < s.mapped_time_fraction <= 1
    assert s.measured_mapped_s == pytest.approx(s.mapped_time_fraction * s.kernel_time_s)
    assert 0 < s.bound_s <= s.sum_of_bounds_s * (1 + 1e-9)  # overlapped <= serial
    assert s.bound_s <= s.measured_mapped_s
    shares = sum(c.share for c in real[0].by_class)
    assert shares == pytest.approx(1.0)


def test_nccl_trace_collectives_bounded_from_their_args() -> None:
    p = profile(DATA / "a100_40gb_resnet_nccl_step5.json.gz")
    comms = [r for r in p.rows if r.op_class == "collective"]
    assert len(comms) == 7 and {r.op.split()[0] for r in comms} == {"all-reduce", "broadcast"}
    chip = load_chip("a100-sxm-40gb")
    for r in comms:  # recomputed from the kernel's own 'In msg nelems' (fp32, 2 ranks)
        assert r.bytes is not None and r.bytes % 4 == 0
        kind = r.op.split()[0]  # all-reduce, broadcast
        want = evaluate(collective(kind, r.bytes, 2, chip=chip), chip).t_lower_s
        assert r.bound_s == pytest.approx(float(want))
    # record_shapes was off in this run: its compute kernels are listed with the reason
    assert any("record_shapes=True" in r.reason for r in p.unmapped)


def test_step_and_on_chip() -> None:
    path = DATA / "a100_40gb_recsys_rank3_step1010.json.gz"
    whole = profile(path)
    assert whole.steps == ["ProfilerStep#1010"] and whole.rank == 3
    one = profile(path, step=1010, on="h100")
    assert one.step == "ProfilerStep#1010" and one.on == "h100-sxm"
    assert one.summary.kernels == whole.summary.kernels
    assert one.summary.on_bound_s is not None and 0 < one.summary.on_bound_s < one.summary.bound_s
    for r in one.rows:
        assert (r.on_bound_s is None) == (r.bound_s is None)
    with pytest.raises(RooflineError, match="no ProfilerStep#7"):
        profile(path, step=7)
    with pytest.raises(RooflineError, match="rank 3"):
        profile(path, rank=0)


def test_gaps_largest_first_with_levers() -> None:
    p = profile(DATA / "a100_80gb_rank0_step551.json.gz")
    gaps = [g.gap_s for g in p.gaps]
    assert gaps == sorted(gaps, reverse=True) and len(gaps) == 10
    first = {"hbm": "memory-bound", "compute": "compute-bound", "scale-up": "waiting on peers"}
    for g in p.gaps:  # the gap's own lever names its bound; the op's levers follow
        assert g.levers[0].startswith(first[g.bound])
    fused = [g for g in p.gaps if g.bound == "hbm"]
    assert fused and all(any("fused" in lever for lever in g.levers) for g in fused)


# --- hand-built traces: hand-calculated numbers ------------------------------------------


def _trace(tmp_path: Path, events: list[dict[str, Any]], device: str = "NVIDIA H100 80GB HBM3",
           name: str = "t.json") -> Path:
    data = {"deviceProperties": [{"id": 0, "name": device}], "traceEvents": events}
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def _launch(corr: int, ts: float, op: str, dims: list[Any], types: list[str],
            kernel: str, k_ts: float, dur: float, stream: int = 7,
            kargs: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return [
        {"ph": "X", "cat": "cpu_op", "name": op, "pid": 1, "tid": 1, "ts": ts, "dur": 10,
         "args": {"Input Dims": dims, "Input type": types}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
         "ts": ts + 1, "dur": 2, "args": {"correlation": corr}},
        {"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": stream, "ts": k_ts,
         "dur": dur, "args": {"correlation": corr, "stream": stream, "device": 0,
                              **(kargs or {})}},
    ]


def test_gemm_bound_by_hand(tmp_path: Path) -> None:
    # mm 8192x8192x8192 bf16 on H100: 2*8192^3 = 1.0995e12 FLOP / 989.4e12 = 1.1113 ms;
    # 3 * 8192^2 * 2 B = 402.7 MB, beyond the 50 MB L2 from HBM: far below that
    events = _launch(1, 100, "aten::mm", [[8192, 8192], [8192, 8192]],
                     ["c10::BFloat16", "c10::BFloat16"], "sm90_xmma_gemm_bf16", 200, 1500)
    p = profile(_trace(tmp_path, events))
    (row,) = p.rows
    assert p.hardware == "h100-sxm" and row.op == "mm 8192x8192x8192 bf16"
    assert row.bound == "compute"
    assert row.bound_s == pytest.approx(2 * 8192**3 / 989.4e12)
    assert row.measured_s == pytest.approx(1500e-6)
    assert row.of_bound == pytest.approx(1500e-6 / (2 * 8192**3 / 989.4e12))


def test_pointwise_out_tensor_is_written_not_read(tmp_path: Path) -> None:
    # mul.out(self[2^26] fp32, scalar, out[2^26]): reads 256 MiB, writes 256 MiB; the 50 MB
    # L2 may hold some: HBM carries 512 MiB - 50 MB at 3.35 TB/s
    n = 2**26
    events = _launch(1, 100, "aten::mul", [[n], [], [n]], ["float", "double", "float"],
                     "vectorized_elementwise_kernel<MulFunctor>", 200, 400)
    (row,) = profile(_trace(tmp_path, events)).rows
    chip = load_chip("h100")
    l2 = chip.level("l2").capacity_bytes
    assert row.bytes == pytest.approx(2 * 4 * n)
    assert row.bound_s == pytest.approx((2 * 4 * n - l2) / chip.level("hbm").bandwidth_Bps)


def test_timeline_idle_and_exposed_comm_by_hand(tmp_path: Path) -> None:
    # compute kernel 100-200 us on stream 7; all-reduce 150-300 us on stream 20; gap; memset
    # 400-410 us. Busy = 100-300 and 400-410 = 210 us; window 310 us -> idle 100 us;
    # the all-reduce alone 200-300 us -> exposed 100 us.
    nccl = {"Collective name": "allreduce", "In msg nelems": 2**20, "Out msg nelems": 2**20,
            "Group size": 8, "dtype": "BFloat16"}
    events = (_launch(1, 10, "aten::add", [[1024], [1024], []], ["float", "float", "Scalar"],
                      "add_kernel", 100, 100)
              + _launch(2, 30, "record_param_comms", [], [], "ncclDevKernel_AllReduce", 150,
                        150, stream=20, kargs=nccl)
              + [{"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 0,
                  "tid": 7, "ts": 400, "dur": 10, "args": {"bytes": 4096, "correlation": 9}}])
    p = profile(_trace(tmp_path, events))
    s = p.summary
    assert s.window_s == pytest.approx(310e-6)
    assert s.measured_s == pytest.approx(210e-6)
    assert s.idle_s == pytest.approx(100e-6)
    assert s.exposed_comm_s == pytest.approx(100e-6)
    comm = next(r for r in p.rows if r.op_class == "collective")
    chip = load_chip("h100")
    want = evaluate(collective("all-reduce", 2**21, 8, chip=chip), chip).t_lower_s
    assert comm.bytes == 2**21 and comm.bound_s == pytest.approx(float(want))


def test_device_names() -> None:
    assert chip_for_device("NVIDIA A100-SXM4-80GB") == "a100-sxm-80gb"
    assert chip_for_device("NVIDIA A100-PG509-200") == "a100-sxm-40gb"
    assert chip_for_device("NVIDIA H100 80GB HBM3") == "h100-sxm"
    assert chip_for_device("NVIDIA H200") == "h200-sxm"
    assert chip_for_device("NVIDIA L40S") == "l40s"
    assert chip_for_device("Tesla V100-SXM2-32GB") == "v100-sxm2-32gb"
    for name in ("AMD Radeon Graphics", "Tesla V100-SXM2-16GB", None):
        with pytest.raises(RooflineError, match="hw is needed"):
            chip_for_device(name)


# --- outputs ---------------------------------------------------------------------------------


def test_cli_outputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = DATA / "a100_40gb_resnet_nccl_step5.json.gz"
    csv_path, html_path = tmp_path / "k.csv", tmp_path / "p.html"
    assert main(["profile", str(trace), "--on", "h100", "--csv", str(csv_path),
                 "--html", str(html_path)]) == 0
    out = capsys.readouterr().out
    assert "GPU busy (measured)" in out and "Largest gaps to the bound first" in out
    header = csv_path.read_text().splitlines()[0]
    assert "measured_s" in header and "bound_s" in header and "expected_s" in header
    page = html_path.read_text()
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page and "http://" not in \
        page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert main(["profile", str(trace), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["summary"]["mapped"] == 365 and data["hardware"] == "a100-sxm-40gb"


def test_repr_and_frame() -> None:
    p = profile(DATA / "mi250_minitoy_train.json.gz", hw="mi250x")
    assert "<table>" in p._repr_html_()
    assert len(p.records()) == len(p.rows)
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(RooflineError, match="pandas"):
            p.to_frame()
    else:
        assert len(p.to_frame()) == len(p.rows)


def test_html_escapes_kernel_names(tmp_path: Path) -> None:
    events = _launch(1, 10, "aten::add", [[64], [64], []], ["float", "float", "Scalar"],
                     "<script>alert(1)</script>", 100, 5)
    page = profile_page(profile(_trace(tmp_path, events)))
    assert "<script>alert" not in page and "&lt;script&gt;" in page


# --- bad input: one line, exit 2 -----------------------------------------------------------


def _error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["profile", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("roofline: error:")
    return err


@pytest.mark.parametrize("content,expect", [
    (b'{"traceEvents": [', "not a JSON trace"),
    (b"hello", "not a JSON trace"),
    (b'{"foo": 1}', "traceEvents"),
    (b"[" * 100000 + b"]" * 100000, "nested too deeply"),
    (b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1e999}]}',
     "finite"),
    (b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": -5}]}',
     ">= 0"),
    (b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1' + b"0" * 5000
     + b', "dur": 1}]}', "trace"),
    (b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": "x", "dur": 1}]}',
     "finite number"),
    (b"\xff\xfe", "UTF-8"),
])
def test_bad_files(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes,
                   expect: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    assert expect in _error(capsys, str(path))


def test_truncated_gzip_and_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    whole = (DATA / "mi250_minitoy_train.json.gz").read_bytes()
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    assert "cannot read" in _error(capsys, str(cut))
    assert "not found" in _error(capsys, str(tmp_path / "nope.json"))
    assert "--hw" in _error(capsys, str(DATA / "mi250_minitoy_train.json.gz"))
    assert "--rank" in _error(capsys, str(DATA))  # a directory of several traces


def test_gzip_bomb_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from roofline.profile import kineto

    monkeypatch.setattr(kineto, "MAX_TRACE_BYTES", 10_000)
    path = tmp_path / "big.json.gz"
    path.write_bytes(gzip.compress(b" " * 100_000))
    with pytest.raises(RooflineError, match="GiB of trace text"):
        profile(path)


def test_cpu_only_trace_recorded_with_torch(tmp_path: Path) -> None:
    """On CPU there are no GPU kernels: profile says so in one line (decided, README)."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    with torch_profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        a = torch.randn(64, 64)
        (a @ a).relu().sum()
    path = tmp_path / "cpu.json"
    prof.export_chrome_trace(str(path))
    with pytest.raises(RooflineError, match=r"no GPU kernels.*CPU-only"):
        profile(path, hw="h100")


def test_cli_does_not_import_torch() -> None:
    code = ("import sys; from roofline.cli import main; import roofline.profile.cli; "
            "import roofline.profile.analyze; "
            "print(sorted(m for m in ('torch', 'matplotlib', 'pandas') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_progress_only_on_a_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from roofline.profile import kineto

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(kineto, "_CHUNK", 2**10)  # a step per KiB read
    trace = DATA / "mi250_minitoy_train.json.gz"
    for stream, drawn in ((io.StringIO(), False), (Tty(), True)):
        monkeypatch.setattr(sys, "stderr", stream)
        profile(trace, hw="mi250x")
        text = stream.getvalue()
        assert ("reading mi250_minitoy_train.json.gz [" in text) is drawn
        assert ("parsing JSON" in text) is drawn
        if drawn:  # the line is cleared so the results print on a clean one
            assert text.endswith("\r") and text.count("#" * 24) >= 1


def test_rank_read_from_each_files_recorded_rank(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """--rank picks the file whose distributedInfo records that rank, whatever its name."""
    from roofline.profile.sources import recorded_rank

    events = _launch(1, 10, "aten::add", [[64], [64], []], ["float", "float", "Scalar"],
                     "add_kernel", 100, 5)
    for name, rank in (("worker_a.json", 1), ("worker_b.json", 0)):
        data = {"distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2,
                                    "pg_config": [{"ranks": [0, 1]}]},
                "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}],
                "traceEvents": events}
        (tmp_path / name).write_text(json.dumps(data))
    gz = tmp_path / "worker_c.json.gz"  # gzip, and a file name that says another rank
    gz.write_bytes(gzip.compress((tmp_path / "worker_a.json").read_bytes()
                                 .replace(b'"rank": 1', b'"rank": 2')))
    gz.rename(tmp_path / "rank5_trace.json.gz")
    assert recorded_rank(tmp_path / "rank5_trace.json.gz") == 2
    assert profile(tmp_path, rank=0).path.endswith("worker_b.json")
    assert profile(tmp_path, rank=1).rank == 1
    assert profile(tmp_path, rank=2).path.endswith("rank5_trace.json.gz")
    # rank 5 is only in a file name whose trace records rank 2: not that file
    assert "0 traces" in _error(capsys, str(tmp_path), "--rank", "5")
    # a file recording no rank is still found by its name
    (tmp_path / "t_rank7.json").write_text(json.dumps({"traceEvents": events}))
    assert recorded_rank(tmp_path / "t_rank7.json") is None
    assert profile(tmp_path, rank=7, hw="h100").path.endswith("t_rank7.json")
