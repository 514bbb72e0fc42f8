"""Hostile data files: every file we read (chip TOML, model config.json, calibration TOML,
`--from` JSON) fed nesting bombs, huge numbers, bad unicode, control characters, devices,
FIFOs, directories, binary and empty files. Each must end in one printable error line and
exit code 2 (no traceback, no hang, no endless read), and good unicode must still load."""

from __future__ import annotations

import json
import os
import re

import pytest

from roofline.errors import UNPRINTABLE
from roofline.hardware.catalog import CATALOG_DIR
from roofline.models.catalog import CATALOG_DIR as MODELS_DIR

CHIP = (CATALOG_DIR / "h100-sxm.toml").read_text()
CONFIG = (MODELS_DIR / "llama-3-8b.json").read_text()
CALIBRATION = ('schema_version = 1\n[calibrated_on]\ndevice = "test rig"\ndate = "2026-11-29"\n'
               'what = "by hand"\nhardware = "h100-sxm"\n[efficiency]\nhbm = 0.9\n')


def _op_json():
    from roofline import evaluate, matmul

    return json.dumps(evaluate(matmul(128, 8192, 8192), "h100").to_dict())


# kind -> (file name, a valid file, the command that reads it)
KINDS = {
    "chip": ("chip.toml", CHIP, lambda p: ["hw", "show", p]),
    "config": ("config.json", CONFIG, lambda p: ["model", p]),
    "calibration": ("calib.toml", CALIBRATION,
                    lambda p: ["op", "matmul", "--m", "8", "--k", "8", "--n", "8",
                               "--calibrated", p]),
    "from": ("results.json", None, lambda p: ["report", "--from", p]),
}


def _toml_or_json(kind, toml, js):
    return toml if KINDS[kind][0].endswith(".toml") else js


def _valid(kind):
    return KINDS[kind][1] if KINDS[kind][1] is not None else _op_json()


def _with_text(kind, text):
    """The valid file with a text field the reader shows set to `text`: the chip's name, the
    calibration's device, the config's _source, the op's name."""
    valid = _valid(kind)
    if kind in ("config", "from"):
        data = json.loads(valid)
        data["_source" if kind == "config" else "name"] = text
        return json.dumps(data)  # control characters and surrogates as \\u escapes
    old = {"chip": 'name = "NVIDIA H100 SXM5 80GB"', "calibration": 'device = "test rig"'}[kind]
    assert old in valid
    key = old.split(" = ")[0]  # a TOML basic string takes JSON's escapes (\\u001b, \\n)
    return valid.replace(old, f"{key} = {json.dumps(text, ensure_ascii=False)}", 1)


def _with_number(kind, number):
    """The valid file with one figure replaced by `number` (as written in the file)."""
    old = {"chip": "flops_per_s = 989.4e12", "calibration": "hbm = 0.9",
           "config": '"hidden_size": 4096', "from": '"t_lower_s": '}[kind]
    valid = _valid(kind)
    assert old in valid, (kind, old)
    if kind == "from":  # keep the key, replace its value
        return re.sub(r'"t_lower_s": [^,]*', f'"t_lower_s": {number}', valid, count=1)
    return valid.replace(old, old.rsplit(" ", 1)[0] + " " + number, 1)


CONTENTS = {
    "nesting bomb": lambda k: _toml_or_json(k, "x = " + "[" * 100_000 + "]" * 100_000,
                                            "[" * 100_000 + "]" * 100_000),
    "nested 100 deep": lambda k: _toml_or_json(k, "x = " + "[" * 100 + "]" * 100,
                                               '{"x": ' + "[" * 100 + "]" * 100 + "}"),
    "5000-digit integer": lambda k: _with_number(k, "9" * 5000),
    "infinity": lambda k: _with_number(k, _toml_or_json(k, "inf", "1e999")),
    "nan": lambda k: _with_number(k, _toml_or_json(k, "nan", "NaN")),
    "negative infinity": lambda k: _with_number(k, _toml_or_json(k, "-inf", "-1e999")),
    "escape sequence in a name": lambda k: _with_text(k, "\x1b[2J\x1b]0;pwned\x07"),
    "bidi override in a name": lambda k: _with_text(k, "\u202egpu"),
    "NUL in a name": lambda k: _with_text(k, "a\x00b"),
    "line break in a name": lambda k: _with_text(k, "two\nlines"),
    "lone surrogate": lambda k: _toml_or_json(k, _valid(k).encode() + b'\nx = "\xed\xa0\x80"\n',
                                              _with_text(k, "\ud800")),
    "invalid UTF-8": lambda k: b"\xff\xfe" + _valid(k).encode("utf-16-le"),
    "binary": lambda k: b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4,
    "raw NUL bytes": lambda k: _valid(k).encode()[:1] + b"\0" + _valid(k).encode()[1:],
    "empty": lambda k: "",
    "only whitespace": lambda k: "\n \t\n",
    "wrong top-level type": lambda k: _toml_or_json(k, "x = 1", '"just a string"'),
}


