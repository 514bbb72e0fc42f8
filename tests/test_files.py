"""Output files: atomic writes, every destination checked before any write, '-' is stdout."""

import errno
import os
import stat

import pytest

from roofline import files
from roofline.errors import RooflineError
from roofline.files import check_destinations, write_csv, write_text
from roofline.hardware.catalog import CATALOG_DIR as CATALOG


@pytest.fixture
def full_disk(monkeypatch):
    """os.write on a file writes a few bytes, then fails as a full disk does."""
    real = os.write

    def write(fd, data):
        if fd <= 2:  # the terminal / pytest's capture
            return real(fd, data)
        real(fd, bytes(data[:10]))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(files.os, "write", write)


def test_full_disk_leaves_the_old_file_intact_and_no_temp_file(tmp_path, full_disk):
    target = tmp_path / "report.html"
    target.write_text("the old report")
    with pytest.raises(RooflineError, match=r"cannot write .*report.html: No space left"):
        write_text(target, "<html>" + "x" * 100_000)
    assert target.read_text() == "the old report"
    assert list(tmp_path.iterdir()) == [target]
    with pytest.raises(RooflineError, match="No space left"):
        write_csv(tmp_path / "new.csv", {"a": [1, 2]})
    assert list(tmp_path.iterdir()) == [target]  # no half-written new file either


def test_full_disk_in_the_cli_keeps_the_old_csv(tmp_path, run_cli, full_disk):
    keep = tmp_path / "sweep.csv"
    keep.write_text("old,rows\n")
    code, _, err = run_cli("sweep", "model", "llama-3-8b", "--batch", "1,8", "--csv", str(keep))
    assert code == 2 and err.count("\n") == 1 and "No space left" in err
    assert keep.read_text() == "old,rows\n" and list(tmp_path.iterdir()) == [keep]


def test_every_destination_is_checked_before_any_is_written(tmp_path, run_cli):
    keep = tmp_path / "keep.csv"
    keep.write_text("precious")
    before = keep.stat().st_mtime_ns
    code, out, err = run_cli("model", "llama-3-8b", "--csv", str(keep), "--html",
                             "/nonexistent/x.html")
    assert code == 2 and "cannot write /nonexistent/x.html: no directory" in err
    assert err.count("\n") == 1 and out == ""
    assert keep.read_text() == "precious" and keep.stat().st_mtime_ns == before


def test_write_replaces_the_file_keeping_mode_and_symlinks(tmp_path):
    real = tmp_path / "real.csv"
    real.write_text("old")
    real.chmod(0o640)
    link = tmp_path / "link.csv"
    link.symlink_to(real)
    write_text(link, "new")
    assert link.is_symlink() and real.read_text() == "new"
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    fresh = tmp_path / "fresh.csv"
    write_text(fresh, "x")
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o666 & ~_umask()
    write_text("/dev/null", "discarded")  # a device is written in place, never replaced
    assert os.path.exists("/dev/null") and not os.path.isfile("/dev/null")


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.parametrize(("paths", "needle"), [
    (["-", "-"], "only one output can go to stdout"),
    (["a.csv", "./a.csv"], "named for two outputs"),
    (["{tmp}"], "it is a directory"),
    (["{tmp}/missing/x.csv"], "no directory"),
])
def test_bad_destinations(tmp_path, paths, needle):
    os.chdir(tmp_path)
    with pytest.raises(RooflineError, match=needle):
        check_destinations([p.format(tmp=tmp_path) for p in paths])


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_read_only_destinations(tmp_path):
    ro = tmp_path / "ro.csv"
    ro.write_text("x")
    ro.chmod(0o444)
    with pytest.raises(RooflineError, match="read-only"):
        check_destinations([ro])
    d = tmp_path / "locked"
    d.mkdir()
    d.chmod(0o555)
    with pytest.raises(RooflineError, match="not writable"):
        check_destinations([d / "x.csv"])


@pytest.mark.skipif(not os.path.isdir("/proc/sys/kernel"), reason="needs Linux's /proc/sys")
def test_read_only_destinations_even_to_root():
    """/proc/sys refuses writes from root too (its files' modes hold, and the directory takes
    no new file): the checks are exercised as CI runs, as root."""
    ro = "/proc/sys/kernel/osrelease"
    with pytest.raises(RooflineError, match="read-only"):
        check_destinations([ro])
    with pytest.raises(RooflineError, match="not writable"):
        check_destinations(["/proc/sys/new.csv"])


@pytest.mark.parametrize("option", ["--csv", "--markdown", "--html"])
def test_dash_writes_the_output_to_stdout_and_the_summary_to_stderr(run_cli, tmp_path, option):
    os.chdir(tmp_path)
    code, summary, _ = run_cli("model", "llama-3-8b", option, "file")
    assert code == 0 and "TPOT >=" in summary
    code, out, err = run_cli("model", "llama-3-8b", option, "-")
    assert code == 0 and sorted(p.name for p in tmp_path.iterdir()) == ["file"]
    assert out == (tmp_path / "file").read_text()  # stdout holds the file, nothing else
    # the text summary still shows, out of the pipe's way; only a file says where it went
    assert summary == err + "wrote file\n"


def test_dash_for_report_sweep_and_plot(run_cli, tmp_path):
    os.chdir(tmp_path)
    code, out, err = run_cli("report", "--op", "matmul --m 128 --k 8192 --n 8192",
                             "--markdown", "-")
    assert code == 0 and out.startswith("#") and "wrote -" in err
    code, out, _ = run_cli("sweep", "model", "llama-3-8b", "--batch", "1,8", "--csv", "-")
    lines = out.splitlines()  # a header, then 2 batches x 3 default contexts
    assert code == 0 and len(lines) == 1 + 2 * 3 and "tokens_per_s" in lines[0]
    pytest.importorskip("matplotlib")
    code, out, _ = run_cli("plot", "roofline", "--op", "matmul --m 128 --k 8192 --n 8192",
                           "-o", "-")
    assert code == 0 and "<svg" in out and out.rstrip().endswith("</svg>")
    assert list(tmp_path.iterdir()) == []


def test_calibration_and_chip_files_go_to_stdout(capsys):
    from roofline.measure.calibration import Calibration, write_calibration

    cal = Calibration(compute={}, resources={"hbm": 0.9}, device="rig", date="2025-01-01",
                      what="stream")
    write_calibration(cal, "-")
    assert "[efficiency]\nhbm = 0.9" in capsys.readouterr().out


@pytest.mark.parametrize("how", ["config", "config dir", "chip"])
def test_an_output_never_overwrites_an_input(run_cli, tmp_path, how):
    os.chdir(tmp_path)
    code, cfg, _ = run_cli("model", "export", "llama-3-8b")
    (tmp_path / "m").mkdir()
    for p in (tmp_path / "in.json", tmp_path / "m" / "config.json"):
        p.write_text(cfg)
    chip = tmp_path / "chip.toml"
    chip.write_text((CATALOG / "h100-sxm.toml").read_text())
    args = {"config": ("model", "in.json", "--csv", "in.json"),
            "config dir": ("model", "m", "--markdown", "m/config.json"),
            "chip": ("model", "llama-3-8b", "--hw", "chip.toml", "--html", "chip.toml")}[how]
    before = {p: p.read_bytes() for p in (tmp_path / "in.json", tmp_path / "m" / "config.json",
                                         chip)}
    code, _, err = run_cli(*args)
    assert code == 2 and "the command reads it" in err and err.count("\n") == 1
    assert all(p.read_bytes() == data for p, data in before.items())  # nothing overwritten
