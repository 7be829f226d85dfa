"""``evaluator report``: one self-contained HTML page over one or more results files."""

from __future__ import annotations

from pathlib import Path

import click

from evaluator.analysis.label_files import parse_label_scale
from evaluator.cli.options import parse_mapping, rubrics_dir_option, score_option
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
@click.option("--labels", "labels_paths", multiple=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Labels (.jsonl or .csv) for agreement tables and clinician-level "
                   "estimates: one for every results file (several judges of the same "
                   "answers), or one per results file in the same order (several systems: "
                   "the page then compares them).")
@click.option("--estimate-criterion", "estimate_criteria", multiple=True, metavar="KEY",
              help="With --labels: the criterion the labels rate, for the clinician-level "
                   "estimates (repeatable; default: KEY of a KEY.label field).")
@click.option("--label-field", default=None, help="The labels file's field holding the label.")
@click.option("--label-id-column", default="case_id", show_default=True,
              help="The labels file's case id column.")
@click.option("--label-scale", default=None, metavar="VALUES",
              help="The labels' possible values, e.g. 0,1,2 or 1-5 (confusion-matrix rows; "
                   "default: the values observed).")
@click.option("--by", default=None, metavar="COLUMN",
              help="With --labels: a grouping column of the labels file (e.g. "
                   "generator_model): score and agreement per group, with CIs.")
@click.option("--cases", "cases_path", default=None,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="With --labels: the cases file the runs read (default: the one the "
                   "records name), for the circular-label check and text lengths.")
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
@click.option("--map", "mappings", multiple=True, metavar="FIELD=COLUMN",
              help="The --map options the run used (repeatable): for --show-text and for "
                   "reading the cases with --labels.")
@click.option("--id-column", default="case_id", show_default=True,
              help="The --id-column the run used (for --show-text and the cases).")
@click.option("--resamples", type=click.IntRange(min=100), default=1000, show_default=True,
              help="Bootstrap resamples for the agreement CIs.")
@score_option
@click.option("--low-confidence", "low_confidence", type=click.IntRange(min=0), default=10,
              show_default=True,
              help="Lowest-confidence scores listed per file (case id, path, chosen score, "
                   "confidence, expected score; 0: none). Needs score distributions.")
@rubrics_dir_option
def report_command(results: tuple[Path, ...], html_path: Path, overwrite: bool,
                   labels_paths: tuple[Path, ...], estimate_criteria: tuple[str, ...],
                   label_field: str | None, label_id_column: str,
                   label_scale: str | None, by: str | None, cases_path: Path | None,
                   text_field: str | None, common_cases: bool, worst_by: str | None, worst_n: int,
                   show_text: bool, mappings: tuple[str, ...], id_column: str, resamples: int,
                   score_mode: str, low_confidence: int, rubrics_dirs: tuple[Path, ...]) -> None:
    """Write an HTML report over RESULTS (results files of one rubric: several judges,
    systems or runs side by side): distributions, means and pass rates with 95% CIs,
    statuses, agreement with labels and clinician-level estimates (PPI++) with the
    differences between systems, the judge's confidence, worst cases, from the scores
    --score names. Works offline; no case text unless --show-text."""
    if labels_paths and not label_field:
        raise click.UsageError("--labels needs --label-field")
    scale = parse_label_scale(label_scale) if label_scale is not None else None
    written = write_report(list(results), html_path, overwrite=overwrite,
                           rubrics_dirs=rubrics_dirs,
                           labels=list(labels_paths) or None,
                           label_field=label_field, estimate_criteria=estimate_criteria,
                           label_id_column=label_id_column, worst_by=worst_by,
                           worst_n=worst_n, show_text=show_text,
                           mapping=parse_mapping(mappings), id_column=id_column,
                           agreement_resamples=resamples, common_cases=common_cases,
                           label_scale=scale, by=by, cases_path=cases_path,
                           text_field=text_field, score_mode=score_mode,
                           low_confidence=low_confidence)
    click.echo(f"report: {written}" + (" (contains case text)" if show_text else ""), err=True)
