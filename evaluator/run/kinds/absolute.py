"""The absolute kind (one text scored against the rubric), run side: one prompt per case,
its generations validated into scored records (:func:`evaluator.run.judging.finish_scores`)."""

from __future__ import annotations

from evaluator.data.cases import Case
from evaluator.judges.models_file import JudgeConfigError
from evaluator.rubrics.rubric import Rubric
from evaluator.run.judging import RunSetup
from evaluator.run.judging import finish_scores as finish
from evaluator.run.task import Judge, Task

__all__ = ["check_jury", "finish", "prompts", "systems"]


def prompts(setup: RunSetup, case: Case) -> list[list[dict[str, str]]]:
    """The case's one prompt."""
    return [setup.chat(case)]


def systems(task: Task, judge: Judge, rubric: Rubric) -> None:
    """None: no candidates to name; the options only a pairwise run takes are refused, in
    one line."""
    pair_options = [name for name, value in (("--versus", task.versus),
                                             ("--answer-column", task.answer_column),
                                             ("--systems", task.systems)) if value]
    if pair_options:
        raise JudgeConfigError(f"{', '.join(pair_options)}: only for a pairwise rubric; "
                               f"{rubric.name!r} scores one text (see `evaluator rubrics`)")


def check_jury(jury_name: str) -> None:
    """Nothing: a jury judges an absolute rubric."""
