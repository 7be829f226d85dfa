"""The reader of a labelling sheet's folder (``--labels SHEET_DIR``, issue 37): the journal's
labels that count (:func:`evaluator.data.sheet.latest_labels`), checked against the sheet
and the results, as a :class:`~evaluator.analysis.labels.labelset.LabelSet`.

:func:`read_sheet_labels` keeps, per (labeller, case, criterion), the last label saved;
drops "cannot judge" (counted); refuses in one line a journal line that breaks the sheet's
rules (:mod:`evaluator.analysis.journal_rules`, the same the labelling page applies: of
another draw or rubric, by an unlisted labeller, for a case or criterion the sheet does not
have or did not assign, a value off the criterion's scale, ...), named by its line number;
and a ``review.jsonl`` changed since the draw (its SHA-256 is sheet.json's
``fingerprint``). The sheet's ``review.jsonl`` rows carry the design columns
(:func:`evaluator.analysis.designs.read_design` reads them as it reads a worksheet's).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from evaluator.analysis.journal_rules import JournalLineError, JournalRules
from evaluator.analysis.label_files import label_rows
from evaluator.analysis.labels.labelset import LabelSet, LabelSetError, Ratings
from evaluator.data.sheet import (
    JOURNAL,
    REVIEW_JSONL,
    SheetError,
    SheetInfo,
    is_sheet_dir,
    latest_labels,
    read_journal_lines,
    read_sheet_info,
)
from evaluator.rubrics.rubric import Rubric

NOUN = "sheet"


def claims(path: Path) -> bool:
    """Whether ``path`` is a labelling sheet's folder (a folder holding ``sheet.json``,
    drawn by ``evaluator review``)."""
    return is_sheet_dir(Path(path))


def criteria(folder: Path) -> list[str]:
    """The criteria the sheet folder rates (its sheet.json)."""
    try:
        return list(read_sheet_info(Path(folder)).criteria)
    except SheetError as exc:
        raise LabelSetError(str(exc)) from None


def drawn_sheet(folder: Path, pairwise: bool, what: str = "the sheet",
                ) -> tuple[SheetInfo, list[tuple[int, dict[str, Any]]]]:
    """The sheet folder's sheet.json and its drawn cases (review.jsonl's rows, unchanged
    since the draw: its SHA-256 is sheet.json's fingerprint), refused in one line when the
    sheet is of the other kind than the results (``pairwise``) or review.jsonl is missing
    or changed. ``what``: what the user should give instead ("the sheet", "the export of
    the sheet")."""
    try:
        info = read_sheet_info(folder)
    except SheetError as exc:
        raise LabelSetError(str(exc)) from None
    if (info.kind == "pairwise") != pairwise:
        raise LabelSetError(f"{folder} is a {info.kind} sheet, but the results are "
                            f"{'pairwise' if pairwise else 'single-answer'}: give {what} "
                            "drawn from these results")
    review = folder / REVIEW_JSONL
    try:
        drawn_bytes = review.read_bytes()
    except OSError:
        raise LabelSetError(f"{folder}: no readable {REVIEW_JSONL} (the sheet's drawn "
                            "cases); draw the sheet again with evaluator review") from None
    if hashlib.sha256(drawn_bytes).hexdigest() != info.fingerprint:
        raise LabelSetError(f"{review} was changed since the sheet was drawn (its SHA-256 "
                            "is not sheet.json's fingerprint): restore it as evaluator "
                            "review wrote it")
    return info, label_rows(review)


def read_sheet_labels(folder: Path, *, rubric: Rubric | None = None,
                      rubric_hash: str | None = None, pairwise: bool = False) -> LabelSet:
    """The labels that count in the sheet folder ``folder`` (see the module docstring).
    ``rubric``: the results' rubric (each criterion's scale); ``rubric_hash``: its hash, which
    every label's must equal; ``pairwise``: the results are pairwise (values A/B/tie)."""
    folder = Path(folder)
    info, rows = drawn_sheet(folder, pairwise)
    try:
        numbered = list(read_journal_lines(folder))
    except SheetError as exc:
        raise LabelSetError(str(exc)) from None
    entries = [entry for _, entry in numbered]
    journal = folder / JOURNAL
    # Values are checked against the scales of the rubric the labels were given on: the
    # rubric read now, when it is that version (else its scales may have moved: said below).
    same = rubric is not None and rubric.source_sha256 == info.rubric_hash
    rules = JournalRules.of(journal, info, (str(row.get("case_id")) for _, row in rows),
                            rubric if same else None)
    try:
        rules.check_all(numbered)
    except JournalLineError as exc:
        raise LabelSetError(str(exc)) from None
    # The labels were given on the page showing the sheet's rubric (every line's rubric
    # hash is sheet.json's). The rubric file read now (``rubric_hash``) may have changed
    # since the sheet was drawn (a new version of the tool, an edit): said, not refused, so
    # that labels and results made before the change stay usable together.
    changed = rubric_hash is not None and rubric_hash != info.rubric_hash
    ratings: Ratings = {k: {} for k in info.criteria}
    cannot = seen = 0
    for (labeller, case, criterion), entry in latest_labels(entries).items():
        if entry.value is None:
            cannot += 1
            continue
        seen += entry.judge_seen
        ratings[criterion].setdefault(case, {})[labeller] = entry.value
    sheet = LabelSet(origin=folder, noun=NOUN, design_path=folder / REVIEW_JSONL, rows=rows,
                     criteria=list(info.criteria), ratings=ratings, kind=info.kind,
                     blind=info.blind, judge_seen=seen, cannot_judge=cannot)
    if cannot:
        sheet.notes.append(f"{cannot} label(s) saved as \"cannot judge\": left out")
    if changed:
        sheet.notes.append(f"rubric {info.rubric!r} has changed since the sheet was drawn "
                           "(its file's hash is not sheet.json's): check that its criteria "
                           "and scales still mean what the labellers were shown")
    return sheet
