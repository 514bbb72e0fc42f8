"""What a serving engine does with a GPU by default, cited for the version named: how much of
the device memory it takes, how many sequences it runs at once, its chunked-prefill token
budget and KV block size. A plan for an engine uses these unless the user sets them; a plan
with no engine named says which generic defaults it assumed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..hardware import Chip

GiB = 2**30


@dataclass(frozen=True)
class Runtime:
    """An engine's defaults on one chip at one tensor-parallel size."""

    engine: str  # vllm, sglang, tensorrt-llm; "generic" when none is named
    version: str
    memory_fraction: float  # of device memory: weights, KV cache and the runtime's buffers
    max_running: int | None  # most sequences running at once (None: only memory limits it)
    chunk_tokens: int  # prompt tokens per iteration (chunked prefill)
    kv_block_tokens: int  # tokens per KV-cache page
    sources: dict[str, str] = field(default_factory=dict)
    reserve_bytes: float = 0.0  # kept per chip beyond the fraction's cut (--reserve)
    graphs: CudaGraphs | None = None  # the decode batches it captures (None: unknown)

    def describe(self) -> str:
        running = f"<= {self.max_running} running sequences" if self.max_running else \
            "running sequences limited by memory only"
        who = f"{self.engine} {self.version} defaults" if self.engine != "generic" else \
            "no engine named: generic defaults assumed"
        reserve = f" less {self.reserve_bytes / GiB:.3g} GiB reserved" if self.reserve_bytes \
            else ""
        graphs = f", CUDA graphs for decode batches <= {self.graphs.largest}" if self.graphs \
            else ""
        return (f"{who}: {100 * self.memory_fraction:.0f}% of device memory{reserve}, {running}, "
                f"{self.chunk_tokens}-token prefill chunks, {self.kv_block_tokens}-token KV "
                f"blocks{graphs}")

    def to_dict(self) -> dict[str, Any]:
        return {"engine": self.engine, "version": self.version,
                "memory_fraction": self.memory_fraction, "max_running": self.max_running,
                "chunk_tokens": self.chunk_tokens, "kv_block_tokens": self.kv_block_tokens,
                "reserve_bytes": self.reserve_bytes,
                "cuda_graph_max_batch": self.graphs.largest if self.graphs else None,
                "sources": self.sources}


@dataclass(frozen=True)
class CudaGraphs:
    """The decode batch sizes an engine captures CUDA graphs for, per engine process (one
    per data-parallel rank). A decode iteration of b sequences replays the graph of the
    smallest captured size >= b, its inputs padded to that size (`padded`), or where the
    engine does not pad, only a captured size itself; any other batch runs eagerly, each
    kernel launched from the host. Shown with the engine's defaults; the expected step does
    not take it (timing each decode step at its padded batch, eagerly past the largest,
    made benchmarks/validation/silicon.py's held-out TPOT median error 22% -> 26%: the
    measured runs set their own capture sizes, TensorRT-LLM's with padding)."""

    sizes: tuple[int, ...]  # ascending
    padded: bool
    source: str

    @property
    def largest(self) -> int:
        return self.sizes[-1]

    def replay(self, batch: Any) -> tuple[Any, Any]:
        """Per point of `batch` (sequences per engine process): the batch the graph runs at
        (`batch` itself where it runs eagerly) and whether it runs eagerly."""
        b = np.ceil(np.asarray(batch, dtype=float) - 1e-9)
        sizes = np.asarray(self.sizes, dtype=float)
        at = np.minimum(np.searchsorted(sizes, b), len(sizes) - 1)
        graph = sizes[at]
        eager = (b > self.largest) | (~np.isclose(graph, b) if not self.padded else False)
        return np.where(eager, np.asarray(batch, dtype=float), graph), eager


def _eights(largest: int) -> tuple[int, ...]:
    """1, 2, 4, then multiples of 8 up to `largest` (vLLM's and SGLang's default pattern)."""
    return tuple(s for s in (1, 2, 4, *range(8, largest + 1, 8)) if s <= largest)


_VLLM = ("vllm-project/vllm v0.10 vllm/engine/arg_utils.py EngineArgs.get_batch_defaults "
         "(OpenAI server: devices of >= 70 GiB other than A100 take max_num_seqs 1024 and "
         "max_num_batched_tokens 8192, others 256 and 2048) and EngineArgs "
         "(gpu_memory_utilization 0.9, block_size 16)")
_SGLANG = ("sgl-project/sglang v0.4 python/sglang/srt/server_args.py __post_init__: "
           "mem_fraction_static 0.88 / 0.87 / 0.85 / 0.81 / 0.79 at TP 1 / 2 / 4 / 8 / 16, "
           "chunked_prefill_size 8192 (2048 under 25 GB), page_size 1; max_running_requests "
           "from the KV pool")
