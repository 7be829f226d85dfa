"""A review worksheet: the cases most worth a clinician's time, and how many more labels an
agreement CI needs.

:func:`build_review` picks the ``ok`` cases of one or more results files of one rubric by a
design (:mod:`evaluator.analysis.designs`): ``priority`` ranks them
(:mod:`evaluator.analysis.review.signals`: lowest confidence, disagreeing verdicts, nearest
a pass threshold, in turn) and leaves out the cases labelled already
(:mod:`evaluator.analysis.review.inputs`); ``random`` and ``active`` draw them with known
inclusion probabilities, which every row carries. It lays the worksheet out, with an empty
``<key>.label`` column per criterion that ``evaluator agree --labels review.csv --label-field
<key>.label`` reads back. A ``priority`` sheet (hunting the judge's failures) shows per
criterion the judge's score, expected score, confidence and distribution; a ``random`` or
``active`` sheet (figures about the run) is *blind*: no column or field shows the judge's
verdict, expected score, confidence, distribution, aggregate, signals or reasoning (a label
given with the verdict in view echoes it; agree and estimate take the judge's side from the
results). A pairwise rubric's results are drawn ``random`` only, blind, with an ``A``/``B``/
``tie`` ``<key>.label`` per criterion in terms of the run's two systems. With labellers,
:mod:`evaluator.analysis.review.assignment` says who labels which case. With labels, it
estimates how many more an agreement CI needs (:mod:`evaluator.analysis.review.sample_size`).
:func:`write_review` writes ``review.csv`` (every cell escaped for spreadsheets; UTF-8 after
a byte-order mark, so that Excel reads it as UTF-8), ``review.jsonl`` and ``sheet.json``
(:class:`~evaluator.data.sheet.SheetInfo`: what was drawn, how, whether blind, who labels
what). Rows never hold case text unless ``show_text``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluator.analysis.case_fields import case_fields
from evaluator.analysis.designs import (
    DEFAULT_FLOOR,
    DESIGN_COLUMNS,
    DESIGNS,
    RESULTS_SHA256,
    Draw,
    active_draw,
    case_uncertainty,
    random_draw,
)
from evaluator.analysis.kinds import AnalysisKind, analysis_kind
from evaluator.analysis.label_files import label_criterion
from evaluator.analysis.review.assignment import Assignment, assign, check_labellers
from evaluator.analysis.review.cases import pair_texts
from evaluator.analysis.review.inputs import check_input_file, read_labelled
from evaluator.analysis.review.sample_size import halfwidth_estimate
from evaluator.analysis.review.signals import (
    Candidate,
    PassGate,
    ReviewError,
    case_candidate,
    confidence_of,
    criterion_paths,
    pick_criteria,
    rank_candidates,
    score_at,
)
from evaluator.analysis.labels.verdict_seen import AGGREGATE_PART, JUDGE_PARTS, JUDGE_SIGNAL_COLUMNS
from evaluator.data.csv_files import csv_bytes
from evaluator.data.files import (
    atomic_writer,
    exclusive_lock,
    lock_path_for,
    same_file,
    sha256_file,
    show_path,
)
from evaluator.data.results import ResultRecord, ResultsFileDamaged, read_results
from evaluator.data.sheet import (
    JOURNAL,
    REVIEW_JSONL,
    CasesRef,
    FileRef,
    SheetError,
    SheetInfo,
    journal_path,
    now,
    read_journal,
    sheet_path,
)
from evaluator.data.sources import CaseSource, LabelSource
from evaluator.rubrics.load import load_rubric
from evaluator.rubrics.rubric import (
    ChoiceCriterion,
    IntegerCriterion,
    ItemsCriterion,
    Rubric,
    RubricError,
)

REVIEW_CSV = "review.csv"
DEFAULT_N = 50
# A blind sheet's: no signal of the judge's (its confidence, spread or gate margin).
BLIND_COLUMNS = ("case_id", "rubric", "judge", "rank", "reason")
FIXED_COLUMNS = (*BLIND_COLUMNS, *JUDGE_SIGNAL_COLUMNS)
ASSIGNED_COLUMN = "assigned_to"
PHI_WARNING = ("WARNING: the worksheet now holds case text (PHI) from --cases: keep it "
               "inside the hospital, like the cases file itself")


@dataclass
class ReviewSheet:
    """The worksheet (``rows`` for the CSV, ``records`` for the JSONL, in rank order) and
    what was left out and why."""

    rubric: str
    columns: list[str]
    rows: list[dict[str, str]]
    records: list[dict[str, Any]]
    candidates: int
    labelled_skipped: int
    not_ok: int
    without_signal: int
    show_text: bool
    label_columns: list[str]
    estimates: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    design: str = "priority"
    draw: Draw | None = None
    # No case left to draw: every judged case is labelled in --labels (no sheet is written).
    exhausted: bool = False
    # What sheet.json records (:class:`~evaluator.data.sheet.SheetInfo`).
    kind: str = "single"
    blind: bool = False
    rubric_hash: str = ""
    criteria: list[str] = field(default_factory=list)
    results: list[FileRef] = field(default_factory=list)
    cases_ref: CasesRef | None = None
    assignment: Assignment = field(default_factory=Assignment)
    seed: int | None = None

    def info(self, fingerprint: str) -> SheetInfo:
        """The sheet's ``sheet.json``, for the ``review.jsonl`` whose SHA-256 is
        ``fingerprint``."""
        a = self.assignment
        return SheetInfo(fingerprint=fingerprint, rubric=self.rubric,
                         rubric_hash=self.rubric_hash, kind=self.kind,  # type: ignore[arg-type]
                         design=self.design, blind=self.blind, criteria=list(self.criteria),
                         results=list(self.results), cases=self.cases_ref,
                         labellers=list(a.labellers), overlap=a.overlap,
                         overlap_cases=list(a.overlap_cases), assignment=dict(a.cases),
                         seed=self.seed, created=now())

    @property
    def nothing_to_draw(self) -> str:
        """The one line that says why no sheet is written (for an ``exhausted`` sheet)."""
        return (f"every judged case is labelled already ({self.labelled_skipped} labelled); "
                "nothing to draw")


def _read_results(path: Path, rubrics_dirs: Sequence[Path]) -> list[ResultRecord]:
    check_input_file(path, "results file")
    try:
        return read_results(path, rubrics_dirs)
    except ResultsFileDamaged as exc:
        raise ReviewError(str(exc)) from None
    except OSError as exc:
        raise ReviewError(f"cannot read results file {show_path(path)} ({exc.strerror})") from None


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _criterion_cells(f: IntegerCriterion | ItemsCriterion, record: ResultRecord,
                     ) -> dict[str, Any]:
    """A criterion's score, expected score, confidence and distribution in a record."""
    dists = record.distributions or {}
    paths = criterion_paths(f, record)
    scores = [None if v is None else int(v) if v.is_integer() else v
              for v in (score_at(f, p, record.scores) for p in paths)]
    got = {p: dists[p] for p in paths if p in dists}
    expected = [_rounded(got[p].expected) if p in got else None for p in paths]
    confidences = [confidence_of(d) for d in got.values()]
    distribution = {p: {v: round(prob, 4) for v, prob in d.probabilities.items()}
                    for p, d in got.items()}
    if isinstance(f, IntegerCriterion):
        return {"score": scores[0], "expected": expected[0],
                "confidence": _rounded(confidences[0]) if confidences else None,
                "distribution": distribution.get(f.key)}
    return {"score": scores, "expected": expected,
            "confidence": _rounded(min(confidences)) if confidences else None,
            "distribution": distribution or None}


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else str(round(value, 4))
    return str(value)


