"""Check every rubric and models.yaml without loading a model."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from evaluator.judges.models_file import JudgeConfigError, load_models_file
from evaluator.rubrics.load import available_rubrics, load_rubric_file
from evaluator.rubrics.render import render_messages
from evaluator.rubrics.rubric import RubricError
from evaluator.rubrics.schema import UnboundedSchemaError, max_new_tokens, output_json_schema
from evaluator.run.preflight import template_errors


def validate_all(rubrics_dirs: Sequence[Path] = (), models_file: Path | None = None,
                 report: Callable[[str], None] = lambda _: None) -> list[str]:
    """Parse each rubric, build its schema and token budget, render it once with placeholder
    values, and parse models.yaml. Returns the problems found (empty when all is well)."""
    problems: list[str] = []
    try:
        found = available_rubrics(rubrics_dirs)
    except RubricError as exc:
        return [str(exc)]
    for name, path in found.items():
        try:
            rubric = load_rubric_file(path)
            budget = max_new_tokens(output_json_schema(rubric))
            sample = {field: f"<{field}>" for field in rubric.inputs}
            with template_errors(rubric):
                rendered = render_messages(rubric, sample)
        except (RubricError, UnboundedSchemaError) as exc:
            problems.append(str(exc))
            continue
        chars = sum(len(m["content"]) for m in rendered)
        report(f"ok  rubric {name}: {len(rubric.output)} output keys, "
               f"{len(rubric.aggregates)} aggregates, renders to {chars} chars, "
               f"token budget {budget}  [{path}]")
    try:
        models = load_models_file(models_file)
        report(f"ok  models file: {len(models.judges)} judges, default {models.default!r}")
    except JudgeConfigError as exc:
        problems.append(str(exc))
    return problems
