"""``evaluator rubrics``: list the rubrics, or show one."""

from __future__ import annotations

import json
from pathlib import Path

import click

from evaluator.api import available_rubrics, load_rubric, output_json_schema
from evaluator.cli.options import printable, rubrics_dir_option
from evaluator.common.columns import row, whole, wrap
from evaluator.rubrics.schema import max_new_tokens

NAME_WIDTH = 28  # the listing's first column


@click.command("rubrics")
@click.argument("name", required=False)
@click.option("--schema", "show_schema", is_flag=True, help="Print the output JSON schema.")
@rubrics_dir_option
def rubrics_command(name: str | None, show_schema: bool, rubrics_dirs: tuple[Path, ...]) -> None:
    """List available rubrics, or show NAME: inputs, output keys, aggregates."""
    if name is None:
        _list(rubrics_dirs)
        return
    rubric = load_rubric(name, rubrics_dirs)
    schema = output_json_schema(rubric)
    if show_schema:
        click.echo(json.dumps(schema, indent=2))
        return
    _echo(f"{rubric.name}: {rubric.title}", "")
    _echo(f"file: {rubric.source_path}")
    if rubric.description:
        _echo(rubric.description)
    if rubric.candidates is not None:  # only a pairwise rubric names candidates
        _echo(f"pairwise: compares {rubric.candidates[0]} (candidate A) with "
              f"{rubric.candidates[1]} (candidate B), judged in both orders")
    click.echo("inputs:")
    for field, spec in rubric.inputs.items():
        optional = "" if spec.required else " (optional)"
        _echo(f"{field}{optional}: {spec.description}")
    click.echo("output (in this order):")
    for out in rubric.output:
        if out.type == "string":
            detail = f"string, {out.min_length}-{out.max_length} chars ({out.charset})"
        elif out.type == "items":
            detail = (f"list of {out.min_items}-{out.max_items} {{{out.score_key}, "
                      f"{out.explanation_key}}} items, {out.score_key} in "
                      f"{whole(str(out.allowed))}")
        elif out.type == "choice":
            detail = f"choice of {' / '.join(out.allowed)} (A: the answer shown first)"
        else:
            detail = f"integer in {whole(str(out.allowed))}"
        _echo(f"{out.key}: {detail}")
    if rubric.aggregates:
        click.echo("aggregates:")
        for agg in rubric.aggregates:
            alias = rubric.alias_of(agg.name)
            _echo(f"{agg.name}{f' (paper name: {alias})' if alias else ''}: "
                  f"{agg.reduce} of {agg.of}")
    click.echo(printable(f"token budget per verdict: {max_new_tokens(schema)}"))


def _echo(text: str, indent: str = "  ") -> None:
    """``text`` wrapped to 80 columns (a word, number or path is never cut)."""
    # Escaped first: wrapping would turn a control character like CR into a space.
    for line in wrap(printable(text), indent, "    "):
        click.echo(line)


def _list(rubrics_dirs: tuple[Path, ...]) -> None:
    """Each rubric's name and title, under the folder it is read from (80 columns)."""
    folder = None
    for rubric_name, path in available_rubrics(rubrics_dirs).items():
        rubric = load_rubric(path)
        if path.parent != folder:
            folder = path.parent
            _echo(f"{folder}:", "")
        # A name longer than its column gets a line of its own, whole.
        name = rubric_name if len(rubric_name) < NAME_WIDTH else ""
        if not name:
            _echo(rubric_name)
        for line in row(f"  {printable(name):{NAME_WIDTH}} ", printable(rubric.title)):
            click.echo(line)
