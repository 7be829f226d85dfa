"""``evaluator run``: judge a file of cases."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from tqdm import tqdm

from evaluator.cli.main import EXIT_SOME_FAILED, EXIT_USAGE
from evaluator.cli.options import models_file_option, parse_mapping, rubrics_dir_option


@click.command()
@click.option("--rubric", "-r", required=True, help="Rubric name (see `evaluator rubrics`) or path.")
@click.option("--input", "-i", "input_path", required=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Cases: .jsonl or .csv, one case per line/row.")
@click.option("--output", "-o", "output_path", required=True,
              type=click.Path(dir_okay=False, path_type=Path),
              help="Results .jsonl (a <name>.summary.json is written beside it).")
@click.option("--model", "-m", "judge", default=None, help="Judge name from models.yaml "
              "(default: the file's default).")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Judge only the first N cases.")
@click.option("--batch-size", type=click.IntRange(min=1), default=None,
              help="Cases per generate call (default: the judge's batch_size).")
@click.option("--map", "mappings", multiple=True, metavar="FIELD=COLUMN",
              help="Read rubric input FIELD from COLUMN (repeatable).")
@click.option("--id-column", default="case_id", show_default=True,
              help="Column holding the case id (rows without it get line-N).")
@rubrics_dir_option
@models_file_option
@click.option("--overwrite", is_flag=True, help="Replace an existing OUTPUT (default: refuse).")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
def run(rubric: str, input_path: Path, output_path: Path, judge: str | None, limit: int | None,
        batch_size: int | None, mappings: tuple[str, ...], id_column: str,
        rubrics_dirs: tuple[Path, ...], models_file: Path | None, overwrite: bool,
        no_progress: bool) -> None:
    """Judge every case in INPUT with a rubric and write one result per case to OUTPUT."""
    from evaluator.api import USER_ERRORS, evaluate

    mapping = parse_mapping(mappings)
    bar: tqdm | None = None

    def on_cases_read(valid: int, invalid: int) -> None:
        nonlocal bar
        click.echo(f"{valid + invalid} case(s) read: {valid} valid, {invalid} with input "
                   "errors (recorded in the results)", err=True)
        bar = tqdm(total=valid + invalid, unit="case", disable=no_progress or None,
                   file=sys.stderr, dynamic_ncols=True)

    try:
        result = evaluate(rubric=rubric, input_path=input_path, output_path=output_path,
                          judge=judge, models_path=models_file, rubrics_dirs=rubrics_dirs,
                          mapping=mapping, id_column=id_column, limit=limit,
                          batch_size=batch_size, on_cases_read=on_cases_read, overwrite=overwrite,
                          progress=lambda n: bar.update(n) if bar is not None else None)
    except USER_ERRORS as exc:
        if bar is not None:
            bar.close()
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    if bar is not None:
        bar.close()
    summary = result.summary
    click.echo(json.dumps({k: summary[k] for k in ("rubric", "judge", "cases", "status_counts",
                                                   "criteria", "aggregates")}, indent=2))
    click.echo(f"results: {result.results_path}\nsummary: {result.summary_path}", err=True)
    if result.failed:
        click.echo(f"{result.failed} case(s) have no verdict; see 'status' and 'reason' in the "
                   "results", err=True)
        sys.exit(EXIT_SOME_FAILED)
