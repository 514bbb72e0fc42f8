"""The CLI starts with only what the chosen command needs: each command is a name and a help
line until chosen (roofline.cli.COMMANDS), each op of `roofline op` / `sweep op` likewise;
the lazily built parsers are the ones built eagerly. No timing here (benchmarks/run.py)."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import subprocess
import sys
from importlib import import_module

import pytest

from roofline.cli import COMMANDS, build_parser, main
from roofline.cli._base import _Parser
from roofline.ops.registry import OPS

# never loaded by a start that does not run them (what issue 15 keeps unloaded, and more)
HEAVY = ("roofline.models", "roofline.render", "roofline.plot", "roofline.plot_cli",
         "roofline.trace", "roofline.measure", "roofline.serve", "roofline.levers",
         "roofline.sweep", "roofline.expect", "matplotlib", "torch", "jax", "pandas")


def _loaded(*argv: str) -> set[str]:
    """The modules a `roofline ARGV` process has loaded when it exits (status 0)."""
    code = ("import atexit, json, sys, runpy\n"
            "atexit.register(lambda: sys.__stderr__.write('MODULES ' + json.dumps("
            "sorted(sys.modules)) + '\\n'))\n"
            "sys.argv = ['roofline', *sys.argv[1:]]\n"
            "runpy.run_module('roofline', run_name='__main__')\n")
    proc = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stderr.splitlines() if x.startswith("MODULES "))
    return set(json.loads(line.removeprefix("MODULES ")))


def _under(modules: set[str], *packages: str) -> list[str]:
    return sorted(m for m in modules for p in packages if m == p or m.startswith(p + "."))


def test_help_imports_no_command_module():
    loaded = _loaded("--help")
    assert not _under(loaded, *HEAVY)
    assert _under(loaded, "roofline.cli") == ["roofline.cli", "roofline.cli._base",
                                              "roofline.cli._exit"]
    assert "roofline.argtypes" not in loaded
    assert "tomllib" not in loaded  # no file is read


def test_an_op_imports_its_command_alone():
    loaded = _loaded("op", "matmul", "--m", "1", "--k", "1", "--n", "1", "--json")
    assert not _under(loaded, *HEAVY)
    assert _under(loaded, "roofline.cli") == ["roofline.cli", "roofline.cli._base",
                                              "roofline.cli._exit", "roofline.cli.expect",
                                              "roofline.cli.ops"]


# loaded on first use: what only some models run (MLA, MoE, EP copies, linear attention's
# state, training's backward and optimizer), the op registry and declarations, html escaping
NOT_IN_A_DENSE_STEP = (
    "roofline.ops.mla", "roofline.ops.moe", "roofline.ops.attention_backward",
    "roofline.ops.optimizer", "roofline.ops.collectives.crossover",
    "roofline.ops.collectives.expert_parallel", "roofline.ops.registry", "roofline.ops.params",
    "roofline.ops.decls", "roofline.ops.attention_decls", "roofline.ops.collective_decls",
    "html")


def test_a_dense_model_step_imports_what_it_runs_alone():
    loaded = _loaded("model", "llama-3-70b", "--hw", "h100", "--phase", "decode", "--batch",
                     "16", "--context", "4096", "--tp", "4")
    assert not _under(loaded, "roofline.plot", "roofline.plot_cli", "roofline.trace",
                      "roofline.measure", "roofline.serve", "roofline.levers", "roofline.sweep",
                      "roofline.expect", "matplotlib", "torch", "jax", "pandas")
    assert not _under(loaded, *NOT_IN_A_DENSE_STEP)
    assert {"roofline.models.layers", "roofline.ops.collectives.build"} <= loaded


def test_the_command_table_is_what_the_modules_register():
    sub = _Parser(prog="roofline").add_subparsers(dest="command", parser_class=_Parser)
    for module in dict.fromkeys(module for module, _ in COMMANDS.values()):
        import_module(module).register(sub)
    registered = [(a.dest, a.help) for a in sub._choices_actions]
    assert registered == [(name, help_text) for name, (_, help_text) in COMMANDS.items()]
    assert list(sub.choices) == list(COMMANDS)  # no aliases the table would not list


def _help(argv: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 0
    return out.getvalue()


def _node(parser: argparse.ArgumentParser, path: list[str]) -> argparse.ArgumentParser:
    for name in path:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return parser


@pytest.mark.parametrize("path", [[], ["op"], ["sweep"], ["sweep", "op"], ["op", "matmul"],
                                  ["op", "all-reduce"], ["sweep", "op", "attention"],
                                  ["hw", "list"], ["quant-table"], ["plot", "model"],
                                  ["report"]])
def test_lazy_help_is_the_eager_help(path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")  # argparse wraps to the terminal width
    assert _help([*path, "--help"]) == _node(build_parser(), path).format_help()


def test_op_help_lists_every_op_with_its_help(monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")  # one line per op
    text = _help(["op", "--help"])
    for decl in OPS.values():
        assert decl.name in text and decl.help in text


def test_errors_name_the_lazy_commands(capsys):
    with pytest.raises(SystemExit) as info:
        main(["plott"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.count("\n") == 1
    assert "invalid choice: 'plott'" in err and "'plot'" in err and "'trace'" in err
    with pytest.raises(SystemExit) as info:
        main(["op", "matmul", "--m", "1", "--k", "1"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "roofline op matmul" in err and "--n" in err


def test_a_chip_alias_loads_its_file_alone():
    code = ("import roofline.hardware.catalog as c\n"
            "assert c.load_chip('H100').id == 'h100-sxm'\n"
            "assert c._catalog.cache_info().currsize == 0, 'the whole catalog was parsed'\n"
            "assert c._load_by_id.cache_info().currsize == 1\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_every_alias_finds_the_chip_the_whole_catalog_names():
    from roofline.hardware import catalog

    table = catalog._aliases()
    assert table
    for alias, chip_id in table.items():
        assert catalog._by_alias(alias).id == chip_id
    assert catalog._by_alias("h100-sxm-typo") is None  # the full catalog names the error


def test_only_the_processs_own_command_line_freezes_the_collector():
    """main() on sys.argv (the `roofline` command) moves what is loaded to the collector's
    permanent generation (gc.freeze); a caller passing argv keeps its collector as it was."""
    code = ("import gc, sys\n"
            "from roofline.cli import main\n"
            "main(['hw', 'list'])\n"
            "given = gc.get_freeze_count()\n"
            "sys.argv = ['roofline', 'hw', 'list']\n"
            "main()\n"
            "sys.stderr.write(f'FROZEN {given} {gc.get_freeze_count()}')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    given, own = map(int, proc.stderr.split("FROZEN ")[1].split())
    assert given == 0 and own > 10_000
