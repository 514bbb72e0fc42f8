"""Hardware: chips with their peaks, memory levels and links, from validated data files."""

from .catalog import list_chips, load_chip, load_chip_file, parse_chip
from .model import Chip, Link, MemoryLevel, Peak

__all__ = ["Chip", "Link", "MemoryLevel", "Peak", "list_chips", "load_chip", "load_chip_file",
           "parse_chip"]
