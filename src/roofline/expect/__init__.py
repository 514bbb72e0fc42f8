"""The expected time beside the bound: a forecast with sourced efficiencies, never in place
of the bound and never faster than it.

`expected(cost, chip)` for one op; `expected_step(analysis)` for a whole step of a model.
The figures come from the chip file's [efficiency] tables (each with its source, or marked
as fitted with the data it was fitted to), generic fitted defaults where a chip has none,
and a local `measure` calibration over both.
"""

from .op import WHAT, Expected, describe, expected
from .step import ExpectedStep, expected_step
from .table import DEFAULTS, figures

__all__ = ["DEFAULTS", "WHAT", "Expected", "ExpectedStep", "describe", "expected",
           "expected_step", "figures"]
