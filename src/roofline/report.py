"""Compatibility names: the text views live in `roofline.render` (one module per format and
per kind of result). Kept importable while callers move over."""

from .render.chip import chip_comparison, chip_dict, chip_text
from .render.estimate import bound_kind, estimate_text, extra_text, what_if_text
from .render.model import mfu_text, model_text, model_what_if_text
from .render.sweep import sweep_text
from .render.text import table
from .serialize import jsonable

__all__ = ["bound_kind", "chip_comparison", "chip_dict", "chip_text", "estimate_text",
           "extra_text", "jsonable", "mfu_text", "model_text", "model_what_if_text",
           "sweep_text", "table", "what_if_text"]
