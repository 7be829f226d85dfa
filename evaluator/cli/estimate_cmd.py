"""``evaluator estimate``: clinician-level estimates (PPI++) from a judge's scores on every
case and clinicians' labels on a few, per system, and the differences between systems."""

from __future__ import annotations

import json
from pathlib import Path

import click

from evaluator.analysis.distributions import SCORE_MODES
from evaluator.analysis.estimate.estimate import estimate
from evaluator.analysis.estimate.text import format_estimate
from evaluator.analysis.gates import Gate
from evaluator.cli.options import label_options, parse_gates, rubrics_dir_option
from evaluator.data.sources import LabelSource


@click.command("estimate")
@click.argument("results", nargs=-1, required=True,
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@label_options("one per results file, in the same order.", required=True, multiple=True,
               sheets=True)
@click.option("--criterion", "criteria", multiple=True, metavar="KEY",
              help="Criterion or aggregate the labels rate (repeatable; default: KEY of a "
                   "KEY.label field).")
@click.option("--pass", "gates", multiple=True, metavar="CRITERION>=T",
              callback=lambda ctx, param, values: parse_gates(values),
              help="Also estimate the clinician-level pass rate of this gate (repeatable; "
                   "also >, <=, <): the judge's pass/fail predicts the labels'.")
@click.option("--score", "score_mode", type=click.Choice(SCORE_MODES), default="argmax",
              show_default=True,
              help="The judge's scores as predictions: argmax (the verdict as written) or "
                   "expected (each score's expected value; a case without distributions uses "
                   "its verdict's score, said in a note).")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON object per line: each system (its design and notes), each "
                   "estimate, then each difference.")
@rubrics_dir_option
def estimate_command(results: tuple[Path, ...], labels: LabelSource,
                     criteria: tuple[str, ...], gates: tuple[Gate, ...], score_mode: str,
                     as_json: bool,
                     rubrics_dirs: tuple[Path, ...]) -> None:
    """Clinician-level estimates for each RESULTS file (a system) from its judge's scores on
    every case and clinicians' labels on a few: the judge-only mean and its bias, the labels
    alone, and PPI++ (prediction-powered inference), whose 95% CI is valid whatever the
    judge's quality; with several RESULTS, each pair's difference with its CI and p-value.
    Labels from `evaluator review --design random|active` carry their probabilities; labels
    from a priority sheet are refused; from a sheet folder, a case several clinicians
    labelled counts once, with the mean of their labels. No case text is shown."""
    report = estimate(list(results), labels, criteria=criteria, gates=gates,
                      score_mode=score_mode, rubrics_dirs=rubrics_dirs)
    if as_json:
        for row in [*report.systems, *report.estimates, *report.differences]:
            click.echo(json.dumps(row.to_json()))
    else:
        click.echo(format_estimate(report))
