"""Tracing real code: exact counts for small programs, the model-vs-trace agreement, JAX."""

import json
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="torch is an optional extra (pip install torch)")
import torch.nn.functional as F  # noqa: E402

from roofline.cli import main  # noqa: E402
from roofline.errors import RooflineError  # noqa: E402
from roofline.models import Precision, analyze, prefill  # noqa: E402
from roofline.trace import trace, tracing  # noqa: E402

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_matmul_exact_flops_and_bytes():
    x, w = torch.randn(64, 512), torch.randn(512, 2048)
    t = trace(lambda: x @ w)
    (op,) = t.ops
    assert op.kind == "mm" and op.flops_source == "torch"
    assert op.flops == 2 * 64 * 512 * 2048
    assert op.bytes == 4 * (64 * 512 + 512 * 2048 + 64 * 2048)
    row = t.rows("h100")[0]
    assert row.intensity == pytest.approx(op.flops / op.bytes) and row.bound == "compute"


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_flops(causal):
    b, h, n, d = 2, 4, 128, 32
    q = torch.randn(b, h, n, d)
    t = trace(lambda: F.scaled_dot_product_attention(q, q, q, is_causal=causal))
    (op,) = t.ops
    pairs = n * (n + 1) / 2 if causal else n * n
    assert op.flops == b * h * pairs * (2 * (d + d) + 5)  # our attention formula
    assert op.flops_source == "roofline"
    assert ("counts the full score matrix" in op.note) == causal
    assert op.bytes == 4 * (4 * b * h * n * d + b * h * n)  # q, k, v read; o and lse written


def test_sdpa_flops_against_torch_counter():
    # Independent reference: torch's FlopCounterMode counts the two score matmuls of
    # non-causal SDPA (4·b·h·n²·d) on the math backend, where SDPA is two bmm kernels; ours
    # adds the documented 5 FLOPs per score (softmax).
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    b, h, n, d = 2, 4, 128, 32
    q, k, v = (torch.randn(b, h, n, d) for _ in range(3))
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        F.scaled_dot_product_attention(q, k, v)
    (op,) = trace(lambda: F.scaled_dot_product_attention(q, k, v)).ops
    assert counter.get_total_flops() == 4 * b * h * n * n * d
    assert op.flops - 5 * b * h * n * n == counter.get_total_flops()


def test_mlp_counts_and_fusion_headroom():
    x, w1, w2 = torch.randn(64, 512), torch.randn(512, 2048), torch.randn(2048, 512)
    t = trace(lambda: F.silu(x @ w1) @ w2)
    assert [op.kind for op in t.ops] == ["mm", "silu", "mm"]
    hidden = 64 * 2048
    assert t.flops == 2 * (2 * 64 * 512 * 2048) + 4 * hidden
    fusion = t.fusion("h100")
    assert fusion.intermediates == 2
    assert fusion.bytes_removed == 2 * 2 * hidden * 4  # two tensors, written once, read once
    assert fusion.t_lower_fused_s <= fusion.t_lower_before_s
    assert not t.flagged


def test_unknown_arithmetic_is_flagged_not_silently_zero():
    x = torch.rand(1000)
    t = trace(lambda: torch.special.erfinv(x))
    assert [op.flops_source for op in t.ops] == ["unknown"]
    assert t.flagged and t.by_kind("h100")[0].flagged


def test_context_manager_and_timing():
    x = torch.randn(256, 256)
    with tracing(time_ops=True) as tr:
        (x @ x).relu()
    assert tr.trace is not None and [op.kind for op in tr.trace.ops] == ["mm", "relu"]
    row = tr.trace.rows("h100")[0]
    assert row.time_s > 0 and row.achieved_flops_per_s > 0 and row.efficiency > 0


