"""``evaluator agree``: agreement of a results file with human or reference labels."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from evaluator.analysis.agreement import AgreementError, agreement, format_agreement
from evaluator.analysis.stats import StatsUnavailable
from evaluator.cli.exit_codes import EXIT_USAGE
from evaluator.data.results import ResultsFileDamaged


@click.command()
@click.argument("results", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--labels", "labels_path", required=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Labels: .jsonl or .csv with a case id and a numeric label per row.")
@click.option("--label-field", required=True, help="The labels file's field holding the label.")
@click.option("--criterion", "criteria", multiple=True, metavar="KEY",
              help="Criterion or aggregate to compare (repeatable; default: every integer "
                   "criterion and aggregate).")
@click.option("--id-column", default="case_id", show_default=True,
              help="The labels file's case id column.")
@click.option("--resamples", type=click.IntRange(min=100), default=1000, show_default=True,
              help="Bootstrap resamples for the CIs.")
@click.option("--seed", type=int, default=20141, show_default=True, help="Bootstrap seed.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON output.")
def agree(results: Path, labels_path: Path, label_field: str, criteria: tuple[str, ...],
          id_column: str, resamples: int, seed: int, as_json: bool) -> None:
    """Agreement of RESULTS' judge scores with human labels, per criterion: Spearman, Kendall,
    quadratic kappa, ICC, Krippendorff's alpha, exact/within-one agreement, confusion matrix,
    with bootstrap 95% CIs. Only 'ok' results are compared; case text is never shown."""
    try:
        report = agreement(results, labels_path, label_field, criteria=criteria,
                           id_column=id_column, resamples=resamples, seed=seed)
    except (AgreementError, ResultsFileDamaged, StatsUnavailable) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    click.echo(json.dumps(report, indent=2) if as_json else format_agreement(report))
