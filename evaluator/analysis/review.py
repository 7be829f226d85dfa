"""A review worksheet: the cases most worth a clinician's time, and how many more labels an
agreement CI needs.

:func:`build_review` reads the ``ok`` records of one or more results files (one rubric) and
ranks their cases by three signals, each a list of its own:

* **confidence** - the lowest, over the chosen criteria's scores, of the judge's probability
  of the value it gave (``ScoreDistribution.confidence``; the largest probability where the
  given value is not an allowed one, e.g. a median of 2.5); lowest first. Several files:
  the lowest over them. Cases without distributions are not in this list.
* **disagreement** - the spread (max - min) of the scores several verdicts gave one score:
  self-consistency samples or jury members in a record, and the judges of the RESULTS files
  when there are several; divided by the width of the criterion's scale so that scales
  compare; largest first, only cases with a spread above 0.
* **gate** (with ``--pass KEY>=T``) - how close the expected score (from the distribution,
  aggregates recomputed from expected scores; the verdict's own score where there is no
  distribution) is to the threshold: |expected - T|, divided by the scale's width for an
  integer criterion (an aggregate's margin is used as it is); the smallest over the gates,
  smallest first.

The worksheet takes the head of each list in turn (confidence, disagreement, gate), skipping
cases already taken, until it has ``n`` cases or the lists run out; ties within a list go by
case id, so the same inputs give the same sheet. Each row says which list picked it
(``reason``) and carries all three figures. Cases with a label already (``labels``) are not
proposed again; rows never hold case text unless ``show_text``.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluator.analysis.case_fields import case_fields
from evaluator.analysis.distributions import verdict_view
from evaluator.analysis.sample_size import TARGET_STATISTICS, halfwidth_estimate
from evaluator.common.readable import NotARegularFile, check_regular_file
from evaluator.data.files import atomic_writer, same_file, show_path
from evaluator.data.results import ResultRecord, ResultsFileDamaged, ScoreDistribution, read_results
from evaluator.rubrics.load import load_rubric
from evaluator.rubrics.rubric import IntegerCriterion, ItemsCriterion, Rubric, RubricError
from evaluator.rubrics.score_paths import item_path

REVIEW_CSV = "review.csv"
REVIEW_JSONL = "review.jsonl"
DEFAULT_N = 50
SIGNALS = ("confidence", "disagreement", "gate")
FIXED_COLUMNS = ("case_id", "rubric", "judge", "rank", "reason", "min_confidence",
                 "max_spread", "gate_margin")
PHI_WARNING = ("WARNING: the worksheet now holds case text (PHI) from --cases: keep it "
               "inside the hospital, like the cases file itself")
# A spreadsheet runs a cell that starts with one of these as a formula.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_GATE = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*>=\s*([-+]?\d+(?:\.\d+)?)\s*")


class ReviewError(ValueError):
    """The worksheet cannot be built or written (a wrong path, an unknown criterion, a
    worksheet already there); the message names files, lines and fields, never case text."""


@dataclass(frozen=True)
class PassGate:
    """``--pass KEY>=T``: a pass threshold on an integer criterion or aggregate."""

    key: str
    threshold: float

    def __str__(self) -> str:
        return f"{self.key}>={self.threshold:g}"


def parse_gate(text: str) -> PassGate:
    """``"accuracy>=3"`` -> :class:`PassGate`."""
    match = _GATE.fullmatch(text)
    if not match:
        raise ReviewError(f"--pass {text!r}: expected CRITERION>=THRESHOLD, e.g. accuracy>=3")
    return PassGate(match.group(1), float(match.group(2)))


@dataclass
class Candidate:
    """One case's signals over every results file, and the verdict its row shows."""

    case_id: str
    record: ResultRecord
    confidence: float | None = None
    confidence_text: str = ""
    spread: float | None = None
    spread_text: str = ""
    margin: float | None = None
    margin_text: str = ""
    reason: str = ""


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


