"""``evaluator export``: a results file as a flat Parquet table (pandas, polars, DuckDB)."""

from __future__ import annotations

from pathlib import Path

import click

from evaluator.cli.options import rubrics_dir_option
from evaluator.data.files import show_path
from evaluator.report.export import export_parquet


@click.command("export")
@click.argument("results", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--parquet", "parquet_path", required=True,
              type=click.Path(dir_okay=False, path_type=Path),
              help="The Parquet file to write (mode 0600; the name ends in .parquet).")
@click.option("--with-text", is_flag=True,
              help="Add the judge's written text: string fields such as reasoning, item "
                   "explanations, the raw output of a verdict that failed validation. It can "
                   "quote the case (PHI!). Case text itself is never copied: join on case_id.")
@click.option("--overwrite", is_flag=True,
              help="Replace the --parquet file even when it is not an export evaluator wrote "
                   "(never RESULTS or a case file its run read).")
@rubrics_dir_option
def export_command(results: Path, parquet_path: Path, with_text: bool, overwrite: bool,
                   rubrics_dirs: tuple[Path, ...]) -> None:
    """Write RESULTS as a Parquet table, one row per case: id, status, reason, each score,
    aggregate, expected score and confidence in a typed column of its own (a pairwise
    rubric: each criterion's outcome), tokens, timings, judge and record version. Streamed:
    a large results file is never held in memory. Needs pyarrow (the parquet extra)."""
    written = export_parquet(results, parquet_path, with_text=with_text,
                             overwrite=overwrite, rubrics_dirs=rubrics_dirs)
    if written.torn_bytes:
        click.echo(f"note: {show_path(results)}: its last line is cut short ({written.torn_bytes} "
                   "bytes, a run killed while writing it); not exported: re-run the same "
                   "`evaluator run` command to judge that case again", err=True)
    click.echo(f"export: {show_path(written.path)} ({written.rows} row(s), "
               f"{len(written.columns)} columns)"
               + (" (contains the judge's text, which can quote the case)" if with_text
                  else ""), err=True)
