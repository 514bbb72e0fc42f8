"""The figures of the expected-time model for a chip: the chip file's [efficiency] tables over
generic defaults, a local `measure` calibration over both.

Every figure is an `Efficiency` with its source; the generic defaults are fitted (they say to
what: the fit half of benchmarks/validation, `python benchmarks/validation/check.py --fit`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, cast

from ..hardware.model import Chip, Efficiency
from .kernels import default_kernel, kernel_figures
from .power import power_figures

if TYPE_CHECKING:
    from ..measure.calibration import Calibration

_FIT = "fit half of benchmarks/validation (check.py --fit): median measured/bound of "

_LA = "fit half of benchmarks/validation, the linear_attention rows: "

_SILICON = ("the fit half's aggregated silicon_sample TTFT rows (benchmarks/validation/"
            "silicon.py), fitted with burst_share, first_token_steps and request_s")
_ENGINE = "fit half of benchmarks/validation: median measured/expected (factor 1) of the "

# For a chip whose file gives no figure of a kind (a chip without published measurements).
DEFAULTS: dict[str, Efficiency] = {
    "matmul": Efficiency(0.72, "fitted", _FIT + "the gemm rows, every chip and dtype"),
    # block-scaled 4-bit GEMMs (nvfp4 / mxfp4 on Blackwell, mxfp4 on MI355X): the 4-bit peak is
    # twice fp8's, but each 16 / 32 elements bring a scale to load and apply, and the chips
    # hold no higher clock for it: the kernels reach a smaller share of that peak
    "matmul.fp4": Efficiency(0.55, "fitted", _FIT + "the fp4 gemm rows (35: CUTLASS, cuDNN, "
                             "CuTe DSL, TRT-LLM, vLLM, DeepGEMM on B200 / B300 / GB200 / "
                             "GB300 / RTX PRO 6000, aiter on MI355X): median measured/expected "
                             "0.77 at the generic 0.72, so 0.72 x 0.77 (the held-out 39: "
                             "0.80)"),
    "attention": Efficiency(0.60, "fitted", _FIT + "the attention_fwd rows of the arch's "
                            "default kernel (FA3 / cuDNN / FA4)"),
    "attention_bwd": Efficiency(0.55, "fitted", _FIT + "the attention_bwd rows"),
    # an attention kernel's time: its derated roofs' max plus this share of the shorter of
    # its tensor-core and softmax (exp, vector) times, which overlap only in part
    "softmax_exposed": Efficiency(0.4, "fitted", "fitted to the fit half of "
                                  "benchmarks/validation: the share that minimises the "
                                  "attention_fwd rows' median error with attention_tile_s "
                                  "(0.5 before that figure: 13.5% against 18.1% fully "
                                  "overlapped; head dim 64 and fp8 / int8 kernels ran "
                                  "0.52-0.83x the expected speed)"),
    # a prefill attention forward's fixed time per wave of query-block tiles (physics.
    # attention_waves): each tile loads its Q block and first K / V blocks before its first
    # MMA and rescales and stores its output after the last (FlashAttention-3, arXiv:2407.08608
    # Fig. 5-7: the same kernel at 512 tokens runs 0.6-0.8x its throughput at 16k); fitted
    # together with softmax_exposed
    "attention_tile_s": Efficiency(2e-6, "fitted", "fitted to the fit half of benchmarks/"
                                   "validation: with softmax_exposed, the pair that minimises "
                                   "the attention_fwd rows' median error (11.0% -> 10.2%, "
                                   "within 25%: 80% -> 83%; 1.5 us ties on the median, 2 us "
                                   "has the smaller mean |log| error)"),
    # the backward's, per wave of key-block tiles: each tile loads its K / V block and walks
    # the query blocks, then stores dK / dV; its preprocess (dO·O) and dQ-conversion passes
    # scale with the tiles too (FlashAttention-2's flash_bwd_dot_do_o and convert_dq kernels)
    "attention_bwd_tile_s": Efficiency(8e-6, "fitted", "fitted to the fit half of "
                                       "benchmarks/validation: the value that minimises the "
                                       "attention_bwd rows' median error at the attention_bwd "
                                       "figure (13.7% -> 7.6%; 512-token rows ran 0.5-0.6x "
                                       "the expected speed without it; refitting both, 15 us "
                                       "and 0.65, moved the training steps, fitted with 0.55)"),
    # chunked linear attention (Gated DeltaNet): the kernel's fraction of whichever roof
    # binds (tensor cores, HBM), and the time one chunk step of its recurrence takes on one
    # SM (`_chain_s`: the walk of physics.recurrence_chain, its chains in waves over the SMs,
    # context-parallel kernels cutting long sequences into segments). Fitted per kernel
    # family: the pair that minimises the fit half's median error of its prefill rows
    # (python benchmarks/validation/check.py --rows); the generic pair over every prefill row
    "linear_attention": Efficiency(0.58, "fitted", _LA + "every Gated DeltaNet prefill row "
                                   "(34; 30% median error left: the families differ 3x)"),
    "linear_attention_chain_s": Efficiency(3.3e-6, "fitted", _LA + "every Gated DeltaNet "
                                           "prefill row (34)"),
    "linear_attention_decode": Efficiency(0.46, "fitted", _LA + "every one-token decode "
                                          "row (12: FLA, TileOps; HBM-bound state updates)"),
    "linear_attention.fla": Efficiency(0.34, "fitted", _LA + "FLA's Triton prefill rows (11: "
                                       "5.4% median error)"),
    "linear_attention_chain_s.fla": Efficiency(3.6e-6, "fitted", _LA + "FLA's Triton "
                                               "prefill rows (11)"),
    "linear_attention.flashinfer": Efficiency(0.65, "fitted", _LA + "FlashInfer's CuTe-DSL "
                                              "chunk-kernel rows (10: 4.2%)"),
    "linear_attention_chain_s.flashinfer": Efficiency(3.1e-6, "fitted", _LA + "FlashInfer's "
                                                      "CuTe-DSL chunk-kernel rows (10)"),
    "linear_attention.flashqla": Efficiency(0.21, "fitted", _LA + "FlashQLA's rows (9: 5.5%)"),
    "linear_attention_chain_s.flashqla": Efficiency(2.4e-6, "fitted", _LA + "FlashQLA's rows "
                                                    "(9)"),
    "linear_attention.tileops": Efficiency(0.41, "fitted", _LA + "TileOps' Gated DeltaNet "
                                           "prefill rows (4: 31%)"),
    # (its segments' walk hides behind the parallel work on all 4 rows: the fit's 0)
    "linear_attention_chain_s.tileops": Efficiency(0.0, "fitted", _LA + "TileOps' Gated "
                                                   "DeltaNet prefill rows (4)"),
    # Mamba-2's chunked scan (state-space duality): five kernels (chunk cumsum, chunk
    # states, state passing, chunk scan; mamba_ssm/ops/triton/ssd_combined.py), the state
    # passing a light elementwise pass, so no walk is charged; its fraction of either roof
    "ssd": Efficiency(0.12, "fitted", _LA + "every Mamba-2 SSD row (12)"),
    "ssd.mamba-ssm": Efficiency(0.072, "fitted", _LA + "mamba-ssm's Triton SSD rows (7: "
                                "five kernels, chunk states in HBM; 20% median error)"),
    "ssd.tileops": Efficiency(0.12, "fitted", _LA + "TileOps' Mamba-2 SSD rows (5: 1.4%)"),
    "linear_attention_decode.tileops": Efficiency(0.91, "fitted", _LA + "TileOps' fused "
                                                  "Gated DeltaNet decode rows (6)"),
    "hbm": Efficiency(0.85, "fitted", _FIT + "the hbm rows"),
    # a named decode attention kernel's share of that streaming fraction (kernels.KERNELS
    # names the kernels that stream the KV cache slower; none named: the kernels' fraction)
    "decode_hbm": Efficiency(1.0, "fitted", "no decode kernel named: the hbm figure"),
    # an L2-resident working set (a GEMM timed warm, over the same operands) streams at
    # this share of the chip file's L2 bandwidth (mostly estimates: few are measured)
    "l2": Efficiency(0.40, "fitted", _FIT + "the warm (L2-resident) gemm rows (32: "
                     "aiconfigurator's CUDA-graph replays, FlashInfer; 43% -> 8% median "
                     "error; 0.35-0.45 all within 14%)"),
    "scale-up": Efficiency(0.75, "fitted", _FIT + "the large (>= 256 MiB) collective rows"),
    "scale-out": Efficiency(0.75, "fitted", _FIT + "the multi-node collective rows"),
    "launch_s": Efficiency(4e-6, "fitted", _FIT + "the short-sequence attention and small "
                           "GEMM rows (launch, prologue, epilogue, tail)"),
    "graph_launch_s": Efficiency(1e-6, "fitted", _FIT + "the batch-1 decode rows of serving "
                                 "engines (CUDA graphs)"),
    # a kernel of a graph-replayed decode or serving step, beside its work: its launch
    # (~1.3 us on H100) and the ramp in which the next kernel's loads wait for this one to
    # drain (Hazy Research, "Look Ma, No Bubbles!", hazyresearch.stanford.edu/blog/
    # 2025-05-27-no-bubbles: vLLM and SGLang keep <= 50% of an H100's bandwidth on
    # Llama-3.2-1B batch-1 decode, a megakernel 78%: some 5 us per kernel boundary)
    # Fitted with the engines' factors unchanged (they now time only a dense step's work off
    # the HBM roof, expect.step): 5 us minimises the median |measured / expected - 1| of the
    # fit halves of benchmarks/validation/silicon.py's dense rows (TPOT, 10.1%; 4 us 10.7%,
    # 3 us 13.3%) and check.py's decode rows (14.4%; 4 us 15.5%, 3 us 17.9%)
    "step_kernel_s": Efficiency(5e-6, "fitted", "the fit halves of benchmarks/validation/"
                                "silicon.py's dense rows (TPOT: Llama-3.1-8B / 70B, Qwen3-32B "
                                "at TP 1-8 on H100 / H200 / B200) and check.py's decode rows; "
                                "Hazy Research's no-bubbles post implies ~5 us per kernel on "
                                "H100"),
    "framework": Efficiency(0.75, "fitted", _FIT + "the train, decode and serving rows"),
    "framework.decode": Efficiency(0.70, "fitted", _FIT + "the decode rows (batch 1-256 "
                                   "decode steps of serving engines)"),
    # an MoE model's training step keeps the chip off its kernels' roofs for longer: token
    # permutation and un-permutation, the router and its losses, many small expert kernels
    # and their launches, which the ops' figures do not charge
    # (refitted with fp8 training's expert GEMMs at the fp8 peak and their operand casts over
    # every routed row of the rank, expect.step.cast_s / routed_rows: the fit half's median
    # measured/expected 1.014 at the previous 0.50)
    "framework.train.moe": Efficiency(0.51, "fitted", _ENGINE + "MoE training rows (59 of "
                                      "119: Megatron-Bridge / NeMo, MaxText, Primus, "
                                      "HAI-LLM, torchtitan; DeepSeek-V3, Qwen3 MoE, gpt-oss, "
                                      "Kimi K2, Llama 4, Mixtral): 1.014 at 0.50, so "
                                      "0.50 x 1.014; the dense training rows keep 0.75"),
    # per training framework (the framework a row names, table.engine): torchtitan's
    # FSDP2 steps (per-layer all-gathers and reduce-scatters at one or two sequences a GPU,
    # selective activation checkpointing, eager or torch.compile kernels) keep the chips
    # further from their roofs than Megatron / NeMo, MaxText and llm-foundry, whose fit-half
    # rows sit at 0.89-0.98 of the default factor and keep it
    "framework.train.torchtitan": Efficiency(0.45, "fitted", _ENGINE + "torchtitan training "
                                             "rows (19: Llama 3 / 3.1 8B-405B on H100, "
                                             "H200-class, A100, B200, GB200, MI300X, FSDP2 "
                                             "with TP / PP / CP and float8 / MXFP8): 0.60 "
                                             "at the default 0.75, so 0.75 x 0.60 (the "
                                             "held-out 18: 0.66)"),
    "scale-up.nvls": Efficiency(0.60, "fitted", _FIT + "the NVLS all-reduce rows (H200, "
                                "B200); NCCL's own tuning derates NVLS too (tuning.cc: 0.85 "
                                "Hopper, 0.74 Blackwell)"),
    # per serving / generation engine (table.engine), decode and continuous-batching steps:
    # measured / expected at factor 1, median over the engine's fit-half rows that are not
    # weight-only quantized (decode and serving kinds)
    "framework.decode.gpt-fast": Efficiency(0.79, "fitted", _ENGINE + "gpt-fast rows (4: "
                                            "batch-1 generate.py on A100 / MI250X)"),
    "framework.decode.vllm": Efficiency(0.60, "fitted", _ENGINE + "vLLM rows off MI300X "
                                        "(25, refitted 2026-11-30: torchao on B200, vLLM CI on "
                                        "H200, InferenceX on H100 / H200 / B200, GPUStack, "
                                        "TPU v6e; was 0.52 on 7); MI300X has its own"),
    "framework.decode.sglang": Efficiency(0.57, "fitted", _ENGINE + "SGLang rows (30, "
                                          "refitted 2026-11-30: batch-1 MoE decode on B200, "
                                          "GPUStack, InferenceX, Kimi-K2 on H200; was 0.75 "
                                          "on 2)"),
    "framework.decode.tensorrt-llm": Efficiency(0.57, "fitted", _ENGINE + "TensorRT-LLM rows "
                                                "(81, refitted 2026-11-30: perf-overview "
                                                "0.14-0.17 throughput and online serving, "
                                                "DeepSeek-R1 min-latency on B200, InferenceX; "
                                                "was 0.63 on 24)"),
    # the tensor-core-bound share of a dense graph-replayed serving iteration (expect.step:
    # its GEMMs over the running batch and the prompt chunks it carries, the chunks'
    # attention) under TensorRT-LLM, in place of its decode factor, which its collectives
    # keep. That factor, fitted where the step is mostly streamed, put the large-batch
    # offline runs (trtllm-bench throughput: batch up to the KV cache's capacity, 2-32k
    # context tokens an iteration, tensorrt_llm/bench/build/tuning.py) 1.06x too slow, and a
    # decode GEMM just past the HBM ridge 1/0.57 = 1.75x slower than one just below it.
    # Fitted: the value minimising the median |measured / expected - 1| of the fit half's
    # dense TensorRT-LLM serving rows of benchmarks/validation/check.py (60: 14.3% -> 11.6%;
    # 0.62-0.71 all within 12.6%; median measured/expected 0.97)
    "framework.compute.tensorrt-llm": Efficiency(0.65, "fitted", _ENGINE + "dense "
                                                 "TensorRT-LLM serving rows' tensor-core-"
                                                 "bound share (60: perf-overview 0.14-0.17 "
                                                 "and 0.19+, MLPerf v5.1 / v6.0 Llama 2 70B / "
                                                 "3.1 8B / 405B, online serving; 14.3% -> "
                                                 "11.6% median error)"),
    # a weight-only-quantized GEMM's HBM stream over the streaming fraction (dequantizing
    # in the kernel: gpt-fast's int8 and tinygemm int4 kernels, torchao); no published
    # figure found, so fitted: the value that brings the fit half's weight-only rows to a
    # median measured/expected of 1 (few rows: a rough figure)
    "dequant": Efficiency(1.0, "fitted", "no weight-only family fitted (int8, int4 are)"),
    "dequant.int8": Efficiency(0.85, "fitted", "the fit half's int8 weight-only decode rows "
                               "(2: gpt-fast Llama-3.1-8B 1 GPU, Llama-3.1-405B TP8 on A100)"),
    "dequant.int4": Efficiency(0.46, "fitted", "the fit half's int4 weight-only decode rows "
                               "(1: gpt-fast Llama-2-70B int4-g32 TP8 on A100)"),
    # a served request's own time beside its prefill, in its TTFT: the client's HTTP round
    # trip, tokenization, admission by the scheduler, sampling and detokenizing the first
    # token (measured at the client: sglang.bench_serving, vllm bench serve). Fitted per
    # engine: the median gap of the fit half's TTFT rows (prefill and serving kinds)
    # A closed loop's aggregated TTFT per engine, fitted together (a grid over the three)
    # on a quarter of the fit half's aggregated rows of benchmarks/validation/silicon.py
    # (NVIDIA's silicon_sample; 294 rows; median |measured / expected - 1| 57% -> 31%):
    # - burst_share: the share of the burst's queue (serve.burst) a client waits. vLLM's V1
    #   scheduler mixes one partial prefill at a time into the decode steps
    #   (SchedulerConfig.max_num_partial_prefills 1, the chunk budget 8192) and TensorRT-LLM's
    #   in-flight batching puts context requests in every iteration's max_num_tokens: the
    #   burst drains beside decoding (0.1); SGLang runs prefill batches on their own, decode
    #   paused (enable_mixed_chunk off by default), and its clients stay closer in step (0.8).
    #   0.1 is also one round in ten: NVIDIA's serving benchmark (ai-dynamo/dynamo
    #   benchmarks/llm/perf.sh) runs aiperf with --request-count 10 x --concurrency after a
    #   warmup, so the measured clients start together once in ten rounds. Per model the fit
    #   half disagrees (silicon.py's burst table): DeepSeek rows imply more (SGLang 1.2-1.9,
    #   TensorRT-LLM 0.35-0.45), the other models 0-0.2 under vLLM / TensorRT-LLM (Qwen3-235B
    #   0.3 under vLLM) and 0.2-0.6 under SGLang: SGLang's 0.8 is set by its DeepSeek rows
    # - first_token_steps: iterations of the running batch a request's first token waits
    #   beyond its prefill: admission at the next iteration, the overlap scheduler returning
    #   an iteration's tokens one iteration late (SGLang, TensorRT-LLM's PyTorch executor),
    #   the detokenizer's process hop; in steps since they scale with the step measured
    #   (vLLM 1, TensorRT-LLM 2; SGLang none: its single-request rows in check.py sit at
    #   its prefill and request_s)
    # - request_s: the rest per request (HTTP, tokenization, the frontend)
    "burst_share": Efficiency(0.26, "fitted", "serve.burst.IN_STEP: the fit half's "
                              "silicon_sample TTFT rows, every engine"),
    "burst_share.vllm": Efficiency(0.1, "fitted", _SILICON),
    "burst_share.sglang": Efficiency(0.8, "fitted", _SILICON + " (its request_s and "
                                     "first_token_steps held at check.py's single-request "
                                     "figures: 12 steps fitted here made those rows 2x slow)"),
    "burst_share.tensorrt-llm": Efficiency(0.1, "fitted", _SILICON),
    "first_token_steps": Efficiency(0.0, "fitted", "none without an engine"),
    "first_token_steps.vllm": Efficiency(1.0, "fitted", _SILICON),
    "first_token_steps.tensorrt-llm": Efficiency(2.0, "fitted", _SILICON),
    "request_s": Efficiency(0.0, "fitted", "none without an engine (NIM and TensorRT-LLM "
                            "rows: within 5 ms of their prefill forecast)"),
    "request_s.sglang": Efficiency(0.08, "fitted", "the fit half's SGLang TTFT rows (7, "
                                   "concurrency 1: 71% -> 12% median error)"),
    "request_s.vllm": Efficiency(0.030, "fitted", _SILICON + " (was 0.065 on check.py's 7 "
                                 "single-request vLLM rows)"),
    "request_s.tensorrt-llm": Efficiency(0.120, "fitted", _SILICON),
    # a disaggregated request's hand-off between its pools, in its TTFT beside the prefill
    # pass, its queue and the KV bytes' transfer: the router's two hops (the prefill worker,
    # then the decode worker), the transfer's setup, the decode worker admitting it. Fitted:
    # the value minimising the median |measured / expected - 1| of TTFT on the fit half's
    # disaggregated rows of benchmarks/validation/silicon.py (129 rows, DeepSeek-V3 under
    # TensorRT-LLM and SGLang: 58% -> 39%; flat from 0.15 to 0.19 s)
    "handoff_s": Efficiency(0.16, "fitted", "the fit half's disaggregated silicon_sample "
                            "rows (129: 58% -> 39% median TTFT error)"),
    # TensorRT-LLM's request_s (0.12 s, fitted on its aggregated rows) already holds most of
    # it: refitted beside it on the same 75 fit-half disaggregated rows (45% -> 34%)
    "handoff_s.tensorrt-llm": Efficiency(0.04, "fitted", "the fit half's disaggregated "
                                         "TensorRT-LLM silicon_sample rows beside its "
                                         "request_s (75: 45% -> 34% median TTFT error)"),
    "collective_call_s.direct": Efficiency(5e-6, "fitted", _FIT + "the DeepEP dispatch / "
                                           "combine rows (its own kernels, no NCCL call)"),
    # beside the library's protocol model (protocols.py: NCCL's own per-protocol step and
    # base latencies, which now carry what this figure held for mid-size messages)
    "collective_call_s": Efficiency(12e-6, "fitted", "fitted to the fit half of "
                                    "benchmarks/validation: the NCCL / RCCL host-side time "
                                    "per call that minimises the collective rows' median "
                                    "error with the protocol model (10.1%; 8 us 11.7%, "
                                    "16-25 us 11.7-12.2%)"),
    # NCCL's NVLS outside a CUDA graph: the bound charges it no base latency (NCCL's own
    # cost model has none for NVLS); its eager calls run the Simple protocol with more
    # software around them (NCCL 2.18's tuning table: a 23 us NVLS base)
    "collective_call_s.nvls": Efficiency(35e-6, "fitted", "fitted to the fit half of "
                                         "benchmarks/validation: the per-call time that "
                                         "minimises the collective rows' median error "
                                         "(15.0%; 20 us: 18.4%, 40-50 us: 15.0-15.1%)"),
    # a library's collective in a CUDA / HIP graph or timed on the device (nccl-tests -G,
    # a profiler's kernel time; `expected(..., in_graph=True)`): no host-side enqueue, the
    # kernel's own launch and cross-GPU handshake left, as for DeepEP's and the engines' own
    # kernels below (5 us)
    "collective_call_s.graph": Efficiency(5e-6, "fitted", "fitted to the fit half of "
                                          "benchmarks/validation: the per-call time that "
                                          "minimises the median error of the graph- and "
                                          "device-timed collective rows (23: NCCL, RCCL, "
                                          "MSCCL++, symmetric memory; 22.8% -> 13.5%; 4-6 us "
                                          "all within 16%)"),
    # the engines' own all-reduce kernels (SGLang / vLLM / aiter custom all-reduce) timed on
    # their own (`expected(..., engine_kernels=True)`): no NCCL call, a kernel and its
    # cross-GPU flags, as DeepEP's (collective_call_s.direct)
    "collective_call_s.engine": Efficiency(5e-6, "fitted", _FIT + "the DeepEP dispatch / "
                                           "combine rows, taken for the engines' custom "
                                           "all-reduce kernels too (their own kernels, no "
                                           "NCCL call)"),
}

# FlashInfer's fully fused chunk kernel before its context-parallel split (releases up to
# 0.6.13 on SM90, 0.6.16 on SM100): the same kernel family and chunk step as `flashinfer`,
# each (sequence, head) walked by one CTA (flashinfer-ai/flashinfer PR #3477: 1x8192 with
# h_v = 8 in 0.371 ms on H100, 128 chunk steps of 2.9 us)
for _kind in ("linear_attention", "linear_attention_chain_s"):
    DEFAULTS[f"{_kind}.flashinfer-fused"] = DEFAULTS[f"{_kind}.flashinfer"]


# The serving / generation engines a `framework` string names (a row's `framework` param,
# "vllm-0.13.0+torchao", "sglang(PD disagg)", "torchao(gpt-fast-style generate)": the first
# of these it contains; torchao's generate.py is gpt-fast's).
ENGINES = ("gpt-fast", "vllm", "sglang", "tensorrt-llm", "llama.cpp")


def engine(framework: str) -> str:
    """'vllm-0.13.0+torchao' -> 'vllm'; an engine not in ENGINES keeps its own name."""
    name = framework.strip().lower()
    return next((e for e in ENGINES if e in name), name)


def check_engine(name: str) -> str:
    """An engine a user names (`engine=`, `--engine`): one of ENGINES, or a one-line error
    naming them ('trtllm' and 'tensorrt' are TensorRT-LLM)."""
    key = name.strip().lower().replace("_", "-")
    key = {"trtllm": "tensorrt-llm", "trt-llm": "tensorrt-llm", "tensorrt": "tensorrt-llm",
           "llamacpp": "llama.cpp"}.get(key, key)
    if key not in ENGINES:
        from ..errors import RooflineError

        raise RooflineError(f"engine {name!r}: unknown (allowed: {', '.join(ENGINES)})")
    return key


def figures(chip: Chip, calibration: Calibration | None = None, step: bool = False
            ) -> dict[str, Efficiency]:
    """Every figure the model may use on `chip`: defaults < its power-limited GEMM fractions
    (power.py) < its architecture's named kernels (kernels.py) < chip file < calibration.

    `step`: the figures of a whole step's ops (expect.step), without the power-limited
    fractions: a GEMM timed alone, back to back, spends the board's power on GEMMs only,
    where a step's attention, norms, collectives and launches between its GEMMs draw less
    and leave the clock higher; its framework factors were fitted on the generic fraction."""
    kept = cast(dict[bool, dict[str, Efficiency]], chip.memo.get("expect.figures", {}))
    if calibration is None and step in kept:  # read per op of a step
        return dict(kept[step])
    # a chip's power-limited GEMM fraction (power.py) where no default names its dtype
    power = {} if step else {k: v for k, v in power_figures(chip).items() if k not in DEFAULTS}
    out = {**DEFAULTS, **power, **kernel_figures(chip), **chip.efficiency}
    out.update(default_kernel(chip, out))
    if calibration is None:  # both tables dropped at once (fit_kernels.py pops the key)
        chip.memo.setdefault("expect.figures", {})[step] = dict(out)
    else:
        what = f"measured: {calibration.description}"
        for dt, eff in calibration.compute.items():
            out[f"matmul.{dt}"] = Efficiency(eff, what)
        for key, eff in calibration.resources.items():
            if key in ("hbm", "scale-up", "scale-out"):
                out[key] = Efficiency(eff, what)
    return out


def lookup_framework(figs: Mapping[str, Efficiency], phase: str, engine: str | None,
                     moe: bool = False) -> tuple[str, Efficiency]:
    """framework.<phase>.<engine>, else (an MoE model's step) framework.<phase>.moe, else
    framework.<phase>, else framework. A continuous-batching iteration (mixed) is the
    engine's decode step carrying prefill chunks: it takes the engine's decode figure where
    it has no mixed one."""
    for p in (phase, "decode") if phase == "mixed" else (phase,):
        if engine and f"framework.{p}.{engine}" in figs:
            return f"framework.{p}.{engine}", figs[f"framework.{p}.{engine}"]
    if moe and f"framework.{phase}.moe" in figs:
        return f"framework.{phase}.moe", figs[f"framework.{phase}.moe"]
    return lookup(figs, "framework", phase)


def request_s(engine: str | None) -> tuple[str, Efficiency]:
    """A served request's own time in its TTFT (request_s.<engine>, else request_s)."""
    return lookup(DEFAULTS, "request_s", engine)


def first_token_steps(engine: str | None) -> tuple[str, Efficiency]:
    """Iterations of the running batch a request's first token waits beyond its prefill
    (first_token_steps.<engine>, else first_token_steps)."""
    return lookup(DEFAULTS, "first_token_steps", engine)


def handoff_s(engine: str | None) -> tuple[str, Efficiency]:
    """A disaggregated request's hand-off between its pools (handoff_s.<engine>, else
    handoff_s)."""
    return lookup(DEFAULTS, "handoff_s", engine)


def lookup(figs: Mapping[str, Efficiency], kind: str, variant: str | None = None
           ) -> tuple[str, Efficiency]:
    """The most specific figure: `kind.variant`, else `kind` (a default always exists)."""
    if variant and f"{kind}.{variant}" in figs:
        return f"{kind}.{variant}", figs[f"{kind}.{variant}"]
    return kind, figs[kind]
