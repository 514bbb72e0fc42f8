"""Nsight Compute CSV (issue 32): hand-made files in ncu's two layouts (raw page and the
default details page) with its real column and metric names, placed on the roofline by
hand-calculated numbers, and compared with our bound where the kernel name maps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from roofline.cli import main
from roofline.errors import RooflineError
from roofline.hardware import load_chip
from roofline.profile.ncu import place, read_ncu
from test_profile_nsys import ADD, GEMM, export

HEAD = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
        '"Block Size","Grid Size","Device","CC"')
RAW = "\n".join([
    "==PROF== Connected to process 1234 (/usr/bin/python3.11)",
    HEAD + ',"dram__bytes.sum","gpu__time_duration.sum",'
    '"smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",'
    '"smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",'
    '"smsp__sass_thread_inst_executed_op_fmul_pred_on.sum","sm__throughput.avg.pct_of_peak'
    '_sustained_elapsed"',
    '"","","","","","","","","","","","Mbyte","usecond","inst","inst","inst","%"',
    f'"0","1234","python3.11","host","{ADD.replace(chr(34), chr(34) * 2)}","1","7",'
    '"(128, 1, 1)","(65536, 1, 1)","0","9.0","201.33","75.00","16,777,216","0","0","3.1"',
    f'"1","1234","python3.11","host","{GEMM}","1","7","(128, 1, 1)","(64, 1, 1)","0","9.0",'
    '"6.29","5.00","0","536,870,912","0","71.0"',
])
DETAILS = "\n".join([
    HEAD + ',"Section Name","Metric Name","Metric Unit","Metric Value"',
    '"0","1234","python","host","kern_a","1","7","(128, 1, 1)","(1024, 1, 1)","0","9.0",'
    '"GPU Speed Of Light Throughput","DRAM Frequency","Ghz","2.62"',
    '"0","1234","python","host","kern_a","1","7","(128, 1, 1)","(1024, 1, 1)","0","9.0",'
    '"GPU Speed Of Light Throughput","Duration","msecond","1.50"',
    '"0","1234","python","host","kern_a","1","7","(128, 1, 1)","(1024, 1, 1)","0","9.0",'
    '"Command line profiler metrics","dram__bytes_read.sum","Gbyte","2.00"',
    '"0","1234","python","host","kern_a","1","7","(128, 1, 1)","(1024, 1, 1)","0","9.0",'
    '"Command line profiler metrics","dram__bytes_write.sum","Gbyte","1.00"',
])


def test_raw_page_placed_by_hand(tmp_path: Path) -> None:
    path = tmp_path / "raw.csv"
    path.write_text(RAW)
    add, gemm = read_ncu(path)
    assert add.name == ADD and add.duration_s == pytest.approx(75e-6)
    assert add.dram_bytes == pytest.approx(201.33e6) and add.flops == {"fp32": 16777216}
    assert gemm.flops == {"fp32": 2 * 536870912}  # an FMA is two FLOPs
    chip = load_chip("h100")
    hbm = chip.level("hbm").bandwidth_Bps
    a, g = place([add, gemm], chip)
    # 201.33 MB at 3.35 TB/s = 60.1 us; its 16.8 MFLOP at the fp32 vector rate far less
    assert a.work_bound_s == pytest.approx(201.33e6 / hbm)
    assert a.intensity == pytest.approx(16777216 / 201.33e6)
    assert a.achieved_flops_per_s == pytest.approx(16777216 / 75e-6)
    # 1.07 GFLOP on CUDA cores at H100's fp32 vector peak bounds it (6.29 MB is 1.9 us)
    vector = chip.vector["fp32"].flops_per_s
    assert g.work_bound_s == pytest.approx(max(2 * 536870912 / vector, 6.29e6 / hbm))
    assert g.our_bound_s is None


def test_details_page(tmp_path: Path) -> None:
    path = tmp_path / "details.csv"
    path.write_text(DETAILS)
    (k,) = read_ncu(path)
    assert (k.name, k.duration_s, k.dram_bytes, k.flops) == ("kern_a", 1.5e-3, 3e9, {})
    (row,) = place([k], load_chip("h100"))
    assert row.work_bound_s == pytest.approx(3e9 / load_chip("h100").level("hbm").bandwidth_Bps)
    assert row.intensity is None


def test_beside_a_trace_our_bound_by_kernel_name(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    csv_path = tmp_path / "raw.csv"
    csv_path.write_text(RAW)
    trace = export(tmp_path / "run.sqlite")
    assert main(["profile", str(trace), "--ncu", str(csv_path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    add, gemm = data["ncu"]
    # the GEMM maps (mm 1024^3 bf16: 2.17 us at 989.4 TFLOP/s); ncu counted no tensor FLOPs
    assert gemm["our_bound_s"] == pytest.approx(2 * 1024**3 / 989.4e12)
    assert gemm["our_flops"] == pytest.approx(2 * 1024**3)
    assert add["our_bytes"] == 3 * 4 * 2**24  # our add moves 201.3 MB; ncu measured 201.33 MB
    assert main(["profile", str(csv_path), "--hw", "h100"]) == 0
    assert "bound of its measured work" in capsys.readouterr().out


@pytest.mark.parametrize("content,expect", [
    ("hello", "not an Nsight Compute CSV"),
    (HEAD + ',"gpu__time_duration.sum"\n"0","1","p","h","k","1","7","","","0","9.0","-5"',
     "finite and >= 0"),
    (HEAD + ',"gpu__time_duration.sum"\n"","","","","","","","","","","","parsec"\n'
     '"0","1","p","h","k","1","7","","","0","9.0","5"', "unit"),
    (HEAD + ',"gpu__time_duration.sum"\n"0","1","p","h","k","1","7","","","0","9.0","abc"',
     "not a number"),
    (HEAD + ',"dram__bytes.sum"\n"0","1","p","h","k","1","7","","","0","9.0","5"',
     "no kernel with a duration"),
])
def test_bad_ncu_csv(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str,
                     expect: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(content)
    assert main(["profile", str(path), "--hw", "h100"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expect in err
    with pytest.raises(RooflineError, match="hw is needed"):
        from roofline.profile.cli import _cmd_ncu

        _cmd_ncu(type("A", (), {"hw": None})(), str(path))