def _check_gates(rubric: Rubric, gates: Sequence[PassGate]) -> None:
    keys = ([f.key for f in rubric.output if isinstance(f, IntegerCriterion)]
            + [a.name for a in rubric.aggregates])
    for gate in gates:
        if gate.key not in keys:
            raise ReviewError(f"--pass {gate.rule}: {gate.key!r} is neither an integer criterion "
                              f"nor an aggregate of rubric {rubric.name!r} ({', '.join(keys)})")


def _estimate_key(rubric: Rubric, label_field: str, criteria: Sequence[str]) -> str | None:
    """The criterion the labels rate: ``<key>.label`` (a worksheet's column) or ``<key>``
    itself names it; else the first --criterion that agree compares; else the rubric's first integer one."""
    comparable = ([f.key for f in rubric.output if isinstance(f, IntegerCriterion)]
                  + [a.name for a in rubric.aggregates])
    named = label_criterion(label_field, comparable)
    if named is not None:
        return named
    if label_field in comparable:  # labels named after the criterion they rate
        return label_field
    return next((k for k in [*criteria, *comparable] if k in comparable), None)


def _estimates(rubric: Rubric, files: Sequence[tuple[Path, list[ResultRecord]]],
               labels: Mapping[str, float], key: str | None, *, statistic: str,
               target_halfwidth: float, resamples: int, seed: int) -> list[dict[str, Any]]:
    if key is None:
        return [{"note": "no integer criterion or aggregate to compare with the labels: no "
                         "estimate"}]
    scale = next((f.allowed for f in rubric.output
                  if isinstance(f, IntegerCriterion) and f.key == key), None)
    out = []
    for path, records in files:
        judge, label = [], []
        for record in records:
            if record.status != "ok" or record.case_id not in labels:
                continue
            value = (record.scores or {}).get(key)
            if not isinstance(value, (int, float)):  # an aggregate (maybe of an items key)
                value = (record.aggregates or {}).get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                judge.append(float(value))
                label.append(labels[record.case_id])
        entry = halfwidth_estimate(judge, label, statistic=statistic,
                                   target_halfwidth=target_halfwidth, judge_scale=scale,
                                   resamples=resamples, seed=seed)
        out.append({"results": str(path), "criterion": key, **entry})
    return out


