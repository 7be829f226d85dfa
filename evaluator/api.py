"""The public Python API, importable without torch, vLLM or Ray (re-exported by
:mod:`evaluator`).

A run is :func:`evaluate` of three objects: a :class:`Task` (what to judge: a cases file and
a rubric), a :class:`Judge` (which judge from models.yaml, and how it samples) and
:class:`RunOptions` (where the results go, resume, engine)::

    from evaluator import Judge, RunOptions, Task, evaluate

    result = evaluate(Task("trial_eligibility", "examples/trial_eligibility.jsonl"),
                      Judge(), RunOptions("out/trial.jsonl"))
    print(result.summary.criteria, result.failed)

:func:`evaluate_jury` does the same with several judges. Every error a user can act on
derives from :class:`UserError` (its ``exit_code``: 2 means "fix your input or configuration
and re-run"); any other exception is a bug.
"""

from __future__ import annotations

from evaluator.common.errors import UserError
from evaluator.data.files import OutputBusy, OutputRefused
from evaluator.judges.models_file import load_models_file, resolve_judge, resolve_jury
from evaluator.rubrics.load import available_rubrics, load_rubric
from evaluator.rubrics.schema import output_json_schema
from evaluator.run.engines import RayOptions, RayRunFailed
from evaluator.run.judging import InputRejected
from evaluator.run.jury import JuryResult, evaluate_jury
from evaluator.run.runner import OutputWriteFailed, RunResult, evaluate
from evaluator.run.task import Judge, RunOptions, RunStart, Task

__all__ = [
    "InputRejected", "Judge", "JuryResult", "OutputBusy", "OutputRefused", "OutputWriteFailed",
    "RayOptions", "RayRunFailed", "RunOptions", "RunResult", "RunStart", "Task", "UserError",
    "available_rubrics", "evaluate", "evaluate_jury", "load_models_file",
    "load_rubric", "output_json_schema", "resolve_judge", "resolve_jury",
]
