"""``evaluator log`` and ``evaluator run --mlflow``: a finished run recorded in MLflow.

:func:`log_run` reads a results file that ``evaluator run`` finished (its manifest must say
so) and logs one MLflow run:

- **params** and **tags** from the manifest and the summary (:mod:`.provenance`);
- **metrics** (:mod:`.figures`) from the summary recomputed from the records by
  :func:`evaluator.analysis.summary.summary.summarize`, exactly as the run and ``evaluator summary``
  compute it (a summary file that differs is said in a note), and with labels, the figures
  of ``evaluator agree`` (:func:`evaluator.analysis.agreement.agreement.agreement`) and ``evaluator
  estimate`` (:func:`evaluator.analysis.estimate.estimate.estimate`);
- **artifacts** under ``evaluator/``: ``summary.json``, ``manifest.json`` and, with the
  ``report`` extra and a scored (not pairwise) rubric, ``report.html``
  (:func:`evaluator.report.html.write_report`, without case text); the results file itself
  only with ``with_results`` (it holds case text).

Everything is computed before MLflow is contacted, so a user error never leaves a half-made
run in the tracker; the run's own files are only read.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluator.analysis.agreement.agreement import AGREEMENT_RESAMPLES, AGREEMENT_SEED, agreement
from evaluator.analysis.estimate.estimate import estimate
from evaluator.analysis.gates import Gate
from evaluator.analysis.kinds import analysis_kind
from evaluator.analysis.label_files import AgreementError
from evaluator.analysis.score_mode import ScoreModeError
from evaluator.analysis.summary.records import RunSummary
from evaluator.analysis.summary.summary import summary_path_for
from evaluator.common.readable import NotARegularFile, check_regular_file
from evaluator.data.results import read_results, rubric_and_judge
from evaluator.data.sources import LabelSource
from evaluator.report.html import write_report
from evaluator.report.plots import REPORT_EXTRA_HINT, plots_available
from evaluator.rubrics.rubric import Rubric
from evaluator.run.manifest import (
    manifest_path_for,
    read_manifest,
    sha256_file,
    unfinished_run,
)
from evaluator.tracking.figures import (
    agreement_metrics,
    estimate_interval_tags,
    estimate_metrics,
    interval_tags,
    summary_metrics,
)
from evaluator.tracking.mlflow_store import (
    TrackingError,
    destination,
    log_to_mlflow,
    require_mlflow,
)
from evaluator.tracking.provenance import run_params, run_tags

ARTIFACT_FOLDER = "evaluator"


@dataclass(frozen=True)
class LabelOptions:
    """Labels to log agreement and clinician-level estimates for: the options of ``evaluator
    agree`` and ``evaluator estimate`` of the same names."""

    source: LabelSource
    criteria: tuple[str, ...] = ()
    gates: tuple[Gate, ...] = ()
    resamples: int = AGREEMENT_RESAMPLES
    seed: int = AGREEMENT_SEED


@dataclass(frozen=True)
class TrackingOptions:
    """Where and what to log. ``tracking_uri``: else ``MLFLOW_TRACKING_URI``, else
    ``./mlruns`` (:func:`evaluator.tracking.mlflow_store.destination`); ``experiment``:
    default the rubric's name; ``run_name``: default the results file's stem;
    ``with_results``: upload the results file too (**it holds case text**)."""

    tracking_uri: str | None = None
    experiment: str | None = None
    run_name: str | None = None
    labels: LabelOptions | None = None
    with_results: bool = False
    rubrics_dirs: tuple[Path, ...] = ()


@dataclass
class LoggedRun:
    """What :func:`log_run` logged, and where."""

    run_id: str
    experiment_id: str
    experiment: str
    run_name: str
    tracking_uri: str  # as shown: without user and password
    default_store: bool
    location: str  # the run's folder (a local store) or its page on the server
    params: dict[str, str]
    metrics: dict[str, float]
    tags: dict[str, str]
    artifacts: list[str]
    notes: list[str] = field(default_factory=list)


def finished_manifest(results: Path) -> dict[str, Any]:
    """The manifest of ``results``, which must say its last run finished (a jury's combined
    manifest is written only when every member has). Raises :class:`TrackingError`."""
    path = manifest_path_for(results)
    manifest = read_manifest(path)
    if not isinstance(manifest, dict):
        raise TrackingError(f"{results}: no readable manifest beside it ({path.name}): "
                            "`evaluator log` records a run that `evaluator run` wrote")
    owner = manifest.get("results_file")
    if owner is not None and owner != results.name:
        raise TrackingError(f"{path.name} is the manifest of {owner}, not of {results.name}")
    unfinished = unfinished_run(results, manifest)
    if unfinished is not None:
        raise TrackingError(f"{results}: {unfinished}, then log it")
    return manifest


def _summary_notes(results: Path, summary: RunSummary, manifest: dict[str, Any],
                   rubric: Rubric) -> list[str]:
    """Notes when the summary file beside ``results`` is missing or differs from the one
    recomputed, or the rubric file changed since the run."""
    notes = []
    recorded = (manifest.get("settings") or {}).get("rubric_file_hash")
    if recorded and rubric.source_sha256 and recorded != rubric.source_sha256:
        notes.append(f"the rubric file {rubric.source_path} changed since the run (the "
                     "manifest records another hash): allowed values and thresholds are "
                     "today's")
    path = summary_path_for(results)
    try:
        check_regular_file(path, "summary file")
        stored = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return [*notes, f"no summary file ({path.name}): the summary logged is recomputed "
                        "from the records"]
    except (OSError, UnicodeDecodeError, ValueError, NotARegularFile) as exc:
        return [*notes, f"{path.name} could not be read ({type(exc).__name__}): the summary "
                        "logged is recomputed from the records"]
    if stored != summary.to_json():
        notes.append(f"{path.name} differs from the summary recomputed from the records "
                     "(written by another version, or the rubric or an extra changed since "
                     "the run): the recomputed one is logged")
    return notes


def _label_figures(results: Path, labels: LabelOptions, rubrics_dirs: Sequence[Path],
                   ) -> tuple[dict[str, float], dict[str, Any], list[str], dict[str, str]]:
    """Agreement and clinician-level estimates with ``labels``: metrics, params, notes, and
    the tags saying why an estimate has no CI (:func:`estimate_interval_tags`). An
    estimate that cannot be made (labels from a priority worksheet, no criterion the labels
    rate) is a note, as on the HTML report; agreement errors are the user's to fix."""
    source, path = labels.source, Path(str(labels.source.path))
    report = agreement(results, source, criteria=labels.criteria, resamples=labels.resamples,
                       seed=labels.seed, rubrics_dirs=rubrics_dirs, gates=labels.gates)
    metrics = agreement_metrics(report)
    notes = [f"agreement: {warning}" for warning in report.warnings]
    tags: dict[str, str] = {}
    try:
        estimates = estimate([results], source, criteria=labels.criteria,
                             gates=labels.gates, rubrics_dirs=rubrics_dirs)
        metrics.update(estimate_metrics(estimates))
        tags = estimate_interval_tags(estimates)
    except (AgreementError, ScoreModeError) as exc:
        notes.append(f"no clinician-level estimate logged: {exc}")
    params = {"labels.file": path.name, "labels.sha256": sha256_file(path),
              "labels.label_field": source.field, "labels.id_column": source.id_column,
              "labels.criteria": ",".join(labels.criteria) or None,
              "labels.gates": ",".join(g.rule for g in labels.gates) or None,
              "labels.design": report.design.get("kind") or "none",
              "labels.resamples": labels.resamples, "labels.seed": labels.seed}
    return metrics, params, notes, tags