def build_review(results: Sequence[Path], *, n: int = DEFAULT_N, criteria: Sequence[str] = (),
                 gates: Sequence[PassGate] = (), labels: LabelSource | None = None,
                 show_text: bool = False, cases: CaseSource | None = None,
                 rubrics_dirs: Sequence[Path] = (), target_halfwidth: float = 0.1,
                 target_statistic: str = "weighted_kappa", resamples: int = 1000,
                 seed: int = 20141, design: str = "priority",
                 floor: float = DEFAULT_FLOOR, labellers: Sequence[str] = (),
                 overlap: float | None = None,
                 cases_ref: CasesRef | None = None) -> ReviewSheet:
    """The worksheet of the ``n`` cases most worth a clinician's time (see the module
    docstring for the ranking). ``labels``: labels
    already given (their cases are skipped; with them, :func:`halfwidth_estimate` says how
    many more labelled cases bring ``target_statistic``'s CI half-width under
    ``target_halfwidth``); they are on its scale when given, else a ``KEY.label``
    field's on KEY's scale in the rubric. ``show_text`` adds the rubric's input fields, read
    from ``cases`` as the run read them (a pairwise run of two files: from ``cases_ref``,
    its ``versus`` and ``answer_column``).

    ``design`` (:mod:`evaluator.analysis.designs`): ``priority`` (the ranking above),
    ``random`` (``n`` cases drawn at random) or ``active`` (each case drawn with a
    probability that grows with the judge's uncertainty on the first of ``criteria``; at
    least ``floor`` * n/N); ``seed`` seeds the draw (and the estimate's bootstrap, and the
    assignment). ``random`` and ``active`` sheets are blind (the module docstring).
    ``labellers`` and ``overlap``: who labels which case
    (:func:`~evaluator.analysis.review.assignment.assign`). ``cases_ref``: the cases file
    and reading options recorded in ``sheet.json`` (the run's, from its manifest).

    Three steps: the options are checked (:func:`_check_options`), the results and their
    rubric read (:func:`_read_inputs`), then the sheet is drawn and laid out. Checked here,
    raising :class:`ReviewError` (one line, exit 2 in the CLI), are the rules between
    options and files that ``evaluator review``'s click options do not enforce, so the CLI
    relies on them: ``--labels`` with ``--label-field`` and only with ``--design priority``,
    ``--design active`` with a ``--criterion``, ``--show-text`` with a cases file (the CLI
    finds it in the run's manifest), the labellers and ``--overlap``
    (:func:`~evaluator.analysis.review.assignment.check_labellers`), criteria and gates the
    rubric has. ``design`` is checked here as well as by click's choice: a Python caller's
    unknown design would otherwise draw actively and record the wrong design in
    ``sheet.json``. Not checked again here, as click validates them: ``n`` at least 1 (0
    gives an empty sheet), at least one results file (none: "no records"), ``floor``
    (:func:`~evaluator.analysis.designs.inclusion_probabilities` checks it), and
    ``target_statistic`` and ``target_halfwidth`` (:func:`halfwidth_estimate` checks them,
    raising ValueError)."""
    cases = cases or CaseSource()
    _check_options(design, labels, criteria, show_text, cases, labellers, overlap)
    files, rubric, kind = _read_inputs(results, rubrics_dirs, design)
    asked = pick_criteria([f for f in rubric.output if isinstance(f, kind.SHEET_CRITERIA)],
                          criteria, rubric.name, kind.SHEET_VERB)
    # The judge's scores among them: what a sheet ranks by and, unless blind, shows.
    chosen = [f for f in asked if isinstance(f, (IntegerCriterion, ItemsCriterion))]
    _check_gates(rubric, gates)
    labelled: dict[str, float] = {}
    if labels is not None and labels.path is not None and labels.field is not None:
        labelled = read_labelled(labels, rubric)
    by_case, not_ok = _judged(files)
    candidates = [case_candidate(rubric, case_id, records, chosen, gates)
                  for case_id, records in sorted(by_case.items()) if case_id not in labelled]
    # Every judged case labelled: a sheet of 0 cases would tell the user to fill one in.
    exhausted = design == "priority" and not candidates and bool(labelled) and bool(by_case)
    picked, draw = _pick(design, candidates, by_case, chosen, n=n, seed=seed, floor=floor,
                         files=len(files))
    texts = (_texts(picked, rubric, files[0][0], cases, cases_ref) if show_text and picked
             else {})
    assignment = assign([c.case_id for c in picked], labellers, overlap, seed)
    layout = _layout(rubric, kind, asked, chosen, blind=design != "priority",
                     assigned=bool(assignment.labellers), show_text=show_text)
    hashes = [sha256_file(path) for path, _ in files]
    drawn_from = ";".join(dict.fromkeys(hashes))
    records_out = [_record(rank, case, layout, draw, assignment, drawn_from, texts)
                   for rank, case in enumerate(picked, start=1)]
    without = sum(1 for c in candidates
                  if c.confidence is None and not c.spread and c.margin is None)
    estimates: list[dict[str, Any]] = []
    if labelled and labels is not None and labels.field is not None:
        estimates = _estimates(rubric, files, labelled,
                               _estimate_key(rubric, labels.field, criteria),
                               statistic=target_statistic, target_halfwidth=target_halfwidth,
                               resamples=resamples, seed=seed)
    return ReviewSheet(rubric=rubric.name, columns=layout.columns,
                       rows=[_row(record, layout) for record in records_out],
                       records=records_out, candidates=len(candidates),
                       labelled_skipped=sum(1 for c in by_case if c in labelled),
                       not_ok=len(not_ok - set(by_case)), without_signal=without,
                       show_text=show_text, label_columns=[f"{k}.label" for k in layout.labels],
                       estimates=estimates,
                       notes=_notes(design, draw, len(picked), n, exhausted, len(candidates),
                                    without),
                       design=design, draw=draw, exhausted=exhausted, kind=kind.SHEET,
                       blind=layout.blind, rubric_hash=rubric.source_sha256 or "",
                       criteria=layout.labels,
                       results=[FileRef(path=str(path), sha256=digest)
                                for (path, _), digest in zip(files, hashes, strict=True)],
                       cases_ref=cases_ref, assignment=assignment, seed=seed)


