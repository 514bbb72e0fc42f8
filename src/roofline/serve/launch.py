"""A chosen serving plan as the engine's own launch command, with the flag names of the
engine version runtime.py cites: parallel sizes, the running-sequence cap, the prefill chunk
budget, the memory fraction and the dtypes of the plan, so it launches as it was planned."""

from __future__ import annotations

from ..errors import ParameterError, RooflineError
from .point import ServePoint

EMITTERS = ("vllm", "sglang", "tensorrt-llm")


def _kv(row: ServePoint, engine: str) -> str | None:
    """The KV cache dtype flag value, None for the engines' default (the model's dtype)."""
    kv = row.kv_dtype
    if kv == row.dtype or kv in ("bf16", "fp16"):
        return None
    if kv != "fp8":
        raise RooflineError(f"emit: {engine} has no KV cache dtype {kv!r} flag (fp8 or the "
                            "model's own)")
    return {"vllm": "fp8", "sglang": "fp8_e4m3"}.get(engine, "fp8")


def _quantized(row: ServePoint, checkpoint: str) -> bool:
    """The plan runs fp8 weights from a wider checkpoint: the engine quantizes on load."""
    return row.weight_dtype.startswith("fp8") and not checkpoint.startswith("fp8")


# NVIDIA Dynamo: a frontend (`python -m dynamo.frontend`) and workers that take the engine's own
# flags (`python -m dynamo.vllm --model M <vLLM engine args>`, a prefill worker with
# `--is-prefill-worker`; `python -m dynamo.sglang --model-path M <SGLang server args>`, with
# `--disaggregation-mode prefill|decode` and `--disaggregation-transfer-backend nixl`), as the
# launch scripts of github.com/ai-dynamo/dynamo show: components/backends/vllm/launch/disagg.sh
# (commit abd13dfd), components/backends/vllm/src/dynamo/vllm/args.py (AsyncEngineArgs flags
# passed through), components/backends/sglang/launch/disagg.sh (commit 3103039d)
DYNAMO = "ai-dynamo/dynamo components/backends launch scripts (commits abd13dfd, 3103039d)"
DYNAMO_ENGINES = ("vllm", "sglang")


def command(engine: str, row: ServePoint, model_id: str, max_len: int,
            checkpoint_weights: str, backend: str | None = None, prompt_len: int = 0,
            node_gpus: int = 8) -> str:
    """The launch command(s) of `engine` (vllm, sglang, tensorrt-llm, dynamo) for one
    operating point of a plan (`row`: ServePlan.best's): one line per process, each replica
    of the plan (its `instances`, or its decode and prefill workers) a worker of its own.
    `backend`: the engine Dynamo's workers run (vllm or sglang; default vllm);
    `prompt_len`: the prompt tokens a prefill worker's pass holds whole (chunk / prompt_len
    prompts per replica); `node_gpus`: GPUs per node, where the workers are placed."""
    if engine not in (*EMITTERS, "dynamo"):
        raise RooflineError(f"emit {engine!r}: unknown (allowed: "
                            f"{', '.join((*EMITTERS, 'dynamo'))})")
    disagg = row.mode != "aggregated"
    if engine == "dynamo":
        return _dynamo(backend or "vllm", row, model_id, max_len, checkpoint_weights,
                       prompt_len, node_gpus)
    if disagg and engine != "sglang":
        raise ParameterError("emit", f"{engine}: the best plan is disaggregated, which {engine} "
                             "launches as separate prefill and decode servers behind a router: "
                             "{emit} dynamo prints them (or pin {modes} aggregated)",
                             mentions=("emit", "modes"))
    if disagg:  # SGLang's own disaggregation flags, one server per worker
        mode = " --disaggregation-mode {} --disaggregation-transfer-backend nixl"
        return _placed([
            *[(_server("sglang", row, model_id, max_len, checkpoint_weights, "prefill_",
                       prompt_len) + mode.format("prefill"), row.layout(prefill=True).gpus)]
            * int(row.prefill_workers),
            *[(_server("sglang", row, model_id, max_len, checkpoint_weights)
               + mode.format("decode"), row.layout().gpus)] * int(row.decode_workers)],
            node_gpus)
    one = _server(engine, row, model_id, max_len, checkpoint_weights)
    n = int(row.instances)
    return one if n == 1 else _placed([(one, row.layout().gpus)] * n, node_gpus)


