"""``evaluator validate``: parse every rubric and models.yaml, render each rubric once."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from evaluator.cli.exit_codes import EXIT_USAGE
from evaluator.cli.options import models_file_option, rubrics_dir_option
from evaluator.common.columns import wrap
from evaluator.run.validation import validate_all


def _echo_wrapped(line: str) -> None:
    """An "ok ..." line in 80 columns (its rubric path kept whole, on a line of its own
    when it is long)."""
    for part in wrap(line, "", "    "):
        click.echo(part)


@click.command("validate")
@rubrics_dir_option
@models_file_option
def validate_command(rubrics_dirs: tuple[Path, ...], models_file: Path | None) -> None:
    """Check all rubric files and models.yaml; exit non-zero on the first class of problem."""
    problems = validate_all(rubrics_dirs, models_file, report=_echo_wrapped)
    if problems:
        for problem in problems:
            click.echo(f"error: {problem}", err=True)
        sys.exit(EXIT_USAGE)
    click.echo("all rubrics and models.yaml are valid")