def _check_options(design: str, labels: LabelSource | None, criteria: Sequence[str],
                   show_text: bool, cases: CaseSource, labellers: Sequence[str],
                   overlap: float | None) -> None:
    """Refuse, before any file is read, options that do not go together (the rules
    :func:`build_review`'s docstring lists)."""
    if design not in DESIGNS:
        raise ReviewError(f"--design {design!r}: one of {', '.join(DESIGNS)}")
    check_labellers(labellers, overlap)
    labels_path = labels.path if labels is not None else None
    label_field = labels.field if labels is not None else None
    if design != "priority" and labels_path is not None:
        raise ReviewError(f"--labels goes with --design priority only: --design {design} "
                          "draws from every judged case, labelled or not, so that each has a "
                          "known probability (label the new sheet in full)")
    if design == "active" and not criteria:
        raise ReviewError("--design active needs --criterion KEY: the score whose "
                          "uncertainty sets each case's probability")
    if (labels_path is None) != (label_field is None):
        raise ReviewError("--labels and --label-field go together")
    if show_text and cases.path is None:
        raise ReviewError("--show-text needs --cases (the cases file the run read)")


def _read_inputs(results: Sequence[Path], rubrics_dirs: Sequence[Path], design: str,
                 ) -> tuple[list[tuple[Path, list[ResultRecord]]], Rubric, AnalysisKind]:
    """Each results file's records, their one rubric and its analysis kind (which may
    refuse a sheet of this ``design``)."""
    files = [(Path(p), _read_results(Path(p), rubrics_dirs)) for p in results]
    names = sorted({r.rubric for _, records in files for r in records})
    if len(names) != 1:
        raise ReviewError("the results files hold no records" if not names else
                          f"the results files hold records of {len(names)} rubrics "
                          f"({', '.join(names)}); review one rubric at a time")
    try:
        rubric = load_rubric(names[0], tuple(rubrics_dirs))
    except RubricError as exc:
        raise ReviewError(f"rubric {names[0]!r} cannot be loaded ({exc}); give "
                          "--rubrics-dir") from None
    kind = analysis_kind(rubric)
    if refused := kind.sheet_refusal(", ".join(map(str, results)), rubric, design):
        raise ReviewError(refused)
    return files, rubric, kind


