"""The CLI's names for the library's parameters: a library error names the parameter
(`ParameterError`), the CLI's one-line message names the flag the user typed."""

from __future__ import annotations

from ..errors import ParameterError

# parameter -> flag where the flag is not the parameter with dashes (`tp` -> `--tp`)
RENAMED = {"util": "--mem-util", "reserve_bytes": "--reserve", "pipeline": "--pp-schedule",
           "direction": "--pass", "warm_l2_bytes": "--warm", "modes": "--mode"}


def flag(parameter: str) -> str:
    return RENAMED.get(parameter, "--" + parameter.replace("_", "-"))


def cli_message(exc: Exception) -> str:
    """The message a user of the CLI reads: a parameter's name replaced by its flag."""
    if isinstance(exc, ParameterError):
        return exc.naming(flag(exc.parameter), flag)
    return str(exc)
