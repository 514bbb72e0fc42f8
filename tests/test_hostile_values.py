"""Odd values are refused in one line naming the option and its range (issue 35, items 7 and
10): every physical input has a floor and a ceiling, counts are integers written in ASCII
digits, money has no size suffix, names carry no control characters, and an offline Hub id
fails at once."""

import json
import re
import sys
import time
import types

import pytest

from roofline import RooflineError
from roofline.measure.calibration import parse_calibration
from roofline.units import parse_bytes, parse_duration

MODEL = ("model", "llama-3-8b")
SERVE = ("serve", "llama-3-8b", "--tp", "1")
OP = ("report", "--op", "matmul --m 8 --n 8 --k 8")


def _refused(run_cli, argv, option, needle=""):
    code, _, err = run_cli(*argv)
    assert code == 2, (argv, err)
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert option in err and needle in err, err
    return err


# --- 7. floors and ceilings ------------------------------------------------------------------


@pytest.mark.parametrize("value", ["5e-324", "1e-300", "0.5", "0", "1e6", "inf", "nan",
                                   "1.2k", "-1"])
def test_clock_mhz_has_a_range(run_cli, value):
    _refused(run_cli, (*MODEL, "--clock-mhz", value), "--clock-mhz")


def test_the_range_is_in_the_error_and_the_help(run_cli):
    err = _refused(run_cli, (*MODEL, "--clock-mhz", "5e-324"), "--clock-mhz")
    assert "1 to 10000 MHz" in err
    for argv, flag, text in [(("model",), "--clock-mhz", "1 to 10000 MHz"),
                             (("model",), "--mem-util", "0.001 to 1"),
                             (("serve",), "--rate", "1e-06 to 1e+09 requests/s"),
                             (("serve",), "--spec-k", "1 to 64 draft tokens"),
                             (("serve",), "--price", "1e-06 to 1e+06 USD per chip-hour")]:
        code, out, _ = run_cli(*argv, "--help")
        assert code == 0
        entry = re.search(rf"\n  {flag}[ ,].*?(?=\n  -|\Z)", out, re.S)
        text_of = re.sub(r"\s+", " ", entry.group())
        assert text in text_of, (flag, text_of)


@pytest.mark.parametrize(("argv", "option"), [
    ((*SERVE, "--rate", "5e-324"), "--rate"), ((*SERVE, "--rate", "1e300"), "--rate"),
    ((*SERVE, "--mem-util", "1e-300"), "--mem-util"), ((*MODEL, "--mem-util", "1.5"),
                                                       "--mem-util"),
    ((*SERVE, "--prefix-hit", "nan"), "--prefix-hit"), ((*SERVE, "--accept", "inf"),
                                                        "--accept"),
    ((*SERVE, "--ttft", "1e-20s"), "--ttft"), ((*SERVE, "--tpot", "1e309ms"), "--tpot"),
    ((*SERVE, "--tpot", "1e12s"), "--tpot"),
    (("mfu", "llama-3-8b", "--tokens", "1M", "--step-time-s", "1e309"), "--step-time-s"),
])
def test_physical_inputs_have_floors_and_ceilings(run_cli, argv, option):
    _refused(run_cli, argv, option)


def test_inf_durations_and_fractional_bytes_are_refused_by_the_parsers():
    with pytest.raises(RooflineError, match="1 ps to 1e9 s"):
        parse_duration("1e309ms", "--tpot")
    with pytest.raises(RooflineError, match="whole number of bytes"):
        parse_bytes("1.5", "--reserve")
    assert parse_bytes("1.5KiB") == 1536


# --- 10. the odd values --------------------------------------------------------------------


@pytest.mark.parametrize("value", ["\u0661", "\u0663\u0662", "1_000", "\uff12", "2.5", "0",
                                   "65", "nan"])
def test_spec_k_takes_ascii_digits_only(run_cli, value):
    # refused as it is read (int() took '\u0661' as 1 and '1_000' as 1000)
    _refused(run_cli, (*SERVE, "--spec-k", value), "argument --spec-k")


@pytest.mark.parametrize(("option", "value"), [
    ("--mem-util", "0\u0665"), ("--prefix-hit", "0_5"), ("--accept", "\u0660.5"),
    ("--input-len", "1_024"), ("--rate", "\u0662")])
def test_every_number_takes_ascii_digits_only(run_cli, option, value):
    argv = (*SERVE, option, value) + (("--spec-k", "2") if option == "--accept" else ())
    _refused(run_cli, argv, f"argument {option}")  # as it is read, not later


@pytest.mark.parametrize("value", ["1.5", "2048.5", "1e-3"])
def test_token_counts_are_integers(run_cli, value):
    _refused(run_cli, (*SERVE, "--input-len", value), "--input-len")
    _refused(run_cli, (*SERVE, "--output-len", value), "--output-len")


