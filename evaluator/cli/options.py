"""Options shared by several commands."""

from __future__ import annotations

from pathlib import Path

import click

rubrics_dir_option = click.option(
    "--rubrics-dir", "rubrics_dirs", multiple=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Extra directory of rubric .yaml files (searched before the built-ins; repeatable).")
models_file_option = click.option(
    "--models-file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None, help="models.yaml to use (default: the project's).")


def parse_mapping(values: tuple[str, ...]) -> dict[str, str]:
    """``("rubric_field=column", ...)`` -> dict, with a usage error for a malformed item."""
    mapping: dict[str, str] = {}
    for item in values:
        field, sep, column = item.partition("=")
        if not sep or not field or not column:
            raise click.BadParameter(f"{item!r}: expected RUBRIC_FIELD=COLUMN", param_hint="--map")
        mapping[field.strip()] = column.strip()
    return mapping
