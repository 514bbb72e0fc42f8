"""Profiles in: a real run's trace placed kernel by kernel on the roofline.

`profile(path)` reads a PyTorch profiler (Kineto) trace, maps each GPU kernel to the op it
ran with its shapes, and bounds it with the one evaluator and the forecast.
"""

from .analyze import profile
from .result import ClassRow, Gap, KernelRow, Profile, Summary

__all__ = ["ClassRow", "Gap", "KernelRow", "Profile", "Summary", "profile"]