@pytest.mark.parametrize("value", ["1.5", "0.5", "100.25"])
def test_fractional_bytes_are_refused(run_cli, value):
    _refused(run_cli, (*MODEL, "--reserve", value), "--reserve", "whole number of bytes")


@pytest.mark.parametrize(("price", "needle"), [("h100=2,h100=3", "priced twice"),
                                               ("h100=2,h100-sxm=3", "priced twice"),
                                               ("h100=8k", "plain number"),
                                               ("h100=2M", "plain number"),
                                               ("h100=1e300", "USD per chip-hour"),
                                               ("h100=5e-324", "USD per chip-hour")])
def test_prices_are_plain_and_given_once(run_cli, price, needle):
    _refused(run_cli, (*SERVE, "--price", price), "--price", needle)


def test_mode_both_is_what_help_offers(run_cli):
    code, out, err = run_cli(*SERVE, "--mode", "both", "--json")
    assert code == 0, err
    modes = set(json.loads(out)["best"]["h100-sxm"]["mode"] for _ in [0]) | {
        m for m in json.loads(run_cli(*SERVE, "--mode", "both", "--json", "--all")[1])
        ["all_points"]["mode"]}
    assert modes == {"aggregated", "disaggregated"}


@pytest.mark.parametrize("argv", [(*OP, "--title", "a\x1b[31mb"), (*OP, "--title", "a\nb"),
                                  (*OP, "--measured", "x\x07y,10,1e12"),
                                  (*OP, "--measured", "x\u202ey,10,1e12")])
def test_control_characters_in_names_are_refused(run_cli, argv):
    _refused(run_cli, argv, "--title" if "--title" in argv else "--measured",
             "only printable text")


def test_a_tiny_calibration_efficiency_is_refused():
    data = {"schema_version": 1, "efficiency": {"hbm": 5e-324},
            "calibrated_on": {"device": "x", "date": "2026-01-31", "what": "y"}}
    with pytest.raises(RooflineError, match=r"\[1e-06, 1\]"):
        parse_calibration(data, "cal.toml")


def test_a_tiny_chip_efficiency_is_refused(tmp_path, run_cli):
    from roofline.hardware.catalog import CATALOG_DIR

    text = (CATALOG_DIR / "h100-sxm.toml").read_text()
    text += "\n[efficiency.hbm]\nvalue = 5e-324\nsource = \"x\"\n" \
        if "[efficiency.hbm]" not in text else ""
    text = re.sub(r"(\[efficiency\.hbm\]\s*\nvalue = )[^\n]+", r"\g<1>5e-324", text)
    (tmp_path / "c.toml").write_text(text)
    _refused(run_cli, (*MODEL, "--hw", str(tmp_path / "c.toml")), "efficiency.hbm",
             "[1e-06, 1]")


def test_a_huge_head_dim_names_head_dim(run_cli):
    err = _refused(run_cli, ("op", "attention", "--q-len", "1", "--kv-len", "100", "--heads",
                             "8", "--head-dim", "1e12"), "head_dim")
    assert "sram_bytes" not in err.split("head_dim")[0]


def test_an_offline_hub_id_fails_at_once(run_cli, monkeypatch):
    """No retries, no lines before the one error (a fake library: its retries print)."""
    def download(repo, name, local_files_only=False, **kwargs):
        if local_files_only:
            raise FileNotFoundError(name)
        print("Retrying in 1s [Retry 1/5].", file=sys.stderr)
        time.sleep(5)
        raise OSError("offline")

    monkeypatch.setitem(sys.modules, "huggingface_hub",
                        types.SimpleNamespace(hf_hub_download=download))
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # the discard port: refused
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    start = time.monotonic()
    err = _refused(run_cli, ("model", "some-owner/some-model"), "some-owner/some-model",
                   "unreachable")
    assert time.monotonic() - start < 1.4 and "Retry" not in err
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _refused(run_cli, ("model", "some-owner/some-model"), "Hub", "HF_HUB_OFFLINE")


@pytest.mark.parametrize(("argv", "needle"), [
    (["op", "elementwise", "--n", "1000", "--ops-per-element", "1e-300"],
     "--ops-per-element: must be 0.001 to 1e+06"),
    (["op", "allreduce", "--bytes", "1MiB", "--ranks", "8", "--link-share", "2"],
     "--link-share: must be 0.001 to 1"),
    (["sweep", "op", "elementwise", "--n", "1000", "--ops-per-element", "1e-300,1"],
     "--ops-per-element: every value must be 0.001 to 1e+06"),
])
def test_op_declared_floats_have_a_documented_range(run_cli, argv, needle):
    """An op's float parameters (not only the command line's own options) have a floor and a
    ceiling, shown in --help and named in the one-line error."""
    code, _, err = run_cli(*argv, "--hw", "h100")
    assert code == 2 and err.count("\n") == 1 and needle in err, err
    _, out, _ = run_cli("op", "elementwise", "--help")
    assert "(0.001 to 1e+06)" in " ".join(out.split())