def test_llama_block_trace_agrees_with_the_model():
    sys.path.insert(0, str(EXAMPLES))
    try:
        import llama_block
    finally:
        sys.path.pop(0)
    t = trace(llama_block.main)
    c = llama_block.CONFIG
    a = analyze(llama_block.spec(), "h100", prefill(c["batch"], c["seq"]),
                precision=Precision("fp32", "fp32"))
    layer = [op for op in a.ops if op.group != "model"]  # the block: no embedding, no head
    flops = sum(op.flops for op in layer)
    # The matmuls independently: torch's own counter on the trace side, our shapes on the other.
    traced_mm = [op for op in t.ops if op.kind == "mm"]
    assert all(op.flops_source == "torch" for op in traced_mm)
    model_mm = [op for op in layer if op.name in
                ("qkv projection", "attention output", "mlp up/gate", "mlp down")]
    assert sum(op.flops for op in traced_mm) == sum(op.flops for op in model_mm)
    # Same attention; the elementwise conventions differ by a few thousand FLOPs
    # (the traced RMSNorm adds eps and takes rsqrt per row, which the model's 4/element omits).
    assert t.flops == pytest.approx(flops, rel=1e-4)
    model_bytes = sum(op.hbm_bytes for op in layer)
    # The trace runs RMSNorm as 6 kernels and SwiGLU as 2, the model counts each as one fused
    # op: the unfused trace moves 1.41x the model's bytes (README; the model's flash attention
    # re-reads K/V from L2, not HBM); a perfect fusion, less.
    assert t.bytes / model_bytes == pytest.approx(1.408, rel=0.02)
    assert t.bytes - t.fusion("h100").bytes_removed < model_bytes


