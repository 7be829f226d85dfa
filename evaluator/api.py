"""The public Python API: everything the CLI calls, importable without torch or vLLM."""

from __future__ import annotations

from evaluator.backends import BackendUnavailable
from evaluator.cases import InputFileError
from evaluator.embedded_judge import EmbeddedJudgeError
from evaluator.files import OutputBusy, OutputRefused
from evaluator.judges import JudgeConfigError, load_models_file, resolve_judge, resolve_jury
from evaluator.jury import JuryResult, evaluate_jury
from evaluator.ray_options import RayClusterError, RayOptions, RayRunFailed
from evaluator.results import ResultsFileDamaged
from evaluator.resume import ResumeConflict
from evaluator.rubric import RubricError, available_rubrics, load_rubric
from evaluator.runner import InputRejected, RunResult, RunStart, evaluate
from evaluator.schema import UnboundedSchemaError, output_json_schema

# Errors that mean "fix your input/config and re-run" (the CLI's usage exit code), as
# opposed to bugs.
USER_ERRORS: tuple[type[Exception], ...] = (
    RubricError, JudgeConfigError, InputFileError, BackendUnavailable, UnboundedSchemaError,
    EmbeddedJudgeError, ResumeConflict, ResultsFileDamaged, RayClusterError, OutputRefused,
)

__all__ = [
    "USER_ERRORS", "InputRejected", "JuryResult", "OutputBusy", "OutputRefused", "RayOptions",
    "RayRunFailed", "RunResult",
    "RunStart", "available_rubrics", "evaluate", "evaluate_jury", "load_models_file",
    "load_rubric", "output_json_schema", "resolve_judge", "resolve_jury",
]