def _check_one_line_error(run_cli, argv, name):
    code, out, err = run_cli(*argv)
    assert code == 2, (argv, out[:200], err[-500:])
    assert err.startswith("roofline: error: ") and err.count("\n") == 1, err
    assert not UNPRINTABLE.search(err), err  # nothing raw reaches the terminal
    assert name in err  # names the file
    return err


# A line break is refused in the names we validate (a chip's name, a config's _source); a
# calibration's device is prose, and an op's name from --from is escaped where it is shown.
CASES = [(k, c) for k in KINDS for c in CONTENTS
         if c != "line break in a name" or k in ("chip", "config")]


@pytest.mark.parametrize(("kind", "content"), CASES)
def test_hostile_contents(run_cli, tmp_path, kind, content):
    name, _, command = KINDS[kind]
    data = CONTENTS[content](kind)
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass"))
    _check_one_line_error(run_cli, command(str(path)), name)


def _symlink(target):
    def make(path):
        path.symlink_to(target)
    return make


def _fifo(path):
    os.mkfifo(path)  # reading it would block forever


def _directory(path):
    path.mkdir()
    (path / "config.json").mkdir()  # a model directory whose config.json is a directory


def _sparse_huge(path):
    with path.open("wb") as f:
        f.truncate(65 * 2**20)  # 65 MiB of zeros, no disk used


def _link_loop(path):
    path.symlink_to(path)


SPECIAL = {"symlink to /dev/zero": _symlink("/dev/zero"),
           "symlink to /dev/null": _symlink("/dev/null"),
           "FIFO": _fifo, "directory": _directory, "65 MiB file": _sparse_huge,
           "symlink loop": _link_loop, "dangling symlink": _symlink("/nonexistent/x")}


@pytest.mark.parametrize("special", SPECIAL)
@pytest.mark.parametrize("kind", KINDS)
def test_special_files(run_cli, tmp_path, kind, special):
    name, _, command = KINDS[kind]
    path = tmp_path / name
    SPECIAL[special](path)
    _check_one_line_error(run_cli, command(str(path)), name)


@pytest.mark.parametrize("kind", KINDS)
def test_good_unicode_still_loads(run_cli, tmp_path, kind):
    # refusing control characters must not refuse text: accents, CJK, emoji, a tab in prose
    name, _, command = KINDS[kind]
    path = tmp_path / name
    path.write_text(_with_text(kind, "Ünïcødé 加速器 🚀"), encoding="utf-8")
    code, out, err = run_cli(*command(str(path)))
    assert code == 0, err
    assert kind in ("config", "calibration") or "Ünïcødé 加速器 🚀" in out


def test_file_names_with_control_characters_are_shown_escaped(run_cli, tmp_path):
    path = tmp_path / "evil\x1b[2J.toml"
    path.write_text("not = [valid")
    err = _check_one_line_error(run_cli, ["hw", "show", str(path)], "evil\\x1b[2J.toml")
    assert "not valid TOML" in err


@pytest.mark.parametrize("argv", [
    ["plot", "roofline", "--op", "matmul --m 128 --k 8192 --n 8192", "--title", "$\\foo$"],
    ["plot", "breakdown", "--op", "matmul --m 128 --k 8192 --n 8192", "--hw", "{chip}"],
    ["plot", "roofline", "--op", "matmul --m 128 --k 8192 --n 8192", "--hw", "{chip}"],
    ["plot", "sweep", "--hw", "{chip}"],
    ["plot", "model", "{config}", "--hw", "{chip}"],
])
def test_dollar_signs_are_text_not_mathtext(run_cli, tmp_path, argv):
    # matplotlib reads $...$ as math: '$\\foo$' raised a ParseFatalException (a traceback)
    pytest.importorskip("matplotlib")
    chip = tmp_path / "chip.toml"
    chip.write_text(CHIP.replace('name = "NVIDIA H100 SXM5 80GB"', 'name = "$\\\\foo$ GPU"', 1))
    config = tmp_path / "$\\foo$.json"
    config.write_text(CONFIG)
    out = tmp_path / "chart.svg"
    argv = [a.format(chip=chip, config=config) for a in argv]
    code, _, err = run_cli(*argv, "-o", str(out))
    assert code == 0, err
    assert out.read_text().rstrip().endswith("</svg>")


def test_plot_functions_take_plain_text():
    # titles and labels are text: escaped once where they reach matplotlib, never twice
    pytest.importorskip("matplotlib")
    from roofline.plot import plot_breakdown, plot_roofline, plot_sweep

    ax = plot_roofline("h100", title="$\\foo$ and 5$")
    assert ax.get_title() == "\\$\\foo\\$ and 5\\$"
    ax = plot_breakdown([("$a$", 1e-3, "hbm")], title="cost $")
    assert ax.get_title() == "cost \\$" and ax.get_yticklabels()[0].get_text() == "\\$a\\$"
    ax = plot_sweep([1, 2], {"$s$": [1.0, 2.0]}, "x", "y", title="t")
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["\\$s\\$"]
    ax.figure.canvas.draw()  # renders without a mathtext error