def test_trace_cli(capsys):
    target = f"{EXAMPLES / 'llama_block.py'}:main"
    assert main(["trace", target, "--hw", "h100", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["flops"] > 2e10 and data["fusion"]["intermediates"] > 10
    assert {r["name"] for r in data["by_kind"]} >= {"mm", "silu"}
    assert main(["trace", target, "--time"]) == 0
    assert "fusion headroom" in capsys.readouterr().out
    assert main(["trace", str(EXAMPLES / "llama_block.py"), "--json"]) == 0  # main() by default
    assert json.loads(capsys.readouterr().out)["flops"] == data["flops"]


@pytest.mark.parametrize(("target", "needle"), [
    ("nope.py:main", "script not found"),
    ("examples/llama_block.txt", "expected path/to/script.py[:function]"),
    (f"{EXAMPLES / 'llama_block.py'}:absent", "has no function 'absent'"),
])
def test_trace_cli_bad_target(capsys, target, needle):
    assert main(["trace", target]) == 2
    err = capsys.readouterr().err
    assert needle in err.splitlines()[-1] and err.count("error") == 1


ENCODER = """
import torch


def main():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(64, 4, 128, batch_first=True)
    x = torch.randn(2, 16, 64, requires_grad=True)
    layer(x).sum().backward()
"""


def test_trace_text_with_flagged_ops_has_a_flagged_column(run_cli, tmp_path):
    # a stock encoder layer, forward and backward: dropout's bernoulli_ and _safe_softmax have
    # no FLOP formula, so the table gains a 'flagged' column (it crashed without a header)
    script = tmp_path / "encoder.py"
    script.write_text(ENCODER)
    code, out, err = run_cli("trace", str(script), "--top", "100")
    assert code == 0, err
    lines = out.splitlines()
    header, rule = lines[2], lines[3]
    assert header.split()[-1] == "flagged" and len(rule.split()) == 8
    rows = {line.split()[0]: line for line in lines[4:lines.index("", 4)]}
    assert {"bernoulli_", "_safe_softmax", "mm"} <= set(rows)
    assert rows["bernoulli_"].endswith("yes") and not rows["mm"].endswith("yes")
    assert "aten.bernoulli_" in out.splitlines()[-1]  # the flagged list names them
    code, out, _ = run_cli("trace", str(script), "--top", "3")  # no flagged op among 3: no column
    assert code == 0 and out.splitlines()[2].split()[-1] == "bound"
    code, out, _ = run_cli("trace", str(script), "--json")
    data = json.loads(out, parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    assert "aten._safe_softmax.default" in data["flagged"]


def test_trace_checks_its_options_before_running_the_script(run_cli, tmp_path):
    marker = tmp_path / "ran"
    script = tmp_path / "side_effect.py"
    script.write_text(f"open({str(marker)!r}, 'w').close()\n\ndef main():\n    pass\n")
    code, _, err = run_cli("trace", str(script), "--hw", "no-such-chip")
    assert code == 2 and "unknown chip 'no-such-chip'" in err and err.count("\n") == 1
    assert not marker.exists()
    code, _, err = run_cli("trace", str(script))
    assert code == 0 and marker.exists()
    assert err.count("importing and running") == 1 and err.count("\n") == 1


def test_trace_script_without_main_names_the_fix(capsys, tmp_path):
    script = tmp_path / "work.py"
    script.write_text("def step():\n    pass\n")
    assert main(["trace", str(script)]) == 2
    err = capsys.readouterr().err
    assert "has no function 'main' (name one: script.py:function)" in err


def test_load_function_errors_are_clean():
    from roofline.trace.cli import load_function

    with pytest.raises(RooflineError, match="expected"):
        load_function("x.txt:main")


def test_jax_cost_analysis_beside_our_count():
    jax = pytest.importorskip("jax", reason="jax is optional (pip install jax)")
    import jax.numpy as jnp

    from roofline.trace import trace_jax

    def mlp(x, w1, w2):
        return jax.nn.silu(x @ w1) @ w2

    args = jnp.ones((64, 512)), jnp.ones((512, 2048)), jnp.ones((2048, 512))
    t = trace_jax(mlp, *args)
    assert t.matmul_flops == 2 * (2 * 64 * 512 * 2048)
    assert t.xla_flops >= t.matmul_flops and not t.flags
    # XLA's bytes for the compiled program equal our torch trace's unfused traffic here
    xt = trace(lambda: F.silu(torch.ones(64, 512) @ torch.ones(512, 2048))
               @ torch.ones(2048, 512))
    factories = sum(op.bytes for op in xt.ops if op.kind == "ones")
    assert t.xla_bytes == xt.bytes - factories
    assert t.estimate("h100").bound == "compute"


@pytest.mark.parametrize(("op", "layout", "args", "causal"), [
    ("_scaled_dot_product_efficient_attention", "bhld", (None, False, 0.0, True), True),
    ("_scaled_dot_product_efficient_attention", "bhld", (None, True, 0.0, False), False),
    ("_scaled_dot_product_cudnn_attention", "bhld", (None, True, 0.0, True), True),
    ("_flash_attention_forward", "blhd", (None, None, 64, 64, 0.0, True, False), True),
    ("_efficient_attention_forward", "blhd", (None, None, None, 64, 64, 0.0, 1), True),
    ("_efficient_attention_forward", "blhd", (None, None, None, 64, 64, 0.0, 0), False),
])
def test_attention_kernels_read_causal_and_layout_by_schema(op, layout, args, causal):
    # the GPU kernels cannot run here; their FLOPs come from shapes and named arguments only
    from roofline.trace.torch_trace import count_flops

    b, h, n, d = 2, 8, 64, 32
    shape = (b, h, n, d) if layout == "bhld" else (b, n, h, d)
    q = torch.empty(shape)
    func = getattr(torch.ops.aten, op).default
    flops, source, note = count_flops(func, op, (q, q, q, *args), {}, None)
    pairs = n * (n + 1) / 2 if causal else n * n
    assert flops == b * h * pairs * (2 * 2 * d + 5) and source == "roofline"
    assert bool(note) == causal


def test_trace_script_that_exits_is_a_clean_error(capsys, tmp_path):
    script = tmp_path / "quits.py"
    script.write_text("import sys\n\ndef main():\n    sys.exit(3)\n")
    assert main(["trace", str(script)]) == 2
    assert "called sys.exit(3) while it ran" in capsys.readouterr().err
    script.write_text("import sys\nsys.exit(4)\n")
    assert main(["trace", str(script)]) == 2
    assert "called sys.exit(4); guard its command-line code" in capsys.readouterr().err


def test_trace_top_is_a_positive_count(run_cli):
    code, _, err = run_cli("trace", str(EXAMPLES / "llama_block.py"), "--top", "0")
    assert code == 2 and "argument --top: expected a positive whole number" in err
