"""Tracing real code: exact counts for small programs, the model-vs-trace agreement, JAX."""

import json
import sys
from pathlib import Path

import numpy as np
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
    # the block: no embedding, no head; its one layer's attention norm is the first layer's
    layer = [op for op in a.ops if op.group != "model" or op.name == "first norm (no add)"]
    flops = sum(op.flops for op in layer)
    # The matmuls independently: torch's own counter on the trace side, our shapes on the other.
    traced_mm = [op for op in t.ops if op.kind == "mm"]
    assert all(op.flops_source == "torch" for op in traced_mm)
    model_mm = [op for op in layer if op.name in
                ("qkv projection", "attention output", "mlp up/gate", "mlp down")]
    # (the GEMMs' own: serving runs SwiGLU in the up/gate GEMM's epilogue)
    assert sum(op.flops for op in traced_mm) == sum(op.count * sum(op.cost.flops.values())
                                                    for op in model_mm)
    # Same attention; the elementwise conventions differ by a few thousand FLOPs
    # (the traced RMSNorm adds eps and takes rsqrt per row, which the model's 4/element omits).
    assert t.flops == pytest.approx(flops, rel=1e-4)
    model_bytes = sum(op.hbm_bytes for op in layer)
    # The trace runs RMSNorm as 6 kernels and SwiGLU as 2 beside the GEMM, the model counts
    # each norm as one fused op (the residual add fused with it but for the first layer's)
    # and SwiGLU in the up/gate GEMM's epilogue: the unfused trace moves 2.07x the model's
    # bytes (the model's flash attention re-reads K/V from L2, not HBM); a perfect fusion,
    # less.
    assert t.bytes / model_bytes == pytest.approx(2.073, rel=0.02)
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


# --- indexed ops move only the elements their indices select ---------------------------------


def _one(fn):
    with torch.no_grad():
        ops = trace(fn).ops
    assert len(ops) == 1, [op.op for op in ops]
    return ops[0]


def test_embedding_reads_the_rows_it_looks_up_not_the_table():
    # 8 distinct ids into a 32000 x 4096 fp32 table: 8 rows read and written, plus the ids
    # (the whole table, 524 MB, was charged)
    table = torch.nn.Embedding(32000, 4096)
    ids = torch.tensor([[3, 17, 31999, 5, 1000, 2, 40, 7]])
    op = _one(lambda: table(ids))
    assert op.kind == "embedding"
    assert op.bytes_read == 8 * 4096 * 4 + 8 * 8 and op.bytes_written == 8 * 4096 * 4
    assert op.bytes == 262_208


@pytest.mark.parametrize(("name", "fn"), [
    ("index", lambda c, i: c[i]),
    ("index_select", lambda c, i: c.index_select(0, i)),
    ("gather", lambda c, i: c.gather(0, i[:, None].expand(2, 4096))),
])
def test_row_lookups_read_the_rows_they_gather(name, fn):
    cache, ids = torch.randn(64, 4096), torch.tensor([1, 2])
    op = _one(lambda: fn(cache, ids))
    assert op.kind == name
    rows = 2 * 4096 * 4  # 32 kB of a 1 MB tensor
    index = 2 * 8 if name != "gather" else 2 * 4096 * 8  # gather's index is one per element
    assert op.bytes_read == rows + index and op.bytes_written == rows


def test_repeated_ids_read_their_row_once():
    # the compulsory traffic: a row looked up 4 times is read from memory once (charging it
    # 4 times would let a run that hits the cache beat the bound)
    table = torch.randn(1000, 256)
    op = _one(lambda: F.embedding(torch.tensor([7, 7, 7, 7, 9]), table))
    assert op.bytes_read == 2 * 256 * 4 + 5 * 8 and op.bytes_written == 5 * 256 * 4
    op = _one(lambda: table[torch.tensor([-1, 999, 3])])  # -1 and 999 are the same row
    assert op.bytes_read == 2 * 256 * 4 + 3 * 8


