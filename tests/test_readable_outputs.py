"""Outputs for people (issue 34): engineering units, a concise serve summary, "wrote PATH"
for every file written, notebook tables, and roofline.trace callable every time."""

import json
import re

import numpy as np
import pytest

E_NOTATION = re.compile(r"\d\.?\d*e[+-]\d+")


def test_trace_is_callable_every_time():
    torch = pytest.importorskip("torch")
    import roofline
    import roofline.trace.cli  # binds the subpackage on its parent, as the CLI does

    def f(x, w):
        return torch.relu(x @ w)

    x, w = torch.randn(4, 8), torch.randn(8, 8)
    first, second = roofline.trace(f, x, w), roofline.trace(f, x, w)
    assert len(first.ops) == len(second.ops) == 2
    html = second._repr_html_()
    assert "aten.mm" in html and "<table>" in html
    assert second.records("h100")[0]["bound"] in ("hbm", "compute")


def test_serve_default_is_one_concise_summary(run_cli):
    argv = ["serve", "llama-3.1-8b", "--hw", "h100,h200,mi300x", "--input-len", "2048",
            "--output-len", "256", "--ttft", "2s", "--tpot", "30ms", "--tp", "1,2"]
    code, out, err = run_cli(*argv)
    assert code == 0, err
    assert len(out.splitlines()) <= 40
    assert out.count("Pareto frontier") == 1 and "--verbose" in out
    assert "aggregated" in out and not re.search(r"\baggre\b|\bdisag\b", out)
    assert "1 chips" not in out and not E_NOTATION.search(out)
    code, verbose, _ = run_cli(*argv, "--verbose")
    assert code == 0 and verbose.count("Pareto frontier") == 6  # 3 chips x TPOT and TTFT
    assert "Continuous batching" in verbose and "Continuous batching" not in out


def test_sweep_op_table_in_engineering_units(run_cli):
    code, out, _ = run_cli("sweep", "op", "matmul", "--hw", "h100", "--m", "1,4096",
                           "--k", "8192", "--n", "8192")
    assert code == 0 and not E_NOTATION.search(out)
    assert "40.1 us" in out and "8192" in out and "TFLOP/s" in out


@pytest.mark.parametrize("argv, files", [
    (["model", "llama-3-8b", "--csv", "{d}/m.csv", "--html", "{d}/m.html",
      "--markdown", "{d}/m.md"], ["m.csv", "m.html", "m.md"]),
    (["serve", "llama-3.1-8b", "--hw", "h100", "--tp", "1", "--kv-dtype", "fp8",
      "--chunk", "2048", "--csv", "{d}/s.csv", "--html", "{d}/s.html"], ["s.csv", "s.html"]),
    (["sweep", "model", "llama-3-8b", "--hw", "h100", "--batch", "1,8", "--context", "1k",
      "--csv", "{d}/w.csv"], ["w.csv"]),
    (["sweep", "op", "matmul", "--hw", "h100", "--m", "1,8", "--k", "64", "--n", "64",
      "--csv", "{d}/o.csv"], ["o.csv"]),
])
def test_every_file_written_is_announced(run_cli, tmp_path, argv, files):
    code, out, err = run_cli(*[a.format(d=tmp_path) for a in argv])
    assert code == 0, err
    for name in files:
        assert f"wrote {tmp_path / name}" in out and (tmp_path / name).exists()
    code, out, err = run_cli(*[a.format(d=tmp_path) for a in argv], "--json")
    assert code == 0
    json.loads(out)  # the JSON stays parseable: the notes went to stderr
    assert all(f"wrote {tmp_path / name}" in err for name in files)


def test_plan_and_sweep_render_in_notebooks():
    from roofline.serve import Targets, Workload, plan
    from roofline.sweep import sweep_model

    p = plan("llama-3.1-8b", ["h100"], Workload.from_lengths(2048, 256),
             Targets(ttft_s=2, tpot_s=0.05))
    html = p._repr_html_()
    assert "Pareto frontier" in html and not E_NOTATION.search(html)
    s = sweep_model("llama-3-8b", ["h100"], "decode", np.array([1, 8, 64]),
                    np.array([1024, 4096]))
    html = s._repr_html_()
    assert "Pareto frontier" in html and " ms<" in html and not E_NOTATION.search(html)


def test_to_frame_without_pandas_says_how_to_get_it():
    from roofline.errors import RooflineError
    from roofline.render.frames import frame

    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(RooflineError, match="pip install pandas"):
            frame({"a": np.array([1.0])})
    else:
        assert list(frame({"a": np.array([1.0])}).columns) == ["a"]


def test_human_units_by_column_name():
    from roofline.render.frames import human

    assert human(18560.0, "tokens_per_s") == "18.6 k/s"
    assert human(4.007e-05, "t_lower_s") == "40.1 us"
    assert human(1030.0, "memory_bytes") == "1.03 kB"
    assert human(8192.0, "k") == "8192"
    assert human(None) == "-"


def test_table_cells_wrap_at_spaces_not_mid_word():
    from roofline.render.html import CSS

    cells = next(rule for rule in CSS.split("}") if rule.strip().startswith("th, td"))
    assert "anywhere" not in cells and "break-all" not in cells  # "attainabl e" came from it


def test_parameter_counts_and_positions_read_as_people_write_them(run_cli):
    from roofline.units import format_params

    assert format_params(1.026e12) == "1.03T" and format_params(70.6e9) == "70.6B"
    code, out, _ = run_cli("model", "list")
    assert code == 0 and not E_NOTATION.search(out)
