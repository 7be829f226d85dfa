"""The HTML report's data: one or more results files of one rubric, side by side.

:func:`build_report` loads each results file (:func:`evaluator.data.results.read_results`),
recomputes its summary from the records with the rubric found by name
(:func:`evaluator.analysis.summary.summary.summarize`), so a report needs no summary file, and
gathers the status breakdown, failed cases, the worst cases by one criterion, agreement with labels
(:func:`evaluator.analysis.agreement.agreement.agreement`) and the ``self_consistency`` /
``inter_judge`` blocks of a summary file when there are any. The result is plain data;
:mod:`evaluator.report.html` renders it (with plots from :mod:`evaluator.report.plots`).

Case text (input fields, the judge's own strings and ``raw_output``, which may quote the
case) is gathered only with ``show_text``; without it the data holds ids, numbers, statuses
and ``reason`` fields only.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, get_args

from evaluator.analysis.agreement.agreement import (
    SAME_SCALE_NOTE,
    AgreementError,
    agreement,
    load_labels,
)
from evaluator.analysis.estimate.estimate import estimate
from evaluator.analysis.gates import Gate
from evaluator.analysis.kinds import analysis_kind
from evaluator.analysis.labels.labelset import LabelSet, LabelSetError
from evaluator.analysis.labels.readers import (
    FIELD_NEEDED,
    field_needed,
    read_labels,
)
from evaluator.analysis.score_mode import (
    MODE_MEANING,
    NO_DISTRIBUTIONS,
    ScoredView,
    ScoreModeError,
    left_out_note,
    score_view,
)
from evaluator.analysis.summary.confidence import (
    DEFAULT_LOW_CONFIDENCE,
    confidence_criteria,
    judge_confidence,
)
from evaluator.analysis.summary.summary import summarize, summary_path_for
from evaluator.common.errors import UserError
from evaluator.common.readable import NotARegularFile, check_regular_file
from evaluator.common.version import __version__
from evaluator.data.files import sha256_file
from evaluator.data.results import ResultRecord, Status, read_results
from evaluator.data.sources import CaseSource, LabelSource
from evaluator.report.data import (
    BlockView,
    CaseRow,
    CaseSets,
    CommonCases,
    ReportData,
    ReportFile,
    ScoreModeText,
    StatusRow,
    Worst,
    WorstGroup,
)
from evaluator.report.decision import build_decision
from evaluator.report.figures import AgreementFile, ReportAgreement, ReportEstimates
from evaluator.report.text import attach_text
from evaluator.rubrics.load import load_rubric
from evaluator.rubrics.rubric import IntegerCriterion, Rubric, RubricError
from evaluator.run.manifest import manifest_path_for, read_manifest

STATUSES: tuple[str, ...] = get_args(Status)
# Summary blocks other tools add (self-consistency runs, several judges): shown when present.
SUMMARY_BLOCKS = ("self_consistency", "inter_judge")
DEFAULT_WORST = 10
_BLOCK_TEXT_LIMIT = 200
_BLOCK_LIST_LIMIT = 20


class ReportError(UserError, ValueError):
    """The report cannot be made from these inputs (missing file, mixed rubrics, bad key)."""


def _read_one(path: Path, rubrics_dirs: Sequence[Path]) -> list[ResultRecord]:
    if not path.exists():
        raise ReportError(f"{path}: results file not found")
    records = read_results(path, rubrics_dirs)
    if not records:
        raise ReportError(f"{path}: no result records in the file")
    return records


def _only(values: set[str], path: Path, what: str) -> str:
    if len(values) != 1:
        raise ReportError(f"{path}: records of several {what}s ({', '.join(sorted(values))}); "
                          "a results file holds one run")
    return next(iter(values))


def _labels(paths: Sequence[Path], judges: Sequence[str]) -> list[str]:
    """``judge · file name``; with more path components where two labels would be equal."""
    depth = 1
    while True:
        labels = [f"{judge} · {'/'.join(path.parts[-depth:])}" for path, judge in
                  zip(paths, judges)]
        if len(set(labels)) == len(labels) or depth >= max(len(p.parts) for p in paths):
            return labels if len(set(labels)) == len(labels) else [
                f"{label} (#{i})" for i, label in enumerate(labels, start=1)]
        depth += 1


def _summary_file(path: Path) -> tuple[dict[str, Any], list[str]]:
    """The extra blocks of ``<name>.summary.json`` (if any), and notes about the file."""
    summary_path = summary_path_for(path)
    if not summary_path.exists():
        return {}, [(f"no summary file ({summary_path.name}): statistics recomputed from the "
                    "records")]
    try:
        check_regular_file(summary_path, "summary file")
        stored = json.loads(summary_path.read_text(encoding="utf-8"))
    except NotARegularFile:
        return {}, [(f"{summary_path.name} is not a regular file (a FIFO or device?); ignored, "
                     "statistics recomputed from the records")]
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return {}, [(f"{summary_path.name} could not be read ({type(exc).__name__}); statistics "
                    "recomputed from the records")]
    if not isinstance(stored, dict):
        return {}, [f"{summary_path.name} is not a JSON object; ignored"]
    owner = stored.get("results_file")
    if owner is not None and owner != path.name:
        return {}, [f"{summary_path.name} is the summary of {owner}, not of this file; ignored"]
    blocks = {name: stored[name] for name in SUMMARY_BLOCKS if isinstance(stored.get(name), dict)}
    return blocks, []


def _rubric_note(path: Path, rubric: Rubric) -> list[str]:
    """A note when the rubric file changed since the run (the manifest records its hash)."""
    manifest = read_manifest(manifest_path_for(path))
    if not manifest:
        return []
    recorded = (manifest.get("settings") or {}).get("rubric_file_hash")
    if recorded and rubric.source_sha256 and recorded != rubric.source_sha256:
        return [(f"the rubric file {rubric.source_path} changed since this run (the manifest "
                "records another hash): allowed values and thresholds are today's")]
    return []


def _block_view(block: Mapping[str, Any]) -> BlockView:
    """A summary block as scalar rows and small key -> scalar tables; anything deeper is
    listed by name only."""
    scalars: list[tuple[str, Any]] = []
    tables: list[tuple[str, list[tuple[str, Any]]]] = []
    skipped: list[str] = []

    def scalar(value: Any) -> bool:
        return value is None or isinstance(value, (str, int, float, bool))

    def short(value: Any) -> Any:
        if isinstance(value, str) and len(value) > _BLOCK_TEXT_LIMIT:
            return value[:_BLOCK_TEXT_LIMIT - 3] + "..."
        return value

    for key, value in block.items():
        if scalar(value):
            scalars.append((str(key), short(value)))
        elif isinstance(value, Mapping) and all(scalar(v) for v in value.values()):
            tables.append((str(key), [(str(k), short(v)) for k, v in value.items()]))
        elif isinstance(value, list) and all(scalar(v) for v in value):
            shown = ", ".join(str(short(v)) for v in value[:_BLOCK_LIST_LIMIT])
            more = f" ... ({len(value)} in all)" if len(value) > _BLOCK_LIST_LIMIT else ""
            scalars.append((str(key), shown + more))
        else:
            skipped.append(str(key))
    return BlockView(scalars=scalars, tables=tables, skipped=skipped)


def scored_keys(rubric: Rubric) -> list[str]:
    """Integer criteria then aggregates: the keys a report can rank and compare."""
    return ([f.key for f in rubric.output if isinstance(f, IntegerCriterion)]
            + [agg.name for agg in rubric.aggregates])


def resolve_worst_key(rubric: Rubric, key: str | None) -> str | None:
    """The key to rank worst cases by: ``key`` (an alias is accepted), else the first pass
    threshold, integer criterion or aggregate. Unknown keys raise :class:`ReportError`."""
    keys = scored_keys(rubric)
    if key is None:
        return next(iter(rubric.pass_thresholds), keys[0] if keys else None)
    key = rubric.aliases.get(key, key)
    if key not in keys:
        raise ReportError(f"unknown --worst-by key {key!r}; rubric {rubric.name!r} has: "
                          f"{', '.join(keys) or '(no scored keys)'}")
    return key


def _value(view: ScoredView, record: ResultRecord, key: str) -> int | float | None:
    """A judged record's score or aggregate ``key`` in the report's score mode (integer
    scores stay integers in argmax mode); None when not judged or not readable."""
    if record.status != "ok":
        return None
    return view.value(record.case_id, key)


def _values(view: ScoredView, records: Sequence[ResultRecord],
            keys: Sequence[str]) -> dict[str, list[int | float]]:
    """Each key's values over ``records`` (those with one)."""
    return {key: [v for r in records if (v := _value(view, r, key)) is not None]
            for key in keys}


