"""A chosen serving plan as the engine's own launch command, with the flag names of the
engine version runtime.py cites: parallel sizes, the running-sequence cap, the prefill chunk
budget, the memory fraction and the dtypes of the plan, so it launches as it was planned."""

from __future__ import annotations

from typing import Any

from ..errors import ParameterError, RooflineError

EMITTERS = ("vllm", "sglang", "tensorrt-llm")


def _kv(row: dict[str, Any], engine: str) -> str | None:
    """The KV cache dtype flag value, None for the engines' default (the model's dtype)."""
    kv = str(row["kv_dtype"])
    if kv == row["dtype"] or kv in ("bf16", "fp16"):
        return None
    if kv != "fp8":
        raise RooflineError(f"emit: {engine} has no KV cache dtype {kv!r} flag (fp8 or the "
                            "model's own)")
    return {"vllm": "fp8", "sglang": "fp8_e4m3"}.get(engine, "fp8")


def _quantized(row: dict[str, Any], checkpoint: str) -> bool:
    """The plan runs fp8 weights from a wider checkpoint: the engine quantizes on load."""
    return str(row["weight_dtype"]).startswith("fp8") and not checkpoint.startswith("fp8")


def command(engine: str, row: dict[str, Any], model_id: str, max_len: int,
            checkpoint_weights: str) -> str:
    """The launch command of `engine` (vllm, sglang, tensorrt-llm) for one aggregated
    operating point of a plan (`row`: ServePlan.row)."""
    if engine not in EMITTERS:
        raise RooflineError(f"emit {engine!r}: unknown (allowed: {', '.join(EMITTERS)})")
    if row["mode"] != "aggregated":
        raise ParameterError("modes", "aggregated to emit one command",
                             where="emit: the best plan is disaggregated, which these engines "
                             "launch as separate prefill and decode servers with a KV "
                             "transfer connector; pin ")
    tp, pp, dp, ep = (int(row[k]) for k in ("tp", "pp", "dp", "ep"))
    per_replica = max(1, int(row["running"]) // dp)  # each data-parallel engine's own cap
    chunk, fraction, kv = int(row["chunk"]), float(row["memory_fraction"]), _kv(row, engine)
    quant = _quantized(row, checkpoint_weights)
    if engine == "vllm":
        args = ["vllm serve", model_id, f"--tensor-parallel-size {tp}",
                f"--pipeline-parallel-size {pp}", f"--data-parallel-size {dp}",
                *(["--enable-expert-parallel"] if ep > 1 else []),
                f"--max-num-seqs {per_replica}", f"--max-num-batched-tokens {chunk}",
                f"--gpu-memory-utilization {fraction:g}", f"--max-model-len {max_len}",
                *([f"--kv-cache-dtype {kv}"] if kv else []),
                *(["--quantization fp8"] if quant else [])]
    elif engine == "sglang":
        # an MoE plan's dp is attention data parallelism inside one server of tp·dp GPUs;
        # a dense plan's, replicas behind SGLang's router
        attention_dp = dp > 1 and ep > 1
        args = ["python -m sglang.launch_server --model-path", model_id,
                f"--tp {tp * dp if attention_dp else tp}",
                *([f"--dp {dp}"] if dp > 1 else []),
                *(["--enable-dp-attention"] if attention_dp else []),
                *([f"--ep-size {ep}"] if ep > 1 else []),
                f"--max-running-requests {int(row['running'])}",
                f"--chunked-prefill-size {chunk}", f"--mem-fraction-static {fraction:g}",
                f"--context-length {max_len}",
                *([f"--kv-cache-dtype {kv}"] if kv else []),
                *(["--quantization fp8"] if quant else [])]
        if pp > 1:
            args.append(f"--pp-size {pp}")
    else:
        if kv or quant:
            raise RooflineError("emit tensorrt-llm: an fp8 KV cache or fp8 weights from a "
                                "wider checkpoint go in an extra LLM API config (kv_cache_"
                                "config.dtype, a quantized checkpoint): emit the plan with the "
                                "checkpoint's dtypes, or quantize the checkpoint first")
        args = ["trtllm-serve", model_id, f"--tp_size {tp}", f"--pp_size {pp}",
                *([f"--ep_size {ep}"] if ep > 1 else []),
                f"--max_batch_size {per_replica}", f"--max_num_tokens {chunk}",
                f"--kv_cache_free_gpu_memory_fraction {fraction:g}",
                f"--max_seq_len {max_len}"]
        if dp > 1:
            args.insert(0, f"# {dp} replicas, one per group of {tp * pp} GPUs:")
    return " ".join(args)
