"""Each engine's CUDA-graph capture sizes: a decode step runs the graph of the next
captured batch (padded), past the largest one eagerly; the bound never changes."""

from __future__ import annotations

import numpy as np
import pytest

from roofline.expect import expected_step
from roofline.hardware import load_chip
from roofline.models import Parallel, Precision, load_model
from roofline.models.step import MemoryBudget
from roofline.serve import Engine, Workload
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


def _engine(framework: str, dp: int = 1) -> Engine:
    spec = load_model("llama-3.1-8b")
    return Engine(spec, load_chip("h100"), Parallel(dp=dp), Precision("bf16", "bf16", "bf16"),
                  MemoryBudget(0.9), expect=True, framework=framework)


def test_a_decode_step_runs_at_the_padded_batch() -> None:
    e = _engine("vllm")
    w = Workload.from_lengths(1024, 256)
    a13, a16 = e.iteration(13, w, 0), e.iteration(16, w, 0)
    # B = 13 replays the graph of 16: the same kernels' time, the bound of its own 13
    assert float(e._graphed(a13)) == pytest.approx(float(e._graphed(a16)))
    assert float(a13.t_lower_s) < float(a16.t_lower_s)
    assert float(e.step_time(a13)) >= float(a13.t_lower_s)
    # B = 600 > 512: eager, each kernel launched from the host, slower than its graph
    a600 = e.iteration(600, w, 0)
    graphed = expected_step(a600, e.chip, cuda_graphs=True, framework="vllm").t_s
    assert float(e._graphed(a600)) == pytest.approx(float(expected_step(
        a600, e.chip, cuda_graphs=False, framework="vllm").t_s))
    assert float(e._graphed(a600)) > float(graphed)
    # 26 sequences over 2 replicas pad per replica: 2 x 13 -> 2 x 16
    two = _engine("vllm", dp=2)
    assert float(two._graphed(two.iteration(26, w, 0))) == pytest.approx(
        float(two._graphed(two.iteration(32, w, 0))))


def test_the_expected_decode_step_along_the_batch() -> None:
    e = _engine("sglang")
    w = Workload.from_lengths(1024, 256)
    batch = np.arange(1.0, 200.0)
    a = e.iteration(batch, w, 0)
    t = np.asarray(e.step_time(a))
    assert np.all(t >= np.asarray(a.t_lower_s))  # never below the bound
    # steps within one captured size are flat, and the step grows from one to the next
    inside = (batch > 152) & (batch <= 160)
    assert np.ptp(t[inside]) == pytest.approx(0.0, abs=1e-12)
    graphed = batch <= 160
    assert np.all(np.diff(t[graphed]) >= -1e-12)
    assert np.all(np.diff(t[~graphed]) >= -1e-12)
    # past 160 the eager step costs its launches: a jump up at 161
    assert t[160] > t[159]
    # no engine named: every decode step under graphs at its own batch, as before
    generic = Engine(e.spec, e.chip, e.par, e.prec, e.budget, expect=True)
    plain = expected_step(a, e.chip).t_s
    assert np.allclose(generic.step_time(a), plain)
