"""``evaluator study``: a comparison of systems declared before labelling (issue 48).
``study check STUDY`` reads and checks the plan (``STUDY/study.yaml``) and prints what it
declares and its SHA-256."""

from __future__ import annotations

from pathlib import Path

import click

from evaluator.cli.options import rubrics_dir_option
from evaluator.common.columns import wrap
from evaluator.study.plan import load_plan


@click.group("study")
def study_command() -> None:
    """A comparison of systems with its endpoint, margin and labels design declared before
    any label (STUDY/study.yaml; docs/study.md)."""


@study_command.command("check")
@click.argument("study", type=click.Path(exists=True, path_type=Path))
@rubrics_dir_option
def check_command(study: Path, rubrics_dirs: tuple[Path, ...]) -> None:
    """Check STUDY's plan (a study folder holding study.yaml, or the plan file): every
    problem on one line, exit 2; else what it declares and its SHA-256."""
    loaded = load_plan(study, rubrics_dirs)
    plan = loaded.plan
    lines = [f"study: {plan.title}", f"plan: {loaded.path} (sha256 {loaded.sha256})",
             f"rubric: {loaded.rubric.name}"]
    for system, path in zip(plan.systems, loaded.results, strict=True):
        role = "reference" if system.name == plan.comparison.reference else "compared"
        lines.append(f"system {system.name} ({role}): {path}")
    lines += wrap(f"primary endpoint: {plan.hypothesis()}")
    for endpoint in plan.secondary:
        lines.append(f"secondary (reported, never decisive): {endpoint.describe()}")
    design = plan.labels
    lines += wrap(f"labels: {design.design} sheet of {design.n} case(s), labellers "
                  f"{', '.join(design.labellers)}, overlap {design.overlap:g}, seed "
                  f"{design.seed}")
    for line in lines:
        click.echo(line)
