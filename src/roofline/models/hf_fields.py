"""Typed reads from a Hugging Face config dict: each key checked (a positive integer, a
number, a flag), each error naming the file and the key."""

from __future__ import annotations

from typing import Any

from ..errors import RooflineError, brief

MAX_LAYERS = 10_000  # the largest models have a few hundred
_LAYER_KEYS = ("num_hidden_layers", "n_layer")


class ConfigReader:
    """Typed reads from a config dict; errors name the file and the key."""

    def __init__(self, data: dict[str, Any], origin: str) -> None:
        self.data, self.origin = data, origin

    def error(self, key: str, message: str) -> RooflineError:
        return RooflineError(f"{self.origin}: field '{key}': {message}")

    def integer(self, *keys: str, default: int | None = None) -> int:
        for key in keys:
            value = self.data.get(key)
            if value is not None:
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    raise self.error(key, f"must be a positive integer, got {value!r}")
                # layers are walked one by one; every size must stay an exact float
                limit = MAX_LAYERS if key in _LAYER_KEYS else 2**53
                if value > limit:
                    raise self.error(key, f"must be at most {limit}, got {brief(value)}")
                return value
        if default is None:
            raise self.error(keys[0], "required")
        return default

    def number(self, key: str) -> float:
        value = self.data.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                not 0 < value < 2**53:
            raise self.error(key, f"must be a positive number, got {brief(value)}")
        return float(value)

    def opt_int(self, key: str) -> int | None:
        return self.integer(key) if self.data.get(key) is not None else None

    def count(self, key: str, default: int) -> int:
        """A whole number that may be 0 (default when absent or null)."""
        value = self.data.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 2**53:
            raise self.error(key, f"must be a whole number (0 or more), got {brief(value)}")
        return value

    def flag(self, key: str, default: bool) -> bool:
        value = self.data.get(key, default)
        if not isinstance(value, bool):
            raise self.error(key, f"must be true or false, got {value!r}")
        return value
