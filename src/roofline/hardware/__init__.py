"""Hardware: chips with their peaks, memory levels and links, from validated data files."""

from .catalog import list_chips, load_chip, load_chip_file, parse_chip
from .model import Chip, Link, MemoryLevel, Peak
from .system import System, make_system

__all__ = ["Chip", "Link", "MemoryLevel", "Peak", "System", "list_chips", "load_chip",
           "load_chip_file", "make_system", "parse_chip"]