def _member_manifests(results: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """A jury's members' manifests by judge name (None where one cannot be read)."""
    out: dict[str, Any] = {}
    for member in manifest.get("members") or []:
        relative = member.get("results_file")
        if isinstance(relative, str):
            out[str(member.get("judge"))] = read_manifest(
                manifest_path_for(results.parent / relative))
    return out


def log_run(results_path: Path, options: TrackingOptions | None = None) -> LoggedRun:
    """Log the finished run of ``results_path`` to MLflow (see the module docstring) and
    return what was logged. Raises :class:`evaluator.tracking.mlflow_store.TrackingError`
    for a run that is not finished or a tracker that fails (one line; a missing extra is
    :class:`~evaluator.tracking.mlflow_store.MlflowMissing`), and the analysis errors
    (``AgreementError``, ``RubricError``, ``ResultsFileDamaged``, ``StatsUnavailable``) of
    the figures asked for."""
    options = options or TrackingOptions()
    results = Path(results_path)
    require_mlflow()  # before the work below, which takes a while on a big file
    where = destination(options.tracking_uri)
    if not results.exists():
        raise TrackingError(f"{results}: results file not found")
    check_regular_file(results, "results file")
    manifest = finished_manifest(results)
    records = read_results(results, options.rubrics_dirs)
    if not records:
        raise TrackingError(f"{results}: no result records in the file")
    rubric, judge = rubric_and_judge(records, results, options.rubrics_dirs, TrackingError)
    summary = analysis_kind(rubric).summarize(rubric, judge, records,
                                              source=str(results)).model_copy(
        update={"results_file": results.name})
    notes = _summary_notes(results, summary, manifest, rubric)
    metrics = summary_metrics(summary)
    label_params: dict[str, Any] = {}
    label_tags: dict[str, str] = {}
    if options.labels is not None:
        label_metrics, label_params, label_notes, label_tags = _label_figures(
            results, options.labels, options.rubrics_dirs)
        metrics.update(label_metrics)
        notes += label_notes
    members = _member_manifests(results, manifest) if manifest.get("kind") == "jury" else {}
    params = run_params(manifest, summary, {r.record_version for r in records},
                        members=members, extra=label_params)
    tags = {**run_tags(results, manifest, summary, with_results=options.with_results),
            **interval_tags(summary), **label_tags}
    experiment = options.experiment or summary.rubric
    run_name = options.run_name or results.stem
    with tempfile.TemporaryDirectory(prefix="evaluator-log-") as folder:  # mode 0700
        staged = Path(folder)
        (staged / "summary.json").write_text(json.dumps(summary.to_json(), indent=2) + "\n",
                                             encoding="utf-8")
        (staged / "manifest.json").write_bytes(manifest_path_for(results).read_bytes())
        files = [staged / "summary.json", staged / "manifest.json"]
        if analysis_kind(rubric).elsewhere(results, rubric.name, "report"):
            notes.append("no report.html: the HTML report shows scores; a pairwise file's "
                         "figures are in `evaluator compare`")
        elif plots_available():
            labels = options.labels
            files.append(write_report(
                [results], staged / "report.html", rubrics_dirs=options.rubrics_dirs,
                labels=labels.source if labels else None,
                estimate_criteria=labels.criteria if labels else (),
                agreement_resamples=labels.resamples if labels else AGREEMENT_RESAMPLES))
        else:
            notes.append(f"no report.html: the HTML report needs the report extra: "
                         f"{REPORT_EXTRA_HINT}")
        artifacts: list[tuple[Path, str | None]] = [(f, ARTIFACT_FOLDER) for f in files]
        if options.with_results:
            artifacts.append((results, ARTIFACT_FOLDER))
        ids = log_to_mlflow(where, experiment, run_name, params=params, metrics=metrics,
                            tags=tags, artifacts=artifacts)
    return LoggedRun(run_id=ids.run_id, experiment_id=ids.experiment_id,
                     experiment=experiment, run_name=run_name, tracking_uri=where.shown,
                     default_store=where.default, location=ids.location, params=params,
                     metrics=metrics, tags=tags,
                     artifacts=[f"{folder}/{path.name}" for path, folder in artifacts],
                     notes=notes)
