"""Every way a run can stop ends in one line and the right status (issue 35, items 8, 9 and
11): stdout on a full disk, a terminating signal mid-sweep (no temporary file left), the
validation check saying which rows beat their bound."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIG_SWEEP = ("sweep", "model", "llama-3-8b", "--batch", "1:1000000:+1", "--context",
             "1:1000:+1")  # 1e9 points: minutes of work, stopped long before it ends


def _roofline(*argv, **kwargs):
    return subprocess.Popen([sys.executable, "-m", "roofline", *argv], cwd=ROOT,
                            stderr=subprocess.PIPE, text=True, **kwargs)


# --- 8. stdout that cannot be written ------------------------------------------------------


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize("argv", [("hw", "list"), ("model", "llama-3-8b", "--json"),
                                  ("sweep", "model", "llama-3-8b", "--csv", "-")])
def test_stdout_on_a_full_disk_is_one_line_and_exit_2(argv):
    with open("/dev/full", "w") as full:
        p = _roofline(*argv, stdout=full)
        _, err = p.communicate(timeout=120)
    assert p.returncode == 2, err
    assert err == "roofline: error: cannot write standard output: No space left on device\n"


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize("argv", [("--help",), ("--version",), ("model", "--help")])
def test_help_on_a_full_disk_is_one_line_and_exit_2(argv):
    # argparse's own print drops the OSError: help to a full disk used to exit 0
    with open("/dev/full", "w") as full:
        p = _roofline(*argv, stdout=full)
        _, err = p.communicate(timeout=120)
    assert p.returncode == 2, err
    assert err == "roofline: error: cannot write standard output: No space left on device\n"


def test_a_closed_pipe_is_still_quiet():
    p = _roofline("hw", "list", stdout=subprocess.PIPE)
    p.stdout.readline()
    p.stdout.close()  # the reader went away (`| head -1`)
    err = p.stderr.read()
    assert p.wait(timeout=120) == 0 and err == ""


# --- 9. signals during a streamed sweep ---------------------------------------------------


def _wait_for_temporary(folder, p, timeout=120):
    """Poll until the streamed CSV's temporary file exists (the sweep is writing)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if any(n.endswith(".tmp") for n in os.listdir(folder)):
            return
        assert p.poll() is None, p.stderr.read()
        time.sleep(0.05)
    pytest.fail("the sweep never started writing")


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143),
                                                (getattr(signal, "SIGHUP", None), 129)])
def test_a_signal_mid_sweep_leaves_no_temporary_file(tmp_path, signum, status):
    if signum is None:
        pytest.skip("no SIGHUP here")
    out = tmp_path / "out.csv"
    out.write_text("old\n")
    # SIGINT as a terminal sends it (a shell's background job would start with it ignored)
    p = _roofline(*BIG_SWEEP, "--csv", str(out), stdout=subprocess.DEVNULL,
                  preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        _wait_for_temporary(tmp_path, p)
        p.send_signal(signum)
        _, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == status, err
    assert err == f"roofline: stopped by {signal.Signals(signum).name}\n"
    assert sorted(os.listdir(tmp_path)) == ["out.csv"]
    assert out.read_text() == "old\n"  # the old file as it was


def test_main_gives_back_the_signal_handlers(run_cli):
    before = signal.getsignal(signal.SIGTERM)
    assert run_cli("hw", "list")[0] == 0
    assert signal.getsignal(signal.SIGTERM) is before


# --- 11. the validation check says why it fails --------------------------------------------


def test_the_validation_check_names_the_rows_that_beat_their_bound(monkeypatch, capsys):
    import cases
    import check

    rows = [cases.Scored("fine-row", "gemm", "h100-sxm", 0.8, 1.0),
            cases.Scored("bad-row", "moe_dispatch", "h200-sxm", 1.11, 1.0),
            cases.Scored("nan-row", "gemm", "h100-sxm", float("nan"), 1.0)]
    monkeypatch.setattr(cases, "scored", lambda: (rows, {}))
    assert check.main([]) == 1
    last = capsys.readouterr().out.rstrip("\n").splitlines()[-3:]
    assert "2 row(s) beat their bound" in last[0] and "1.03" in last[0]
    assert last[1] == "  bad-row (moe_dispatch, h200-sxm): measured/bound 1.110 > 1.03"
    assert last[2].startswith("  nan-row (gemm, h100-sxm): measured/bound nan")
    monkeypatch.setattr(cases, "scored", lambda: (rows[:1], {}))
    assert check.main([]) == 0
    assert "FAILED" not in capsys.readouterr().out


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="no signal masks here")
def test_a_signal_landing_as_the_held_ones_are_let_go_leaves_no_temporary_file(tmp_path,
                                                                              monkeypatch):
    """The race a loaded machine showed: a signal arriving while the temporary file is made
    lands as the held signals are let go; its name must already be stored by then, for the
    atomic write and for the streamed CSV."""
    import tempfile

    from roofline.csv_stream import CsvStream
    from roofline.files import write_text

    class Stopped(Exception):
        pass

    def stop(signum, frame):
        raise Stopped

    made = tempfile.mkstemp

    def made_then_signalled(*args, **kwargs):
        fd_name = made(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGTERM)  # held here: delivered as the block ends
        return fd_name

    old = signal.signal(signal.SIGTERM, stop)
    monkeypatch.setattr(tempfile, "mkstemp", made_then_signalled)
    try:
        with pytest.raises(Stopped):
            write_text(tmp_path / "out.txt", "new\n")
        with pytest.raises(Stopped), CsvStream(tmp_path / "out.csv") as out:
            out.write({"a": [1]})
    finally:
        signal.signal(signal.SIGTERM, old)
    assert os.listdir(tmp_path) == []