def _judged(files: Sequence[tuple[Path, list[ResultRecord]]],
            ) -> tuple[dict[str, list[ResultRecord]], set[str]]:
    """The ``ok`` records (with scores) by case id, over every file, and the other cases."""
    by_case: dict[str, list[ResultRecord]] = {}
    not_ok: set[str] = set()
    for _, records in files:
        for record in records:
            if record.status == "ok" and record.scores is not None:
                by_case.setdefault(record.case_id, []).append(record)
            else:
                not_ok.add(record.case_id)
    return by_case, not_ok


def _pick(design: str, candidates: Sequence[Candidate],
          by_case: Mapping[str, list[ResultRecord]],
          chosen: Sequence[IntegerCriterion | ItemsCriterion], *, n: int,
          seed: int, floor: float, files: int) -> tuple[list[Candidate], Draw | None]:
    """The sheet's cases in rank order: the ranking (``priority``, no draw) or the draw
    (``random`` or ``active``, each row's reason its probability)."""
    if design == "priority":
        return rank_candidates(candidates, n), None
    draw = (random_draw(list(by_case), n, seed) if design == "random" else
            active_draw({c: case_uncertainty(chosen[0], records) for c, records in
                         by_case.items()}, n, seed, criterion=chosen[0].key, floor=floor))
    draw.files = files
    if not draw.chosen:
        raise ReviewError(f"the active draw took no case (expected {n} of "
                          f"{draw.population}): raise --n, or draw again with another "
                          "--seed")
    by_id = {c.case_id: c for c in candidates}
    picked = [by_id[c] for c in draw.chosen]
    for case in picked:
        # The design only: the judge's uncertainty that set an active probability is
        # its verdict's, and a blind sheet shows none of it.
        case.reason = f"{design} draw (probability {draw.probabilities[case.case_id]:.3g})"
    return picked, draw


