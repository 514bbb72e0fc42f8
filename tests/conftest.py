"""Shared fixtures and hypothesis settings."""

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
