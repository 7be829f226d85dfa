"""Which scores the figures are computed from (``--score argmax|expected``), and what is
said about the records a mode cannot read.

``argmax``: each score as the judge chose it (the verdict as written; reduced, for several
verdicts). ``expected``: each score replaced by its expected value under the judge's own
probabilities over the allowed values, and the aggregates recomputed from them
(:func:`evaluator.analysis.distributions.verdict_view`). An ``ok`` record without
distributions (record_version 1, or a backend without probabilities) has no expected
scores: it is left out of every figure and counted, never imputed with its argmax.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from evaluator.analysis.distributions import SCORE_MODES, ScoreMode, verdict_view
from evaluator.common.errors import UserError
from evaluator.common.record import Record
from evaluator.data.results import ResultRecord
from evaluator.rubrics.rubric import Rubric

__all__ = ["GET_DISTRIBUTIONS", "MODE_MEANING", "NO_DISTRIBUTIONS", "SCORE_MODES",
           "ScoreModeBlock", "ScoreModeError", "ScoredView", "left_out_note", "mode_block",
           "score_view"]

NO_DISTRIBUTIONS = "record_version 1, or a backend without probabilities"
MODE_MEANING = {
    "argmax": "each score as the judge chose it: the verdict as written",
    "expected": ("each score replaced by its expected value under the judge's probabilities "
                 "over the allowed values; aggregates recomputed from them"),
}
GET_DISTRIBUTIONS = ("re-run the cases with the current version of evaluator (the fake, "
                     "transformers and vLLM backends write distributions), or use "
                     "--score argmax")


class ScoreModeBlock(Record):
    """Which scores the figures use, what that means, and the records left out (the
    ``score_mode`` block of the summary's and agreement's typed records)."""

    mode: str
    meaning: str
    left_out_no_distributions: int
    note: str | None


class ScoreModeError(UserError, ValueError):
    """``--score expected`` over results none of whose ``ok`` records has distributions."""


@dataclass
class ScoredView:
    """The ``ok`` records of one results file as a score mode reads them."""

    mode: str
    # case id -> the scores and aggregates in this mode, one flat dict (key -> value).
    values: dict[str, dict[str, Any]] = field(default_factory=dict)
    ok: int = 0
    left_out: int = 0  # ok records this mode cannot read (no distributions)

    def value(self, case_id: str, key: str) -> int | float | None:
        """A case's score or aggregate ``key`` in this mode (None: absent or not numeric)."""
        value = self.values.get(case_id, {}).get(key)
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def score_view(rubric: Rubric, records: Iterable[ResultRecord], mode: ScoreMode | str,
               source: str) -> ScoredView:
    """Read every ``ok`` record of ``source`` (a results file, named in errors) in ``mode``.

    Raises :class:`ScoreModeError` when ``mode`` is ``expected`` and no ``ok`` record has
    distributions: every figure would be empty."""
    if mode not in SCORE_MODES:
        raise ScoreModeError(f"unknown score mode {mode!r}; use one of {', '.join(SCORE_MODES)}")
    view = ScoredView(mode=str(mode))
    for record in records:
        if record.status != "ok" or record.scores is None:
            continue
        view.ok += 1
        read = verdict_view(rubric, record, mode)  # type: ignore[arg-type]
        if read is None:
            view.left_out += 1
            continue
        scores, aggregates = read
        view.values[record.case_id] = {**scores, **(aggregates or {})}
    if mode == "expected" and view.ok and view.left_out == view.ok:
        raise ScoreModeError(f"{source}: --score expected needs score distributions, and none "
                             f"of its {view.ok} ok record(s) has any ({NO_DISTRIBUTIONS}); "
                             f"{GET_DISTRIBUTIONS}")
    return view


def left_out_note(left_out: int) -> str | None:
    """The sentence saying how many ``ok`` records a mode left out, and why (None: none)."""
    if not left_out:
        return None
    return (f"{left_out} ok record(s) have no score distributions ({NO_DISTRIBUTIONS}): "
            "left out of every figure")


def mode_block(mode: str, left_out: int) -> dict[str, Any]:
    """``score_mode`` in JSON output: the mode, what it means, and the records left out."""
    return {"mode": mode, "meaning": MODE_MEANING[mode], "left_out_no_distributions": left_out,
            "note": left_out_note(left_out)}
