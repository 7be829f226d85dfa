"""``evaluator study report STUDY --html OUT``: the study's report, opening with the rule
declared in its plan applied to the primary endpoint (:mod:`evaluator.report.study`); the
sentence is printed too."""

from __future__ import annotations

from pathlib import Path

import click

from evaluator.cli.options import rubrics_dir_option
from evaluator.common.columns import wrap
from evaluator.report.study import write_study_report


@click.command("report")
@click.argument("study", type=click.Path(exists=True, path_type=Path))
@click.option("--html", "html_path", required=True,
              type=click.Path(dir_okay=False, path_type=Path),
              help="The HTML file to write (mode 0600; the name ends in .html or .htm).")
@click.option("--overwrite", is_flag=True,
              help="Replace the --html file even when it is not a report evaluator wrote.")
@click.option("--resamples", type=click.IntRange(min=100), default=1000, show_default=True,
              help="Bootstrap resamples for the agreement CIs.")
@rubrics_dir_option
def study_report_command(study: Path, html_path: Path, overwrite: bool, resamples: int,
                         rubrics_dirs: tuple[Path, ...]) -> None:
    """Write STUDY's report (a study folder whose labels were drawn by `evaluator study
    draw`): first the plan's rule applied to the primary endpoint in one sentence, then the
    secondary endpoints (which decide nothing) and every figure of `evaluator report`, the
    systems called by their names. The plan applied is the one frozen at the draw."""
    report = write_study_report(study, html_path, overwrite=overwrite,
                                rubrics_dirs=rubrics_dirs, resamples=resamples)
    summary = report.study
    if summary is not None:
        for line in wrap(summary.sentence):
            click.echo(line)
        if summary.judge_line:
            for line in wrap(summary.judge_line):
                click.echo(line)
        if summary.plan_changed:
            for line in wrap(f"WARNING: {summary.plan_changed}"):
                click.echo(line)
    click.echo(f"report: {html_path}", err=True)
