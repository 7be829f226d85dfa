"""``evaluator models``: list the judges in models.yaml."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from evaluator.api import USER_ERRORS, load_models_file
from evaluator.cli.exit_codes import EXIT_USAGE
from evaluator.cli.options import models_file_option


@click.command()
@models_file_option
def models(models_file: Path | None) -> None:
    """List the named judge models and where their weights are."""
    try:
        parsed = load_models_file(models_file)
    except USER_ERRORS as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    for name, spec in parsed.judges.items():
        marker = "*" if name == parsed.default else " "
        where = spec.path or (f"embedded:{spec.embedded}" if spec.embedded else "(built on use)")
        click.echo(f"{marker} {name:24} backend={spec.backend:12} {where}")
        if spec.description:
            click.echo(f"    {spec.description}")
    click.echo("(* = default)")
