"""``evaluator log``: record a finished run (its results file's summary, manifest, report and,
with labels, agreement and estimates) in MLflow."""

from __future__ import annotations

from pathlib import Path

import click

from evaluator.analysis.agreement.agreement import AGREEMENT_RESAMPLES, AGREEMENT_SEED
from evaluator.analysis.gates import Gate
from evaluator.cli.options import label_options, parse_gates, rubrics_dir_option, tracking_options
from evaluator.data.sources import LabelSource
from evaluator.tracking.log_run import LabelOptions, LoggedRun, TrackingOptions, log_run


def echo_logged(logged: LoggedRun) -> None:
    """The notes and one line saying where the run was logged, on stderr."""
    for note in logged.notes:
        click.echo(f"note: {note}", err=True)
    where = (f"the local MLflow store {logged.tracking_uri} (the default: no --tracking-uri "
             "or MLFLOW_TRACKING_URI)" if logged.default_store else logged.tracking_uri)
    click.echo(f"mlflow: logged run {logged.run_name!r} ({logged.run_id}) in experiment "
               f"{logged.experiment!r} at {where}: {len(logged.params)} params, "
               f"{len(logged.metrics)} metrics, artifacts {', '.join(logged.artifacts)}; "
               f"see {logged.location}", err=True)


@click.command("log")
@click.argument("results", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@tracking_options
@label_options("also log the agreement figures of `evaluator agree` and the "
               "clinician-level estimates of `evaluator estimate`.")
@click.option("--criterion", "criteria", multiple=True, metavar="KEY",
              help="With --labels: the criterion the labels rate (repeatable; default: KEY "
                   "of a KEY.label field; else every integer criterion and aggregate for "
                   "agreement, and no estimate).")
@click.option("--pass", "gates", multiple=True, metavar="CRITERION>=THRESHOLD",
              callback=lambda ctx, param, values: parse_gates(values),
              help="With --labels: a pass/fail gate (repeatable; also >, <=, <): sensitivity, "
                   "specificity, PPV, NPV and the clinician-level pass rate.")
@click.option("--resamples", type=click.IntRange(min=100), default=AGREEMENT_RESAMPLES,
              show_default=True, help="With --labels: bootstrap resamples for the CIs.")
@click.option("--seed", type=int, default=AGREEMENT_SEED, show_default=True,
              help="With --labels: bootstrap seed.")
@click.option("--with-results", is_flag=True,
              help="Also upload the results file. It holds case text (PHI): it uploads case "
                   "text to the tracker.")
@rubrics_dir_option
def log_command(results: Path, tracking_uri: str | None, experiment: str | None,
                run_name: str | None, labels: LabelSource | None, criteria: tuple[str, ...],
                gates: tuple[Gate, ...], resamples: int, seed: int, with_results: bool,
                rubrics_dirs: tuple[Path, ...]) -> None:
    """Record the finished run of RESULTS in MLflow: params (rubric, judge, model hashes,
    settings hash, sampling, versions), metrics (per criterion mean with its 95% CI, SD, n;
    status counts; pass rates; a pairwise file's win rates; with --labels the agreement
    figures and clinician-level estimates) and artifacts (summary.json, manifest.json,
    report.html). No case text unless --with-results. Prints the MLflow run id."""
    if labels is not None and (not labels.paths) != (labels.field is None):
        raise click.UsageError("--labels and --label-field go together")
    labelled = {"--criterion": criteria, "--pass": gates,
                "--label-scale": labels is not None and labels.scale}
    named = [name for name, value in labelled.items() if value]
    if named and (labels is None or not labels.paths):
        raise click.UsageError(f"{', '.join(named)} only apply with --labels")
    options = None if labels is None or not labels.paths else LabelOptions(
        labels, criteria=criteria, gates=gates, resamples=resamples, seed=seed)
    logged = log_run(results, TrackingOptions(
        tracking_uri=tracking_uri, experiment=experiment, run_name=run_name,
        labels=options, with_results=with_results, rubrics_dirs=rubrics_dirs))
    echo_logged(logged)
    click.echo(logged.run_id)
