"""A System: many copies of one chip, grouped into scale-up domains joined by scale-out links.

Costs stay per chip; the System says where a group of ranks sits: inside one scale-up domain
(NVLink / ICI / Infinity Fabric) or spread over several (the scale-out NIC between them).
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from ..errors import RooflineError
from ..records import record
from .catalog import load_chip
from .model import Chip


@record(frozen=True)
class System:
    """Chips joined into scale-up domains (a domain's chips share its scale-up link)."""

    chip: Chip
    chips_per_domain: int
    domains: int = 1

    @property
    def chips(self) -> int:
        return self.chips_per_domain * self.domains

    def link_for(self, ranks: int) -> str:
        """The slowest link a group of `ranks` consecutive ranks has to cross."""
        if ranks > self.chips:
            raise RooflineError(f"a group of {ranks} ranks does not fit in {self.chips} chips "
                                f"({self.domains} x {self.chips_per_domain})")
        return "scale-up" if ranks <= self.chips_per_domain else "scale-out"

    def link_share(self, link: str, ranks: Any) -> Any:
        """The fraction of a link's per-chip bandwidth a group of `ranks` can use. A switch
        (NVSwitch, a NIC) gives every group all of it. A full mesh (MI300X Infinity Fabric: one
        port to each peer) gives a group of g ranks its g - 1 ports to the others, a pair one
        port. On a torus a group's ring runs along the axes it spans, both ways: 2 ports per
        axis, 1 for a pair of neighbours."""
        lk = self.chip.links.get(link)
        if lk is None or lk.topology == "switch" or lk.ports is None:
            return 1.0
        n = np.maximum(np.asarray(ranks, dtype=float), 1.0)
        if lk.topology == "mesh":
            used = np.maximum(n - 1.0, 1.0)
        else:  # torus
            axis = lk.torus_axis or 2
            axes = np.minimum(np.ceil(np.log(n) / np.log(axis) - 1e-9), max(lk.ports // 2, 1))
            used = np.where(n <= 2, 1.0, 2.0 * np.maximum(axes, 1.0))
        share = np.minimum(used, lk.ports) / lk.ports
        return float(share) if share.ndim == 0 else share

def make_system(hw: Chip | str, chips: int | None = None,
                chips_per_domain: int | None = None) -> System:
    """A System of `chips` chips (default: one scale-up domain) in domains of the chip's
    scale-up domain size (default from the catalog; 1 for a chip without scale-up links)."""
    chip = load_chip(hw)
    if chips is None and chips_per_domain is None:  # one domain: every analysis asks
        system = chip.memo.get("system")
        if system is None:
            system = chip.memo["system"] = _system(chip, None, None)
        return cast(System, system)
    return _system(chip, chips, chips_per_domain)


def _system(chip: Chip, chips: int | None, chips_per_domain: int | None) -> System:
    if chips_per_domain is None:
        up = chip.links.get("scale-up")
        chips_per_domain = (up.domain_size or 1) if up else 1
    if chips_per_domain < 1:
        raise RooflineError(f"chips_per_domain must be at least 1, got {chips_per_domain}")
    chips = chips_per_domain if chips is None else chips
    if chips < 1:
        raise RooflineError(f"chips must be at least 1, got {chips}")
    if chips > chips_per_domain and chips % chips_per_domain:
        raise RooflineError(f"chips ({chips}) must be a multiple of the scale-up domain size "
                            f"({chips_per_domain})")
    return System(chip, min(chips, chips_per_domain), max(1, chips // chips_per_domain))
