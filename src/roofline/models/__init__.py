"""Transformer models: Hugging Face configs in, per-chip step bounds out.

A step's working records (layers.Ctx, step.Placement, memory.Sizing, schedule.StepTimes,
summary.StepCore, analysis.StepParts) are plain dataclasses, not frozen: each is built once
per step and only read after (Ctx fills its derived fields in __post_init__). A frozen
dataclass's __init__ sets every field through object.__setattr__; freezing the five that
could be measured 10-25% slower analyze() calls (benchmarks/run.py's whole-model case).
"""

from .analysis import STEP_TIMES, ModelAnalysis, StepLayer, StepOp, analyze
from .catalog import list_models, load_model
from .graph import tp_layer
from .hf_config import parse_config
from .memory import MemoryFootprint, footprint, kv_bytes_per_token, local_params
from .params import ParamCount, param_counts
from .spec import MLA, ModelSpec, MoE
from .step import Parallel, Phase, Precision, decode, model_precision, prefill, train

__all__ = [
           "MLA",
           "STEP_TIMES",
           "MemoryFootprint",
           "MoE",
           "ModelAnalysis",
           "ModelSpec",
           "Parallel",
           "ParamCount",
           "Phase",
           "Precision",
           "StepLayer",
           "StepOp",
           "analyze",
           "decode",
           "footprint",
           "kv_bytes_per_token",
           "list_models",
           "load_model",
           "local_params",
           "model_precision",
           "param_counts",
           "parse_config",
           "prefill",
           "tp_layer",
           "train",
]
