"""Serving plans: continuous batching (aggregated, chunked prefill) or disaggregated prefill
and decode pools, under TTFT / TPOT targets, built on the model analysis (`models.analyze`
of one step; `iteration.step_time` is the one step time used).

>>> from roofline.serve import Workload, plan, Targets, Space
>>> p = plan("llama-3.1-8b", ["h100"], Workload.from_lengths(1024, 256), Targets(tpot_s=0.02),
...          Space(tp=(1,), kv_dtypes=("fp8",), chunks=(2048,)))
>>> best = p.best()["h100-sxm"]
>>> best.tpot_s <= 0.02, best.mode
(True, 'aggregated')
"""

from .explain import annotate
from .iteration import Engine, step_time
from .plan import MODES, Load, ServePlan, Space, Targets, plan
from .point import Layout, ServePoint
from .queueing import md1_wait_s
from .workload import BLOCK_TOKENS, Workload, read_lengths, spec_tokens_per_step

__all__ = ["BLOCK_TOKENS", "MODES", "Engine", "Layout", "Load", "ServePlan", "ServePoint",
           "Space", "Targets",
           "Workload", "annotate", "md1_wait_s", "plan", "read_lengths",
           "spec_tokens_per_step", "step_time"]