def _check_file(path: Path, what: str) -> None:
    try:
        check_regular_file(path, what)
    except FileNotFoundError:
        raise ReviewError(f"{what} {show_path(path)} does not exist") from None
    except NotARegularFile as exc:
        raise ReviewError(str(exc)) from None
    except OSError as exc:
        raise ReviewError(f"cannot read {what} {show_path(path)} ({exc.strerror})") from None


def _read_results(path: Path) -> list[ResultRecord]:
    _check_file(path, "results file")
    try:
        return read_results(path)
    except ResultsFileDamaged as exc:
        raise ReviewError(str(exc)) from None
    except OSError as exc:
        raise ReviewError(f"cannot read results file {show_path(path)} ({exc.strerror})") from None


def _label_value(value: object) -> float | None | str:
    """A label: a float, None for "not labelled yet" (empty or null), or "bad"."""
    if value is None or (isinstance(value, str) and value.strip() == ""):
        return None
    if isinstance(value, bool):
        return "bad"
    try:
        number = float(value.strip() if isinstance(value, str) else value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "bad"
    return number if math.isfinite(number) else "bad"


def _label_rows(path: Path) -> list[tuple[int, dict[str, Any]]]:
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".jsonl"):
        raise ReviewError(f"labels file {show_path(path)}: must be a .csv or .jsonl file")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ReviewError(f"labels file {show_path(path)} is not UTF-8 text") from None
    except OSError as exc:
        raise ReviewError(f"cannot read labels file {show_path(path)} ({exc.strerror})") from None
    if suffix == ".csv":
        reader = csv.DictReader(io.StringIO(text, newline=""))
        try:
            return [(reader.line_num, row) for row in reader]
        except csv.Error as exc:
            raise ReviewError(f"labels file {show_path(path)} line {reader.line_num}: not "
                              f"valid CSV ({exc})") from None
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ReviewError(f"labels file {show_path(path)} line {number}: not valid JSON "
                              f"({exc.msg})") from None
        if not isinstance(row, dict):
            raise ReviewError(f"labels file {show_path(path)} line {number}: expected a JSON "
                              "object")
        rows.append((number, row))
    return rows


def read_labelled(path: Path, label_field: str, id_column: str = "case_id") -> dict[str, float]:
    """Case id -> label for every row of a labels file (CSV or JSONL) with a label. Unlike
    ``evaluator agree``, a row whose label is empty (or null) is "not labelled yet" and left
    out, so a half-filled worksheet can be read; a label that is not a number, a row
    without an id and a repeated id are errors naming the line, never the id."""
    path = Path(path)
    _check_file(path, "labels file")
    rows = _label_rows(path)
    if not any(label_field in row for _, row in rows):
        raise ReviewError(f"labels file {show_path(path)}: no row has the label field "
                          f"{label_field!r}")
    labels: dict[str, float] = {}
    first: dict[str, int] = {}
    for number, row in rows:
        case_id = row.get(id_column)
        if case_id is None or str(case_id).strip() == "":
            raise ReviewError(f"labels file {show_path(path)} line {number}: no case id in "
                              f"{id_column!r} (--id-column)")
        case_id = str(case_id)
        if case_id in first:
            raise ReviewError(f"labels file {show_path(path)} lines {first[case_id]} and "
                              f"{number} have the same case id (in {id_column!r})")
        first[case_id] = number
        value = _label_value(row.get(label_field))
        if value == "bad":
            raise ReviewError(f"labels file {show_path(path)} line {number}: field "
                              f"{label_field!r} is not a number")
        if isinstance(value, float):
            labels[case_id] = value
    return labels


def _width(criterion: IntegerCriterion | ItemsCriterion) -> float:
    allowed = criterion.allowed
    return float(max(allowed) - min(allowed)) or 1.0


def _item_paths(field_: ItemsCriterion, scores: Mapping[str, Any] | None) -> list[str]:
    items = (scores or {}).get(field_.key) or []
    return [item_path(field_.key, i, field_.score_key) for i in range(len(items))]


