"""The public Python API: everything the CLI calls, importable without torch or vLLM."""

from __future__ import annotations

from evaluator.data.cases import InputFileError
from evaluator.data.results import ResultsFileDamaged
from evaluator.judges.backends import BackendUnavailable
from evaluator.judges.embedded_judge import EmbeddedJudgeError
from evaluator.judges.models_file import (
    JudgeConfigError,
    load_models_file,
    resolve_judge,
    resolve_jury,
)
from evaluator.rubrics.rubric import RubricError, available_rubrics, load_rubric
from evaluator.rubrics.schema import UnboundedSchemaError, output_json_schema
from evaluator.run.engines import RayClusterError, RayOptions, RayRunFailed
from evaluator.run.jury import JuryResult, evaluate_jury
from evaluator.run.resume import ResumeConflict
from evaluator.run.runner import InputRejected, RunResult, RunStart, evaluate

# Errors that mean "fix your input/config and re-run" (the CLI's usage exit code), as
# opposed to bugs.
USER_ERRORS: tuple[type[Exception], ...] = (
    RubricError, JudgeConfigError, InputFileError, BackendUnavailable, UnboundedSchemaError,
    EmbeddedJudgeError, ResumeConflict, ResultsFileDamaged, RayClusterError,
)

__all__ = [
    "USER_ERRORS", "InputRejected", "JuryResult", "RayOptions", "RayRunFailed", "RunResult",
    "RunStart", "available_rubrics", "evaluate", "evaluate_jury", "load_models_file",
    "load_rubric", "output_json_schema", "resolve_judge", "resolve_jury",
]
