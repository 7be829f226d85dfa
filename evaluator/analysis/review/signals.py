"""The review worksheet's ranking: the cases a clinician's label tells most about.

The ``ok`` records of one or more results files (one rubric) give each case three signals,
each a ranked list of its own:

* **confidence** - the lowest, over the chosen criteria's scores, of the judge's probability
  of the value it gave (``ScoreDistribution.confidence``; the largest probability where the
  given value is not an allowed one, e.g. a median of 2.5); lowest first. Several files:
  the lowest over them. Cases without distributions are not in this list.
* **disagreement** - the spread (max - min) of the scores several verdicts gave one score:
  self-consistency samples or jury members in a record, and the judges of the RESULTS files
  when there are several; divided by the width of the criterion's scale so that scales
  compare; largest first, only cases with a spread above 0.
* **gate** (with ``--pass KEY>=T``) - how close the expected score (from the distribution,
  aggregates recomputed from expected scores; the verdict's own score where there is no
  distribution) is to the threshold: |expected - T|, divided by the scale's width for an
  integer criterion (an aggregate's margin is used as it is); the smallest over the gates,
  smallest first.

The worksheet takes the head of each list in turn (confidence, disagreement, gate), skipping
cases already taken, until it has ``n`` cases or the lists run out; ties within a list go by
case id, so the same inputs give the same sheet. Each row says which list picked it
(``reason``) and carries all three figures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evaluator.analysis import gates
from evaluator.analysis.distributions import criterion_paths, verdict_view
from evaluator.analysis.gates import Gate
from evaluator.common.errors import UserError
from evaluator.data.results import ResultRecord, ScoreDistribution
from evaluator.rubrics.rubric import IntegerCriterion, ItemsCriterion, Rubric


class ReviewError(UserError, ValueError):
    """The worksheet cannot be built or written (a wrong path, an unknown criterion, a
    worksheet already there); the message names files, lines and fields, never case text."""


def pick_criteria(available: list[Any], criteria: Sequence[str], rubric_name: str,
                  verb: str) -> list[Any]:
    """The ``--criterion`` keys of ``available`` (the rubric's criteria a sheet can show;
    all of them without ``--criterion``), each once, in the order given; an unknown key is
    a :class:`ReviewError` listing what the rubric ``verb`` (scores, compares)."""
    if not criteria:
        return available
    by_key = {c.key: c for c in available}
    unknown = [k for k in criteria if k not in by_key]
    if unknown:
        raise ReviewError(f"unknown --criterion {', '.join(map(repr, unknown))}; rubric "
                          f"{rubric_name!r} {verb}: {', '.join(by_key)}")
    return [by_key[k] for k in dict.fromkeys(criteria)]


PassGate = Gate  # ``--pass KEY>=T`` (also >, <=, <): the rule agree's gates use


def parse_gate(text: str) -> Gate:
    """``"accuracy>=3"`` -> a :class:`~evaluator.analysis.gates.Gate` (agree's parser)."""
    try:
        return gates.parse_gate(text)
    except gates.GateError as exc:
        raise ReviewError(str(exc)) from None


@dataclass
class Candidate:
    """One case's signals over every results file, and the verdict its row shows."""

    case_id: str
    record: ResultRecord
    confidence: float | None = None
    confidence_text: str = ""
    spread: float | None = None
    spread_text: str = ""
    margin: float | None = None
    margin_text: str = ""
    reason: str = ""


def _width(criterion: IntegerCriterion | ItemsCriterion) -> float:
    allowed = criterion.allowed
    return float(max(allowed) - min(allowed)) or 1.0


def score_at(field_: IntegerCriterion | ItemsCriterion, path: str,
              scores: Mapping[str, Any] | None) -> float | None:
    """The score at ``path`` of a verdict's ``scores`` as a float (None when absent)."""
    scores = scores or {}
    if isinstance(field_, IntegerCriterion):
        value = scores.get(field_.key)
    else:
        index = int(path[len(field_.key) + 1:path.index("]")])
        items = scores.get(field_.key) or []
        item = items[index] if index < len(items) else None
        value = item.get(field_.score_key) if isinstance(item, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def confidence_of(dist: ScoreDistribution) -> float:
    """The probability of the value given, else the largest probability."""
    return dist.confidence if dist.confidence is not None else max(dist.probabilities.values())


def _lowest_confidence(record: ResultRecord, chosen: Sequence[IntegerCriterion | ItemsCriterion],
                       ) -> tuple[float, str] | None:
    found = [(confidence_of(record.distributions[p]), p)
             for f in chosen for p in criterion_paths(f, record)
             if record.distributions and p in record.distributions]
    return min(found) if found else None


def _spread(values: Sequence[float], width: float) -> float:
    return (max(values) - min(values)) / width


def _fmt(value: float) -> str:
    return f"{value:g}" if float(value).is_integer() else f"{value:.2f}"


def _panel_spread(record: ResultRecord, chosen: Sequence[IntegerCriterion | ItemsCriterion],
                  ) -> tuple[float, str] | None:
    panel = [v for v in (record.samples or record.jury or []) if v.status == "ok" and v.scores]
    if len(panel) < 2:
        return None
    kind = "samples" if record.samples else "jury members"
    best: tuple[float, str] | None = None
    for f in chosen:
        for path in criterion_paths(f, record):
            values = [v for v in (score_at(f, path, p.scores) for p in panel) if v is not None]
            if len(values) < 2:
                continue
            spread = _spread(values, _width(f))
            if best is None or spread > best[0]:
                best = (spread, f"{kind} disagree: {', '.join(map(_fmt, values))} on {path}")
    return best


def _files_spread(records: Sequence[ResultRecord],
                  chosen: Sequence[IntegerCriterion | ItemsCriterion]) -> tuple[float, str] | None:
    if len(records) < 2:
        return None
    best: tuple[float, str] | None = None
    for f in chosen:
        for path in criterion_paths(f, records[0]):
            pairs = [(r.judge, v) for r in records
                     if (v := score_at(f, path, r.scores)) is not None]
            if len(pairs) < 2:
                continue
            spread = _spread([v for _, v in pairs], _width(f))
            if best is None or spread > best[0]:
                shown = ", ".join(f"{judge} {_fmt(v)}" for judge, v in pairs)
                best = (spread, f"judges disagree: {shown} on {path}")
    return best


def _gate_margin(rubric: Rubric, record: ResultRecord, gates: Sequence[PassGate],
                 ) -> tuple[float, str] | None:
    if not gates:
        return None
    view, source = verdict_view(rubric, record, "expected"), "expected"
    if view is None:
        view, source = verdict_view(rubric, record, "argmax"), "score"
    if view is None:
        return None
    scores, aggregates = view
    by_key = {f.key: f for f in rubric.output if isinstance(f, IntegerCriterion)}
    best: tuple[float, str] | None = None
    for gate in gates:
        value = scores.get(gate.key) if gate.key in by_key else (aggregates or {}).get(gate.key)
        if value is None or isinstance(value, (bool, list, str)):
            continue
        margin = abs(float(value) - gate.threshold)
        if gate.key in by_key:
            margin /= _width(by_key[gate.key])
        if best is None or margin < best[0]:
            best = (margin, f"near pass gate {gate.rule}: {source} {float(value):.2f}")
    return best


def case_candidate(rubric: Rubric, case_id: str, records: Sequence[ResultRecord],
                   chosen: Sequence[IntegerCriterion | ItemsCriterion],
                   gates: Sequence[PassGate]) -> Candidate:
    """One case's signals over its ``ok`` records (one per results file); the row shows
    the verdict with the lowest confidence (else the first file's)."""
    lowest = [(c, r) for r in records if (c := _lowest_confidence(r, chosen)) is not None]
    shown = min(lowest, key=lambda cr: cr[0][0])[1] if lowest else records[0]
    out = Candidate(case_id, shown)
    if lowest:
        (value, path), _ = min(lowest, key=lambda cr: cr[0][0])
        out.confidence, out.confidence_text = value, f"lowest confidence: P {value:.2f} on {path}"
    spreads = [s for s in [_files_spread(records, chosen),
                           *(_panel_spread(r, chosen) for r in records)] if s is not None]
    if spreads:
        out.spread, out.spread_text = max(spreads, key=lambda s: s[0])
    margins = [m for r in records if (m := _gate_margin(rubric, r, gates)) is not None]
    if margins:
        out.margin, out.margin_text = min(margins, key=lambda m: m[0])
    return out


def rank_candidates(candidates: Sequence[Candidate], n: int) -> list[Candidate]:
    """The worksheet's cases: the head of each signal's list in turn (confidence lowest
    first, disagreement largest first, gate margin smallest first; ties by case id),
    skipping cases already taken, until ``n`` or the lists run out. Sets ``reason``."""
    lists = [
        sorted((c for c in candidates if c.confidence is not None),
               key=lambda c: (c.confidence, c.case_id)),
        sorted((c for c in candidates if c.spread is not None and c.spread > 0),
               key=lambda c: (-(c.spread or 0.0), c.case_id)),
        sorted((c for c in candidates if c.margin is not None),
               key=lambda c: (c.margin, c.case_id)),
    ]
    texts = [lambda c: c.confidence_text, lambda c: c.spread_text, lambda c: c.margin_text]
    taken: dict[str, Candidate] = {}
    heads = [0, 0, 0]
    while len(taken) < n and any(heads[i] < len(lists[i]) for i in range(3)):
        for i, ranked in enumerate(lists):
            while heads[i] < len(ranked) and ranked[heads[i]].case_id in taken:
                heads[i] += 1
            if heads[i] < len(ranked) and len(taken) < n:
                case = ranked[heads[i]]
                case.reason = texts[i](case)
                taken[case.case_id] = case
    return list(taken.values())