def _texts(picked: Sequence[Candidate], rubric: Rubric, results_path: Path, cases: CaseSource,
           cases_ref: CasesRef | None) -> dict[str, dict[str, str]]:
    """The rubric's input fields of each picked case, as the run read them."""
    if cases_ref is not None and cases_ref.versus is not None:  # the run read two files
        return pair_texts({c.case_id for c in picked}, rubric, cases_ref)
    fields, note = case_fields([c.record for c in picked], results_path, rubric, cases)
    if fields is None:
        raise ReviewError(note)
    return fields


@dataclass
class _Layout:
    """The worksheet's columns and what fills them: the judge's criteria shown (``chosen``,
    none on a ``blind`` sheet) and their aggregates, the keys labelled (``labels``), the
    ``kind``'s own columns, the assignment column, the case text."""

    columns: list[str]
    blind: bool
    chosen: list[IntegerCriterion | ItemsCriterion]
    aggregates: list[str]
    labels: list[str]
    kind: AnalysisKind
    assigned: bool
    show_text: bool
    inputs: list[str]


def _layout(rubric: Rubric, kind: AnalysisKind, asked: Sequence[Any],
            chosen: Sequence[IntegerCriterion | ItemsCriterion], *,
            blind: bool, assigned: bool, show_text: bool) -> _Layout:
    """The worksheet's columns (two with one name are refused)."""
    aggregates = [a.name for a in rubric.aggregates if a.of in {f.key for f in chosen}]
    # What a labeller answers (label/criteria.py): a value on an integer criterion's scale,
    # a choice, and the aggregates of the scores chosen (agree compares them).
    label_keys = list(dict.fromkeys([f.key for f in asked if isinstance(
        f, (IntegerCriterion, ChoiceCriterion))] + aggregates))
    verdict_columns = [] if blind else [
        *(f"{f.key}.{part}" for f in chosen for part in JUDGE_PARTS),
        *(f"{name}.{AGGREGATE_PART}" for name in aggregates)]
    inputs = list(rubric.inputs) if show_text else []
    columns = [*(BLIND_COLUMNS if blind else FIXED_COLUMNS), *DESIGN_COLUMNS, RESULTS_SHA256,
               *kind.SHEET_COLUMNS, *((ASSIGNED_COLUMN,) if assigned else ()),
               *verdict_columns, *(f"{k}.label" for k in label_keys),
               *(f"input.{name}" for name in inputs)]
    if len(set(columns)) != len(columns):
        raise ReviewError("the rubric's keys give two worksheet columns the same name")
    return _Layout(columns=columns, blind=blind, chosen=list(chosen), aggregates=aggregates,
                   labels=label_keys, kind=kind, assigned=assigned, show_text=show_text,
                   inputs=inputs)