def _placed(processes: list[tuple[str, int]], node_gpus: int, first: str = "") -> str:
    """One line per process, each on GPUs of its own, node after node (a worker is not split
    over nodes unless it is larger than one): `# node k`, then CUDA_VISIBLE_DEVICES and the
    command, in the background but for the last. `first`: a process on no GPU (a router)."""
    out, node, used = [first] if first else [], 0, 0
    for cmd, gpus in processes:
        if gpus > node_gpus:  # a multi-node worker: the engine's own multi-node launch
            node += used > 0
            span = -(-gpus // node_gpus)
            out += [f"# nodes {node}-{node + span - 1}: one worker over {gpus} GPUs (the "
                    "engine's multi-node launch)", cmd]
            node, used = node + span, 0
            continue
        if used + gpus > node_gpus:
            node, used = node + 1, 0
        if used == 0:
            out.append(f"# node {node}")
        out.append(f"CUDA_VISIBLE_DEVICES={','.join(map(str, range(used, used + gpus)))} "
                   f"{cmd}")
        used += gpus
    last = max(i for i, line in enumerate(out) if not line.startswith("#"))
    return "\n".join(line if line.startswith("#") or i == last else line + " &"
                     for i, line in enumerate(out))


def _dynamo(backend: str, row: ServePoint, model_id: str, max_len: int,
            checkpoint: str, prompt_len: int, node_gpus: int) -> str:
    """A Dynamo frontend and one worker per replica (aggregated) or per decode and prefill
    worker (disaggregated), each running `backend` with the plan's flags."""
    if backend not in DYNAMO_ENGINES:
        raise ParameterError("emit", f"dynamo: workers run {' or '.join(DYNAMO_ENGINES)} here "
                             f"({{engine}}), not {backend}", mentions=("engine",))
    module = {"vllm": "python -m dynamo.vllm", "sglang": "python -m dynamo.sglang"}[backend]

    model = f"--model {model_id}" if backend == "vllm" else f"--model-path {model_id}"
    roles = {"vllm": {"prefill": ["--is-prefill-worker"]},
             "sglang": {role: [f"--disaggregation-mode {role}",
                               "--disaggregation-transfer-backend nixl"]
                        for role in ("prefill", "decode")}}

    def worker(prefix: str, role: str) -> str:
        return " ".join([module, model, *_flags(backend, row, max_len, checkpoint, prefix,
                                                prompt_len),
                         *roles[backend].get(role, [])])

    if row.mode == "aggregated":
        n = int(row.instances)
        workers = [(worker("", "both"), int(row.chips) // n)] * n
    else:
        workers = [(worker("prefill_", "prefill"), row.layout(prefill=True).gpus)] * \
            int(row.prefill_workers) + [(worker("", "decode"), row.layout().gpus)] * \
            int(row.decode_workers)
    return _placed(workers, node_gpus, "python -m dynamo.frontend --http-port 8000")


def _server(engine: str, row: ServePoint, model_id: str, max_len: int,
            checkpoint_weights: str, prefix: str = "", prompt_len: int = 0) -> str:
    head = {"vllm": f"vllm serve {model_id}",
            "sglang": f"python -m sglang.launch_server --model-path {model_id}",
            "tensorrt-llm": f"trtllm-serve {model_id}"}[engine]
    flags = _flags(engine, row, max_len, checkpoint_weights, prefix, prompt_len)
    layout = row.layout(prefill=bool(prefix))
    dp, group = layout.dp, layout.tp * layout.pp
    if engine == "tensorrt-llm" and dp > 1:
        head = f"# {dp} replicas, one per group of {group} GPUs:\n{head}"
    return " ".join([head, *flags])


def _flags(engine: str, row: ServePoint, max_len: int, checkpoint_weights: str,
           prefix: str = "", prompt_len: int = 0) -> list[str]:
    """One server's engine flags for the plan's layout (`prefix` "prefill_": a disaggregated
    plan's prefill worker: its layout, one pass's prompts per replica as its cap)."""
    layout = row.layout(prefill=bool(prefix))
    tp, pp, dp, ep = layout.tp, layout.pp, layout.dp, layout.ep
    chunk, fraction, kv = int(row.chunk), row.memory_fraction, _kv(row, engine)
    prompts = max(1, chunk // max(1, prompt_len or chunk))  # a prefill pass's whole prompts
    running = prompts * dp if prefix else int(row.running)
    per_replica = max(1, running // dp)  # each data-parallel engine's own cap
    if prefix:  # a prefill worker's pass holds its prompts whole (disagg.pools)
        chunk = max(chunk, prompts * prompt_len)
    elif row.mode != "aggregated":  # a decode worker's iteration: its running tokens
        chunk = max(chunk, per_replica)
    quant = _quantized(row, checkpoint_weights)
    if ep > 1 and layout.moe_tp > 1:
        raise ParameterError("emit", f"{engine}: expert tensor parallelism inside EP (moe_tp "
                             f"{layout.moe_tp} x ep {ep}) has no flag here: plan "
                             "without {moe_tp} to emit", mentions=("moe_tp",))
    if engine == "vllm":
        return [f"--tensor-parallel-size {tp}",
                f"--pipeline-parallel-size {pp}", f"--data-parallel-size {dp}",
                *(["--enable-expert-parallel"] if ep > 1 else []),
                f"--max-num-seqs {per_replica}", f"--max-num-batched-tokens {chunk}",
                f"--gpu-memory-utilization {fraction:g}", f"--max-model-len {max_len}",
                *([f"--kv-cache-dtype {kv}"] if kv else []),
                *(["--quantization fp8"] if quant else [])]
    if engine == "sglang":
        # an MoE plan's dp is attention data parallelism inside one server of tp·dp GPUs;
        # a dense plan's, replicas behind SGLang's router
        attention_dp = dp > 1 and ep > 1
        return [f"--tp {tp * dp if attention_dp else tp}",
                *([f"--dp {dp}"] if dp > 1 else []),
                *(["--enable-dp-attention"] if attention_dp else []),
                *([f"--ep-size {ep}"] if ep > 1 else []),
                f"--max-running-requests {running}",
                f"--chunked-prefill-size {chunk}", f"--mem-fraction-static {fraction:g}",
                f"--context-length {max_len}",
                *([f"--kv-cache-dtype {kv}"] if kv else []),
                *(["--quantization fp8"] if quant else []),
                *([f"--pp-size {pp}"] if pp > 1 else [])]
    if kv or quant:
        raise RooflineError("emit tensorrt-llm: an fp8 KV cache or fp8 weights from a "
                            "wider checkpoint go in an extra LLM API config (kv_cache_"
                            "config.dtype, a quantized checkpoint): emit the plan with the "
                            "checkpoint's dtypes, or quantize the checkpoint first")
    return [f"--tp_size {tp}", f"--pp_size {pp}", *([f"--ep_size {ep}"] if ep > 1 else []),
            f"--max_batch_size {per_replica}", f"--max_num_tokens {chunk}",
            f"--kv_cache_free_gpu_memory_fraction {fraction:g}", f"--max_seq_len {max_len}"]
