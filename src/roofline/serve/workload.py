"""What is served: request lengths, prefix-cache hits, speculative decoding and the load.

Lengths may be one value each or paired samples (a CSV of requests): the steady state
depends on them through means only, each weighted by what it drives (prompt tokens per
request, decode steps per request, KV context weighted by the decode steps it is held for);
the tails (tails.py) on their spread, kept as a sample of requests.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ..errors import ParameterError, RooflineError
from .point import Floats
from .tails import representative

BLOCK_TOKENS = 16  # paged KV cache: vLLM / SGLang / TensorRT-LLM's default block size


def spec_tokens_per_step(k: int, accept: float) -> float:
    """Expected tokens one sequence gains per verification step with k drafts, each accepted
    with probability `accept` independently until the first rejection, plus the target
    model's own token: sum_{i=0..k} a^i = (1 - a^(k+1)) / (1 - a) (Leviathan et al. 2023)."""
    if k == 0:
        return 1.0
    if accept == 1:
        return float(k + 1)
    return float((1 - accept ** (k + 1)) / (1 - accept))


@dataclass(frozen=True)
class Workload:
    """Means over requests. `decode_context` is the mean context a decode step attends to,
    weighted by decode steps: a request of L prompt and n output tokens decodes at contexts
    L+1 .. L+n-1, L + n/2 on average."""

    input_len: float  # mean prompt tokens
    output_len: float  # mean output tokens
    decode_context: float
    prefix_hit: float = 0.0  # fraction of prompt tokens served from the prefix cache
    spec_k: int = 0  # draft tokens per step (0: no speculative decoding)
    accept: float = 0.0  # per-draft acceptance probability
    # every request of the same lengths (a benchmark's fixed input / output): a closed loop's
    # clients stay in step, each round's prompts arriving together (grid._settle)
    in_step: bool = True
    # up to 64 equally likely (prompt, output) pairs describing the spread of lengths, for
    # the tails (tails.representative); empty: every request is of the mean lengths
    sample: tuple[tuple[float, float], ...] = ()

    @classmethod
    def from_lengths(cls, input_len: npt.ArrayLike, output_len: npt.ArrayLike,
                     prefix_hit: float = 0.0, spec_k: int = 0, accept: float = 0.0,
                     in_step: bool | None = None) -> Workload:
        """One request shape, or paired samples of prompt and output lengths."""
        ins = np.atleast_1d(np.asarray(input_len, dtype=float))
        outs = np.atleast_1d(np.asarray(output_len, dtype=float))
        if ins.shape != outs.shape:
            raise RooflineError(f"input and output lengths must pair up: {ins.size} input "
                                f"lengths, {outs.size} output lengths")
        if ins.size == 0 or not np.all(np.isfinite(ins)) or np.any(ins < 1):
            raise ParameterError("input_len", ": every prompt needs at least 1 token")
        if not np.all(np.isfinite(outs)) or np.any(outs < 2):
            raise ParameterError("output_len", ": every request needs at least 2 output "
                                 "tokens (1 is a prefill alone: a model's prefill phase)")
        if not 0 <= prefix_hit < 1:
            raise ParameterError("prefix_hit", f"must be in [0, 1), got {prefix_hit:g}")
        if spec_k < 0 or spec_k != int(spec_k):
            raise ParameterError("spec_k", f"must be a whole number >= 0, got {spec_k}")
        if not 0 <= accept <= 1:
            raise ParameterError("accept", f"must be in [0, 1], got {accept:g}")
        if spec_k and accept == 0:
            raise ParameterError("spec_k", "needs {accept} (the per-draft acceptance rate)",
                                 mentions=("accept",))
        steps = outs - 1
        context = float(np.sum(steps * (ins + outs / 2)) / np.sum(steps))
        same = bool(np.all(ins == ins.flat[0]) and np.all(outs == outs.flat[0]))
        return cls(float(ins.mean()), float(outs.mean()), context, float(prefix_hit),
                   int(spec_k), float(accept), same if in_step is None else in_step,
                   representative(ins, outs))

    @property
    def uncached_len(self) -> float:
        """Prompt tokens computed per request: prefix-cache hits are read, not computed."""
        return self.input_len * (1 - self.prefix_hit)

    @property
    def tokens_per_step(self) -> float:
        return spec_tokens_per_step(self.spec_k, self.accept)

    @property
    def verify_len(self) -> int:
        """Tokens per sequence the target model runs per step: the last one and k drafts."""
        return self.spec_k + 1

    @property
    def decode_steps(self) -> float:
        """Decode steps per request: the first token comes from the prefill."""
        return (self.output_len - 1) / self.tokens_per_step

    def kv_tokens_per_sequence(self, reserve_full: bool = False) -> float:
        """Cached tokens a running sequence holds on average, in whole paged blocks; a shared
        prefix-cache hit is held once for all (`shared_prefix_tokens`), not per sequence.
        `reserve_full`: an engine that admits a request only with blocks for its whole prompt
        and output reserved holds input + output tokens from admission on."""
        held = self.input_len + self.output_len if reserve_full else self.decode_context
        own = held - self.input_len * self.prefix_hit
        return float(np.ceil(own / BLOCK_TOKENS) * BLOCK_TOKENS)

    @property
    def shared_prefix_tokens(self) -> float:
        return float(np.ceil(self.input_len * self.prefix_hit / BLOCK_TOKENS) * BLOCK_TOKENS)


