"""Packaging: the version in one place, the licence and changelog shipped, test markers."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

import pytest

import roofline

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_the_version_lives_only_in_the_package():
    project = PYPROJECT["project"]
    assert "version" not in project and "version" in project["dynamic"]
    source = PYPROJECT["tool"]["hatch"]["version"]["path"]
    assert (ROOT / source).resolve() == Path(roofline.__file__).resolve()
    assert re.fullmatch(r"\d+\.\d+\.\d+", roofline.__version__)
    others = [p for p in (ROOT / "src").rglob("*.py")
              if p.resolve() != Path(roofline.__file__).resolve()
              and re.search(r"^__version__\s*=", p.read_text(), flags=re.M)]
    assert not others, f"a second version: {others}"
    try:  # the installed metadata is built from the same line
        assert importlib.metadata.version("roofline") == roofline.__version__
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("roofline is not installed (pip install -e .)")


def test_licence_and_changelog():
    licence = (ROOT / "LICENSE").read_text()
    assert licence.startswith("MIT License") and "the roofline developers" in licence
    assert PYPROJECT["project"]["license"] == {"text": "MIT"}
    changelog = (ROOT / "CHANGELOG.md").read_text()
    headings = re.findall(r"^## \[([^\]]+)\]", changelog, flags=re.M)
    assert headings[0] == "Unreleased" and roofline.__version__ in headings


def test_markers_are_registered_and_strict():
    ini = PYPROJECT["tool"]["pytest"]["ini_options"]
    assert "--strict-markers" in ini["addopts"].split()
    assert {m.split(":")[0] for m in ini["markers"]} == {"gpu", "slow"}


class _Item:
    def __init__(self, *markers: str) -> None:
        self.markers = list(markers)
        self.added: list[pytest.MarkDecorator] = []

    def get_closest_marker(self, name: str) -> object:
        return name if name in self.markers else None

    def add_marker(self, marker: pytest.MarkDecorator) -> None:
        self.added.append(marker)


@pytest.mark.parametrize("cuda", [False, True])
def test_gpu_tests_are_skipped_only_without_cuda(monkeypatch, cuda):
    import conftest

    monkeypatch.setattr(conftest, "_cuda_available", lambda: cuda)
    gpu, cpu = _Item("gpu"), _Item("slow")
    conftest.pytest_collection_modifyitems(None, [gpu, cpu])
    assert cpu.added == []
    if cuda:
        assert gpu.added == []
    else:
        (skip,) = gpu.added
        assert skip.mark.name == "skip" and "CUDA" in skip.mark.kwargs["reason"]
