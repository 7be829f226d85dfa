"""Labels read from a labelling sheet's folder (``--labels SHEET_DIR``, issue 37): the
journal's labels that count (:func:`evaluator.data.sheet.latest_labels`), checked against
the sheet and the results, and each case's label when several labellers labelled it.

:func:`read_sheet_labels` keeps, per (labeller, case, criterion), the last label saved;
drops "cannot judge" (counted); refuses in one line a journal line that breaks the sheet's
rules (:mod:`evaluator.analysis.journal_rules`, the same the labelling page applies: of
another draw or rubric, by an unlisted labeller, for a case or criterion the sheet does not
have or did not assign, a value off the criterion's scale, ...), named by its line number;
and a ``review.jsonl`` changed since the draw (its SHA-256 is sheet.json's
``fingerprint``). The sheet's ``review.jsonl`` rows carry the design columns
(:func:`evaluator.analysis.designs.read_design` reads them as it reads a worksheet's).

Several labellers on one case: the cases are the sampling units, so each case gives one
label, by a rule that keeps each command's figures valid (:data:`RULES`; docs/statistics.md,
"Labels from a sheet"):

* ``draw`` (``agree``): the label of one of its labellers, drawn per case with a seeded
  hash: the figures are the judge's agreement with *a* clinician, cases independent;
* ``mean`` (``estimate``): the mean of its labellers' labels: the estimand is the mean
  clinician's score, each case once, so PPI++'s CI stays valid;
* ``majority`` (``compare``): the most frequent of A/B/tie, a tie between the labellers'
  choices counted as "tie" (the clinicians could not tell the answers apart).

:func:`verdict_seen_note` is the note ``agree`` and ``estimate`` print when labels were
given with the judge's verdict in view.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluator.analysis.journal_rules import JournalLineError, JournalRules
from evaluator.analysis.label_files import AgreementError, label_rows
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

RULES = {
    "draw": ("each case counts once, with the label of one of its labellers drawn at random "
             "per case (seed {seed}): the figures are the judge's agreement with a "
             "clinician"),
    "mean": ("each case counts once, with the mean of its labellers' labels: the estimate "
             "is the mean clinician's"),
    "majority": ("each case counts once, with its labellers' majority choice (a tie between "
                 "their choices: tie)"),
}
# The columns a non-blind worksheet (``evaluator review --design priority``) adds to show
# the judge's verdict: whole-row signals, and each criterion's KEY.<part> (an aggregate's
# KEY.aggregate). A labels file holding any of them was labelled with the verdict in view.
JUDGE_SIGNAL_COLUMNS = ("min_confidence", "max_spread", "gate_margin")
JUDGE_PARTS = ("score", "expected", "confidence", "distribution")
AGGREGATE_PART = "aggregate"
VERDICT_SEEN = ("NOTE: labels given with the judge's verdict in view ({why}): they may echo "
                "the judge, which inflates agreement (kappa, gate sensitivity) and PPI++'s "
                "lambda; for figures about the judge, label a blind sheet (evaluator review "
                "--design random or active)")


class SheetLabelsError(AgreementError):
    """Labels of a sheet folder that cannot be used; one line naming the folder and what to
    do, never a case id or a comment."""


@dataclass
class SheetLabels:
    """A sheet folder's labels: ``info`` (sheet.json), ``rows`` (review.jsonl's rows with
    their line numbers: the drawn cases and their design columns) and ``ratings``
    (criterion -> case id -> labeller -> value) of the labels that count."""

    folder: Path
    info: SheetInfo
    rows: list[tuple[int, dict[str, Any]]]
    ratings: dict[str, dict[str, dict[str, float | str]]]
    cannot_judge: int = 0
    judge_seen: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def review_path(self) -> Path:
        return self.folder / REVIEW_JSONL

    @property
    def labellers(self) -> list[str]:
        """Everyone with a label that counts, sorted."""
        return sorted({name for cases in self.ratings.values() for by in cases.values()
                       for name in by})

    def criteria_for(self, label_field: str | None, criteria: Sequence[str] = ()) -> list[str]:
        """The criteria compared: ``--label-field`` KEY (or KEY.label), else ``criteria``
        (``--criterion``), else every criterion of the sheet; one the sheet does not rate
        is refused."""
        wanted = ([label_field.removesuffix(".label")] if label_field else list(criteria)
                  or list(self.info.criteria))
        unknown = [key for key in wanted if key not in self.info.criteria]
        if unknown:
            raise SheetLabelsError(f"{self.folder}: the sheet rates {', '.join(self.info.criteria)}"
                                   f", not {unknown[0]!r}; give one of them as --label-field")
        if label_field and criteria and list(criteria) != wanted:
            raise SheetLabelsError(f"--criterion {criteria[0]!r} and --label-field "
                                   f"{label_field!r} name different criteria; give one")
        return list(dict.fromkeys(wanted))

    def several(self, criterion: str | None = None) -> int:
        """How many cases two or more labellers labelled (on ``criterion``, else any)."""
        keys = [criterion] if criterion else list(self.ratings)
        return len({case for key in keys for case, by in self.ratings.get(key, {}).items()
                    if len(by) >= 2})

    def overlap(self, criterion: str) -> dict[str, dict[str, float | str]]:
        """Case id -> labeller -> label, for the cases two or more labellers labelled."""
        return {case: by for case, by in self.ratings.get(criterion, {}).items()
                if len(by) >= 2}

    def combined(self, criterion: str, rule: str, seed: int = 0) -> dict[str, float | str]:
        """Case id -> its one label on ``criterion`` by ``rule`` (:data:`RULES`)."""
        out: dict[str, float | str] = {}
        for case, by in self.ratings.get(criterion, {}).items():
            names = sorted(by)
            if len(names) == 1:
                out[case] = by[names[0]]
            elif rule == "draw":
                out[case] = by[names[_drawn(seed, case, len(names))]]
            elif rule == "mean":
                out[case] = sum(float(by[n]) for n in names) / len(names)
            else:
                counts = Counter(str(by[n]) for n in names).most_common()
                out[case] = "tie" if len(counts) > 1 and counts[0][1] == counts[1][1] \
                    else counts[0][0]
        return out

    def rows_for(self, criterion: str, rule: str, seed: int = 0,
                 column: str | None = None) -> list[tuple[int, dict[str, Any]]]:
        """review.jsonl's rows with ``column`` (default ``KEY.label``) holding each case's
        one label (:meth:`combined`), None where nobody has labelled it yet: the rows of a
        worksheet, for the readers of labels files."""
        labels = self.combined(criterion, rule, seed)
        column = column or f"{criterion}.label"
        return [(line, {**row, column: labels.get(str(row.get("case_id")))})
                for line, row in self.rows]

    def rule_line(self, rule: str, seed: int = 0) -> str:
        """One line: who labelled, and how several labellers' labels of a case became one."""
        several = self.several()
        names = self.labellers
        who = (f"{len(names)} labeller(s) ({', '.join(names)})" if len(names) <= 6
               else f"{len(names)} labellers")
        if not several:
            return f"labels from the sheet {self.folder}: {who}, one per case"
        return (f"labels from the sheet {self.folder}: {who}; {several} case(s) labelled by "
                f"two or more: {RULES[rule].format(seed=seed)}")