def _value_at(field_: IntegerCriterion | ItemsCriterion, path: str,
              scores: Mapping[str, Any] | None) -> float | None:
    scores = scores or {}
    if isinstance(field_, IntegerCriterion):
        value = scores.get(field_.key)
    else:
        index = int(path[len(field_.key) + 1:path.index("]")])
        items = scores.get(field_.key) or []
        item = items[index] if index < len(items) else None
        value = item.get(field_.score_key) if isinstance(item, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _paths(field_: IntegerCriterion | ItemsCriterion, record: ResultRecord) -> list[str]:
    return [field_.key] if isinstance(field_, IntegerCriterion) else _item_paths(field_, record.scores)


def _confidence_of(dist: ScoreDistribution) -> float:
    return dist.confidence if dist.confidence is not None else max(dist.probabilities.values())


def _lowest_confidence(record: ResultRecord, chosen: Sequence[IntegerCriterion | ItemsCriterion],
                       ) -> tuple[float, str] | None:
    found = [(_confidence_of(record.distributions[p]), p)
             for f in chosen for p in _paths(f, record)
             if record.distributions and p in record.distributions]
    return min(found) if found else None


def _spread(values: Sequence[float], width: float) -> float:
    return (max(values) - min(values)) / width


def _fmt(value: float) -> str:
    return f"{value:g}" if float(value).is_integer() else f"{value:.2f}"


def _panel_spread(record: ResultRecord, chosen: Sequence[IntegerCriterion | ItemsCriterion],
                  ) -> tuple[float, str] | None:
    panel = [v for v in (record.samples or record.jury or []) if v.status == "ok" and v.scores]
    if len(panel) < 2:
        return None
    kind = "samples" if record.samples else "jury members"
    best: tuple[float, str] | None = None
    for f in chosen:
        for path in _paths(f, record):
            values = [v for v in (_value_at(f, path, p.scores) for p in panel) if v is not None]
            if len(values) < 2:
                continue
            spread = _spread(values, _width(f))
            if best is None or spread > best[0]:
                best = (spread, f"{kind} disagree: {', '.join(map(_fmt, values))} on {path}")
    return best


def _files_spread(records: Sequence[ResultRecord],
                  chosen: Sequence[IntegerCriterion | ItemsCriterion]) -> tuple[float, str] | None:
    if len(records) < 2:
        return None
    best: tuple[float, str] | None = None
    for f in chosen:
        for path in _paths(f, records[0]):
            pairs = [(r.judge, v) for r in records
                     if (v := _value_at(f, path, r.scores)) is not None]
            if len(pairs) < 2:
                continue
            spread = _spread([v for _, v in pairs], _width(f))
            if best is None or spread > best[0]:
                shown = ", ".join(f"{judge} {_fmt(v)}" for judge, v in pairs)
                best = (spread, f"judges disagree: {shown} on {path}")
    return best


def _gate_margin(rubric: Rubric, record: ResultRecord, gates: Sequence[PassGate],
                 ) -> tuple[float, str] | None:
    if not gates:
        return None
    view, source = verdict_view(rubric, record, "expected"), "expected"
    if view is None:
        view, source = verdict_view(rubric, record, "argmax"), "score"
    if view is None:
        return None
    scores, aggregates = view
    by_key = {f.key: f for f in rubric.output if isinstance(f, IntegerCriterion)}
    best: tuple[float, str] | None = None
    for gate in gates:
        value = scores.get(gate.key) if gate.key in by_key else (aggregates or {}).get(gate.key)
        if value is None or isinstance(value, (bool, list, str)):
            continue
        margin = abs(float(value) - gate.threshold)
        if gate.key in by_key:
            margin /= _width(by_key[gate.key])
        if best is None or margin < best[0]:
            best = (margin, f"near pass gate {gate}: {source} {float(value):.2f}")
    return best


def _candidate(rubric: Rubric, case_id: str, records: Sequence[ResultRecord],
               chosen: Sequence[IntegerCriterion | ItemsCriterion],
               gates: Sequence[PassGate]) -> Candidate:
    lowest = [(c, r) for r in records if (c := _lowest_confidence(r, chosen)) is not None]
    shown = min(lowest, key=lambda cr: cr[0][0])[1] if lowest else records[0]
    out = Candidate(case_id, shown)
    if lowest:
        (value, path), _ = min(lowest, key=lambda cr: cr[0][0])
        out.confidence, out.confidence_text = value, f"lowest confidence: P {value:.2f} on {path}"
    spreads = [s for s in [_files_spread(records, chosen),
                           *(_panel_spread(r, chosen) for r in records)] if s is not None]
    if spreads:
        out.spread, out.spread_text = max(spreads, key=lambda s: s[0])
    margins = [m for r in records if (m := _gate_margin(rubric, r, gates)) is not None]
    if margins:
        out.margin, out.margin_text = min(margins, key=lambda m: m[0])
    return out


def rank_candidates(candidates: Sequence[Candidate], n: int) -> list[Candidate]:
    """The worksheet's cases: the head of each signal's list in turn (confidence lowest
    first, disagreement largest first, gate margin smallest first; ties by case id),
    skipping cases already taken, until ``n`` or the lists run out. Sets ``reason``."""
    lists = [
        sorted((c for c in candidates if c.confidence is not None),
               key=lambda c: (c.confidence, c.case_id)),
        sorted((c for c in candidates if c.spread is not None and c.spread > 0),
               key=lambda c: (-(c.spread or 0.0), c.case_id)),
        sorted((c for c in candidates if c.margin is not None),
               key=lambda c: (c.margin, c.case_id)),
    ]
    texts = [lambda c: c.confidence_text, lambda c: c.spread_text, lambda c: c.margin_text]
    taken: dict[str, Candidate] = {}
    heads = [0, 0, 0]
    while len(taken) < n and any(heads[i] < len(lists[i]) for i in range(3)):
        for i, ranked in enumerate(lists):
            while heads[i] < len(ranked) and ranked[heads[i]].case_id in taken:
                heads[i] += 1
            if heads[i] < len(ranked) and len(taken) < n:
                case = ranked[heads[i]]
                case.reason = texts[i](case)
                taken[case.case_id] = case
    return list(taken.values())


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _criterion_cells(f: IntegerCriterion | ItemsCriterion, record: ResultRecord,
                     ) -> dict[str, Any]:
    """A criterion's score, expected score, confidence and distribution in a record."""
    dists = record.distributions or {}
    paths = _paths(f, record)
    scores = [None if v is None else int(v) if v.is_integer() else v
              for v in (_value_at(f, p, record.scores) for p in paths)]
    got = {p: dists[p] for p in paths if p in dists}
    expected = [_rounded(got[p].expected) if p in got else None for p in paths]
    confidences = [_confidence_of(d) for d in got.values()]
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


def _safe_text(text: str) -> str:
    """Case text for a CSV cell that a spreadsheet will not run as a formula."""
    return f"'{text}" if text.startswith(_FORMULA_START) else text


def _chosen_criteria(rubric: Rubric, criteria: Sequence[str],
                     ) -> list[IntegerCriterion | ItemsCriterion]:
    scored = [f for f in rubric.output if isinstance(f, (IntegerCriterion, ItemsCriterion))]
    if not criteria:
        return scored
    by_key = {f.key: f for f in scored}
    unknown = [k for k in criteria if k not in by_key]
    if unknown:
        raise ReviewError(f"unknown --criterion {', '.join(map(repr, unknown))}; rubric "
                          f"{rubric.name!r} scores: {', '.join(by_key)}")
    return [by_key[k] for k in dict.fromkeys(criteria)]


def _check_gates(rubric: Rubric, gates: Sequence[PassGate]) -> None:
    keys = ([f.key for f in rubric.output if isinstance(f, IntegerCriterion)]
            + [a.name for a in rubric.aggregates])
    for gate in gates:
        if gate.key not in keys:
            raise ReviewError(f"--pass {gate}: {gate.key!r} is neither an integer criterion "
                              f"nor an aggregate of rubric {rubric.name!r} ({', '.join(keys)})")


def _estimate_key(rubric: Rubric, label_field: str, criteria: Sequence[str]) -> str | None:
    """The criterion the labels rate: ``<key>.label`` (a worksheet's column) names it;
    else the first --criterion that agree compares; else the rubric's first integer one."""
    comparable = ([f.key for f in rubric.output if isinstance(f, IntegerCriterion)]
                  + [a.name for a in rubric.aggregates])
    if label_field.endswith(".label") and label_field[:-6] in comparable:
        return label_field[:-6]
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
                 gates: Sequence[PassGate] = (), labels_path: Path | None = None,
                 label_field: str | None = None, id_column: str = "case_id",
                 show_text: bool = False, cases_path: Path | None = None,
                 mapping: Mapping[str, str] | None = None, case_id_column: str = "case_id",
                 rubrics_dirs: Sequence[Path] = (), target_halfwidth: float = 0.1,
                 target_statistic: str = "weighted_kappa", resamples: int = 1000,
                 seed: int = 20141) -> ReviewSheet:
    """The worksheet of the ``n`` cases most worth a clinician's time (see the module
    docstring for the ranking). ``labels_path``/``label_field``/``id_column``: labels
    already given (their cases are skipped; with them, :func:`halfwidth_estimate` says how
    many more labelled cases bring ``target_statistic``'s CI half-width under
    ``target_halfwidth``). ``show_text`` adds the rubric's input fields, read from
    ``cases_path`` with the run's ``mapping`` and ``case_id_column``."""
    if not results:
        raise ReviewError("give at least one results file")
    if n < 1:
        raise ReviewError("--n must be at least 1")
    if (labels_path is None) != (label_field is None):
        raise ReviewError("--labels and --label-field go together")
    if show_text and cases_path is None:
        raise ReviewError("--show-text needs --cases (the cases file the run read)")
    if target_statistic not in TARGET_STATISTICS:
        raise ReviewError(f"--target-statistic {target_statistic!r}: one of "
                          f"{', '.join(TARGET_STATISTICS)}")
    if not target_halfwidth > 0:
        raise ReviewError("--target-halfwidth must be above 0")
    files = [(Path(p), _read_results(Path(p))) for p in results]
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
    chosen = _chosen_criteria(rubric, criteria)
    _check_gates(rubric, gates)
    labels: dict[str, float] = {}
    if labels_path is not None and label_field is not None:
        labels = read_labelled(Path(labels_path), label_field, id_column)
    by_case: dict[str, list[ResultRecord]] = {}
    not_ok: set[str] = set()
    for _, records in files:
        for record in records:
            if record.status == "ok" and record.scores is not None:
                by_case.setdefault(record.case_id, []).append(record)
            else:
                not_ok.add(record.case_id)
    candidates = [_candidate(rubric, case_id, records, chosen, gates)
                  for case_id, records in sorted(by_case.items()) if case_id not in labels]
    picked = rank_candidates(candidates, n)
    without = sum(1 for c in candidates
                  if c.confidence is None and not c.spread and c.margin is None)
    texts: dict[str, dict[str, str]] = {}
    notes: list[str] = []
    if show_text and picked:
        fields, note = case_fields([c.record for c in picked], files[0][0], rubric,
                                   cases_path=cases_path, mapping=mapping,
                                   id_column=case_id_column)
        if fields is None:
            raise ReviewError(note)
        texts = fields
    # What agree compares: integer criteria, and the aggregates of the chosen criteria.
    aggregates = [a.name for a in rubric.aggregates if a.of in {f.key for f in chosen}]
    label_keys = list(dict.fromkeys(
        [f.key for f in chosen if isinstance(f, IntegerCriterion)] + aggregates))
    columns = [*FIXED_COLUMNS,
               *(f"{f.key}.{part}" for f in chosen
                 for part in ("score", "expected", "confidence", "distribution")),
               *(f"{name}.aggregate" for name in aggregates),
               *(f"{k}.label" for k in label_keys),
               *((f"input.{name}" for name in rubric.inputs) if show_text else ())]
    if len(set(columns)) != len(columns):
        raise ReviewError("the rubric's keys give two worksheet columns the same name")
    rows, records_out = [], []
    for rank, case in enumerate(picked, start=1):
        cells = {f.key: _criterion_cells(f, case.record) for f in chosen}
        record_out: dict[str, Any] = {
            "case_id": case.case_id, "rubric": case.record.rubric, "judge": case.record.judge,
            "rank": rank, "reason": case.reason,
            "min_confidence": _rounded(case.confidence), "max_spread": _rounded(case.spread),
            "gate_margin": _rounded(case.margin), "criteria": cells,
            "aggregates": {name: (case.record.aggregates or {}).get(name) for name in aggregates},
            **{f"{k}.label": None for k in label_keys}}
        row = {col: _cell(record_out.get(col)) for col in FIXED_COLUMNS}
        for key, cell in cells.items():
            row.update({f"{key}.{part}": _cell(value) for part, value in cell.items()})
        row.update({f"{name}.aggregate": _cell(record_out["aggregates"][name])
                    for name in aggregates})
        row.update({f"{k}.label": "" for k in label_keys})
        if show_text:
            text = texts.get(case.case_id, {})
            record_out["input"] = {name: text.get(name, "") for name in rubric.inputs}
            row.update({f"input.{name}": _safe_text(text.get(name, ""))
                        for name in rubric.inputs})
        rows.append(row)
        records_out.append(record_out)
    if len(picked) < n:
        notes.append(f"{len(picked)} of the {n} cases asked for: of {len(candidates)} "
                     f"unlabelled judged case(s), {without} have no signal (no distributions, "
                     "one verdict, no --pass gate)")
    estimates: list[dict[str, Any]] = []
    if labels and label_field is not None:
        estimates = _estimates(rubric, files, labels, _estimate_key(rubric, label_field, criteria),
                               statistic=target_statistic, target_halfwidth=target_halfwidth,
                               resamples=resamples, seed=seed)
    return ReviewSheet(rubric=rubric.name, columns=columns, rows=rows, records=records_out,
                       candidates=len(candidates),
                       labelled_skipped=sum(1 for c in by_case if c in labels),
                       not_ok=len(not_ok - set(by_case)), without_signal=without,
                       show_text=show_text, label_columns=[f"{k}.label" for k in label_keys],
                       estimates=estimates, notes=notes)


