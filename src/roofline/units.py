"""SI vocabulary: parse sizes and counts at the edges, format numbers for people.

Inside the package every quantity is in SI base units (FLOP, byte, second, FLOP/s, byte/s).
Decimal prefixes mean powers of 1000 (1 TB/s = 1e12 B/s); binary ones say so (KiB, MiB, GiB).
"""

from __future__ import annotations

import math
import re

from .errors import RooflineError

_DECIMAL = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_BINARY = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40}
_EXPONENT = {"K": 3, "M": 6, "G": 9, "T": 12, "P": 15}
_SIZE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([kKMGTP]i?)?\s*([Bb])?\s*$")


def parse_bytes(text: str, what: str = "size") -> float:
    """Parse a byte size such as '64MiB', '1.5GB', '4096' or '2e9' into bytes."""
    m = _SIZE_RE.match(str(text))
    if not m or (m.group(3) == "b"):
        raise RooflineError(
            f"{what}: cannot read {text!r} as a byte size (use e.g. 4096, 64KiB, 16MB, 1.5GiB)"
        )
    number, prefix = float(m.group(1)), m.group(2) or ""
    if prefix in _DECIMAL and prefix and not m.group(3):
        # a count's '64M' is 64·2**20, so a byte size's bare '64M' could mean either: ask
        num, p = m.group(1), prefix.upper()
        binary = f" or {num}{p}iB (= {num}·2^{_EXPONENT[p] // 3 * 10})" if f"{p}i" in _BINARY \
            else ""
        raise RooflineError(f"{what}: {text.strip()!r} is ambiguous for a byte size; write "
                            f"{num}{p}B (= {num}e{_EXPONENT[p]}){binary}")
    scale = _BINARY.get(prefix) if prefix.endswith("i") else _DECIMAL.get(prefix)
    if scale is None:
        raise RooflineError(f"{what}: unknown unit prefix {prefix!r} in {text!r}")
    value = number * scale
    if value <= 0:
        raise RooflineError(f"{what}: must be positive, got {text!r}")
    if value > MAX_BYTES:  # past it products of sizes overflow float64
        raise RooflineError(f"{what}: at most 2**80 bytes (1 YiB), got {text!r}")
    if value != math.floor(value):  # 1.5 bytes is no buffer
        raise RooflineError(f"{what}: a whole number of bytes (1 to 2**80), got {text!r}")
    return value


MAX_BYTES = 2.0**80

# Counts (tokens, batch, dimensions) use binary k / M as ML code does: 8k context = 8192.
# Byte sizes say which they mean: KB = 1000, KiB = 1024 (parse_bytes).
_COUNT_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([kKmM]?)\s*$")
_COUNT_SUFFIX = {"": 1, "k": 1024, "K": 1024, "m": 1024**2, "M": 1024**2}
MAX_COUNT = 2**53  # beyond this a float no longer holds every whole number


def _read_number(text: str) -> float:
    m = _COUNT_RE.match(str(text))
    value = float(m.group(1)) * _COUNT_SUFFIX[m.group(2)] if m else math.nan
    return value if math.isfinite(value) and 0 < value <= MAX_COUNT else math.nan


def parse_number(text: str, what: str = "value") -> float:
    """A positive number with an optional binary suffix: '8192', '8k' (8192), '1e6', '2M'."""
    value = _read_number(text)
    if math.isnan(value):
        raise RooflineError(f"{what}: expected a positive number such as 8192, 8k (= 8192) or "
                            f"1e6 (at most 2**53), got {text!r}")
    return value


def parse_count(text: str, what: str = "value") -> int:
    """Parse a positive whole count such as '8192', '8k' (= 8192) or '1e6'."""
    value = _read_number(text)
    if math.isnan(value) or value != int(value):
        raise RooflineError(f"{what}: expected a positive whole number such as 8192, 8k "
                            f"(= 8192) or 1e6 (at most 2**53), got {text!r}")
    return int(value)


_DURATION = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
_DURATION_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*(s|ms|us|ns)?\s*$")


def parse_duration(text: str, what: str = "duration") -> float:
    """Parse a duration such as '50ms', '1.5 s', '200us' or '0.05' (seconds)."""
    m = _DURATION_RE.match(str(text))
    if not m or float(m.group(1)) <= 0:
        raise RooflineError(f"{what}: cannot read {text!r} as a positive duration "
                            "(use e.g. 50ms, 0.2s, 300us)")
    value = float(m.group(1)) * _DURATION[m.group(2) or "s"]
    if not MIN_DURATION_S <= value <= MAX_DURATION_S:  # 1e309ms reads as inf
        raise RooflineError(f"{what}: must be 1 ps to 1e9 s, got {text!r}")
    return value


MIN_DURATION_S, MAX_DURATION_S = 1e-12, 1e9  # a clock tick's share to ~30 years


_PREFIXES = [(1e24, "Y"), (1e21, "Z"), (1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"),
             (1e6, "M"), (1e3, "k")]
_SMALL = [(1e-3, "m"), (1e-6, "u"), (1e-9, "n"), (1e-12, "p"), (1e-15, "f"), (1e-18, "a"),
          (1e-21, "z"), (1e-24, "y")]


def format_si(value: float, unit: str = "", digits: int = 3) -> str:
    """Format with a decimal SI prefix: format_si(9.894e14, 'FLOP/s') -> '989 TFLOP/s'."""
    if not math.isfinite(value):
        return f"{value} {unit}".strip()
    if value == 0:
        return f"0 {unit}".strip()
    value = float(f"{value:.{digits}g}")  # round first: 999.7e9 is '1 TB', not '1e+03 GB'
    for scale, prefix in _PREFIXES:
        if abs(value) >= scale:
            return f"{value / scale:.{digits}g} {prefix}{unit}".strip()
    if abs(value) < 1e-3:  # '15 u', never '1.5e-05'
        for scale, prefix in _SMALL:
            if abs(value) >= scale * (1 - 1e-12):
                return f"{float(f'{value / scale:.{digits}g}'):g} {prefix}{unit}".strip()
    return f"{value:.{digits}g} {unit}".strip()


def format_number(value: float, digits: int = 4) -> str:
    """A plain number for people: '124.1', '0.25'; past 99,999 or below 0.001 the SI
    prefix ('19.78 k', '15 u'), never e-notation."""
    text = f"{value:.{digits}g}"
    return format_si(value, "", digits) if "e" in text and math.isfinite(value) else text


def format_bytes(value: float, digits: int = 3) -> str:
    """Format a byte count with a decimal prefix: 80e9 -> '80 GB'."""
    return format_si(value, "B", digits)


def format_time(seconds: float, digits: int = 3) -> str:
    """Format a duration: 1.01e-3 -> '1.01 ms'."""
    if not math.isfinite(seconds):
        return str(seconds)
    seconds = float(f"{seconds:.{digits}g}")  # 0.9999 ms is '1 ms', not '1e+03 us'
    for scale, unit in [(1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns")]:
        if abs(seconds) >= scale:
            return f"{seconds / scale:.{digits}g} {unit}"
    return "0 s" if seconds == 0 else f"{seconds / 1e-9:.{digits}g} ns"


def format_params(count: float) -> str:
    """A parameter count as model cards write it: `8.03B`, `671B`, `1.03T`."""
    return f"{count / 1e12:.3g}T" if count >= 999.5e9 else f"{count / 1e9:.3g}B"
