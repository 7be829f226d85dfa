"""Synthetic pairwise runs for the compare tests: records built from the pydantic models
(both orders' choices in candidate terms, the reconciled outcome, lengths, systems) and
scripted judges. Clearly synthetic: no case text (each order's verdict holds a marker that
must never be printed)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path

from evaluator.data.results import (
    PAIRWISE_RECORD_VERSION,
    PairOrder,
    PairwiseResult,
    ResultRecord,
    ResultWriter,
)

SECRET = "SECRET-CASE-TEXT"
RUBRIC = "trial_eligibility_pairwise"
CRITERIA = ("hallucination", "accuracy", "clarity")


def _as_dict(choice: str | Mapping[str, str], criteria: tuple[str, ...]) -> dict[str, str]:
    return dict(choice) if isinstance(choice, Mapping) else {c: choice for c in criteria}


def pair_record(case_id: str, choice_ab: str | Mapping[str, str],
                choice_ba: str | Mapping[str, str], lengths: tuple[int, int] = (100, 100),
                systems: tuple[str, str] = ("alpha", "beta"), *,
                criteria: tuple[str, ...] = CRITERIA, rubric: str = RUBRIC,
                status: str = "ok") -> ResultRecord:
    """A pairwise record: ``choice_ab`` the choice with A shown first, ``choice_ba`` with B
    shown first, both in candidate terms (one value for every criterion, or a dict)."""
    first, second = _as_dict(choice_ab, criteria), _as_dict(choice_ba, criteria)
    outcome = {c: first[c] if first[c] == second[c] else "inconsistent" for c in first}
    flip = {"A": "B", "B": "A", "tie": "tie"}
    orders = [
        PairOrder(first="A", status="ok", choices=first,
                  verdict={**first, "accuracy_reasoning": SECRET}),
        PairOrder(first="B", status="ok", choices=second,
                  verdict={**{c: flip[v] for c, v in second.items()},
                           "accuracy_reasoning": SECRET}),
    ]
    ok = status == "ok"
    return ResultRecord(
        record_version=PAIRWISE_RECORD_VERSION, case_id=case_id, rubric=rubric, judge="hand",
        status=status, scores=outcome if ok else None, reason=None if ok else "scripted",
        pairwise=PairwiseResult(systems={"A": systems[0], "B": systems[1]},
                                lengths={"A": lengths[0], "B": lengths[1]}, orders=orders,
                                outcome=outcome if ok else None))


def write_records(path: Path, records: list[ResultRecord]) -> Path:
    with ResultWriter(path) as writer:
        for record in records:
            writer.write(record)
    return path


def _sigmoid(value: float) -> float:
    return 1.0 / (1.0 + math.exp(-value))


# A judge: (rng, quality A, quality B, length A, length B, which candidate is shown first)
# -> its choice in candidate terms.
Judge = Callable[..., str]


def always_first(rng, qa, qb, la, lb, shown_first) -> str:
    return shown_first


def honest(rng, qa, qb, la, lb, shown_first) -> str:
    """Sees the qualities through noise; a tie when it cannot tell them apart."""
    d = qa - qb + rng.normal(0, 0.7)
    return "tie" if abs(d) < 0.15 else ("A" if d > 0 else "B")


def prefers_longer(rng, qa, qb, la, lb, shown_first) -> str:
    """Quality plus a strong pull towards the longer answer."""
    d = qa - qb + 1.5 * math.tanh((la - lb) / 200) + rng.normal(0, 0.7)
    return "tie" if abs(d) < 0.15 else ("A" if d > 0 else "B")


def run_judge(judge: Judge, n: int, *, seed: int = 0, edge: float = 0.0,
              systems: tuple[str, str] = ("alpha", "beta"), prefix: str = "case",
              criteria: tuple[str, ...] = ("accuracy",)) -> list[ResultRecord]:
    """``n`` pairs: latent qualities (A's raised by ``edge``), lengths drawn independently
    of quality, each order judged independently by ``judge``."""
    import numpy as np

    rng = np.random.default_rng(seed)
    records = []
    for i in range(n):
        qa, qb = rng.normal(edge, 1), rng.normal(0, 1)
        la, lb = (int(v) for v in rng.integers(200, 1200, size=2))
        ab = judge(rng, qa, qb, la, lb, "A")
        ba = judge(rng, qa, qb, la, lb, "B")
        records.append(pair_record(f"{prefix}-{i:04d}", ab, ba, (la, lb), systems,
                                   criteria=criteria))
    return records


def bt_tournament(strengths: Mapping[str, float], per_pairing: int, seed: int
                  ) -> dict[tuple[str, str], list[str]]:
    """A round robin: every pairing's outcomes drawn from P(A wins) = sigmoid(s_A - s_B),
    no ties."""
    import numpy as np

    rng = np.random.default_rng(seed)
    names = list(strengths)
    games = {}
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            p = _sigmoid(strengths[a] - strengths[b])
            games[(a, b)] = ["A" if u < p else "B" for u in rng.random(per_pairing)]
    return games
