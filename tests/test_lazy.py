"""roofline.lazy.cached_property: computed once, on first read, and kept on the instance."""

from __future__ import annotations

import pickle

from roofline.lazy import cached_property
from roofline.models import load_model


class _Counted:
    calls = 0

    @cached_property
    def value(self) -> int:
        """The answer."""
        type(self).calls += 1
        return 42


def test_computed_once_and_stored_on_the_instance():
    a, b = _Counted(), _Counted()
    assert (a.value, a.value, b.value) == (42, 42, 42)
    assert _Counted.calls == 2  # once per instance
    assert a.__dict__["value"] == 42
    assert isinstance(_Counted.__dict__["value"], cached_property)
    assert _Counted.value.__doc__ == "The answer."  # the class sees the descriptor


def test_a_spec_hashes_once_and_like_an_equal_spec():
    # ModelSpec keeps its hash (the analyses' caches key on it): equal specs hash alike,
    # a copy through pickle too (the kept hash is not carried across processes)
    import dataclasses

    spec = load_model("llama-2-70b")
    again = dataclasses.replace(spec)
    assert again == spec and hash(again) == hash(spec)
    assert "_hash" not in pickle.loads(pickle.dumps(spec)).__dict__
    assert hash(pickle.loads(pickle.dumps(spec))) == hash(spec)
    assert dataclasses.replace(spec, layers=79) != spec
