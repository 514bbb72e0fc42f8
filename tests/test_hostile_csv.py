"""No CSV a command writes can run as a spreadsheet formula (issue 35, item 3): one writer
guards every text cell, numbers stay numbers, and chip ids keep to a safe alphabet."""

import csv
import io
import json
import re

import numpy as np
import pytest

from roofline import RooflineError
from roofline.csv_stream import CsvStream
from roofline.files import csv_text, write_csv
from roofline.hardware import catalog
from roofline.hardware.catalog import CATALOG_DIR, load_chip_file
from roofline.render import csv as render_csv
from roofline.render.table import Column, Table

HOSTILE = ["=cmd|' /C calc'!A0", "+1+2", "-2+3", "@SUM(A1)", "\tx", "\rx",
           '=HYPERLINK("http://x")']


def _cells(text):
    return [row for row in csv.reader(io.StringIO(text))]


def _no_formula(rows):
    for row in rows:
        for cell in row:
            assert cell[:1] not in ("=", "+", "@", "\t", "\r"), cell
            if cell.startswith("-"):
                float(cell)  # a negative number is a number; any other '-' cell a formula


def test_the_writer_guards_text_and_keeps_numbers():
    cols = {"hardware": np.array(HOSTILE), "t": np.array([-1.5] * len(HOSTILE)),
            "n": [-3] * len(HOSTILE)}
    rows = _cells(csv_text(cols))
    # a CR is shown escaped (no longer a leading CR); every other lead gets the apostrophe
    assert [r[0] for r in rows[1:]] == [h.replace("\r", "\\x0d") if h[0] == "\r" else "'" + h
                                        for h in HOSTILE]
    assert {r[1] for r in rows[1:]} == {"-1.5"} and {r[2] for r in rows[1:]} == {"-3"}
    _no_formula(rows)


def test_every_writer_guards(tmp_path):
    cols = {"hardware": np.array(HOSTILE), "x": np.arange(len(HOSTILE), dtype=float)}
    write_csv(tmp_path / "a.csv", cols)
    with CsvStream(tmp_path / "b.csv") as out:
        out.write(cols)
        out.write(cols)
    table = Table([Column("hardware", "hw"), Column("x", "x")],
                  [[h, -float(i)] for i, h in enumerate(HOSTILE)])
    for text in ((tmp_path / "a.csv").read_text(), (tmp_path / "b.csv").read_text(),
                 render_csv.render(table)):
        rows = _cells(text)
        assert len(rows) > len(HOSTILE)
        _no_formula(rows)
    assert _cells(render_csv.render(table))[2][1] == "-1.0"  # a number, not "'-1.0"


def _chip_file(tmp_path, **fields):
    text = (CATALOG_DIR / "h100-sxm.toml").read_text()
    for key, value in fields.items():
        text = re.sub(rf"(?m)^{key} = .*$", lambda _, k=key, v=value: f"{k} = {json.dumps(v)}",
                      text, count=1)
    path = tmp_path / "chip.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("bad", ["=cmd|calc", "-2+3", "+x", "@x", "a b", "H100", "a|b",
                                 "a,b", "a=b", ".x", "_x", ""])
def test_chip_ids_keep_to_a_safe_alphabet(tmp_path, bad):
    with pytest.raises(RooflineError, match="field 'id'"):
        load_chip_file(_chip_file(tmp_path, id=bad))


@pytest.mark.parametrize("good", ["my-chip", "h100+nvlink", "gb200_1.2", "9x"])
def test_plain_chip_ids_load(tmp_path, good):
    assert load_chip_file(_chip_file(tmp_path, id=good)).id == good


def test_the_catalog_ids_are_safe():
    for path in CATALOG_DIR.glob("*.toml"):
        assert load_chip_file(path).id == path.stem


def test_a_chip_file_cannot_inject_through_the_cli(tmp_path, run_cli):
    chip = _chip_file(tmp_path, id="my-chip", tdp_source='=HYPERLINK("http://evil")')
    code, _, err = run_cli("serve", "llama-3-8b", "--hw", str(chip), "--tp", "1",
                           "--csv", str(tmp_path / "s.csv"))
    assert code == 0, err
    rows = _cells((tmp_path / "s.csv").read_text())
    _no_formula(rows)
    assert any(cell == "'=HYPERLINK(\"http://evil\")" for cell in rows[1])
    code, err = run_cli("sweep", "model", "llama-3-8b", "--hw", "=cmd")[::2]
    assert code == 2 and err.count("\n") == 1


def test_the_csv_of_every_command_is_guarded(tmp_path, run_cli, monkeypatch):
    # were a hostile id to get past the loader, no command's CSV would carry it raw
    monkeypatch.setattr(catalog, "SAFE_ID", re.compile(".+"))
    chip = _chip_file(tmp_path, id="=cmd|calc")
    for argv in (("sweep", "model", "llama-3-8b", "--batch", "1,2"),
                 ("sweep", "model", "llama-3-8b", "--batch", "1,2", "--json", "--all"),
                 ("sweep", "op", "matmul", "--m", "1,2", "--n", "8", "--k", "8"),
                 ("serve", "llama-3-8b", "--tp", "1"), ("model", "llama-3-8b")):
        out = tmp_path / "out.csv"
        code, _, err = run_cli(*argv, "--hw", str(chip), "--csv", str(out))
        assert code == 0, err
        rows = _cells(out.read_text())
        _no_formula(rows)
        assert any("'=cmd|calc" in cell for row in rows for cell in row) or argv[0] == "model"
