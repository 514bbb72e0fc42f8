"""Shared fixtures, hypothesis settings, and the `gpu` marker's skip (markers: pyproject)."""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", max_examples=60, deadline=None)
settings.register_profile("thorough", max_examples=1000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


import pytest  # noqa: E402


@pytest.fixture
def run_cli(capsys):
    """Run `roofline ...` in-process: (exit code, stdout, stderr); argparse's own rejections
    (SystemExit) come back as their exit code."""
    from roofline.cli import main

    def call(*argv):
        try:
            code = main(list(argv))
        except SystemExit as exc:
            code = exc.code
        out, err = capsys.readouterr()
        return code, out, err

    return call


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config, items):
    """Tests marked `gpu` run where CUDA is available and are skipped, saying why, elsewhere
    (torch is imported only when such a test was collected)."""
    gpu = [item for item in items if item.get_closest_marker("gpu")]
    if gpu and not _cuda_available():
        skip = pytest.mark.skip(reason="needs a CUDA GPU (marker 'gpu')")
        for item in gpu:
            item.add_marker(skip)
