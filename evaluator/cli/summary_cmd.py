"""``evaluator summary``: a results file's summary, recomputed from its records in the score
mode asked for."""

from __future__ import annotations

import json
from pathlib import Path

import click

from evaluator.analysis.kinds import analysis_kind
from evaluator.analysis.score_mode import ScoreModeError
from evaluator.analysis.summary.text import format_summary
from evaluator.cli.options import rubrics_dir_option, score_option
from evaluator.data.results import read_results, rubric_and_judge


@click.command("summary")
@click.argument("results", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@score_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON output.")
@rubrics_dir_option
def summary_command(results: Path, score_mode: str, as_json: bool,
                    rubrics_dirs: tuple[Path, ...]) -> None:
    """Summary of RESULTS recomputed from its records: status counts, per criterion and
    aggregate n, mean with a bootstrap 95% CI, SD, median, and the rubric's pass rates with
    Wilson CIs, from the scores --score names."""
    records = read_results(results, rubrics_dirs)
    rubric, judge = rubric_and_judge(records, results, rubrics_dirs, ScoreModeError)
    result = analysis_kind(rubric).summarize(rubric, judge, records,
                                             score_mode=score_mode, source=str(results))
    click.echo(json.dumps(result.to_json(), indent=2) if as_json else format_summary(result))
