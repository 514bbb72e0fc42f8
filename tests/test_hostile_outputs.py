"""Nothing a command reads or is pointed at is destroyed: devices, FIFOs and /dev/stdout are
written through (never replaced by a renamed file), and no output overwrites an input, the
inputs of repeatable options included."""

import json
import os
import stat
import subprocess
import sys
import threading

import pytest

from roofline.csv_stream import CsvStream
from roofline.files import write_text, written_through

SWEEP = ("sweep", "model", "llama-3-8b", "--hw", "h100", "--batch", "1,2")


def _drain(fifo):
    """A reader on the FIFO (a writer's open blocks until one exists); returns what it read."""
    got = []

    def read():
        with open(fifo, "rb") as f:
            got.append(f.read())

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread, got


@pytest.mark.parametrize("writer", ["stream", "whole"])
def test_a_fifo_is_written_through_and_stays_a_fifo(tmp_path, writer):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    thread, got = _drain(fifo)
    if writer == "stream":
        with CsvStream(fifo) as out:
            out.write({"a": [1, 2]})
    else:
        write_text(fifo, "a\n1\n2\n")
    thread.join(10)
    assert got == [b"a\r\n1\r\n2\r\n" if writer == "stream" else b"a\n1\n2\n"]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]  # no temporary file left


def test_sweep_csv_to_a_fifo_leaves_the_fifo(tmp_path, run_cli):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    thread, got = _drain(fifo)
    code, _, err = run_cli(*SWEEP, "--csv", str(fifo))
    thread.join(10)
    assert code == 0, err
    assert got[0].startswith(b"hardware,") and stat.S_ISFIFO(os.stat(fifo).st_mode)


@pytest.mark.skipif(not hasattr(os, "mknod") or os.geteuid() != 0,
                    reason="creating a device node needs root (CI runs as root)")
def test_sweep_csv_to_a_full_device_fails_in_one_line_and_keeps_the_device(tmp_path, run_cli):
    """`--csv /dev/full` once turned the machine's /dev/full into a regular file: a copy of
    the device (major 1, minor 7) stands in for it here."""
    full = tmp_path / "full"
    os.mknod(full, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
    null = tmp_path / "null"
    os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    code, _, err = run_cli(*SWEEP, "--csv", str(full))
    assert code == 2 and err.count("\n") == 1 and "No space left" in err
    code, _, err = run_cli(*SWEEP, "--csv", str(null))
    assert code == 0, err
    code, _, err = run_cli("model", "llama-3-8b", "--hw", "h100", "--csv", str(null))
    assert code == 0, err
    for node in (full, null):
        assert stat.S_ISCHR(os.stat(node).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full", "null"]


def test_dev_stdout_redirected_to_a_file_keeps_that_file(tmp_path):
    """`--csv /dev/stdout > out.csv`: the CSV goes into the shell's file (same inode), the
    summary to stderr, as with `--csv -`."""
    out = tmp_path / "out.csv"
    out.write_text("")
    inode = out.stat().st_ino
    with out.open("w") as f:
        done = subprocess.run([sys.executable, "-m", "roofline", *SWEEP, "--csv", "/dev/stdout"],
                              stdout=f, stderr=subprocess.PIPE, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert out.stat().st_ino == inode
    text = out.read_text()
    assert text.startswith("hardware,") and "best tokens/s" in done.stderr


def test_written_through_names_devices_fifos_and_dev_paths(tmp_path):
    regular = tmp_path / "a.csv"
    regular.write_text("x")
    assert not written_through(regular) and not written_through(tmp_path / "new.csv")
    assert written_through("/dev/null") and written_through("/dev/stdout")


@pytest.fixture
def op_json(tmp_path, run_cli):
    code, out, _ = run_cli("op", "matmul", "--m", "128", "--k", "4096", "--n", "4096", "--hw",
                           "h100", "--json")
    assert code == 0
    path = tmp_path / "mm.json"
    path.write_text(out)
    return path


@pytest.mark.parametrize("command", [
    ("report", "--html"), ("report", "--markdown"), ("report", "--csv"),
    ("plot", "roofline", "-o"), ("plot", "breakdown", "-o")])
def test_no_output_overwrites_a_from_file(op_json, run_cli, command):
    before = op_json.read_bytes()
    other = op_json.with_name("other.json")
    other.write_bytes(before)
    *cmd, flag = command
    for froms in ([op_json], [other, op_json], [op_json, other]):  # each of a repeated --from
        args = [a for f in froms for a in ("--from", str(f))]
        code, _, err = run_cli(*cmd, *args, flag, str(op_json))
        assert code == 2 and err.count("\n") == 1, err
        assert "the command reads it (--from)" in err
    code, _, err = run_cli(*cmd, f"--from={op_json}", flag, str(op_json))
    assert code == 2 and "(--from)" in err
    assert op_json.read_bytes() == before and json.loads(before)["name"] == "matmul"
