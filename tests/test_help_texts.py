"""Help texts cite sources by name (Scaling Book ch.1 §2.9), not by our internal seed ids."""

import argparse
import contextlib
import io

from roofline.cli import build_parser


def _helps(parser, path):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        parser.print_help()
    yield path, " ".join(buf.getvalue().split())  # argparse wraps to the terminal width
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _helps(sub, f"{path} {name}")


def test_no_help_text_names_a_seed():
    helps = dict(_helps(build_parser(), "roofline"))
    assert len(helps) > 20  # every command and subcommand was walked
    assert not [path for path, text in helps.items() if "seed 0" in text.lower()]
    assert "Scaling Book ch.1 §2.7 Problem 3" in helps["roofline plot sweep"]
