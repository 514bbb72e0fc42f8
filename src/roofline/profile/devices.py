"""A trace's device name ('NVIDIA A100-SXM4-80GB', deviceProperties) -> a catalog chip id.

Rules on the lower-cased name, most specific first; a name no rule knows asks for --hw
rather than guessing a chip whose roofs would be wrong.
"""

from __future__ import annotations

import re

from ..errors import ParameterError

# (every pattern that must appear, chip id); first match wins
RULES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("a100", "80gb", "pcie"), "a100-pcie-80gb"),
    (("a100", "80gb"), "a100-sxm-80gb"),
    (("a100", "40gb"), "a100-sxm-40gb"),
    # Meta's A100 SXM4 boards report 'A100-PG509-200' (40 GB of HBM2: totalGlobalMem 42.3e9)
    (("a100", "pg509"), "a100-sxm-40gb"),
    (("gh200",), "gh200"), (("h100", "nvl"), "h100-nvl"), (("h100", "pcie"), "h100-pcie"),
    (("h100",), "h100-sxm"), (("h200", "nvl"), "h200-nvl"), (("h200",), "h200-sxm"),
    (("h800",), "h800-sxm"), (("h20",), "h20"), (("gb200",), "gb200"), (("gb300",), "gb300"),
    (("b200",), "b200"), (("b300",), "b300"), (("l40s",), "l40s"), (("l40",), "l40"),
    (("l4",), "l4"), (("v100", "32gb"), "v100-sxm2-32gb"), (("rtx", "4090"), "rtx-4090"),
    (("rtx", "5090"), "rtx-5090"), (("rtx", "pro", "6000"), "rtx-pro-6000"),
    (("mi355x",), "mi355x"), (("mi325x",), "mi325x"), (("mi300x",), "mi300x"),
    (("mi250x",), "mi250x"), (("mi210",), "mi210"),
)


def chip_for_device(name: str | None) -> str:
    """The catalog chip id for a device name; RooflineError (asking for --hw) if unknown."""
    if not name:
        raise ParameterError("hw", "is needed: the trace names no device (no deviceProperties; "
                             "roofline hw list shows the chips)")
    words = re.sub(r"[^a-z0-9]+", " ", name.lower())
    tokens = set(words.split())
    for needed, chip in RULES:
        if all(n in tokens or any(t.startswith(n) for t in tokens) for n in needed):
            return chip
    raise ParameterError("hw", f"is needed: device {name[:80]!r} is not one the catalog knows "
                         "(roofline hw list shows the chips)")
