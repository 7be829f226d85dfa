"""The review worksheet's inputs: a file a user names, checked before it is read, and
labels so far, where an empty label means "not labelled yet" (a half-filled worksheet)."""

from __future__ import annotations

from pathlib import Path

from evaluator.analysis.label_files import AgreementError, load_labels
from evaluator.analysis.review.signals import ReviewError
from evaluator.common.readable import NotARegularFile, check_regular_file
from evaluator.data.files import show_path
from evaluator.data.sources import LabelSource
from evaluator.rubrics.rubric import Rubric


def check_input_file(path: Path, what: str) -> None:
    """Raise :class:`ReviewError` in one line unless ``path`` is a readable regular file."""
    try:
        check_regular_file(path, what)
    except FileNotFoundError:
        raise ReviewError(f"{what} {show_path(path)} does not exist") from None
    except NotARegularFile as exc:
        raise ReviewError(str(exc)) from None
    except OSError as exc:
        raise ReviewError(f"cannot read {what} {show_path(path)} ({exc.strerror})") from None



def read_labelled(labels: LabelSource, rubric: Rubric | None = None) -> dict[str, float]:
    """Case id -> label for every row of a labels file (CSV or JSONL) with a label, read as
    ``evaluator agree`` reads it (:func:`evaluator.analysis.agreement.agreement.load_labels`): a row
    whose label is empty (or null) is "not labelled yet" and left out, so a half-filled
    worksheet can be read; a label that is not a number (or, in a ``KEY.label`` column,
    not on KEY's scale in ``rubric``, or on ``labels.scale`` when given), a row without an
    id and a repeated id are errors naming the line, never the id."""
    check_input_file(Path(str(labels.path)), "labels file")
    try:
        return dict(load_labels(labels, allow_none=True, rubric=rubric))
    except AgreementError as exc:
        raise ReviewError(str(exc)) from None
