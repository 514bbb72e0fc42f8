"""`cached_property`: functools' own, but on Python 3.11 without the class-wide lock it
takes on every first read (3.12 dropped that lock). A whole-model estimate reads a few
dozen of these once each; the lock made each first read cost ~0.3 us more."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING or sys.version_info >= (3, 12):
    from functools import cached_property
else:
    class cached_property:
        """Computed on first read and stored on the instance (which then shadows this
        non-data descriptor)."""

        def __init__(self, func: Any) -> None:
            self.func = func
            self.attrname = func.__name__
            self.__doc__ = func.__doc__

        def __set_name__(self, owner: type, name: str) -> None:
            self.attrname = name

        def __get__(self, instance: Any, owner: type | None = None) -> Any:
            if instance is None:
                return self
            value = instance.__dict__[self.attrname] = self.func(instance)
            return value

__all__ = ["cached_property"]
