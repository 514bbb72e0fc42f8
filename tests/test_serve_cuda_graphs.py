"""Each engine's CUDA-graph capture sizes: a decode batch replays the graph of the next
captured size (padded), past the largest one it runs eagerly."""

from __future__ import annotations

import numpy as np

from roofline.hardware import load_chip
from roofline.serve.runtime import cuda_graphs, runtime


def test_capture_sizes_by_hand() -> None:
    h100, h200 = load_chip("h100"), load_chip("h200")
    vllm = cuda_graphs("vllm", h100, 1)
    assert vllm is not None and vllm.sizes[:5] == (1, 2, 4, 8, 16) and vllm.largest == 512
    graph, eager = vllm.replay(np.array([1, 3, 13, 16, 17, 512, 600]))
    assert graph.tolist() == [1, 4, 16, 16, 24, 512, 600]  # 600: past 512, run as it is
    assert eager.tolist() == [False] * 6 + [True]
    # vLLM: min(2 x max_num_seqs, 512); max_num_seqs 100 captures up to 200
    small = cuda_graphs("vllm", h100, 1, max_seqs=100)
    assert small is not None and small.largest == 200
    sglang = cuda_graphs("sglang", h200, 8)
    assert sglang is not None and sglang.largest == 160 and len(sglang.sizes) == 3 + 20
    assert sglang.replay(161)[1] and sglang.replay(150)[0] == 152
    trt = cuda_graphs("tensorrt-llm", h100, 1)  # no padding: only the captured sizes
    assert trt is not None and trt.largest == 128
    graph, eager = trt.replay(np.array([20, 33, 64, 100, 129]))
    assert eager.tolist() == [False, True, False, True, True]
    assert graph.tolist() == [20, 33, 64, 100, 129]
    assert cuda_graphs(None, h100) is None and cuda_graphs("gpt-fast", h100) is None


def test_the_runtime_line_shows_the_capture_limit() -> None:
    h100 = load_chip("h100")
    assert "CUDA graphs for decode batches <= 512" in runtime("vllm", h100).describe()
    assert "<= 160" in runtime("sglang", h100, 8).describe()
    assert runtime("sglang", h100).to_dict()["cuda_graph_max_batch"] == 160
    assert "CUDA graphs" not in runtime(None, h100).describe()


def test_serve_prints_the_capture_limit(run_cli) -> None:
    code, out, _ = run_cli("serve", "llama-3.1-8b", "--hw", "h100", "--engine", "sglang")
    assert code == 0
    line = next(s for s in out.splitlines() if s.startswith("runtime on h100-sxm:"))
    assert line.endswith("CUDA graphs for decode batches <= 160")