_TRTLLM = ("NVIDIA TensorRT-LLM 0.20 docs: KvCacheConfig.free_gpu_memory_fraction 0.9 "
           "(nvidia.github.io/TensorRT-LLM/examples/kvcacheconfig.html; of the memory the "
           "weights leave, taken here as 0.9 of the device), trtllm-serve max_batch_size 2048 "
           "and max_num_tokens 8192, tokens_per_block 32")


_VLLM_GRAPHS = ("vLLM v0.10 SchedulerConfig.cuda_graph_sizes (docs.vllm.ai serve args, "
                "--cuda-graph-sizes): none given, [min(2 x max_num_seqs, 512)]; one value N "
                "captures 1, 2, 4 and the multiples of 8 up to N, a decode batch padded to "
                "the next, a larger one run without graphs")
_SGLANG_GRAPHS = ("sgl-project/sglang v0.4 python/sglang/srt/server_args.py __post_init__ "
                  "(cuda_graph_max_bs 160; under 25 GB of GPU memory 8 at TP < 4, 80 at TP >= "
                  "4) and model_executor/cuda_graph_runner.py get_batch_sizes_to_capture "
                  "(1, 2, 4 and multiples of 8 up to 160, on ROCm up to 256; a batch padded "
                  "to the next captured one, a larger one run eagerly)")
_TRTLLM_GRAPHS = ("NVIDIA TensorRT-LLM 0.20 tensorrt_llm/_torch/pyexecutor/config.py "
                  "PyTorchConfig: cuda_graph_max_batch_size 0 (taken as 128), "
                  "cuda_graph_padding_enabled False, so the sizes 1-32, 64 and 128 "
                  "(_generate_cuda_graph_batch_sizes); another batch runs eagerly")


def cuda_graphs(engine: str | None, chip: Chip, tp: int = 1,
                max_seqs: int | None = None) -> CudaGraphs | None:
    """The decode batches `engine` (vllm, sglang, tensorrt-llm) captures by default on `chip`
    at tensor-parallel size `tp` (`max_seqs`: vLLM's max_num_seqs where set, else its
    default); None for another engine or none named (every decode step under graphs)."""
    if engine == "vllm":
        seqs = max_seqs or _vllm(chip, tp).max_running or 256
        return CudaGraphs(_eights(min(2 * seqs, 512)), True, _VLLM_GRAPHS)
    if engine == "sglang":
        small = (chip.memory[0].capacity_bytes or 0.0) < 25e9
        largest = (8 if tp < 4 else 80) if small else 256 if chip.vendor == "AMD" else 160
        return CudaGraphs(_eights(largest), True, _SGLANG_GRAPHS)
    if engine == "tensorrt-llm":
        return CudaGraphs((*range(1, 33), 64, 128), False, _TRTLLM_GRAPHS)
    return None


def _vllm(chip: Chip, tp: int) -> Runtime:
    big = (chip.memory[0].capacity_bytes or 0.0) >= 70 * GiB and "a100" not in chip.id
    seqs = 1024 if big else 256
    return Runtime("vllm", "v0.10", 0.9, seqs, 8192 if big else 2048, 16,
                   {"vllm": _VLLM, "vllm cuda graphs": _VLLM_GRAPHS},
                   graphs=cuda_graphs("vllm", chip, tp, seqs))


def _sglang(chip: Chip, tp: int) -> Runtime:
    fraction = 0.79 if tp >= 16 else 0.81 if tp >= 8 else 0.85 if tp >= 4 else \
        0.87 if tp >= 2 else 0.88
    small = (chip.memory[0].capacity_bytes or 0.0) < 25e9
    return Runtime("sglang", "v0.4", fraction, None, 2048 if small else 8192, 1,
                   {"sglang": _SGLANG, "sglang cuda graphs": _SGLANG_GRAPHS},
                   graphs=cuda_graphs("sglang", chip, tp))


def _trtllm(chip: Chip, tp: int) -> Runtime:
    return Runtime("tensorrt-llm", "0.20", 0.9, 2048, 8192, 32,
                   {"tensorrt-llm": _TRTLLM, "tensorrt-llm cuda graphs": _TRTLLM_GRAPHS},
                   graphs=cuda_graphs("tensorrt-llm", chip, tp))


def _generic(chip: Chip, tp: int) -> Runtime:
    return Runtime("generic", "", 0.9, 1024, 8192, 16,
                   {"generic": "no engine named: the engines' common defaults (vLLM's and "
                    "TensorRT-LLM's 90% of memory, vLLM's 1024 running sequences and "
                    "8192-token chunks on large GPUs); --engine takes one's own"})


