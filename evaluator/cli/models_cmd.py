"""``evaluator models``: list the judges in models.yaml, or verify one judge's weights."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from tqdm import tqdm

from evaluator.api import load_models_file
from evaluator.cli.options import models_file_option, printable
from evaluator.common.columns import row, wrap
from evaluator.common.errors import UserError
from evaluator.judges.weights import folder_bytes, verify_weights
from evaluator.run.manifest import model_dir_for


@click.command("models")
@click.option("--verify", "verify_name", metavar="NAME", default=None,
              help="Re-hash judge NAME's folder against its evaluator-weights.json (every "
                   "byte is read); exit 1 naming each file that differs.")
@models_file_option
def models_command(verify_name: str | None, models_file: Path | None) -> None:
    """List the named judge models and where their weights are."""
    parsed = load_models_file(models_file)
    if verify_name is not None:
        _verify(parsed, verify_name)
        return
    for name, spec in parsed.judges.items():
        marker = "*" if name == parsed.default else " "
        where = spec.path or (f"embedded:{spec.embedded}" if spec.embedded else "(built on use)")
        # A long name or folder goes on under the row, whole (80 columns).
        # Escaped first: wrapping would turn a control character like CR into a space.
        for line in row(printable(f"{marker} {name:24} "),
                        printable(f"backend={spec.backend:12} {where}")):
            click.echo(line)
        if spec.description:
            for line in wrap(printable(spec.description), "    ", ""):
                click.echo(line)
    click.echo("(* = default)")


def _verify(parsed, name: str) -> None:
    """Hash one judge's folder against its weight list, with a progress bar on a terminal."""
    spec = parsed.judges.get(name)
    if spec is None:
        raise UserError(f"no judge {name!r}; known: {', '.join(parsed.judges)}")
    folder = Path(spec.path) if spec.path is not None else model_dir_for(spec)
    if folder is None or not folder.is_dir():
        raise UserError(f"judge {name!r} has no weights folder to verify")
    total = folder_bytes(folder)
    # disable=None: a bar on a terminal only, never in logs or pipes.
    with tqdm(total=total, unit="B", unit_scale=True, desc=f"verifying {name}",
              disable=None, file=sys.stderr) as bar:
        problems = verify_weights(folder, progress=bar.update)
    if problems:
        for problem in problems:
            click.echo(printable(f"FAILED {folder}/{problem}"), err=True)
        sys.exit(1)
    click.echo(printable(f"verified: {name}: all files in {folder} ({total / 1e6:.0f} MB) "
                         "match its evaluator-weights.json"))
