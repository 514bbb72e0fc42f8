"""Transformer models: Hugging Face configs in, per-chip step bounds out."""

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