def _drawn(seed: int, case_id: str, count: int) -> int:
    """A labeller's index for ``case_id``, drawn from a hash of the seed and the case: the
    same case gets the same labeller whatever else is on the sheet."""
    digest = hashlib.sha256(f"{seed}\0{case_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % count


def read_sheet_labels(folder: Path, *, rubric: Rubric | None = None,
                      rubric_hash: str | None = None, pairwise: bool = False) -> SheetLabels:
    """The labels that count in the sheet folder ``folder`` (see the module docstring).
    ``rubric``: the results' rubric (each criterion's scale); ``rubric_hash``: its hash, which
    every label's must equal; ``pairwise``: the results are pairwise (values A/B/tie)."""
    folder = Path(folder)
    try:
        info = read_sheet_info(folder)
        numbered = list(read_journal_lines(folder))
    except SheetError as exc:
        raise SheetLabelsError(str(exc)) from None
    entries = [entry for _, entry in numbered]
    if (info.kind == "pairwise") != pairwise:
        raise SheetLabelsError(f"{folder} is a {info.kind} sheet, but the results are "
                               f"{'pairwise' if pairwise else 'single-answer'}: give the "
                               "sheet drawn from these results")
    review = folder / REVIEW_JSONL
    try:
        drawn_bytes = review.read_bytes()
    except OSError:
        raise SheetLabelsError(f"{folder}: no readable {REVIEW_JSONL} (the sheet's drawn "
                               "cases); draw the sheet again with evaluator review") from None
    if hashlib.sha256(drawn_bytes).hexdigest() != info.fingerprint:
        raise SheetLabelsError(f"{review} was changed since the sheet was drawn (its SHA-256 "
                               "is not sheet.json's fingerprint): restore it as evaluator "
                               "review wrote it")
    rows = label_rows(review)
    journal = folder / JOURNAL
    # Values are checked against the scales of the rubric the labels were given on: the
    # rubric read now, when it is that version (else its scales may have moved: said below).
    same = rubric is not None and rubric.source_sha256 == info.rubric_hash
    rules = JournalRules.of(journal, info, (str(row.get("case_id")) for _, row in rows),
                            rubric if same else None)
    try:
        rules.check_all(numbered)
    except JournalLineError as exc:
        raise SheetLabelsError(str(exc)) from None
    # The labels were given on the page showing the sheet's rubric (every line's rubric
    # hash is sheet.json's). The rubric file read now (``rubric_hash``) may have changed
    # since the sheet was drawn (a new version of the tool, an edit): said, not refused, so
    # that labels and results made before the change stay usable together.
    changed = rubric_hash is not None and rubric_hash != info.rubric_hash
    ratings: dict[str, dict[str, dict[str, float | str]]] = {k: {} for k in info.criteria}
    cannot = seen = 0
    for (labeller, case, criterion), entry in latest_labels(entries).items():
        if entry.value is None:
            cannot += 1
            continue
        seen += entry.judge_seen
        ratings[criterion].setdefault(case, {})[labeller] = entry.value
    sheet = SheetLabels(folder, info, rows, ratings, cannot, seen)
    if cannot:
        sheet.notes.append(f"{cannot} label(s) saved as \"cannot judge\": left out")
    if changed:
        sheet.notes.append(f"rubric {info.rubric!r} has changed since the sheet was drawn "
                           "(its file's hash is not sheet.json's): check that its criteria "
                           "and scales still mean what the labellers were shown")
    return sheet


def judge_columns(rows: Sequence[tuple[int, dict[str, Any]]]) -> list[str]:
    """The columns of a non-blind sheet that show the judge's verdict
    (:data:`JUDGE_SIGNAL_COLUMNS`, ``KEY.<part>`` of :data:`JUDGE_PARTS`, ``KEY.aggregate``) among ``rows``'
    columns, in the file's order."""
    names = dict.fromkeys(name for _, row in rows for name in row)
    return [name for name in names if name in JUDGE_SIGNAL_COLUMNS
            or ("." in name and name.rsplit(".", 1)[1] in (*JUDGE_PARTS, AGGREGATE_PART))]


def verdict_seen_note(path: Path, sheet: SheetLabels | None = None, *,
                      rows: Sequence[tuple[int, dict[str, Any]]] = (),
                      priority: bool = False) -> str | None:
    """The note for labels given with the judge's verdict in view, or None: ``sheet`` (the
    labels of a sheet folder) says blind false, or some of its labels were saved after the
    verdict was shown; or the labels file ``path`` sits in a sheet folder whose sheet.json
    says blind false (a non-blind sheet's review.csv); or, wherever the file is (a
    worksheet mailed to a clinician and back), its design is ``priority`` (a sheet that
    shows the verdicts) or its ``rows`` have a column of the judge's (:func:`judge_columns`)."""
    if sheet is not None:
        why = []
        if not sheet.info.blind:
            why.append(f"{sheet.folder} is not a blind sheet")
        if sheet.judge_seen:
            why.append(f"{sheet.judge_seen} label(s) were saved after the verdict was shown")
        return VERDICT_SEEN.format(why="; ".join(why)) if why else None
    if priority:
        return VERDICT_SEEN.format(why=f"{path} is a priority worksheet, which shows the "
                                       "judge's verdicts")
    shown = judge_columns(rows)
    if shown:
        more = f" and {len(shown) - 2} more" if len(shown) > 2 else ""
        return VERDICT_SEEN.format(why=f"{path} has the judge's columns "
                                       f"({', '.join(shown[:2])}{more})")
    parent = Path(path).parent
    if not is_sheet_dir(parent):
        return None
    try:
        info = read_sheet_info(parent)
    except SheetError:
        return None  # a damaged sheet.json beside a labels file: nothing known to say
    if info.blind:
        return None
    return VERDICT_SEEN.format(why=f"{path} is from a sheet that is not blind, "
                                   f"{parent / 'sheet.json'}")
