"""A study's report (issue 48, item 3): the report of the two systems' results files with
the study's labels (one sheet per system, drawn by ``evaluator study draw``), the systems
called by their names, the pass-rate endpoints' gates added to the clinician-level
estimates, and the study's block first on the page (:mod:`evaluator.study.summary`): the
rule declared in the plan applied to the primary endpoint in one sentence.

The plan applied is the copy frozen when the labels were drawn (``study-draw.json``); a
plan file changed since is said on the page ("plan changed after labelling began"), never
silently applied. A results file changed since the draw is refused: the decision must rest
on the answers the clinicians labelled.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from evaluator.common.errors import UserError
from evaluator.data.files import sha256_file, show_path
from evaluator.data.sheet import journal_with_labels, read_sheet_info
from evaluator.data.sources import LabelSource
from evaluator.data.study_draw import (
    checked_sheet_folders,
    labels_dir,
    read_study_draw,
    study_draw_path,
)
from evaluator.report.data import ReportData
from evaluator.report.html import write_report
from evaluator.study.plan import StudyPlanError, load_plan_bytes, plan_path
from evaluator.study.summary import Drawn, study_summary


class StudyReportError(UserError, ValueError):
    """A study whose report cannot be made (no draw yet, a results file changed)."""


def _current_sha(path: Path) -> str | None:
    """The plan file's SHA-256 now; None when it is gone or cannot be read."""
    try:
        return sha256_file(path)
    except OSError:
        return None


def write_study_report(study: Path, output: Path, *, overwrite: bool = False,
                       rubrics_dirs: Sequence[Path] = (), resamples: int = 1000,
                       ) -> ReportData:
    """Write the report of the study at ``study`` (its folder, or its plan file) to
    ``output`` (an .html file, as :func:`evaluator.report.html.write_report` writes it) and
    return what the page shows."""
    path = plan_path(Path(study))
    labels = labels_dir(path.parent)
    draw = read_study_draw(labels)
    try:
        frozen = load_plan_bytes(draw.plan_text.encode("utf-8"), path, tuple(rubrics_dirs))
    except StudyPlanError as exc:
        # The paths and keys are the frozen copy's, not what study.yaml says now.
        raise StudyReportError(f"the plan frozen at the draw ({show_path(study_draw_path(labels))}"
                               f") cannot be applied: {exc}") from None
    plan = frozen.plan
    order = [plan.systems.index(plan.reference), plan.systems.index(plan.candidate)]
    results = [frozen.results[i] for i in order]
    for i in order:
        recorded = draw.systems[i]
        if sha256_file(frozen.results[i]) != recorded.results_sha256:
            raise StudyReportError(
                f"{show_path(frozen.results[i])} ({recorded.name}) has changed since the "
                f"study's labels were drawn ({draw.drawn}): the decision must rest on the "
                "answers the clinicians labelled; restore that results file")
    folders = checked_sheet_folders(labels, draw)
    sheets = tuple(folders[i] for i in order)
    if not any(journal_with_labels(folder) for folder in folders):
        raise StudyReportError(f"no label is saved yet in {show_path(labels)}: have the "
                               "clinicians label the study first (evaluator study label "
                               f"{show_path(path.parent)})")
    gates = [g for g in (e.parsed_gate for e in (plan.primary, *plan.secondary))
             if g is not None]
    drawn = Drawn(plan_path=show_path(path), plan_sha256=draw.plan_sha256, drawn=draw.drawn,
                  current_sha256=_current_sha(path),
                  overlap_cases=len(read_sheet_info(sheets[0]).overlap_cases))
    names = [plan.systems[i].name for i in order]

    def attach(report: ReportData) -> None:
        differences = report.estimates.differences if report.estimates else []
        primary = plan.primary.criterion
        validity = [v.line for v in (report.decision.validity if report.decision else [])
                    if v.criterion == frozen.rubric.aliases.get(primary, primary)]
        report.study = study_summary(plan, frozen.rubric, differences, str(results[0]),
                                     str(results[1]), drawn, validity)

    built: list[ReportData] = []
    write_report(results, output, overwrite=overwrite, rubrics_dirs=tuple(rubrics_dirs),
                 labels=LabelSource(paths=sheets, field=None), gates=gates, names=names,
                 agreement_resamples=resamples,
                 finish=lambda report: (attach(report), built.append(report)))
    return built[0]