def _worst_rows(files: list[ReportFile], index: int, key: str, n: int) -> list[CaseRow]:
    """The ``n`` ok records of one file with the lowest ``key`` (ties by case id), with the
    same case's value of ``key`` in the other files."""
    this = files[index]
    ranked = sorted(((v, r.case_id, r) for r in this.records
                     if (v := _value(this.view, r, key)) is not None
                     and r.case_id in this.compared_ids),
                    key=lambda t: (t[0], t[1]))
    numeric = scored_keys(this.rubric)
    rows = []
    for _, _, record in ranked[:n]:
        others = []
        for j, other in enumerate(files):
            if j == index:
                continue
            match = other.by_id.get(record.case_id)
            shown = ("absent" if match is None else _value(other.view, match, key)
                     if match.status == "ok" else match.status)
            others.append(shown)
        rows.append(CaseRow(case_id=record.case_id, status=record.status,
                            input_line=record.input_line, record=record,
                            values=[_value(this.view, record, k) for k in numeric],
                            others=others))
    return rows


def _load(paths: Sequence[Path], rubrics_dirs: Sequence[Path], score_mode: str = "argmax",
          low_n: int = DEFAULT_LOW_CONFIDENCE) -> tuple[Rubric, list[ReportFile]]:
    if not paths:
        raise ReportError("no results files given")
    seen: set[Path] = set()
    loaded = []
    for path in map(Path, paths):
        if path.resolve() in seen:
            raise ReportError(f"{path}: given twice")
        seen.add(path.resolve())
        records = _read_one(path, rubrics_dirs)
        loaded.append((path, records, _only({r.rubric for r in records}, path, "rubric"),
                       _only({r.judge for r in records}, path, "judge")))
    first_path, _, rubric_name, _ = loaded[0]
    for path, _, name, _ in loaded[1:]:
        if name != rubric_name:
            raise ReportError(f"{path} holds results of rubric {name!r} but {first_path} of "
                              f"{rubric_name!r}: a report compares results of one rubric")
    try:
        rubric = load_rubric(rubric_name, tuple(rubrics_dirs))
    except RubricError as exc:
        raise ReportError(f"{first_path}: cannot load its rubric: {exc}") from None
    if refused := analysis_kind(rubric).elsewhere(first_path, rubric.name, "report"):
        raise ReportError(refused)
    labels = _labels([p for p, *_ in loaded], [j for *_, j in loaded])
    files = []
    for (path, records, _, judge), label in zip(loaded, labels):
        blocks, notes = _summary_file(path)
        view = score_view(rubric, records, score_mode, str(path))
        summary = summarize(rubric, judge, records, score_mode=score_mode, source=str(path))
        files.append(ReportFile(
            view=view, path=str(path), label=label, judge=judge, rubric=rubric,
            # The page's header: which bytes the figures came from.
            sha256=sha256_file(path),
            records=records, by_id={r.case_id: r for r in records},
            summary=summary, notes=notes + _rubric_note(path, rubric),
            left_out=left_out_note(view.left_out),
            settings_hashes=sorted({r.settings_hash or "-" for r in records}),
            blocks={name: _block_view(block) for name, block in blocks.items()},
            confidence=judge_confidence(rubric, records, low_n),
            failed=[CaseRow(case_id=r.case_id, status=r.status, reason=r.reason,
                            input_line=r.input_line, record=r)
                    for r in records if r.status != "ok"],
            values=_values(view, records, scored_keys(rubric))))
    return rubric, files