def test_boolean_mask_index_and_take_read_what_they_select():
    x = torch.arange(64 * 16, dtype=torch.float32).reshape(64, 16)
    mask = torch.zeros(64, dtype=torch.bool)
    mask[[0, 5, 9]] = True
    op = _one(lambda: x[mask])
    assert op.bytes_read == 3 * 16 * 4 + 64 and op.bytes_written == 3 * 16 * 4
    op = _one(lambda: torch.take(x, torch.tensor([0, 1, 1, 1023])))
    assert op.bytes_read == 3 * 4 + 4 * 8 and op.bytes_written == 4 * 4


def test_kv_cache_update_writes_the_position_not_the_cache():
    # decode's cache[:, :, pos] = k: one position of 8 heads x 64 (2 kB), not the 262 kB cache
    # read and written
    cache, k, pos = torch.zeros(1, 8, 128, 64), torch.randn(1, 8, 1, 64), torch.tensor([5])

    def put():
        cache[:, :, pos] = k

    op = _one(put)
    assert op.kind == "index_put_"
    assert op.bytes_written == 8 * 64 * 4 and op.bytes_read == 8 * 64 * 4 + 8
    op = _one(lambda: cache.index_copy_(2, pos, k))
    assert op.bytes_written == 8 * 64 * 4 and op.bytes_read == 8 * 64 * 4 + 8


def test_accumulating_scatters_read_and_write_the_elements_they_update():
    x, src = torch.zeros(64, 4096), torch.ones(2, 4096)
    ids = torch.tensor([1, 2])
    op = _one(lambda: x.index_add_(0, ids, src))
    rows = 2 * 4096 * 4
    assert op.bytes_written == rows and op.bytes_read == rows + 2 * 8 + rows  # src, ids, rows
    index = ids[:, None].expand(2, 4096)
    op = _one(lambda: x.scatter_add_(0, index, src))
    assert op.bytes_written == rows and op.bytes_read == rows + 2 * 4096 * 8 + rows
    op = _one(lambda: x.scatter_(0, index, 1.0))  # a value: nothing read but the index
    assert op.bytes_written == rows and op.bytes_read == 2 * 4096 * 8


def test_lookup_on_meta_tensors_counts_every_index():
    # no values to deduplicate: each index is one row (the output's size)
    table, ids = torch.empty(1000, 64, device="meta"), torch.zeros(6, dtype=torch.long,
                                                                    device="meta")
    op = _one(lambda: F.embedding(ids, table))
    assert op.bytes_read == 6 * 64 * 4 + 6 * 8


def test_allocations_move_nothing():
    # torch.empty runs no kernel: charging its size as a write counted traffic that never
    # happens (and new_empty_strided, which autograd allocates, was flagged as arithmetic)
    t = trace(lambda: torch.empty(1000).copy_(torch.ones(1000)))
    assert [op.kind for op in t.ops] == ["ones", "copy_"] and t.bytes == 3 * 4000
    assert t.ops[1].bytes_read == 4000  # the copy reads its source only
    t = trace(lambda: torch.ones(2).new_empty_strided((1000,), (1,)))
    assert [op.kind for op in t.ops] == ["ones"] and not t.flagged


def test_overwritten_tensors_are_not_read():
    # copy_, fill_ and zero_ replace their target and out= receives a result: none of them
    # reads the old contents (a 4 kB copy was charged 8 kB read)
    x, y, out = torch.ones(1000), torch.ones(1000), torch.empty(1000)
    op = _one(lambda: x.copy_(y))
    assert op.bytes_read == 4000 and op.bytes_written == 4000
    op = _one(lambda: x.zero_())
    assert op.bytes_read == 0 and op.bytes_written == 4000
    op = _one(lambda: torch.add(x, y, out=out))
    assert op.bytes_read == 8000 and op.bytes_written == 4000
    op = _one(lambda: x.add_(y))  # an in-place update does read its target
    assert op.bytes_read == 8000 and op.bytes_written == 4000


EMBED = """
import torch

E = torch.nn.Embedding(32000, 4096)
IDS = torch.randint(0, 32000, (1, 8))


def main():
    with torch.no_grad():
        return E(IDS)
"""


