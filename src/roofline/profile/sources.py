"""Which trace file to read: a file as given, or one rank's file in a directory of traces."""

from __future__ import annotations

import gzip
import re
import zlib
from pathlib import Path

from ..errors import ParameterError, RooflineError

SUFFIXES = (".json", ".json.gz", ".sqlite")
HEAD_BYTES = 2**20  # Kineto writes distributedInfo among the first few kB of metadata
# the rank PyTorch records in a Kineto trace: "distributedInfo": {..., "rank": 3, ...}
_RANK = re.compile(rb'"distributedInfo"\s*:\s*\{[^{}]*?"rank"\s*:\s*([0-9]{1,9})[,} ]')


def recorded_rank(path: Path) -> int | None:
    """The rank a Kineto trace records in its metadata (`distributedInfo.rank`), read from
    the file's head only; None where it records none (or is not such a trace)."""
    try:
        with path.open("rb") as raw:
            gz = raw.read(2) == b"\x1f\x8b"
        with (gzip.open(path) if gz else path.open("rb")) as f:
            head = f.read(HEAD_BYTES)
    except (OSError, EOFError, zlib.error):
        return None
    found = _RANK.search(head)
    return int(found.group(1)) if found else None



def _traces(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and p.name.endswith(SUFFIXES))


def trace_file(path: Path, rank: int | None) -> Path:
    """`path` itself, or in a directory the one trace of rank `rank`: the one whose
    metadata records that rank (Kineto's `distributedInfo.rank`), else (where a file records
    no rank) the one with 'rank<R>', 'rank-<R>' or 'rank_<R>' in its name."""
    if not path.is_dir():
        return path
    found = _traces(path)
    if not found:
        raise RooflineError(f"{path}: a directory without .json / .json.gz / .sqlite "
                            "traces")
    if rank is None:
        if len(found) > 1:
            raise ParameterError("rank", f"is needed: {path} holds {len(found)} traces (or give "
                                 "one file)")
        return found[0]
    recorded = {p: recorded_rank(p) for p in found}
    mine = [p for p in found if recorded[p] == rank]
    if not mine:  # no file records the rank: its file name may say it
        mine = [p for p in found if recorded[p] is None
                and re.search(rf"rank[-_]?{rank}(?![0-9])", p.name)]
    if len(mine) != 1:
        names = ", ".join(p.name for p in found[:5]) + (", ..." if len(found) > 5 else "")
        raise ParameterError("rank", f"{rank}: {len(mine)} traces in {path} are rank {rank}'s "
                             f"by their recorded rank or file name (files: {names})")
    return mine[0]
