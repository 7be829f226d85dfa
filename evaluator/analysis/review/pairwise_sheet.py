"""A pairwise run's sheet (issue 37): which choice criteria a labeller answers (A, B or tie,
in terms of the run's two systems), both answers' text for ``--show-text`` when the run
paired two files (``--versus``), and the refusal of the designs that rank by the judge's
scores (a pairwise sheet is drawn at random, and is blind)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from evaluator.analysis.review.signals import ReviewError, pick_criteria
from evaluator.data.cases import Case, InputFileError
from evaluator.data.pairs import iter_pairs
from evaluator.data.sheet import CasesRef
from evaluator.rubrics.rubric import ChoiceCriterion, Rubric


def chosen_choices(rubric: Rubric, criteria: Sequence[str]) -> list[ChoiceCriterion]:
    """A pairwise rubric's choice criteria (``criteria``: those named, else every one);
    an unknown one is a :class:`ReviewError`."""
    return pick_criteria(rubric.choices(), criteria, rubric.name, "compares")


def pair_texts(ids: set[str], rubric: Rubric, ref: CasesRef) -> dict[str, dict[str, str]]:
    """A pairwise run of two files (``--versus``): each drawn case's fields, candidate B's
    answer from the second file, read as the run read them."""
    try:
        items = iter_pairs(Path(ref.path), Path(str(ref.versus)), rubric,
                           answer_column=str(ref.answer_column), mapping=ref.mapping,
                           id_column=ref.id_column)
        return {item.case_id: dict(item.fields) for item in items
                if isinstance(item, Case) and item.case_id in ids}
    except (InputFileError, OSError) as exc:
        raise ReviewError(f"the cases files cannot be read ({exc})") from None


def pairwise_refusal(results: Sequence[Path], rubric: Rubric, design: str) -> str:
    """The one line that refuses a pairwise run's sheet of a design other than random."""
    return (f"{', '.join(map(str, results))} holds pairwise verdicts (rubric "
            f"{rubric.name!r}): `evaluator review` draws a pairwise sheet with --design random "
            f"only (--design {design} ranks by the judge's scores); its labels go to "
            "`evaluator compare --labels`")
