"""Each op's parameters are declared once (roofline.ops): the CLI options, `sweep op` axes,
`--op` specs and `run_op` all come from the declaration, with the same defaults."""

import argparse
import inspect
import json

import numpy as np
import pytest

from roofline import load_chip
from roofline.errors import RooflineError
from roofline.ops import OPS, op_decl, resolve_op, run_op
from roofline.ops.attention import DEFAULT_BLOCK_Q, attention, flash_tiling
from roofline.ops.collectives import ALGORITHMS
from roofline.ops.mla import mla_attention, mla_form
from roofline.ops.params import Param

H100 = load_chip("h100")

# one call per op, as Python keyword arguments (bools and choices included somewhere)
SAMPLES = {
    "matmul": dict(m=128, k=8192, n=8192, weight_dtype="int4"),
    "gemv": dict(k=4096, n=4096),
    "dot": dict(n=4096),
    "elementwise": dict(n=4096, kind="silu"),
    "tiled-matmul": dict(m=4096, k=4096, n=4096, level="l2"),
    "batched-matmul": dict(batch=8, k=4096, n=4096),
    "grouped-matmul": dict(tokens=64, k=4096, n=1024, experts=64, top_k=4),
    "sharded-matmul": dict(m=1024, k=8192, n=8192, shards=8, shard="output", gather=False),
    "tp-layer": dict(seq_len=4096, hidden=8192, ffn=28672, heads=64, kv_heads=8, tp=8),
    "attention": dict(q_len=2048, heads=16, kv_heads=4, causal=False),
    "mla": dict(q_len=4096, form="expanded"),
    "linear-attention": dict(q_len=1, kv_len=8192, key_heads=16),
    **{kind: dict(nbytes=64 * 2**20, ranks=16) for kind in
       ["allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "sendrecv"]},
}


def test_every_op_has_a_sample_and_levers():
    from roofline.levers import OP_LEVERS

    assert set(SAMPLES) == set(OPS) == set(OP_LEVERS)


def _argv(decl, kwargs):
    """Python keyword arguments as the op's command-line words, through its declaration."""
    params = {p.name: p for p in decl.params}
    out = []
    for name, value in kwargs.items():
        p = params[name]
        if p.kind == "bool":
            out.append(p.option if value else "--no-" + p.option[2:])
        else:
            out += [p.option, str(value)]
    return out


def _subparser(parser, *path):
    for name in path:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


def _options(parser):
    return {a.dest: a for a in parser._actions if a.option_strings and a.dest != "help"}


def _check_matches(actions, decl, default_of, lists=False):
    for p in decl.params:
        action = actions[p.name]
        flags = [p.option, "--no-" + p.option[2:]] if p.kind == "bool" else [p.option]
        assert action.option_strings == flags, (decl.name, p.name)
        assert action.help == p.help_text, (decl.name, p.name)
        assert action.required == p.required, (decl.name, p.name)
        assert action.default == default_of(p), (decl.name, p.name)
        assert list(action.choices or []) == ([] if lists else list(p.choices)), (
            decl.name, p.name)  # a sweep's list is checked value by value, by the op


@pytest.mark.parametrize("name", list(OPS))
def test_cli_options_are_the_declaration(name):
    from roofline.cli import build_parser
    from roofline.cli.ops import op_parser

    decl = OPS[name]
    parser = build_parser()
    op = _options(_subparser(parser, "op", name))
    assert set(op) == {p.name for p in decl.params} | {"hw", "clock_mhz", "json", "explain",
                                                      "calibrated", "expect", "kernel"}
    _check_matches(op, decl, lambda p: None if p.kind == "bool" else p.default)
    # an --op spec of plot / report: the op's own parser, the same options
    spec = _options(op_parser(decl, "x"))
    assert set(spec) == {p.name for p in decl.params}
    _check_matches(spec, decl, lambda p: None if p.kind == "bool" else p.default)
    # sweep op: the same flags and help; values are lists, read by the sweep
    sweep = _options(_subparser(parser, "sweep", "op", name))
    assert set(sweep) == {p.name for p in decl.params} | {"hw", "json", "csv", "rows",
                                                         "expect"}
    _check_matches(sweep, decl, lambda p: None, lists=True)
    for sub in (_subparser(parser, "op", name), _subparser(parser, "sweep", "op", name)):
        text = " ".join(sub.format_help().split())  # the help renders, every option in it
        assert all(p.option in text for p in decl.params)


# the functions behind the two ops whose declared function wraps another
UNDERLYING = {"attention": attention}


DISPATCHED = {"attention": ("direction",)}  # forward, backward or both: which op to call


@pytest.mark.parametrize("name", list(OPS))
def test_declared_defaults_are_the_functions_defaults(name):
    decl = OPS[name]
    if name == "tp-layer":
        from roofline.models import tp_layer as function
    else:
        function = UNDERLYING.get(name, decl.function)
    signature = inspect.signature(function).parameters
    for p in decl.params:
        if p.name in DISPATCHED.get(name, ()):
            continue  # read by the op's dispatcher (attention_or_mla), not the formula
        assert p.name in signature, (name, p.name)  # every parameter reaches the function
        default = signature[p.name].default
        if p.default is not None and default is not inspect.Parameter.empty:
            assert p.default == default, (name, p.name)
        if p.required:
            assert default is inspect.Parameter.empty, (name, p.name)


@pytest.mark.parametrize("name", list(OPS))
def test_filled_in_defaults_cost_what_the_functions_own_rules_cost(name):
    """A parameter that follows another one (weight dtype -> dtype, kv heads -> heads) costs
    the same filled in as left to the function (where the function has its own default)."""
    decl, kwargs = OPS[name], resolve_op(name, H100, **SAMPLES[name])
    function = UNDERLYING.get(name, decl.function)
    signature = inspect.signature(function).parameters
    base = decl.function(**kwargs)
    for p in decl.params:
        if p.follows and p.name not in SAMPLES[name] and p.name in kwargs \
                and signature.get(p.name) and signature[p.name].default is None:
            left = decl.function(**{k: v for k, v in kwargs.items() if k != p.name})
            assert left.bytes == base.bytes and left.flops == base.flops, (name, p.name)


def test_help_shows_each_kind_of_default():
    assert Param("m", "rows").help_text == "rows"
    assert Param("bm", "tile rows", default=128).help_text == "tile rows (default 128)"
    assert Param("kv_len", "keys", follows="q_len").help_text == "keys (default --q-len)"
    assert Param("causal", "causal", "bool", True).help_text == "causal (default --causal)"
    assert Param("gated", "gated", "bool", False).help_text == "gated (default --no-gated)"
    assert Param("kv_len", "keys (incl. queries)", follows="q_len").help_text == \
        "keys (incl. queries; default --q-len)"


@pytest.mark.parametrize("name", list(OPS))
def test_op_json_echoes_its_inputs_as_resolved(run_cli, name):
    decl = OPS[name]
    code, out, err = run_cli("op", name, *_argv(decl, SAMPLES[name]), "--hw", "h100", "--json")
    assert code == 0, err
    data = json.loads(out)
    expected = {k: v for k, v in resolve_op(name, "h100", **SAMPLES[name]).items()
                if k != "chip"}  # a collective's "auto" carries the chip it picks on
    if expected.get("algo") == "auto":  # echoed as what it picked
        assert data["inputs"]["algo"] in ALGORITHMS
        expected["algo"] = data["inputs"]["algo"]
    assert data["inputs"] == json.loads(json.dumps({"op": name, **expected}))
    assert {p.name for p in decl.params if p.default is not None or p.follows} <= set(
        expected)  # every default filled in
    # the echo is enough to run the op again, from Python, to the same bound
    again = run_op(name, "h100", **{k: v for k, v in data["inputs"].items() if k != "op"})
    assert again.t_lower_s == pytest.approx(data["t_lower_s"])


def test_op_json_inputs_name_shapes_dtypes_and_chip_defaults(run_cli):
    _, out, _ = run_cli("op", "matmul", "--m", "128", "--k", "8k", "--n", "8192",
                        "--weight-dtype", "int4", "--json")
    assert json.loads(out)["inputs"] == {
        "op": "matmul", "m": 128, "k": 8192, "n": 8192, "dtype": "bf16", "weight_dtype": "int4",
        "out_dtype": "bf16", "compute_dtype": "bf16"}
    _, out, _ = run_cli("op", "attention", "--q-len", "1024", "--heads", "8", "--json")
    inputs = json.loads(out)["inputs"]
    assert inputs["kv_len"] == 1024 and inputs["kv_heads"] == 8 and inputs["v_head_dim"] == 128
    assert inputs["sram_bytes"] == 233472 and inputs["block_q"] is None  # H100's SMEM per SM
    _, out, _ = run_cli("op", "attention", "--q-len", "1024", "--heads", "8", "--hw", "gaudi2",
                        "--json")
    inputs = json.loads(out)["inputs"]
    assert inputs["sram_bytes"] is None and inputs["block_q"] == DEFAULT_BLOCK_Q
    _, out, _ = run_cli("op", "allreduce", "--bytes", "1GiB", "--ranks", "16", "--json")
    inputs = json.loads(out)["inputs"]
    assert inputs["nbytes"] == 2**30 and inputs["domain_size"] == 8  # H100: 8 per NVLink domain


def test_run_op_is_the_cli_op():
    est = run_op("matmul", H100, m=128, k=8192, n=8192)
    assert est.bound == "hbm" and est.intensity["hbm"] == pytest.approx(124.12, rel=1e-4)
    # chip-dependent defaults: flash tiles with the chip's SRAM, collectives with its domain
    assert run_op("attention", "h100", q_len=4096, heads=32).cost.bytes == run_op(
        "attention", "h100", q_len=4096, heads=32, sram_bytes=233472).cost.bytes
    assert run_op("all-reduce", "h100", nbytes=2**20, ranks=16).cost.link_bytes.keys() == {
        "scale-up", "scale-out"}  # 16 ranks on 8-GPU domains: hierarchical


@pytest.mark.parametrize(("call", "needle"), [
    (lambda: run_op("matmull", "h100", m=1, k=1, n=1), "did you mean 'matmul'"),
    (lambda: run_op("matmul", "h100", m=1, k=1), "n is required"),
    (lambda: run_op("matmul", "h100", m=1, k=1, n=1, wieght_dtype="int4"),
     "did you mean 'weight_dtype'"),
    (lambda: run_op("matmul", "h1000", m=1, k=1, n=1), "unknown chip"),
])
def test_run_op_errors_name_what_was_wrong(call, needle):
    with pytest.raises(RooflineError, match=needle):
        call()


def test_op_specs_use_the_ops_own_parser_not_the_whole_cli(run_cli, monkeypatch):
    import roofline.cli

    def refuse():
        raise AssertionError("an --op spec re-parsed the whole command line")

    code, out, _ = run_cli("report", "--op", "matmul --m 1 --k 8 --n 8")
    assert code == 0 and "matmul" in out
    monkeypatch.setattr(roofline.cli, "build_parser", refuse)
    from roofline.cli.ops import op_estimate

    est = op_estimate(["attention", "--q-len", "512", "--heads", "8", "--no-causal"], H100)
    assert est.flops == run_op("attention", H100, q_len=512, heads=8, causal=False).flops
    with pytest.raises(SystemExit) as info:  # a bad option: argparse's one line, exit 2
        op_estimate(["matmul", "--m", "1", "--k", "1"], H100)
    assert info.value.code == 2
    with pytest.raises(RooflineError, match="--dtype: empty value"):
        op_estimate(["matmul", "--m", "1", "--k", "1", "--n", "1", "--dtype", " "], H100)


# --- the MLA form rule: one function in ops/attention.py ------------------------------------


def test_mla_form_rule():
    assert mla_form(1) == mla_form(16) == "absorbed"
    assert mla_form(17) == mla_form(4096) == "expanded"
    assert mla_form(np.array([1, 4, 16])) == "absorbed"
    with pytest.raises(RooflineError, match="q_len: MLA is absorbed up to 16"):
        mla_form(np.array([1, 4096]))


@pytest.mark.parametrize(("q_len", "form"), [(1, "absorbed"), (16, "absorbed"),
                                             (17, "expanded"), (2048, "expanded")])
def test_attention_impl_mla_follows_the_rule(run_cli, q_len, form):
    _, out, _ = run_cli("op", "attention", "--q-len", str(q_len), "--kv-len", "4096",
                        "--heads", "128", "--impl", "mla", "--json")
    data = json.loads(out)
    assert data["name"] == f"mla ({form})"
    direct = mla_attention(1, q_len, 4096, 128, form=form,
                           **flash_tiling(H100) if form == "expanded" else {})
    assert data["bytes"]["hbm"] == pytest.approx(direct.bytes["hbm"])
    assert run_op("attention", H100, q_len=q_len, kv_len=4096, heads=128,
                  impl="mla").cost.name == f"mla ({form})"


def test_sweeping_q_len_across_the_mla_rule_is_one_line(run_cli):
    code, _, err = run_cli("sweep", "op", "attention", "--q-len", "1,4096", "--kv-len", "8192",
                           "--heads", "128", "--impl", "mla")
    assert code == 2 and "MLA is absorbed up to 16" in err and err.count("\n") == 1


# --- the flash tiling default: one function, the same answer for op, model and measure -----


def test_flash_tiling_given_chip_or_fallback():
    h100_l2 = {"l2_bytes": 50e6}  # H100's L2
    assert flash_tiling(H100) == {"sram_bytes": 233472.0, "block_q": None, **h100_l2}
    assert flash_tiling(load_chip("gaudi2")) == {"sram_bytes": None, "block_q": DEFAULT_BLOCK_Q,
                                                 "l2_bytes": 48e6}
    assert flash_tiling(None) == {"sram_bytes": None, "block_q": DEFAULT_BLOCK_Q,
                                  "l2_bytes": None}
    assert flash_tiling(H100, block_q=64) == {"sram_bytes": None, "block_q": 64, **h100_l2}
    assert flash_tiling(H100, sram_bytes=1e5) == {"sram_bytes": 1e5, "block_q": None, **h100_l2}
    assert flash_tiling(H100, l2_bytes=1e6) == {
        "sram_bytes": 233472.0, "block_q": None, "l2_bytes": 1e6}
    assert flash_tiling(load_chip("tpu-v5e"))["l2_bytes"] is None  # no L2 level: all to HBM


@pytest.mark.parametrize("hw", ["h100", "gaudi2", "tpu-v5e"])
def test_op_model_and_measure_tile_flash_attention_alike(hw):
    from roofline.measure.ops import attention_case
    from roofline.models import analyze, prefill

    chip = load_chip(hw)
    model = analyze("llama-3-8b", chip, prefill(1, 4096))  # 32 heads, 8 KV heads, d = 128
    layer = next(o for o in model.ops if o.name == "attention")
    op = run_op("attention", chip, q_len=4096, heads=32, kv_heads=8)
    measured = attention_case(1, 4096, 4096, 32, 8, 128, "bf16", chip)
    assert float(layer.hbm_bytes) / layer.count == op.cost.bytes["hbm"]
    assert measured.cost.bytes["hbm"] == op.cost.bytes["hbm"]
    # and the tiling is the chip's: a 128-row tile would give other traffic on H100 and v5e
    fallback = run_op("attention", chip, q_len=4096, heads=32, kv_heads=8, block_q=128)
    assert (op.cost.bytes == fallback.cost.bytes) == (hw == "gaudi2")


def test_a_given_tiling_wins_in_the_model_too():
    from roofline.models import analyze, prefill

    model = analyze("llama-3-8b", "h100", prefill(1, 4096), block_q=64)
    layer = next(o for o in model.ops if o.name == "attention")
    op = run_op("attention", "h100", q_len=4096, heads=32, kv_heads=8, block_q=64)
    assert float(layer.hbm_bytes) / layer.count == op.cost.bytes["hbm"]


def test_elementwise_fp8_lever_narrows_input_and_output():
    from roofline.levers import levers_for, what_if
    from roofline.ops import elementwise

    kwargs = resolve_op("elementwise", H100, n=10**7, kind="silu")  # out_dtype filled: bf16
    base = run_op("elementwise", H100, n=10**7, kind="silu")
    rows = {r.label: r for r in what_if(elementwise, kwargs, H100, levers_for("elementwise"),
                                        base)}
    assert rows["fp8 input and output"].speedup == pytest.approx(2.0)  # half the bytes


def test_op_decl_by_alias():
    assert op_decl("all-reduce") is op_decl("allreduce") is OPS["allreduce"]