def _label_sets(files: list[ReportFile], labels: LabelSource) -> dict[Path, LabelSet]:
    """Each ``--labels`` path's labels, read once for the agreement and the estimates; bad
    labels (and a labels file's bad label column) stop the report."""
    rubric = files[0].rubric
    label_sets = {}
    for path in dict.fromkeys(labels.paths):
        label_sets[Path(path)] = read_labels(labels, path, rubric=rubric)
        if not label_sets[Path(path)].named:
            load_labels(labels, path, rubric=rubric, rows=label_sets[Path(path)].rows)
    return label_sets


def _agreement(files: list[ReportFile], labels: LabelSource, resamples: int,
               options: Mapping[str, Any], label_sets: Mapping[Path, LabelSet],
               ) -> ReportAgreement:
    per_file = []
    for entry, path in zip(files, _labels_per_file(labels.paths, files), strict=True):
        try:
            result = agreement(Path(entry.path), replace(labels, paths=(path,)),
                               resamples=resamples, only_ids=entry.common_ids,
                               score_mode=entry.view.mode, label_set=label_sets[Path(path)],
                               **options)
            per_file.append(AgreementFile(label=entry.label, result=result, note=None))
        except LabelSetError:  # the labels themselves cannot be used: stops the report
            raise
        except AgreementError as exc:  # no overlap for this file: said in the page
            per_file.append(AgreementFile(label=entry.label, result=None, note=str(exc)))
    shown = ", ".join(str(p) for p in dict.fromkeys(labels.paths))
    if all(item.result is None for item in per_file):
        raise ReportError(f"no case id of any results file is in {shown} (column "
                          f"{labels.id_column!r}); check --label-id-column")
    joined = {item.result.joined for item in per_file if item.result}
    return ReportAgreement(
        labels=shown, label_field=labels.field, id_column=labels.id_column,
        resamples=resamples, note=SAME_SCALE_NOTE, files=per_file, by=options.get("by"),
        n_differs=len(joined) > 1,
        unlabelled=unlabelled_criteria(scored_keys(files[0].rubric), per_file,
                                       labels.field))


