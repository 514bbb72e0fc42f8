"""Records validate when built: a bad field raises at construction, naming the field and its
allowed range; library errors name parameters, and the CLI names its flags instead."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from roofline.cli import main
from roofline.cli.flags import cli_message, flag
from roofline.errors import ParameterError, RooflineError
from roofline.models import Parallel, decode, prefill, train
from roofline.models.schedule import Schedule, check_schedule
from roofline.models.step import MemoryBudget, Phase

SRC = Path(__file__).parents[1] / "src" / "roofline"


@pytest.mark.parametrize(("build", "field", "allowed"), [
    (lambda: Parallel(tp=0), "tp", "whole number >= 1"),
    (lambda: Parallel(pp=-1), "pp", "whole number >= 1"),
    (lambda: Parallel(dp=2.5), "dp", "whole number >= 1"),
    (lambda: Parallel(ep=True), "ep", "whole number >= 1"),
    (lambda: Parallel(microbatches=0), "microbatches", "whole number >= 1"),
    (lambda: Parallel(zero=4), "zero", "0, 1, 2 or 3"),
    (lambda: Parallel(fsdp=True, zero=2), "zero", "0 or 3 with fsdp"),
    (lambda: MemoryBudget(util=2), "util", r"\(0, 1\]"),
    (lambda: MemoryBudget(util=0), "util", r"\(0, 1\]"),
    (lambda: MemoryBudget(reserve_bytes=-1), "reserve_bytes", ">= 0"),
    (lambda: MemoryBudget(reserve_bytes=float("inf")), "reserve_bytes", "finite"),
    (lambda: Phase("serve", 1, 1, 1), "kind", "prefill, decode, train"),
    (lambda: decode(0, 1024), "batch", "at least 1"),
    (lambda: prefill(4, 0), "q_len", "at least 1"),
    (lambda: train([8, 0], 2048), "batch", "at least 1"),
])
def test_a_bad_record_fails_when_built_naming_field_and_range(build, field, allowed):
    with pytest.raises(ParameterError, match=rf"^{field} must .*{allowed}") as info:
        build()
    assert info.value.parameter == field
    assert isinstance(info.value, (RooflineError, ValueError))


def test_good_records_still_build():
    assert Parallel(tp=8, pp=4, dp=2, ep=16, microbatches=8, zero=1).chips == 64
    assert Parallel(fsdp=True, zero=3).zero_stage == 3
    assert MemoryBudget(0.9, 2e9).util == 0.9
    assert decode([1, 64], 8192).kind == "decode"


def test_a_schedule_names_its_fields():
    with pytest.raises(ParameterError, match=r"^vpp must be at least 1"):
        check_schedule(Schedule("interleaved", 0), Parallel(pp=2))
    with pytest.raises(ParameterError, match=r"^pipeline 1f1b: virtual stages"):
        check_schedule(Schedule("1f1b", 2), Parallel(pp=2))


def test_the_cli_names_its_flag_where_the_library_names_the_parameter():
    exc = ParameterError("util", "must be in (0, 1], got 2")
    assert str(exc) == "util must be in (0, 1], got 2"
    assert cli_message(exc) == "--mem-util must be in (0, 1], got 2"
    assert cli_message(ParameterError("batch", ": no value")) == "--batch: no value"
    assert flag("seq_len") == "--seq-len" and flag("pipeline") == "--pp-schedule"
    assert cli_message(RooflineError("plain")) == "plain"


@pytest.mark.parametrize(("argv", "needle"), [
    (["--mem-util", "0.5", "--reserve", "1TB"], "--reserve of 1e+12 B leaves nothing"),
    (["--phase", "train", "--pp", "2", "--pp-schedule", "1f1b", "--vpp", "2"],
     "--pp-schedule 1f1b: virtual stages (vpp 2) need interleaved"),
])
def test_the_cli_error_is_one_line_naming_the_flag(capsys, argv, needle):
    assert main(["model", "llama-3-8b", "--hw", "h100", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("roofline: error: ") and err.count("\n") == 1, err
    assert needle in err, err


# Modules that are a command line themselves (their errors are about their own flags)
CLI_MODULES = ("cli/", "measure/cli.py", "plot_cli.py", "trace/cli.py")


def test_library_errors_name_parameters_not_flags():
    flagged = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith(CLI_MODULES):
            continue
        text = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Raise) and re.search(r"--[a-z]",
                                                         ast.get_source_segment(text, node)):
                flagged.append(f"{rel}:{node.lineno}")
    assert not flagged, flagged


def test_serve_errors_name_parameters_and_the_cli_names_its_flags(capsys):
    from roofline.serve import Load, Space, Workload, plan

    with pytest.raises(ParameterError, match=r"^spec_k needs accept \(the per-draft"):
        Workload.from_lengths(100, 100, spec_k=2)
    with pytest.raises(ParameterError, match=r"^give rate \(open loop\) or concurrency "):
        plan("llama-3.1-8b", ["h100"], Workload.from_lengths(100, 100),
             load=Load(rate=1.0, concurrency=4))
    with pytest.raises(ParameterError) as pinned:
        plan("llama-3.1-8b", ["h100"], Workload.from_lengths(100, 100),
             space=Space(tp=(1,), batch=(64,)), load=Load(rate=1.0))
    assert str(pinned.value).startswith("batch pins the running batch, rate sets it")
    assert cli_message(pinned.value).startswith("--batch pins the running batch, --rate sets "
                                                "it (Little's law: rate x decode time): give "
                                                "one, or a --batch grid to pick from")
    assert main(["serve", "llama-3.1-8b", "--hw", "h100", "--tp", "1", "--batch", "64",
                 "--rate", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("roofline: error: --batch pins the running batch, --rate sets it")
    assert err.count("\n") == 1
