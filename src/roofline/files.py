"""Reading the data files we accept (chip TOML, calibration TOML, model config JSON).

Data is parsed, never executed: TOML and JSON only, no eval, no pickle. Errors name the file.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from .errors import RooflineError


def read_toml(path: str | Path, what: str) -> dict[str, Any]:
    p = Path(path)
    try:
        if not p.is_file():  # is_file() itself raises for e.g. a name too long
            raise RooflineError(f"{what} not found: {p}")
        return tomllib.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise RooflineError(f"{p}: cannot read: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise RooflineError(f"{p}: not valid TOML: {exc}") from None


def read_json(path: str | Path) -> Any:
    p = Path(path)
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise RooflineError(f"{p}: cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise RooflineError(f"{p}: not valid JSON: {exc}") from None


def write_text(path: str | Path, text: str) -> None:
    """Write an output file; a failure is one RooflineError naming the file."""
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise RooflineError(f"cannot write {path}: {exc.strerror or exc}") from None


def write_csv(path: str | Path, columns: dict[str, Any]) -> None:
    """Columns (equal-length arrays or lists) as a CSV file with a header row."""
    import csv

    try:
        with open(path, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(list(columns))
            writer.writerows(zip(*(list(c) for c in columns.values()), strict=True))
    except OSError as exc:
        raise RooflineError(f"cannot write {path}: {exc.strerror or exc}") from None
