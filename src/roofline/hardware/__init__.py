"""Hardware: chips with their peaks, memory levels and links, from validated data files."""

from .catalog import list_chips, load_chip, load_chip_file, parse_chip
from .model import Chip, Link, MemoryLevel, Peak, half_dtype
from .system import System, make_system

__all__ = ["Chip", "Link", "MemoryLevel", "Peak", "System", "half_dtype", "list_chips",
           "load_chip", "load_chip_file", "make_system", "parse_chip"]