def _record(rank: int, case: Candidate, layout: _Layout, draw: Draw | None,
            assignment: Assignment, drawn_from: str,
            texts: Mapping[str, dict[str, str]]) -> dict[str, Any]:
    """A case's ``review.jsonl`` record (its CSV row: :func:`_row`)."""
    record_out: dict[str, Any] = {
        "case_id": case.case_id, "rubric": case.record.rubric, "judge": case.record.judge,
        "rank": rank, "reason": case.reason}
    if not layout.blind:
        record_out.update({
            "min_confidence": _rounded(case.confidence),
            "max_spread": _rounded(case.spread), "gate_margin": _rounded(case.margin),
            "criteria": {f.key: _criterion_cells(f, case.record) for f in layout.chosen},
            "aggregates": {name: (case.record.aggregates or {}).get(name)
                           for name in layout.aggregates}})
    record_out.update(layout.kind.sheet_fields(case.record))
    if layout.assigned:
        record_out[ASSIGNED_COLUMN] = assignment.of(case.case_id)
    record_out[RESULTS_SHA256] = drawn_from
    record_out.update({f"{k}.label": None for k in layout.labels})
    record_out.update(draw.columns(case.case_id) if draw is not None else
                      {col: None for col in DESIGN_COLUMNS} | {"design": "priority"})
    if layout.show_text:
        text = texts.get(case.case_id, {})
        record_out["input"] = {name: text.get(name, "") for name in layout.inputs}
    return record_out


def _row(record_out: Mapping[str, Any], layout: _Layout) -> dict[str, str]:
    """A case's CSV row, from its ``review.jsonl`` record (:func:`_record`)."""
    row = {col: _cell(record_out.get(col))
           for col in (BLIND_COLUMNS if layout.blind else FIXED_COLUMNS)}
    # Probabilities at full precision (str of a float round-trips): an estimate weights
    # by them, so a rounded one would be a wrong weight.
    row.update({col: "" if record_out.get(col) is None else str(record_out[col])
                for col in DESIGN_COLUMNS})
    row[RESULTS_SHA256] = record_out[RESULTS_SHA256]
    row.update({col: str(record_out.get(col, "")) for col in layout.kind.SHEET_COLUMNS})
    if layout.assigned:
        row[ASSIGNED_COLUMN] = ";".join(record_out[ASSIGNED_COLUMN])
    for key, cell in (record_out.get("criteria") or {}).items():
        row.update({f"{key}.{part}": _cell(value) for part, value in cell.items()})
    if not layout.blind:
        row.update({f"{name}.aggregate": _cell(record_out["aggregates"][name])
                    for name in layout.aggregates})
    row.update({f"{k}.label": "" for k in layout.labels})
    if layout.show_text:
        row.update({f"input.{name}": value for name, value in record_out["input"].items()})
    return row


def _notes(design: str, draw: Draw | None, picked: int, n: int, exhausted: bool,
           candidates: int, without: int) -> list[str]:
    """The draw's notes (an active one: its probabilities), or why a ranking has fewer
    cases than asked for."""
    if draw is not None:
        notes = list(draw.notes)
        if design == "active":
            notes.append(f"{picked} case(s) drawn (expected {min(n, draw.population)}) "
                         f"of {draw.population}; probabilities from "
                         f"{min(draw.probabilities.values()):.3g} to "
                         f"{max(draw.probabilities.values()):.3g}")
        return notes
    if picked < n and not exhausted:
        return [(f"{picked} of the {n} cases asked for: of {candidates} "
                f"unlabelled judged case(s), {without} have no signal (no distributions, "
                "one verdict, no --pass gate)")]
    return []


def review_paths(out_dir: Path) -> tuple[Path, Path]:
    """The worksheet's two files in ``out_dir``: CSV and JSONL (``sheet.json`` beside them:
    :func:`evaluator.data.sheet.sheet_path`)."""
    return Path(out_dir) / REVIEW_CSV, Path(out_dir) / REVIEW_JSONL


def _saved_labels(out_dir: Path) -> int:
    """How many labels the sheet folder's journal holds (a damaged journal: its non-blank
    lines, which are labels someone saved all the same)."""
    target = journal_path(out_dir)
    if not target.exists():
        return 0
    try:
        return sum(1 for _ in read_journal(out_dir))
    except SheetError:
        return sum(1 for line in target.read_bytes().splitlines() if line.strip())


