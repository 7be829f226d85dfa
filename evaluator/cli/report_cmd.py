"""``evaluator report``: one self-contained HTML page over one or more results files."""

from __future__ import annotations

from pathlib import Path

import click

from evaluator.analysis.labels.readers import FIELD_NEEDED, field_needed
from evaluator.cli.options import case_options, label_options, rubrics_dir_option, score_option
from evaluator.data.sources import CaseSource, LabelSource
from evaluator.report.html import write_report


@click.command("report")
@click.argument("results", nargs=-1, required=True,
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--html", "html_path", required=True,
              type=click.Path(dir_okay=False, path_type=Path),
              help="The HTML file to write (mode 0600; the name ends in .html or .htm).")
@click.option("--overwrite", is_flag=True,
              help="Replace the --html file even when it is not a report evaluator wrote "
                   "(never one of the report's own inputs).")
@label_options("for agreement tables and clinician-level estimates: one for every "
               "results file (several judges of the same answers), or one per results file "
               "in the same order (several systems: the page then compares them).",
               multiple=True, old_id=False, sheets=True)
@click.option("--estimate-criterion", "estimate_criteria", multiple=True, metavar="KEY",
              help="With --labels: the criterion the labels rate, for the clinician-level "
                   "estimates (repeatable; default: KEY of a KEY.label field).")
@click.option("--by", default=None, metavar="COLUMN",
              help="With --labels: a grouping column of the labels file (e.g. "
                   "generator_model): score and agreement per group, with CIs.")
@click.option("--text-field", default=None, metavar="FIELD",
              help="With --labels: the rubric input whose length the verbosity figures use.")
@click.option("--common-cases", is_flag=True,
              help="Compare every file over the cases judged ok in all of them (n shown).")
@click.option("--worst-by", default=None, metavar="KEY",
              help="Criterion or aggregate to rank the worst cases by (lowest first; default: "
                   "the first pass-threshold key, else the first criterion).")
@click.option("--worst", "worst_n", type=click.IntRange(min=0), default=10, show_default=True,
              help="Worst cases shown per file (0: none).")
@click.option("--show-text", is_flag=True,
              help="Include case text and the judge's written output (PHI!). Without it the "
                   "page holds ids, scores, statuses and failure reasons only.")
@case_options("with --labels, for the circular-label check and text lengths; with "
              "--show-text, its --map and --case-id-column read the case text.", old_id=True)
@click.option("--resamples", type=click.IntRange(min=100), default=1000, show_default=True,
              help="Bootstrap resamples for the agreement CIs.")
@score_option
@click.option("--low-confidence", "low_confidence", type=click.IntRange(min=0), default=10,
              show_default=True,
              help="Lowest-confidence scores listed per file (case id, path, chosen score, "
                   "confidence, expected score; 0: none). Needs score distributions.")
@rubrics_dir_option
def report_command(results: tuple[Path, ...], html_path: Path, overwrite: bool,
                   labels: LabelSource | None, estimate_criteria: tuple[str, ...],
                   by: str | None, text_field: str | None, common_cases: bool,
                   worst_by: str | None, worst_n: int, show_text: bool, cases: CaseSource,
                   resamples: int,
                   score_mode: str, low_confidence: int, rubrics_dirs: tuple[Path, ...]) -> None:
    """Write an HTML report over RESULTS (results files of one rubric: several judges,
    systems or runs side by side): distributions, means and pass rates with 95% CIs,
    statuses, agreement with labels and clinician-level estimates (PPI++) with the
    differences between systems, the judge's confidence, worst cases, from the scores
    --score names. Works offline; no case text unless --show-text."""
    # A sheet folder needs no --label-field: its criteria are in its sheet.json.
    if field_needed(labels):
        raise click.UsageError(FIELD_NEEDED)
    written = write_report(list(results), html_path, overwrite=overwrite,
                           rubrics_dirs=rubrics_dirs, labels=labels, cases=cases,
                           estimate_criteria=estimate_criteria, worst_by=worst_by,
                           worst_n=worst_n, show_text=show_text,
                           agreement_resamples=resamples, common_cases=common_cases, by=by,
                           text_field=text_field, score_mode=score_mode,
                           low_confidence=low_confidence)
    click.echo(f"report: {written}" + (" (contains case text)" if show_text else ""), err=True)