_LENGTH_COLUMNS = ("input_len", "output_len")
_MAX_CELL = 40  # a count is at most 16 digits: a longer cell is echoed cut short


def read_lengths(path: str) -> tuple[Floats, Floats]:
    """A CSV of requests with columns input_len and output_len (one request a row, other
    columns ignored). Each cell is read as --input-len / --output-len are, as a whole count
    (8192, 8k = 8192, 1e6; at most 2**53); an error names the file, line and column."""
    import csv
    import io
    from pathlib import Path

    from ..files import _read_text  # the one guarded file reader (size, encoding, kind)
    from ..units import parse_count

    where = f"--lengths {path}"
    # a BOM starts Excel's "CSV UTF-8" export
    reader = csv.DictReader(io.StringIO(_read_text(Path(path), "--lengths").removeprefix(
        "\ufeff"), newline=""))
    ins: list[int] = []
    outs: list[int] = []
    try:
        header = reader.fieldnames or []
        for col in _LENGTH_COLUMNS:
            if header.count(col) != 1:
                shown = ",".join(header)
                shown = shown if len(shown) <= 80 else shown[:80] + "..."
                raise RooflineError(f"{where}: needs a header naming input_len and output_len "
                                    f"once each (other columns are ignored), got {shown!r}")
        for row in reader:
            line = f"{where} line {reader.line_num}"
            if None in row:  # more cells than the header names
                raise RooflineError(f"{line}: {len(header) + len(row[None])} cells, the header "
                                    f"has {len(header)} (quote a cell that holds a comma)")
            for col, into in (("input_len", ins), ("output_len", outs)):
                text = row[col]
                if text is None:
                    raise RooflineError(f"{line}: no {col} cell (the row has fewer cells "
                                        f"than the header's {len(header)})")
                if len(text) > _MAX_CELL:
                    text = text[:_MAX_CELL] + "..."
                into.append(parse_count(text, f"{line}, column {col}"))
            if outs[-1] < 2:  # as --output-len (Workload.from_lengths)
                raise RooflineError(f"{line}, column output_len: every request needs at least "
                                    "2 output tokens (1 is a prefill alone: a model's prefill "
                                    f"phase), got {row['output_len']!r}")
    except csv.Error as exc:  # e.g. a cell over the csv module's field size limit
        raise RooflineError(f"{where} line {reader.reader.line_num}: not valid CSV: "
                            f"{exc}") from None
    if not ins:
        raise RooflineError(f"{where}: no requests after the header (one a row)")
    return np.array(ins, dtype=float), np.array(outs, dtype=float)