def write_review(sheet: ReviewSheet, out_dir: Path, *, force: bool = False,
                 inputs: Sequence[Path] = ()) -> tuple[Path, Path]:
    """Write ``review.csv``, ``review.jsonl`` and ``sheet.json`` in ``out_dir`` (created
    0700; files 0600). ``sheet.json`` (:meth:`ReviewSheet.info`) carries the SHA-256 of the
    ``review.jsonl`` bytes written (its ``fingerprint``).
    An existing worksheet (a clinician may be filling it in) is replaced only with
    ``force``, and never when it is one of ``inputs`` (the labels read) or when the
    folder's ``journal.jsonl`` holds labels (saved against the old draw: a new draw would
    strand them). Every CSV cell, header and case ids included, is escaped by
    :func:`~evaluator.data.csv_files.csv_bytes` (no cell a spreadsheet runs; the labels
    reader undoes it), and the file starts with a UTF-8 byte-order mark (Excel reads a CSV
    without one as Windows-1252). ``review.evaluator-lock``
    in ``out_dir`` (:func:`exclusive_lock`, as a run's) is held from the checks to the end:
    a second ``review`` on the same ``--out`` is refused
    (:class:`~evaluator.data.files.OutputBusy`), and the CSV and JSONL are written to
    temporaries before either is renamed into place, then ``sheet.json`` (also through a
    temporary) under the same lock, so the three always describe the same draw. An
    ``exhausted`` sheet (no case left to draw) is refused: it would be a sheet of 0 cases."""
    if sheet.exhausted:
        raise ReviewError(sheet.nothing_to_draw)
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ReviewError(f"--out {show_path(out_dir)} exists and is not a folder")
    targets = review_paths(out_dir)
    info_path = sheet_path(out_dir)
    table = csv_bytes([sheet.columns, *([row.get(name, "") for name in sheet.columns]
                                       for row in sheet.rows)])
    jsonl = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in sheet.records
                    ).encode("utf-8")
    info = sheet.info(hashlib.sha256(jsonl).hexdigest())
    info_bytes = (json.dumps(info.to_json(), indent=1, ensure_ascii=False) + "\n"
                  ).encode("utf-8")
    try:
        with exclusive_lock(lock_path_for(targets[0]), targets[0], writer="`evaluator review`",
                            wait_option=None):
            for target in (*targets, info_path):
                if any(Path(i).exists() and target.exists() and same_file(target, Path(i))
                       for i in inputs):
                    raise ReviewError(f"{show_path(target)} is also an input (one of the files "
                                      "read); write the new worksheet to another --out folder")
                if target.is_symlink():  # checked for all three before any is written
                    raise ReviewError(f"{show_path(target)} is a symbolic link; a worksheet is "
                                      "never written through one: remove it or choose another "
                                      "--out")
                if target.exists() and not force:
                    raise ReviewError(f"{show_path(target)} exists (a worksheet that may hold "
                                      "labels already); pass --force to replace it, or choose "
                                      "another --out")
            saved = _saved_labels(out_dir)
            if saved:
                # The journal's labels were saved against this draw (its fingerprint): a new
                # draw over it would strand every one of them, --force or not.
                raise ReviewError(f"{show_path(out_dir)}: the sheet has {saved} saved "
                                  f"label(s) in {JOURNAL}; draw the new sheet into another "
                                  "--out")
            # The three temporaries are written in full before any is renamed into place
            # (the JSONL's, the CSV's, then sheet.json's, as write_sheet_info writes it): an
            # error while writing leaves the three old files.
            with atomic_writer(info_path) as info_file, \
                    atomic_writer(targets[0]) as csv_file, \
                    atomic_writer(targets[1]) as jsonl_file:
                csv_file.write(table)
                jsonl_file.write(jsonl)
                info_file.write(info_bytes)
    except OSError as exc:  # the folder or the disk: one line naming where
        where = show_path(exc.filename) if exc.filename else show_path(out_dir)
        raise ReviewError(f"cannot write {where} ({exc.strerror})") from None
    return targets