def review_paths(out_dir: Path) -> tuple[Path, Path]:
    """The worksheet's two files in ``out_dir``: CSV and JSONL."""
    return Path(out_dir) / REVIEW_CSV, Path(out_dir) / REVIEW_JSONL


def write_review(sheet: ReviewSheet, out_dir: Path, *, force: bool = False,
                 inputs: Sequence[Path] = ()) -> tuple[Path, Path]:
    """Write ``review.csv`` and ``review.jsonl`` in ``out_dir`` (created 0700; files 0600,
    each replaced atomically). An existing worksheet (a clinician may be filling it in) is
    replaced only with ``force``, and never when it is one of ``inputs`` (the labels read)."""
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ReviewError(f"--out {show_path(out_dir)} exists and is not a folder")
    targets = review_paths(out_dir)
    for target in targets:
        if any(Path(i).exists() and target.exists() and same_file(target, Path(i))
               for i in inputs):
            raise ReviewError(f"{show_path(target)} is also an input (it holds the labels "
                              "read); write the new worksheet to another --out folder")
        if (target.exists() or target.is_symlink()) and not force:
            raise ReviewError(f"{show_path(target)} exists (a worksheet that may hold labels "
                              "already); pass --force to replace it, or choose another --out")
    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, fieldnames=sheet.columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(sheet.rows)
    jsonl = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in sheet.records)
    for target, data in zip(targets, (buffer.getvalue(), jsonl), strict=True):
        with atomic_writer(target) as handle:
            handle.write(data.encode("utf-8"))
    return targets
