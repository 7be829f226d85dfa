"""``evaluator agree``: agreement of a results file with human or reference labels, with
the warnings that decide how to read it and the judge-bias figures."""

from __future__ import annotations

import json
from pathlib import Path

import click

from evaluator.analysis.agreement.agreement import agreement
from evaluator.analysis.agreement.text import format_agreement
from evaluator.analysis.gates import Gate
from evaluator.cli.options import (
    case_options,
    label_options,
    parse_gates,
    rubrics_dir_option,
    score_option,
)
from evaluator.data.sources import CaseSource, LabelSource


@click.command("agree")
@click.argument("results", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@label_options("a case id and a numeric label per row (a worksheet's design is "
               "read).", required=True, sheets=True)
@click.option("--criterion", "criteria", multiple=True, metavar="KEY",
              help="Criterion or aggregate to compare (repeatable; default: KEY of a "
                   "KEY.label field, else every integer criterion and aggregate).")
@click.option("--by", default=None, metavar="COLUMN",
              help="Grouping column of the labels file (e.g. generator_model, site): mean "
                   "score and agreement per group, each group vs the rest with a CI.")
@case_options("for the circular-label check and text lengths.")
@click.option("--text-field", default=None, metavar="FIELD",
              help="Rubric input whose length the verbosity figures use (default: the input "
                   "the rubric describes as being evaluated).")
@click.option("--resamples", type=click.IntRange(min=100), default=1000, show_default=True,
              help="Bootstrap resamples for the CIs.")
@click.option("--seed", type=int, default=20141, show_default=True, help="Bootstrap seed.")
@score_option
@click.option("--pass", "gates", multiple=True, metavar="CRITERION>=THRESHOLD",
              callback=lambda ctx, param, values: parse_gates(values),
              help="A pass/fail gate (repeatable; also >, <=, <): the judge's pass/fail "
                   "against the labels' with the same threshold (pass is the positive "
                   "class): TP/FP/FN/TN, sensitivity, specificity, PPV, NPV with Wilson CIs.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON output.")
@rubrics_dir_option
def agree_command(results: Path, labels: LabelSource, criteria: tuple[str, ...],
                  by: str | None, cases: CaseSource, text_field: str | None, resamples: int,
                  seed: int, score_mode: str,
                  gates: tuple[Gate, ...], as_json: bool, rubrics_dirs: tuple[Path, ...]) -> None:
    """Agreement of RESULTS' judge scores with human labels, per criterion: Spearman, Kendall,
    quadratic kappa, ICC, Krippendorff's alpha, exact/within-one agreement (with chance
    levels), confusion matrix, each CI with its method; warnings (a constant judge, circular
    labels, unreliable intervals) and judge-bias figures (verbosity, --by subgroups); --pass
    gates. Labels from a review worksheet: a priority sheet is warned about before any
    figure; an active sheet's labels weigh 1/pi in kappa, mean |judge - label|, exact and
    within-one agreement, the confusion matrix and the gates. --labels may be a labelling
    sheet's folder: a case several clinicians labelled counts once (one labeller's label
    drawn per case), and on those cases the ceiling is printed: clinician-vs-clinician
    agreement beside the judge's, and their difference with a CI. Only 'ok' results are
    compared; case text is never shown."""
    report = agreement(results, labels, criteria=criteria, resamples=resamples, seed=seed,
                       rubrics_dirs=rubrics_dirs, cases=cases, text_field=text_field, by=by,
                       score_mode=score_mode, gates=gates)
    click.echo(json.dumps(report.to_json(), indent=2) if as_json else format_agreement(report))


