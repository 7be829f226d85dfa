"""``evaluator compare``: pairwise results files read and checked, and every figure of
:mod:`evaluator.analysis.pairwise.pairwise` per file and choice criterion, Bradley-Terry strengths
(:mod:`evaluator.analysis.pairwise.bradley_terry`) when the files cover more than two systems, and
the agreement with clinicians' A/B/tie labels.

A file or labels file that cannot be compared is refused with :class:`CompareError`: one
line naming the file (and line and field), never a case id, a label's value or case text.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evaluator.analysis.label_files import AgreementError, label_rows, no_labels_yet
from evaluator.analysis.labels.labelset import LabelSet
from evaluator.analysis.labels.readers import FIELD_NEEDED, field_needed, read_labels
from evaluator.analysis.pairwise.bradley_terry import Battles, bradley_terry
from evaluator.analysis.pairwise.pairwise import (
    INCONSISTENT_NOTE,
    Pairs,
    label_agreement,
    length_bias,
    order_figures,
    pairs_from_records,
)
from evaluator.analysis.stats import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, require_stats
from evaluator.common.record import Record
from evaluator.data.files import same_file
from evaluator.data.results import ResultRecord, ResultsFileDamaged, read_results
from evaluator.data.sources import LabelSource
from evaluator.rubrics.load import load_rubric
from evaluator.rubrics.rubric import RubricError

POSITION_NOTE = ("position bias: the share of decisive verdicts (both orders) that chose the "
                 "answer shown first; 0.5 = no bias, 1 = always the first")
LENGTH_NOTE = ("length slope > 0: the longer answer is favoured; the length-controlled win "
               "rate is A's win rate at equal lengths")


class CompareError(AgreementError):
    """The files cannot be compared; one line naming the file, never case text."""


def _read(path: Path) -> list[ResultRecord]:
    try:
        records = read_results(path)
    except ResultsFileDamaged as exc:
        raise CompareError(str(exc)) from None
    except OSError as exc:
        raise CompareError(f"cannot read results file {path} ({exc.strerror})") from None
    if not records:
        raise CompareError(f"{path}: no records")
    if not any(r.pairwise is not None for r in records) or any(
            r.status == "ok" and r.pairwise is None for r in records):
        raise CompareError(f"{path} is not a pairwise results file (its records hold no pair "
                           "judged in both orders): compare reads the results of a rubric "
                           "with kind: pairwise")
    return records


def _systems(path: Path, ok: Sequence[ResultRecord]) -> dict[str, str]:
    pairings = {(r.pairwise.systems["A"], r.pairwise.systems["B"]) for r in ok if r.pairwise}
    if len(pairings) != 1:
        raise CompareError(f"{path}: its records name {len(pairings)} different pairs of "
                           "systems; a file compares one system A with one system B")
    a, b = pairings.pop()  # printable, 1-100 characters: the record model checks them
    if a == b:
        raise CompareError(f"{path}: candidates A and B are the same system")
    return {"A": a, "B": b}


def _criteria(paths: Sequence[Path], oks: Sequence[Sequence[ResultRecord]],
              rubric: str, wanted: Sequence[str]) -> list[str]:
    available: list[str] | None = None
    for records in oks:
        for record in records:
            keys = list((record.pairwise.outcome or record.scores or {}).keys())
            available = keys if available is None else [k for k in available if k in keys]
    available = available or []
    if not wanted:
        if not available:
            raise CompareError(f"{paths[0]}: its records hold no choice criterion")
        return available
    unknown = [c for c in dict.fromkeys(wanted) if c not in available]
    if unknown:
        raise CompareError(f"unknown --criterion {', '.join(map(repr, unknown))}; rubric "
                           f"{rubric!r} has the choice criteria: {', '.join(available)}")
    return list(dict.fromkeys(wanted))


def load_choice_labels(source: LabelSource, rows: list[tuple[int, dict[str, Any]]] | None = None,
                       ) -> tuple[dict[str, str], int]:
    """Case id -> "A", "B" or "tie" (case-insensitive; candidate terms: A is system A) from
    the source's labels file (JSONL or CSV, :func:`label_files.label_rows`; ``rows``: its
    rows, when read already), and the number of rows whose label is still empty. Anything
    else is refused naming the file, line and field, never the value."""
    path, label_field, id_column = Path(str(source.path)), str(source.field), source.id_column
    rows = label_rows(path) if rows is None else rows
    if not rows:
        raise CompareError(f"{path}: no label rows")
    if not any(label_field in row for _, row in rows):
        raise CompareError(f"{path}: no row has the label field {label_field!r}")
    labels: dict[str, str] = {}
    line_of: dict[str, int] = {}
    empty = 0
    for number, row in rows:
        case_id = row.get(id_column)
        if case_id is None or str(case_id).strip() == "":
            raise CompareError(f"{path} line {number}: no case id in {id_column!r}")
        value = row.get(label_field)
        if value is None or (isinstance(value, str) and not value.strip()):
            empty += 1
            continue
        text = value.strip().lower() if isinstance(value, str) else None
        if text not in ("a", "b", "tie"):
            raise CompareError(f"{path} line {number}: field {label_field!r} must be A, B or "
                               "tie (case-insensitive)")
        case_id = str(case_id)
        if case_id in labels:
            raise CompareError(f"{path} lines {line_of[case_id]} and {number} have the same "
                               f"case id (in {id_column!r})")
        labels[case_id] = "tie" if text == "tie" else text.upper()
        line_of[case_id] = number
    if not labels:
        raise CompareError(no_labels_yet(path, label_field))
    return labels, empty


def read_choice_labels(source: LabelSource, rubric: str) -> LabelSet:
    """The labels of ``source``'s one path, read as labels of pairwise results of
    ``rubric`` (its scales and hash checked when it is a built-in one)."""
    try:
        loaded = load_rubric(rubric)
    except RubricError:
        loaded = None  # a rubric not among the built-ins: its hash and choices not checked
    return read_labels(source, rubric=loaded, pairwise=True)


def sheet_choice_labels(source: LabelSource, sheet: LabelSet, keys: Sequence[str],
                        ) -> tuple[dict[str, dict[str, str]], int, list[str]]:
    """Pairwise labels that name their criteria (a sheet's, :mod:`evaluator.analysis.labels`):
    per criterion compared that they rate (``--label-field`` KEY or KEY.label: that one),
    case id -> A, B or tie, a case several labelled given its labellers' majority (a tie
    between their choices: tie); the drawn cases nobody has labelled; the notes to print."""
    folder = sheet.origin
    rated = [k for k in sheet.criteria_for(source.field) if k in keys]
    if not rated:
        raise CompareError(f"{folder} rates {', '.join(sheet.criteria)}, none of the "
                           f"criteria compared ({', '.join(keys)})")
    by_key = {key: {case: str(value) for case, value in sheet.combined(key, "majority").items()}
              for key in rated}
    labelled = {case for labels in by_key.values() for case in labels}
    unlabelled = sum(1 for _, row in sheet.rows
                     if str(row.get(sheet.id_column)) not in labelled)
    return by_key, unlabelled, [sheet.rule_line("majority"), *sheet.notes]


def _comparison(path: Path, pairs: Pairs, labels: dict[str, str] | None, resamples: int,
                seed: int) -> dict[str, Any]:
    entry: dict[str, Any] = {"file": str(path), "systems": pairs.systems,
                             "criterion": pairs.criterion, "n": len(pairs), "notes": []}
    if pairs.skipped:
        entry["notes"].append(f"{pairs.skipped} ok record(s) have no choice for "
                              f"{pairs.criterion!r}: left out")
    if not len(pairs):
        entry["notes"].append("no pair to compare")
        return entry
    entry.update(order_figures(pairs, resamples=resamples, seed=seed))
    entry["length_bias"] = length_bias(pairs.outcome, pairs.length_a, pairs.length_b,
                                       resamples=resamples, seed=seed)
    if entry["length_bias"]["note"]:
        entry["notes"].append(entry["length_bias"]["note"])
    if labels is not None:
        joined = [(o, labels[c]) for o, c in zip(pairs.outcome, pairs.case_ids, strict=True)
                  if c in labels]
        if not joined:
            raise CompareError(f"no labelled case has an ok verdict in {path}; check "
                               "--id-column")
        entry["labels"] = label_agreement([o for o, _ in joined], [v for _, v in joined],
                                          seed=seed)
        outside = len(labels) - len(joined)
        if outside:
            entry["notes"].append(f"{outside} labelled case(s) have no ok verdict on "
                                  f"{pairs.criterion!r} in {path}: left out")
    return entry


class CompareReport(Record):
    """:func:`compare`'s result, read by ``evaluator compare`` (its text and ``--json``): one
    dict per file, per file and criterion (``comparisons``) and per criterion over more
    than two systems (``bradley_terry``), and the notes on reading them."""

    files: list[dict[str, Any]]
    rubric: str
    criteria: list[str]
    comparisons: list[dict[str, Any]]
    bradley_terry: list[dict[str, Any]]
    notes: list[str]


def compare(paths: Sequence[Path], *, criteria: Sequence[str] = (),
            labels: LabelSource | None = None, resamples: int = BOOTSTRAP_RESAMPLES,
            seed: int = BOOTSTRAP_SEED) -> CompareReport:
    """Compare pairwise results files (each one pairing, system A vs B): per file and
    choice criterion (all of the rubric's, or ``criteria``) the win rate, position
    consistency, position bias, length bias and, with ``labels`` (a file), the agreement
    with clinicians' labels (one results file only); per criterion the Bradley-Terry
    strengths when the files cover more than two systems. Its fields: ``files``, ``rubric``,
    ``criteria``, ``comparisons``, ``bradley_terry``, ``notes`` (docs/pairwise.md)."""
    paths = [Path(p) for p in paths]
    labels_path = labels.path if labels is not None else None
    if not paths:
        raise CompareError("give at least one pairwise results file")
    if any(same_file(a, b) for i, a in enumerate(paths) for b in paths[i + 1:]):
        raise CompareError("the same results file is given twice: its pairs would count twice")
    if labels_path is not None and len(paths) != 1:
        raise CompareError("--labels compares one results file with its labels: give one "
                           "RESULTS file")
    if field_needed(labels):
        raise CompareError(f"{FIELD_NEEDED}: A, B or tie")
    require_stats()
    files, oks, rubrics = [], [], {}
    for path in paths:
        records = _read(path)
        ok = [r for r in records if r.status == "ok"]
        if not ok:
            raise CompareError(f"{path}: no ok records ({len(records)} record(s), none judged "
                               "in both orders)")
        names = sorted({r.rubric for r in records})
        if len(names) != 1:
            raise CompareError(f"{path}: records of {len(names)} rubrics")
        rubrics[path] = names[0]
        files.append({"path": str(path), "rubric": names[0], "systems": _systems(path, ok),
                      "records": len(records), "ok": len(ok),
                      "judges": sorted({r.judge for r in ok})})
        oks.append(ok)
    if len(set(rubrics.values())) != 1:
        shown = "; ".join(f"{p} uses {r!r}" for p, r in rubrics.items())
        raise CompareError(f"the files use different rubrics ({shown}): compare files of one "
                           "rubric")
    rubric = rubrics[paths[0]]
    keys = _criteria(paths, oks, rubric, criteria)
    chosen = unlabelled = None
    by_key: dict[str, dict[str, str]] | None = None
    notes = [INCONSISTENT_NOTE, POSITION_NOTE, LENGTH_NOTE]
    label_set = (read_choice_labels(labels, rubric)
                 if labels is not None and labels_path is not None else None)
    if label_set is not None and label_set.named:
        by_key, unlabelled, sheet_notes = sheet_choice_labels(labels, label_set, keys)
        notes += sheet_notes
    elif label_set is not None:
        chosen, unlabelled = load_choice_labels(labels, label_set.rows)
    if unlabelled:
        notes.append(f"{unlabelled} row(s) of {labels_path} are not labelled yet: left out")
    if len({j for f in files for j in f["judges"]}) > 1:
        notes.append("the files were judged by more than one judge")
    comparisons, strengths = [], []
    systems = {name for f in files for name in f["systems"].values()}
    for key in keys:
        battles = []
        for path, ok, info in zip(paths, oks, files, strict=True):
            pairs = pairs_from_records(ok, key)
            comparisons.append(_comparison(path, pairs, chosen if by_key is None
                                           else by_key.get(key), resamples, seed))
            battles.append(Battles(info["systems"]["A"], info["systems"]["B"], pairs.outcome))
        if len(systems) > 2:
            strengths.append({"criterion": key,
                              **bradley_terry(battles, resamples=resamples, seed=seed)})
    return CompareReport(files=files, rubric=rubric, criteria=keys, comparisons=comparisons,
                         bradley_terry=strengths, notes=notes)