@dataclass(frozen=True)
class IterationCost:
    """What an engine adds to each continuous-batching iteration beyond its kernels: the
    host's scheduling, input preparation, sampling and output processing between CUDA-graph
    replays (vLLM's and SGLang's schedulers run in Python between steps, TensorRT-LLM's
    executor in C++): `host_s` once per iteration and `sequence_s` per sequence each
    scheduler process runs (one per attention-DP rank); and per collective in the graph what
    a custom all-reduce / all-to-all kernel's launch, flag exchange and barrier take beyond
    the bound's latency and the graph launch it already pays (`collective_s`: a TP8 step of
    160 all-reduces pays it 160 times, a TP1 step never; sglang#2904 measured one-shot
    all-reduces of 4-32 KiB on 8xH100 at 5.7-7.8 us in all, some 4 us above the bound's
    latency and a graph launch; a dense step charging each kernel its boundary,
    expect.step's step_kernel_s of 5 us, already holds those 4 us: `seconds`' charged_s).
    With these charged apart, the kernels run at
    `kernel_scale` of the time the engine's decode factor gives them (that factor, fitted
    on whole steps, had absorbed them)."""

    host_s: float
    sequence_s: float
    collective_s: float
    kernel_scale: float
    source: str

    def seconds(self, kernels_s: Any, bound_s: Any, sequences: Any, collectives: Any,
                charged_s: float = 0.0) -> Any:
        """The iteration: its kernels' expected time rescaled (never below the bound), the
        host's time for `sequences` per scheduler and each of `collectives` calls, less the
        `charged_s` per call the kernels' time already holds beyond a graph launch (a dense
        step's kernel boundary, expect.step.collective_kernel_s): never below 0."""
        kernels = np.maximum(np.asarray(kernels_s) * self.kernel_scale, bound_s)
        per_call = max(self.collective_s - charged_s, 0.0)
        return kernels + self.host_s + self.sequence_s * np.asarray(sequences) + \
            per_call * np.asarray(collectives)


_ITER = ("fitted to the fit half of benchmarks/validation/silicon.py (NVIDIA's silicon_sample "
         "runs as fixed deployments, expected TPOT with no per-iteration cost): per engine "
         "the host time per iteration that minimises the median |measured / expected - 1| "
         "of TPOT, with 4 us per collective for all (from sglang#2904); a kernel scale below "
         "1 and a host time per sequence fitted there too made check.py's published serving "
         "runs worse (offline runs of thousands of sequences 2-4x too slow): left at 1 and 0")
ITERATION_COSTS = {"vllm": IterationCost(1.4e-3, 0.0, 4e-6, 1.0, _ITER),
                   "sglang": IterationCost(1.4e-3, 0.0, 4e-6, 1.0, _ITER),
                   "tensorrt-llm": IterationCost(0.0, 0.0, 4e-6, 1.0, _ITER)}
NO_COST = IterationCost(0.0, 0.0, 0.0, 1.0, "no engine with a fitted iteration cost named: the "
                        "framework factor alone")


def iteration_cost(engine: str | None) -> IterationCost:
    """The per-iteration cost of `engine` (one of ITERATION_COSTS, by `expect.table.engine`'s
    name: 'vllm-0.13.0' is vLLM's); none for another engine or none named (NO_COST)."""
    from ..expect.table import engine as engine_name

    return ITERATION_COSTS.get(engine_name(engine), NO_COST) if engine else NO_COST


RUNTIMES = {"vllm": _vllm, "sglang": _sglang, "tensorrt-llm": _trtllm}
# the vendors an engine runs on, where it is one vendor's own (TensorRT-LLM is NVIDIA's; vLLM
# and SGLang ship ROCm builds, and vLLM TPU, Neuron and Gaudi plugins)
VENDORS = {"tensorrt-llm": ("NVIDIA",)}


def check_runs_on(engine: str, chip: Chip) -> None:
    """A one-line error where `engine` does not run on `chip`'s vendor."""
    vendors = VENDORS.get(engine)
    if vendors and chip.vendor not in vendors:
        from ..errors import RooflineError

        raise RooflineError(f"engine {engine}: runs on {' and '.join(vendors)} GPUs, not on "
                            f"{chip.id} ({chip.vendor})")


def runtime(engine: str | None, chip: Chip, tp: int = 1) -> Runtime:
    """The defaults of `engine` (vllm, sglang, tensorrt-llm; None: generic ones) on `chip`
    at tensor-parallel size `tp`; an engine without a table (gpt-fast, llama.cpp) takes the
    generic ones."""
    return RUNTIMES.get(engine or "", _generic)(chip, tp)


def hub_id(source: str, fallback: str) -> str:
    """The Hugging Face repo a catalog model's source names (its config's URL), else the
    model's own name."""
    found = re.search(r"huggingface\.co/([\w.-]+/[\w.-]+)/", source)
    return found.group(1) if found else fallback
