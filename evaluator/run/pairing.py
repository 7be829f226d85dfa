"""A pairwise rubric's two orders and their reconciliation (pure functions).

Every pair is judged twice in the same batch: as given (candidate A shown first) and swapped
(B first). The judge's verdict names positions (``"A"``: the text shown first); each order's
choices are mapped back to candidates, so that the two orders compare directly. The
reconciled outcome of a criterion is the winner both orders name (``A``, ``B`` or ``tie``),
and ``inconsistent`` when the swap changed the verdict: a choice that flips with the order
is an artefact of the position, not a preference, and analysis counts it as a tie
(see docs/pairwise.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evaluator.data.cases import Case
from evaluator.data.results import (
    PAIRWISE_RECORD_VERSION,
    PairOrder,
    PairwiseResult,
    ResultRecord,
    reconcile,
)
from evaluator.rubrics.rubric import TIE, Rubric

ORDERS = ("A", "B")  # the candidate shown first in each order


def swap(rubric: Rubric, case: Case) -> Case:
    """The case with its two candidates' texts exchanged (the second order)."""
    first, second = rubric.candidates or ("", "")
    fields = dict(case.fields)
    fields[first], fields[second] = case.fields[second], case.fields[first]
    return Case(case.case_id, case.line, fields)


def ordered_cases(rubric: Rubric, case: Case) -> tuple[Case, Case]:
    """The case as given (A first) and swapped (B first)."""
    return case, swap(rubric, case)


def to_candidate(choice: str, first: str) -> str:
    """A choice written in positions (``A``: the text shown first) as a candidate."""
    if choice == TIE or first == "A":
        return choice
    return "B" if choice == "A" else "A"


def _candidate_keys(values: Mapping[str, float], first: str) -> dict[str, float]:
    mapped = {to_candidate(choice, first): p for choice, p in values.items()}
    return {choice: mapped[choice] for choice in ("A", "B", TIE) if choice in mapped}


def pair_order(rubric: Rubric, first: str, record: ResultRecord,
               probabilities: Mapping[str, Mapping[str, float]] | None) -> PairOrder:
    """One order's part of the pair record, from the record its verdict was judged into."""
    keys = [c.key for c in rubric.choices()]
    choices = None
    if record.status == "ok" and record.scores is not None:
        choices = {key: to_candidate(record.scores[key], first) for key in keys}
    probs = None
    if probabilities:
        probs = {key: _candidate_keys(values, first) for key, values in probabilities.items()}
    return PairOrder(first=first, status=record.status, verdict=record.scores,
                     choices=choices, probabilities=probs, reason=record.reason,
                     finish_reason=record.finish_reason, prompt_tokens=record.prompt_tokens,
                     completion_tokens=record.completion_tokens,
                     cached_tokens=record.cached_tokens, prompt_hash=record.prompt_hash,
                     raw_output=record.raw_output)


def _total(values: Sequence[int | None]) -> int | None:
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def pair_record(rubric: Rubric, case: Case, systems: tuple[str, str],
                orders: Sequence[PairOrder], base: Mapping[str, Any]) -> ResultRecord:
    """The case's record: ``ok`` with the reconciled outcome when both orders gave a valid
    verdict; otherwise the first failing order's status, its reason saying which order."""
    first, second = rubric.candidates or ("", "")
    pairwise = PairwiseResult(
        systems={"A": systems[0], "B": systems[1]},
        lengths={"A": len(case.fields[first]), "B": len(case.fields[second])},
        orders=list(orders))
    fields = dict(base, record_version=PAIRWISE_RECORD_VERSION,
                  prompt_tokens=_total([o.prompt_tokens for o in orders]),
                  completion_tokens=_total([o.completion_tokens for o in orders]),
                  cached_tokens=_total([o.cached_tokens for o in orders]))
    failed = next((o for o in orders if o.status != "ok"), None)
    if failed is not None:
        where = "as given (A first)" if failed.first == "A" else "swapped (B first)"
        return ResultRecord(status=failed.status, finish_reason=failed.finish_reason,
                            reason=f"the order {where}: {failed.reason}",
                            pairwise=pairwise, **fields)
    outcome = {c.key: reconcile(*[o.choices[c.key] for o in orders if o.choices])
               for c in rubric.choices()}
    pairwise = pairwise.model_copy(update={"outcome": outcome})
    return ResultRecord(status="ok", finish_reason="stop", scores=dict(outcome),
                        pairwise=pairwise, **fields)