def unlabelled_criteria(keys: Sequence[str], per_file: Sequence[AgreementFile],
                        field: str | None) -> dict[str, str]:
    """Scored key -> why no file has agreement figures for it: the labels rate other
    criteria (a ``KEY.label`` field rates KEY only; a sheet its own criteria). The page
    says so in one line instead of a table of dashes."""
    rated = [key for key in keys if any(item.result and key in item.result.criteria
                                        for item in per_file)]
    if not rated:  # every file failed: each file's note says why
        return {}
    source = f"--label-field {field}" if field else "the labels"
    verb = "rates" if field else "rate"
    return {key: f"no labels given ({source} {verb} {', '.join(rated)} only)"
            for key in keys if key not in rated}


def _labels_per_file(labels: Sequence[Path], files: Sequence[Any]) -> list[Path]:
    """One labels file for every results file (several judges of the same answers), or one
    per results file in order (several systems: each one's answers labelled)."""
    if len(labels) == 1:
        return [Path(labels[0])] * len(files)
    if len(labels) != len(files):
        raise ReportError(f"{len(files)} results file(s) and {len(labels)} --labels: give one "
                          "--labels for all of them, or one per results file in the same order")
    return [Path(p) for p in labels]


def _sheet_criteria(labels: LabelSource, criteria: Sequence[str],
                    label_sets: Mapping[Path, LabelSet]) -> list[str] | None:
    """Without --label-field, the criteria of labels that name theirs (those every one
    rates, in the first one's order; ``criteria`` narrows them): each gets its own
    estimate, as ``agree`` compares every criterion of a sheet. None: a --label-field, or
    labels files. ``label_sets``: each path's labels, as read for the report."""
    sets = [label_sets[Path(p)] for p in labels.paths]
    if labels.field or not sets or not all(s.named for s in sets):
        return None
    each = [s.criteria for s in sets]
    shared = [key for key in each[0] if all(key in other for other in each[1:])]
    return [key for key in shared if not criteria or key in criteria]


