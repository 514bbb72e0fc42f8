"""Which trace file to read: a file as given, or one rank's file in a directory of traces."""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import ParameterError, RooflineError

SUFFIXES = (".json", ".json.gz")


def _traces(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and p.name.endswith(SUFFIXES))


def trace_file(path: Path, rank: int | None) -> Path:
    """`path` itself, or in a directory the one trace (of rank `rank`: a file name with
    'rank<R>', 'rank-<R>' or 'rank_<R>' in it)."""
    if not path.is_dir():
        return path
    found = _traces(path)
    if not found:
        raise RooflineError(f"{path}: a directory without .json / .json.gz traces")
    if rank is None:
        if len(found) > 1:
            raise ParameterError("rank", f"is needed: {path} holds {len(found)} traces (or give "
                                 "one file)")
        return found[0]
    mine = [p for p in found if re.search(rf"rank[-_]?{rank}(?![0-9])", p.name)]
    if len(mine) != 1:
        names = ", ".join(p.name for p in found[:5])
        raise ParameterError("rank", f"{rank}: {len(mine)} trace file names in {path} name rank "
                            f"{rank} (files: {names}{', ...' if len(found) > 5 else ''})")
    return mine[0]