def test_trace_cli_embedding_bytes(run_cli, tmp_path):
    script = tmp_path / "emb.py"
    script.write_text(EMBED)
    code, out, err = run_cli("trace", str(script), "--json")
    assert code == 0, err
    (row,) = [r for r in json.loads(out)["ops"] if r["name"] == "embedding"]
    assert row["bytes"] <= 2 * 8 * 4096 * 4 + 8 * 8  # 262 kB (was 524 MB)


# --- causal attention as torch runs it ----------------------------------------------------------


def _pairs_top_left(lq, lkv):
    return sum(min(i + 1, lkv) for i in range(lq))


@pytest.mark.parametrize(("lq", "lkv"), [(1, 256), (5, 7), (7, 5), (64, 64)])
def test_causal_sdpa_counts_torchs_top_left_mask(lq, lkv):
    # is_causal with Lq != Lkv: query i sees keys 0..i (torch.tril(0)), not the last keys
    b, h, d = 2, 8, 64
    q, k, v = torch.randn(b, h, lq, d), torch.randn(b, h, lkv, d), torch.randn(b, h, lkv, d)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    mask = torch.ones(lq, lkv, dtype=torch.bool).tril(0)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    op = _one(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
    assert op.flops == b * h * _pairs_top_left(lq, lkv) * (2 * (d + d) + 5)


def test_decode_query_against_a_cache_is_one_pair_when_causal():
    # the reviewer's case: 1,069,056 FLOPs were traced, torch computes 4,176
    q, kv = torch.randn(2, 8, 256, 64), torch.randn(2, 8, 256, 64)
    op = _one(lambda: F.scaled_dot_product_attention(q[:, :, :1], kv, kv, is_causal=True))
    assert op.flops == 4176


def test_top_left_causal_reads_only_the_keys_its_queries_see():
    # one query under torch's top-left mask sees key 0 only: K and V of the other 255 keys are
    # never needed (2.1 MB was charged for 16 kB of compulsory traffic)
    b, h, n, d = 2, 8, 256, 64
    q, kv = torch.randn(b, h, n, d), torch.randn(b, h, n, d)
    op = _one(lambda: F.scaled_dot_product_attention(q[:, :, :1], kv, kv, is_causal=True))
    row = b * h * d * 4  # one query (or key) row per batch and head, fp32
    assert op.bytes_read == 3 * row and op.bytes_written == row + b * h * 4  # o, logsumexp
    op = _one(lambda: F.scaled_dot_product_attention(q[:, :, :1], kv, kv))  # no mask: all keys
    assert op.bytes_read == row + 2 * n * row
    # the backward reads K and V of the 4 keys 4 queries see, and writes dK, dV whole
    q4 = q[:, :, :4].clone().requires_grad_()
    t = trace(lambda: F.scaled_dot_product_attention(q4, kv, kv, is_causal=True).sum()
              .backward())
    (bwd,) = [op for op in t.ops if op.kind.endswith("_backward")]
    # dO, q, k, v, o and the logsumexp; dq, dk, dv
    assert bwd.bytes_read == (4 + 4 + 4 + 4 + 4) * row + 4 * b * h * 4
    assert bwd.bytes_written == (4 + n + n) * row


def test_cross_attention_with_more_queries_than_keys_traces():
    b, h, lq, lkv, d = 1, 4, 32, 8, 16
    q, kv = torch.randn(b, h, lq, d), torch.randn(b, h, lkv, d)
    op = _one(lambda: F.scaled_dot_product_attention(q, kv, kv))
    assert op.flops == b * h * lq * lkv * (2 * 2 * d + 5)


@pytest.mark.parametrize(("op", "layout", "args", "lq", "lkv", "pairs"), [
    # FlashAttention-2 aligns its causal mask bottom right (SDPA sends it non-square causal
    # masks only for CausalBias LOWER_RIGHT); the query i sees keys up to Lkv - Lq + i
    ("_scaled_dot_product_flash_attention", "bhld", (0.0, True), 4, 16, 4 * 16 - 6),
    ("_flash_attention_forward", "blhd", (None, None, 4, 16, 0.0, True, False), 4, 16, 58),
    ("_flash_attention_forward", "blhd", (None, None, 16, 4, 0.0, True, False), 16, 4, 10),
    # the memory-efficient kernel: custom_mask_type 1 is top left, 2 bottom right
    ("_efficient_attention_forward", "blhd", (None, None, None, 4, 16, 0.0, 1), 4, 16, 10),
    ("_efficient_attention_forward", "blhd", (None, None, None, 4, 16, 0.0, 2), 4, 16, 58),
    ("_efficient_attention_forward", "blhd", (None, None, None, 16, 4, 0.0, 1), 16, 4, 58),
    ("_scaled_dot_product_efficient_attention", "bhld", (None, False, 0.0, True), 4, 16, 10),
    ("_scaled_dot_product_cudnn_attention", "bhld", (None, False, 0.0, True), 4, 16, 10),
    # the XPU / out-of-tree kernel had no formula at all (flagged, counted as 0)
    ("_scaled_dot_product_fused_attention_overrideable", "bhld", (None, 0.0, True), 4, 16, 10),
])
def test_attention_kernels_align_causal_masks_as_torch_does(op, layout, args, lq, lkv, pairs):
    from roofline.trace.torch_trace import count_flops

    b, h, d = 2, 4, 32
    q = torch.empty((b, h, lq, d) if layout == "bhld" else (b, lq, h, d), device="meta")
    kv = torch.empty((b, h, lkv, d) if layout == "bhld" else (b, lkv, h, d), device="meta")
    flops, source, _ = count_flops(getattr(torch.ops.aten, op).default, op, (q, kv, kv, *args),
                                   {}, None)
    assert flops == b * h * pairs * (2 * 2 * d + 5) and source == "roofline"


BWD = 2 * (3 * 32 + 2 * 32) + 4  # per pair: five GEMMs (2.5x the forward's two), softmax bwd


@pytest.mark.parametrize(("op", "layout", "args", "pairs"), [
    # (grad_out, q, k, v, then the kernel's arguments); n = 64 queries and keys
    ("_scaled_dot_product_flash_attention_backward", "bhld",
     ("o", "lse", None, None, 64, 64, 0.0, True, "t", "t"), 64 * 65 / 2),
    ("_scaled_dot_product_flash_attention_backward", "bhld",
     ("o", "lse", None, None, 64, 64, 0.0, False, "t", "t"), 64 * 64),
    ("_scaled_dot_product_efficient_attention_backward", "bhld",
     (None, "o", "lse", "t", "t", 0.0, [True, True, True, False], True), 64 * 65 / 2),
    ("_scaled_dot_product_cudnn_attention_backward", "bhld",
     ("o", "lse", "t", "t", None, None, None, 64, 64, 0.0, True), 64 * 65 / 2),
    ("_flash_attention_backward", "blhd",
     ("o", "lse", None, None, 64, 64, 0.0, True, "t", "t"), 64 * 65 / 2),
    ("_efficient_attention_backward", "blhd",
     (None, "o", None, None, 64, 64, "lse", 0.0, "t", "t", 1, False), 64 * 65 / 2),
    ("_efficient_attention_backward", "blhd",
     (None, "o", None, None, 64, 64, "lse", 0.0, "t", "t", 0, False), 64 * 64),
])
def test_attention_backward_kernels_count_causal_pairs(op, layout, args, pairs):
    # the GPU backward kernels cannot run here: torch's formula for them ignores is_causal
    # (a causal backward counted as full, 2x); ours counts the pairs the forward does
    from roofline.trace.torch_trace import count_flops

    b, h, n, d = 2, 8, 64, 32
    t = torch.empty((b, h, n, d) if layout == "bhld" else (b, n, h, d), device="meta")
    fill = {"o": t, "lse": torch.empty(b, h, n, device="meta"),
            "t": torch.empty((), device="meta")}
    call = (t, t, t, t, *(fill.get(a, a) if isinstance(a, str) else a for a in args))
    flops, source, note = count_flops(getattr(torch.ops.aten, op).default, op, call, {}, None)
    assert flops == b * h * pairs * BWD and source == "roofline"
    assert bool(note) == (pairs != 64 * 64)


@pytest.mark.parametrize("op", ["_flash_attention_forward", "_flash_attention_backward"])
def test_varlen_flash_attention_counts_each_packed_sequence(op):
    # two sequences of 3 and 7 tokens packed in one [total, H, d] row (cum_seq = 0, 3, 10):
    # causal pairs 3·4/2 + 7·8/2 per head (the packed shape was read as [B, L, H, d])
    from roofline.trace.torch_trace import count_flops

    h, d = 4, 32
    t = torch.empty(10, h, d, device="meta")
    offsets = torch.tensor([0, 3, 10], dtype=torch.int32)
    kernel = (offsets, offsets, 7, 7, 0.0, True)
    args = (t, t, t, *kernel, False) if op.endswith("forward") else \
        (t, t, t, t, t, torch.empty(h, 10, device="meta"), *kernel, t, t)
    flops, _, _ = count_flops(getattr(torch.ops.aten, op).default, op, args, {}, None)
    per_pair = 2 * 2 * d + 5 if op.endswith("forward") else 2 * 5 * d + 4
    assert flops == h * (6 + 28) * per_pair


def test_cpu_sdpa_backward_is_counted_with_causal_pairs():
    # the CPU kernel's backward runs here: five GEMM-sized products per score pair
    b, h, n, d = 2, 4, 32, 16
    q = torch.randn(b, h, n, d, requires_grad=True)
    t = trace(lambda: F.scaled_dot_product_attention(q, q, q, is_causal=True).sum().backward())
    (bwd,) = [op for op in t.ops if op.kind.endswith("attention_for_cpu_backward")]
    assert bwd.flops == b * h * (n * (n + 1) / 2) * (2 * (3 * d + 2 * d) + 4)
    assert bwd.flops_source == "roofline" and not t.flagged


# --- the script's own output ---------------------------------------------------------------------

NOISY = """
import os
import torch

print("importing")


def main():
    print("running")
    os.write(1, b"raw fd 1\\n")
    return torch.ones(2, 4) @ torch.ones(4, 3)
"""


def test_trace_json_is_not_corrupted_by_the_scripts_prints(capfd, tmp_path):
    script = tmp_path / "noisy.py"
    script.write_text(NOISY)
    assert main(["trace", str(script), "--json"]) == 0
    out, err = capfd.readouterr()
    assert json.loads(out)["flops"] == 2 * 2 * 4 * 3  # stdout is exactly the JSON
    assert "importing" in err and "running" in err and "raw fd 1" in err
    print("after")  # stdout works again once the script is done
    assert capfd.readouterr().out == "after\n"


def _mask_pairs(lq, lkv, mask, left, right):
    """Brute force: the (query, key) pairs a kernel's mask and window let through."""
    i = np.arange(lq)[:, None] + (0 if mask == "top-left" else lkv - lq)
    j = np.arange(lkv)[None, :]
    ok = np.ones((lq, lkv), dtype=bool)
    if mask:
        ok &= j <= i
    if left >= 0:
        ok &= j >= i - left
    if right >= 0 and not mask:
        ok &= j <= i + right
    return ok


@pytest.mark.parametrize("seed", range(4))
def test_sliding_window_kernels_count_the_pairs_and_keys_their_mask_lets_through(seed):
    # FlashAttention's window_size_left / right and the memory-efficient kernel's window_size
    # (Mistral, Gemma's local layers): torch counts the full matrix, a window sees W keys
    from roofline.trace.torch_attention import keys_read as _keys_read
    from roofline.trace.torch_trace import count_flops

    rng = np.random.default_rng(seed)
    b, h, d = 2, 3, 16
    for _ in range(20):
        lq, lkv = int(rng.integers(1, 40)), int(rng.integers(1, 40))
        causal = bool(rng.integers(2)) and lq <= lkv
        left, right = int(rng.integers(-1, 12)), int(rng.integers(-1, 12))
        q = torch.empty(b, lq, h, d, device="meta")
        kv = torch.empty(b, lkv, h, d, device="meta")
        op = torch.ops.aten._flash_attention_forward.default
        named = {"query": q, "key": kv, "value": kv, "is_causal": causal,
                 "window_size_left": left, "window_size_right": right}
        flops, _, _ = count_flops(op, "_flash_attention_forward", (), named, None)
        ok = _mask_pairs(lq, lkv, "bottom-right" if causal else "", left, right)
        assert flops == b * h * ok.sum() * (2 * 2 * d + 5)
        seen, keys = _keys_read("_flash_attention_forward", named)
        used = np.flatnonzero(ok.any(axis=0))
        assert keys == lkv and seen >= (used.max() - used.min() + 1 if used.size else 0)
        if left >= 0 or (right >= 0 and not causal):
            assert seen == (used.max() - used.min() + 1 if used.size else 0)


def test_windowed_decode_reads_only_the_window_of_the_cache():
    # one query against a 4096-token cache with a 1024-key window (left 1023): 1024 pairs
    # and 1024 keys' K and V, not the cache's 4096 (the bound was 4x too slow)
    from roofline.ops.attention import score_pairs
    from roofline.trace.torch_attention import keys_read as _keys_read
    from roofline.trace.torch_trace import count_flops

    q = torch.empty(1, 1, 8, 64, device="meta")
    kv = torch.empty(1, 4096, 8, 64, device="meta")
    named = {"query": q, "key": kv, "value": kv, "is_causal": True,
             "window_size_left": 1023, "window_size_right": 0}
    flops, _, note = count_flops(torch.ops.aten._flash_attention_forward.default,
                                 "_flash_attention_forward", (), named, None)
    assert flops == 8 * 1024 * (2 * 2 * 64 + 5) and note
    assert _keys_read("_flash_attention_forward", named) == (1024, 4096)
    # the op library's sliding window counts the same pairs (W = left + 1)
    assert score_pairs(1, 4096, True, window=1024).value == 1024
    # the memory-efficient kernel's window_size is W itself (bottom right: mask type 2)
    eff = {"query": q, "key": kv, "value": kv, "custom_mask_type": 2, "window_size": 1024}
    flops, _, _ = count_flops(torch.ops.aten._efficient_attention_forward.default,
                              "_efficient_attention_forward", (), eff, None)
    assert flops == 8 * 1024 * (2 * 2 * 64 + 5)


def test_ops_that_add_what_they_select_count_one_flop_per_element():
    # they were flagged "no formula" and counted as 0 FLOPs
    w, idx = torch.randn(100, 16), torch.randint(0, 100, (40,))
    bag = _one(lambda: F.embedding_bag(idx, w, torch.tensor([0, 10, 20, 30]), mode="sum"))
    assert bag.flops == 40 * 16 and bag.flops_source == "roofline"
    assert bag.bytes_read < w.numel() * 4  # the rows it looks up, not the table
    x, src, rows = torch.zeros(10, 16), torch.randn(5, 16), torch.tensor([0, 2, 4, 6, 8])
    assert _one(lambda: x.index_add_(0, rows, src)).flops == 5 * 16
    index = torch.zeros(3, 16, dtype=torch.long)
    t = trace(lambda: x.scatter_add_(0, index, src[:3]))
    assert [op.flops for op in t.ops if op.kind == "scatter_add_"] == [3 * 16]
    assert _one(lambda: x.index_put_((rows,), src, accumulate=True)).flops == 5 * 16
    assert _one(lambda: x.index_put_((rows,), src)).flops == 0  # a copy
    assert not trace(lambda: x.index_add_(0, rows, src)).flagged


def test_packed_windowed_decode_reads_each_sequences_window():
    # varlen (torch.nn.attention.varlen's call): 4 sequences of one query over 4096 cached
    # keys each, a 1024-key window: 4 x 1024 keys' K and V, not all 16384
    from roofline.trace.torch_attention import keys_read as _keys_read

    q = torch.empty(4, 8, 64, device="meta")
    kv = torch.empty(4 * 4096, 8, 64, device="meta")
    named = {"query": q, "key": kv, "value": kv, "max_q": 1, "max_k": 4096,
             "cum_seq_q": torch.tensor([0, 1, 2, 3, 4], dtype=torch.int32),
             "cum_seq_k": torch.tensor([0, 4096, 8192, 12288, 16384], dtype=torch.int32),
             "is_causal": True, "window_size_left": 1023, "window_size_right": 0}
    assert _keys_read("_flash_attention_forward", named) == (4 * 1024, 16384)
    del named["window_size_left"], named["window_size_right"]
    assert _keys_read("_flash_attention_forward", named) == (1, 1)  # all keys: no window
