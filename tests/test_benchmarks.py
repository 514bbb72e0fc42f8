"""benchmarks/run.py gates CI: a case that misses its target (or fails) makes it exit 1.

No assertion here depends on how fast this machine is: targets are impossible (0 s after
`--target-scale 0`, a case that sleeps against a 0 s target) or unmissable (an hour).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "run.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("benchmarks_run", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def nap() -> None:
    time.sleep(1e-4)


def case(bench, name, target, baseline=nap):
    return bench.Case(name, target, 2, nap, "naps", baseline)


def test_a_missed_target_or_a_broken_case_counts_as_a_failure(bench, capsys):
    assert bench.run([case(bench, "naps", 3600.0)]) == 0
    assert bench.run([case(bench, "naps", 3600.0), case(bench, "impossible", 0.0)]) == 1

    def broken() -> None:
        raise ValueError("boom")

    assert bench.run([case(bench, "broken", 3600.0, broken)]) == 1
    out, err = capsys.readouterr()
    assert "SLOW" in out and "ERROR ValueError" in out and "1 of 1 cases missed" in err


def test_a_missing_reference_skips_its_case(bench, capsys):
    assert bench.run([case(bench, "no reference", 0.0, None)]) == 0
    assert "skipped 'no reference': naps is not installed" in capsys.readouterr().err


def test_main_exit_status_and_options(bench, capsys):
    assert bench.main(["--only", "CLI start: roofline --help", "--target-scale", "0"]) == 1
    assert "x  <= 0x" in capsys.readouterr().out
    with pytest.raises(SystemExit) as info:
        bench.main(["--only", "no such case"])
    assert info.value.code == 2


def test_the_script_exits_non_zero_on_a_miss():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--only", "CLI start: roofline --help",
                           "--target-scale", "0"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1 and "SLOW" in proc.stdout, proc.stderr
