"""The newer chips of issue 14 (B300 so far): figures against their cited sources."""

import json

from roofline.hardware import load_chip


def test_hw_compare_b200_b300_shows_the_fp4_and_memory_figures(run_cli):
    code, out, _ = run_cli("hw", "compare", "b200,b300", "--json")
    assert code == 0
    rows = {r["figure"]: r["values"] for r in json.loads(out)["figures"]}
    # B300: 13.1 PF dense fp4 (vs 9 on B200), 288 GB of HBM3e at the same 8 TB/s
    assert rows["fp4 peak (dense)"] == [9e15, 13.125e15]
    assert rows["hbm capacity"][1] == 288e9 and rows["hbm bandwidth"] == [8e12, 8e12]
    code, text, _ = run_cli("hw", "compare", "b200,b300")
    assert "13.1 PFLOP/s (1.5x)" in text and "288 GB (1.5x)" in text


def test_b300_figures_carry_their_sources(run_cli):
    chip = load_chip("b300")
    assert "13125 dense" in chip.peaks["fp4"].source
    assert "288 GB" in chip.level("hbm").source and "8 TB/s" in chip.level("hbm").source
    code, shown, _ = run_cli("hw", "show", "b300")
    assert code == 0 and "glennklockwood.com/garden/processors/B300" in shown
    # dense peaks: bf16 is half NVIDIA's sparse 4.5 PF, as on B200
    assert chip.peaks["bf16"].flops_per_s == load_chip("b200").peaks["bf16"].flops_per_s