def _estimates(files: list[ReportFile], labels: LabelSource, criteria: Sequence[str],
               score_mode: str, rubrics_dirs: Sequence[Path],
               label_sets: Mapping[Path, LabelSet], gates: Sequence[Gate] = ()
               ) -> ReportEstimates:
    """Clinician-level estimates (:func:`evaluator.analysis.estimate.estimate.estimate`) beside each
    file's judge-only mean, and with one labels file per file, the differences; an estimate
    that cannot be made is a note on the page, never a failed report. Sheet folders without
    --label-field: one estimate per criterion of the sheets (:func:`_sheet_criteria`), each
    with the ``gates`` on its criterion (a pass rate's figures)."""
    per_file = replace(labels, paths=tuple(_labels_per_file(labels.paths, files)))
    keys = _sheet_criteria(labels, criteria, label_sets)
    runs = ([(per_file, criteria)] if keys is None else
            [(replace(per_file, field=key), (key,)) for key in keys])
    results, failed = [], []
    aliases = files[0].rubric.aliases
    for source, wanted in runs:
        on = [g for g in gates if keys is None or aliases.get(g.key, g.key) in wanted]
        try:
            results.append(estimate([Path(f.path) for f in files], source,
                                    criteria=wanted, gates=on, score_mode=score_mode,
                                    rubrics_dirs=rubrics_dirs, label_sets=label_sets))
        except (AgreementError, ScoreModeError) as exc:
            failed.append(f"no clinician-level estimate{f' of {wanted[0]}' if keys else ''}: "
                          f"{exc}")
    if not results:
        return ReportEstimates(note="; ".join(failed) or "no clinician-level estimate: the "
                               "sheets share no criterion")
    shared = len(labels.paths) == 1 and len(files) > 1
    return ReportEstimates(
        rows=[row for result in results for row in result.estimates],
        systems=results[0].systems,
        differences=[] if shared else [row for result in results for row in result.differences],
        failed=failed,
        shared_note=("one labels file for every results file (several judges of the same "
                     "answers): each judge's estimate of the same clinician-level mean; no "
                     "differences between them. For systems, give one --labels per results "
                     "file." if shared else None),
        scale_note="; ".join(dict.fromkeys(r.scale_note for r in results
                                           if r.scale_note)) or None,
        labels={f.path: f.label for f in files})


def _restrict_to_common(rubric: Rubric, files: list[ReportFile]) -> CommonCases:
    """``--common-cases``: every file's statistics over the cases judged ``ok`` in all of
    them (the status table and failed cases still show every record)."""
    ok_sets = [set(entry.view.values) for entry in files]
    common = set.intersection(*ok_sets)
    union = set().union(*(set(entry.by_id) for entry in files))
    for entry in files:
        kept = [r for r in entry.records if r.case_id in common]
        entry.common_ids = common
        entry.summary = summarize(rubric, entry.judge, kept, score_mode=entry.view.mode,
                                  source=entry.path)
        entry.values = _values(entry.view, kept, scored_keys(rubric))
    return CommonCases(n=len(common), union=len(union))


def _case_sets(files: list[ReportFile]) -> CaseSets:
    """The judged (ok) case count per file and whether the files' ok case sets differ."""
    ok_sets = [frozenset(entry.view.values) for entry in files]
    return CaseSets(ok_counts=[len(ids) for ids in ok_sets], differ=len(set(ok_sets)) > 1,
                    common=len(frozenset.intersection(*ok_sets)) if ok_sets else 0)


