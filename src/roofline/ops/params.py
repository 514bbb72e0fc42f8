"""How an op is declared: its parameters (name, help, kind, default) next to its function.

The CLI (`roofline op`, `sweep op`, `--op` specs) generates its options from these records and
`roofline.ops.run_op` fills in the same defaults, so a parameter's flag, help and default are
written once, beside the op they belong to.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..cost import Cost
from ..dtypes import dtype_names
from ..hardware import Chip

if TYPE_CHECKING:
    from ..evaluate import Estimate

KINDS = ("count", "bytes", "float", "str", "choice", "bool")


@dataclass(frozen=True)
class Param:
    """One argument of an op function.

    `default` None means "not given": the op's own rule applies, stated in `help` (a chip's
    SRAM) or by `follows` (the value of another parameter, e.g. kv_len follows q_len)."""

    name: str  # the op function's keyword argument
    help: str
    kind: str = "count"  # count | bytes | float | str | choice | bool
    default: Any = None
    required: bool = False
    choices: tuple[str, ...] = ()
    flag: str = ""  # the command-line option, when not "--" + name with dashes
    follows: str = ""  # default: this other parameter's value
    bounds: tuple[float, float] = (1e-6, 2.0**53)  # a float's documented floor and ceiling

    @property
    def option(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    @property
    def help_text(self) -> str:
        """The help with its default: what every generated option shows."""
        if self.kind == "float":  # its range, as every physical input of the CLI shows it
            lo, hi = self.bounds
            return f"{self.help} ({lo:g} to {hi:g})"
        if self.kind == "bool":
            shown = ("--" if self.default else "--no-") + self.name.replace("_", "-")
        elif self.follows:
            shown = "--" + self.follows.replace("_", "-")
        elif self.default is not None:
            shown = str(self.default)
        else:
            return self.help
        if self.help.endswith(")"):  # "keys (context incl. the queries; default --q-len)"
            return f"{self.help[:-1]}; default {shown})"
        return f"{self.help} (default {shown})"


Prepare = Callable[[dict[str, Any], Chip], dict[str, Any]]


@dataclass(frozen=True)
class OpDecl:
    """An op as the CLI and `run_op` see it: its function, parameters and the defaults that
    depend on the chip or on other parameters (`prepare`), and any figures beyond the
    Estimate (`extras`, e.g. a collective's bus bandwidth)."""

    name: str
    help: str
    function: Callable[..., Cost]
    params: tuple[Param, ...]
    prepare: Prepare | None = None
    extras: Callable[[dict[str, Any], Estimate], dict[str, Any]] | None = None
    aliases: tuple[str, ...] = ()


def dtype_params(*which: str) -> tuple[Param, ...]:
    """The dtype parameters an op takes (dtype, weight, out, compute, kv); all but the
    activation dtype default to it."""
    names = ", ".join(dtype_names())
    table = {
        "dtype": Param("dtype", f"activation / input dtype ({names}, int4-g128, nvfp4, ...)",
                       "str", "bf16"),
        "weight": Param("weight_dtype", "weight dtype", "str", follows="dtype"),
        "out": Param("out_dtype", "output dtype", "str", follows="dtype"),
        "compute": Param("compute_dtype", "dtype whose peak applies", "str", follows="dtype"),
        "kv": Param("kv_dtype", "KV cache dtype", "str", follows="dtype"),
    }
    return tuple(table[w] for w in which)


def chain(*steps: Prepare) -> Prepare:
    """Several prepare steps, applied in order."""
    def run(kwargs: dict[str, Any], chip: Chip) -> dict[str, Any]:
        for step in steps:
            kwargs = step(kwargs, chip)
        return kwargs

    return run
