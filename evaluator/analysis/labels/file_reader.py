"""The reader of a labels file (``--labels FILE``: JSONL or CSV, e.g. a filled-in
worksheet): its rows, read once (:func:`evaluator.analysis.label_files.label_rows`), as a
:class:`~evaluator.analysis.labels.labelset.LabelSet` of one column, the one
``--label-field`` names; and whether the file shows the judge's verdict."""

from __future__ import annotations

from pathlib import Path

from evaluator.analysis.label_files import label_rows
from evaluator.analysis.labels.labelset import LabelSet
from evaluator.analysis.labels.verdict_seen import shown_in_rows
from evaluator.data.sheet import SheetError, is_sheet_dir, read_sheet_info

NOUN = "labels file"


def claims(path: Path) -> bool:
    """Any path the other readers leave: :func:`label_rows` says what is wrong with it."""
    return True


def read_label_file(path: Path, *, id_column: str = "case_id") -> LabelSet:
    """The labels file ``path``'s rows, its case ids in ``id_column``."""
    path = Path(path)
    rows = label_rows(path)
    return LabelSet(origin=path, noun=NOUN, design_path=path, rows=rows, id_column=id_column,
                    shown=shown_in_rows(path, rows) or _in_open_sheet(path))


def _in_open_sheet(path: Path) -> str | None:
    """Why ``path`` shows the judge's verdict when it sits in a sheet folder whose sheet.json
    says blind false (a non-blind sheet's review.csv); else None."""
    parent = path.parent
    if not is_sheet_dir(parent):
        return None
    try:
        info = read_sheet_info(parent)
    except SheetError:
        return None  # a damaged sheet.json beside a labels file: nothing known to say
    if info.blind:
        return None
    return f"{path} is from a sheet that is not blind, {parent / 'sheet.json'}"
