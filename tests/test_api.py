"""The public surface: `__all__` complete and resolvable, `import roofline` loads the core
only, results have short reprs and render in a notebook."""

import subprocess
import sys

import roofline
from roofline.models import Parallel, decode


def test_all_names_resolve_and_include_the_model_analysis():
    assert {"analyze", "ModelAnalysis", "evaluate", "matmul", "trace"} <= set(roofline.__all__)
    for name in roofline.__all__:
        assert getattr(roofline, name) is not None, name
    assert sorted(roofline.__all__) == roofline.__all__


def test_lazy_names_resolve_to_their_objects_every_time():
    """Names loaded on first use (PEP 562) are the functions, on every read and through
    `import *`, in each package that defers some (never the module of the same name)."""
    import types

    import roofline.ops
    import roofline.ops.collectives

    for package in (roofline, roofline.ops, roofline.ops.collectives):
        star: dict = {}
        exec(f"from {package.__name__} import *", star)
        for name in package.__all__:
            first = getattr(package, name)
            assert not isinstance(first, types.ModuleType), (package.__name__, name)
            assert getattr(package, name) is first is star[name], (package.__name__, name)
    from roofline.ops.mla import mla_attention

    assert roofline.mla_attention is roofline.ops.mla_attention is mla_attention


def test_import_roofline_loads_the_core_only():
    code = ("import sys, roofline; "
            "print(','.join(sorted(m for m in sys.modules if m.startswith('roofline'))))")
    loaded = set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                check=True).stdout.strip().split(","))
    for outside in ("roofline.trace", "roofline.render", "roofline.measure", "roofline.plot",
                    "roofline.report", "roofline.html_report", "roofline.cli",
                    "roofline.models"):
        assert not any(m == outside or m.startswith(outside + ".") for m in loaded), outside
    assert {"roofline.evaluate", "roofline.cost", "roofline.ops", "roofline.hardware"} <= loaded


def test_reprs_are_one_short_line():
    est = roofline.evaluate(roofline.matmul(128, 8192, 8192), "h100")
    assert repr(est) == ("Estimate(matmul on h100-sxm: hbm-bound, t_lower 41.3 us, "
                         "I_hbm 124.1 FLOP/B)")
    import numpy as np

    sweep = roofline.evaluate(roofline.matmul(np.array([1, 4096]), 8192, 8192), "h100")
    assert repr(sweep).startswith("Estimate(matmul on h100-sxm: 2 points, t_lower ")
    a = roofline.analyze("llama-3-8b", "h100", decode(1, 1024), Parallel())
    assert "\n" not in repr(a) and len(repr(a)) < 120 and "object at 0x" not in repr(a)


class _Formatter:
    def __init__(self) -> None:
        self.types: dict = {}

    def for_type(self, cls, func) -> None:
        self.types[cls] = func


class _Shell:
    def __init__(self) -> None:
        self.display_formatter = type("D", (), {"formatters": {"text/html": _Formatter()}})()


def test_every_result_type_renders_in_a_notebook():
    from roofline.render.notebook import register

    shell = _Shell()
    register(shell)
    types = shell.display_formatter.formatters["text/html"].types
    est = roofline.evaluate(roofline.matmul(128, 8192, 8192), "h100")
    a = roofline.analyze("llama-3-8b", "h100", decode(1, 1024), Parallel())
    chip = roofline.load_chip("h100")
    for obj in (est, a, chip):
        html = types[type(obj)](obj)
        assert html.startswith("<div>") and "</table>" in html


def test_json_integers_stay_integers_and_nothing_is_nan():
    import json

    from roofline.serialize import jsonable

    data = jsonable({"max_batch": 133.0, "t": 2.5e-3, "nan": float("nan"), "big": 1e300})
    assert json.dumps(data, allow_nan=False) == (
        '{"max_batch": 133, "t": 0.0025, "nan": null, "big": 1e+300}')
    a = roofline.analyze("llama-3-70b", "h100", decode(16, 4096), Parallel(tp=4)).to_dict()
    assert isinstance(a["memory"]["max_batch"], int) and a["memory"]["max_batch"] > 1


def test_serve_plan_repr_is_one_line():
    from roofline.serve import Workload, plan

    text = repr(plan("llama-3-8b", ["h100"], Workload(512, 128, 576)))
    assert text.startswith("ServePlan(llama-3-8b: ") and "\n" not in text and len(text) < 120