def build_report(results: Sequence[Path], *, rubrics_dirs: Sequence[Path] = (),
                 labels: LabelSource | None = None, cases: CaseSource | None = None,
                 estimate_criteria: Sequence[str] = (), worst_by: str | None = None,
                 worst_n: int = DEFAULT_WORST, show_text: bool = False,
                 agreement_resamples: int = 1000, common_cases: bool = False,
                 by: str | None = None, text_field: str | None = None,
                 score_mode: str = "argmax",
                 low_confidence: int = DEFAULT_LOW_CONFIDENCE,
                 gates: Sequence[Gate] = (),
                 names: Sequence[str] | None = None) -> ReportData:
    """Gather everything the HTML report shows for ``results`` (files of one rubric).

    ``labels`` (one file for all results files, or one per file in order: several systems,
    with its field) add agreement tables and clinician-level estimates (PPI++, with the
    differences between systems; ``estimate_criteria`` the criteria the labels rate,
    default KEY of a KEY.label field); ``worst_by`` picks the key the worst
    ``worst_n`` cases are ranked by (lowest first; default: the first pass-threshold key,
    else the first scored key). ``show_text`` adds case text, read from each record's
    ``input_file`` with the mapping and id column of ``cases`` as the run used them, and the
    judge's own text. ``common_cases`` computes every file's statistics over the cases
    judged ok in all files. With labels: ``by`` (a grouping column of the labels file),
    ``cases`` and ``text_field`` are passed to
    :func:`evaluator.analysis.agreement.agreement.agreement`. ``score_mode`` (``argmax`` or
    ``expected``, see :mod:`evaluator.analysis.score_mode`) says which scores every figure uses;
    ``low_confidence`` how many lowest-confidence scores are listed per file. ``gates``:
    pass rules whose rates the clinician-level estimates add (a study's pass-rate
    endpoints). ``names``: each file's system name (a study's), in place of its file
    name on the page. Raises
    :class:`ReportError` for unusable input (and
    :class:`evaluator.analysis.score_mode.ScoreModeError` for expected scores of a file
    without distributions)."""
    cases = cases or CaseSource()
    if field_needed(labels):
        raise ReportError(FIELD_NEEDED)
    rubric, files = _load(results, rubrics_dirs, score_mode, low_confidence)
    if names is not None:
        for entry, name in zip(files, names, strict=True):
            entry.label = name
    case_sets = _case_sets(files)
    common = _restrict_to_common(rubric, files) if common_cases else None
    worst_key = resolve_worst_key(rubric, worst_by) if worst_n > 0 else None
    report = ReportData(
        generated=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        version=__version__, rubric=rubric, files=files, statuses=STATUSES,
        judges=list(dict.fromkeys(f.judge for f in files)),
        show_text=show_text, scored_keys=scored_keys(rubric),
        criteria=[f for f in rubric.output if isinstance(f, IntegerCriterion)],
        aggregates=list(rubric.aggregates),
        ci_method=files[0].summary.ci_method,
        stats_note=files[0].summary.stats_note,
        case_sets=case_sets, common_cases=common,
        score_mode=ScoreModeText(mode=score_mode, meaning=MODE_MEANING[score_mode]),
        expected=score_mode == "expected",
        confidence_criteria=confidence_criteria(rubric),
        low_confidence=low_confidence, no_distributions=NO_DISTRIBUTIONS)
    if worst_key is not None:
        report.worst = Worst(key=worst_key, n=worst_n, columns=scored_keys(rubric),
                             by_file=[WorstGroup(label=f.label,
                                                 rows=_worst_rows(files, i, worst_key, worst_n))
                                      for i, f in enumerate(files)])
    if labels is not None and labels.paths:
        label_sets = _label_sets(files, labels)
        report.agreement = _agreement(
            files, labels, agreement_resamples, {"by": by, "rubrics_dirs": tuple(rubrics_dirs),
                                                 "cases": cases, "text_field": text_field},
            label_sets)
        report.estimates = _estimates(files, labels, estimate_criteria, score_mode,
                                      rubrics_dirs, label_sets, gates)
    # The page's first section: built from the figures above, never from case text.
    report.decision = build_decision(rubric, [f.path for f in files], report.estimates,
                                     report.agreement,
                                     None if names is None else
                                     {f.path: name for f, name in zip(files, names)})
    if show_text:
        attach_text(report, cases)
    else:
        # The records behind the rows hold the judge's text: not even reachable then.
        for row in _rows_with_records(report):
            row.record = None
    return report


def _rows_with_records(report: ReportData) -> list[CaseRow]:
    rows = [failed for entry in report.files for failed in entry.failed]
    if report.worst:
        rows += [row for group in report.worst.by_file for row in group.rows]
    return rows


def status_table(report: ReportData) -> list[StatusRow]:
    """Per file: the count of each status (every status listed, zeros included)."""
    rows = []
    for entry in report.files:
        counts = Counter(r.status for r in entry.records)
        rows.append(StatusRow(label=entry.label, counts=[counts.get(s, 0) for s in STATUSES],
                              cases=len(entry.records), failed=len(entry.failed)))
    return rows
