"""Who labels which case of a sheet: several labellers, with a share of the drawn cases given
to every one of them (the overlap, on which clinician-vs-clinician agreement is measured)
and the rest split between them as evenly as possible.

:func:`assign` is seeded (``numpy.random.default_rng(seed)``, as the draws of
:mod:`evaluator.analysis.designs`): the same cases, labellers, share and seed give the same
assignment. numpy is imported inside it (the ``stats`` extra).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from evaluator.analysis.review.signals import ReviewError

MAX_NAME = 64


@dataclass
class Assignment:
    """``overlap_cases``: the cases every labeller is given; ``cases``: labeller -> the case
    ids given to that labeller, in sheet order (empty without labellers: anyone labels every
    case)."""

    labellers: list[str] = field(default_factory=list)
    overlap: float | None = None
    overlap_cases: list[str] = field(default_factory=list)
    cases: dict[str, list[str]] = field(default_factory=dict)

    def of(self, case_id: str) -> list[str]:
        """The labellers given ``case_id`` (in the order they were named)."""
        return [name for name in self.labellers if case_id in self.cases.get(name, ())]


def check_labellers(labellers: Sequence[str], overlap: float | None) -> None:
    """Raise :class:`ReviewError` in one line for a bad ``--labeller`` or ``--overlap``: a
    name empty, over :data:`MAX_NAME` characters, with a control character or a ``;``, or
    given twice;
    ``--overlap`` outside 0..1 or with fewer than two labellers."""
    seen: set[str] = set()
    for number, name in enumerate(labellers, start=1):
        if not name.strip():
            raise ReviewError(f"--labeller number {number} is empty: give each labeller a "
                              "name")
        if len(name) > MAX_NAME:
            raise ReviewError(f"--labeller number {number} is {len(name)} characters long: "
                              f"at most {MAX_NAME}")
        if not name.isprintable():
            raise ReviewError(f"--labeller number {number} holds a control character: give "
                              "a plain name")
        if ";" in name:  # the separator of review.csv's assigned_to column
            raise ReviewError(f"--labeller number {number} holds ';' (it separates the "
                              "names in review.csv): give a name without it")
        if name in seen:
            raise ReviewError(f"--labeller {name!r} is given twice: name each labeller once")
        seen.add(name)
    if overlap is None:
        return
    if not 0 <= overlap <= 1:
        raise ReviewError(f"--overlap {overlap:g}: a share of the drawn cases, from 0 to 1")
    if len(labellers) < 2:
        raise ReviewError("--overlap gives a share of the cases to every labeller: name at "
                          "least two with --labeller NAME")


def assign(case_ids: Sequence[str], labellers: Sequence[str], overlap: float | None,
           seed: int) -> Assignment:
    """Who labels which of ``case_ids`` (the sheet's, in sheet order). Without labellers:
    nobody in particular (every case to anyone). Else round(``overlap`` x n) of the n cases,
    drawn with ``seed``, go to every labeller, and the others are dealt out in a seeded
    random order, one labeller after the other, so each has the same number give or take
    one; a labeller's extra case goes to a seeded choice of labellers."""
    check_labellers(labellers, overlap)
    if not labellers:
        return Assignment()
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np

    ids = list(case_ids)
    share = 0.0 if overlap is None else float(overlap)
    rng = np.random.default_rng(seed)
    order = [ids[i] for i in rng.permutation(len(ids))]
    # round() of Python rounds half to even; the share is the one the user gave, so half
    # a case goes up (floor(x + 0.5)), as a person reading "0.25 of 10" expects 3.
    k = min(len(ids), int(share * len(ids) + 0.5))
    shared, rest = set(order[:k]), order[k:]
    dealt = [labellers[i] for i in rng.permutation(len(labellers))]
    given: dict[str, set[str]] = {name: set(shared) for name in labellers}
    for i, case_id in enumerate(rest):
        given[dealt[i % len(dealt)]].add(case_id)
    return Assignment(labellers=list(labellers), overlap=share,
                      overlap_cases=[c for c in ids if c in shared],
                      cases={name: [c for c in ids if c in given[name]]
                             for name in labellers})
