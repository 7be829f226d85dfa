"""``evaluator compare``: how a pairwise judge ranks the systems of one or more pairwise
results files, and how far its position and length biases and clinicians' labels let its
verdicts be trusted."""

from __future__ import annotations

import json
from pathlib import Path

import click

from evaluator.analysis.pairwise.compare import compare
from evaluator.analysis.pairwise.text import format_comparison
from evaluator.cli.options import label_options
from evaluator.common.errors import UserError
from evaluator.data.sources import LabelSource


@click.command("compare")
@click.argument("results", nargs=-1, required=True,
                type=click.Path(dir_okay=False, path_type=Path))
@click.option("--criterion", "criteria", multiple=True, metavar="KEY",
              help="A choice criterion to compare (repeatable; default: all of the rubric's).")
@label_options("clinicians' preferences, A, B or tie per case (A: system A); with "
               "one RESULTS file.", path_type=click.Path(path_type=Path), scale=False,
               sheets=True)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def compare_command(results: tuple[Path, ...], criteria: tuple[str, ...],
                    labels: LabelSource | None, as_json: bool) -> None:
    """Compare the systems of pairwise RESULTS files (each one pairing, system A vs B,
    judged in both orders): per choice criterion A's win rate, the position consistency
    and position bias, the length bias (and a length-controlled win rate), with --labels
    the agreement with clinicians' preferences, and with more than two systems their
    Bradley-Terry strengths and ranking. --labels may be a pairwise labelling sheet's
    folder: a case several clinicians labelled gets their majority (a tie between their
    choices: tie). Each figure has its 95% CI; no case text is shown."""
    if labels is not None and labels.field is not None and labels.path is None:
        raise UserError("--label-field goes with --labels")
    report = compare(list(results), criteria=criteria, labels=labels)
    if as_json:
        click.echo(json.dumps(report.to_json()))
    else:
        click.echo(format_comparison(report))
