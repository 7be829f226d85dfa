"""The errors that mean "fix your input or configuration and re-run" (the CLI's usage exit
code, 2), as opposed to bugs: one tuple, gathered from the layers that raise them, so the CLI
and the Ray engine (which unwraps them from Ray's own exceptions) agree on what they are.
"""

from __future__ import annotations

from evaluator.analysis.score_mode import ScoreModeError
from evaluator.data.cases import InputFileError
from evaluator.data.files import OutputRefused
from evaluator.data.results import ResultsFileDamaged
from evaluator.judges.backends import BackendUnavailable
from evaluator.judges.embedded_judge import EmbeddedJudgeError
from evaluator.judges.models_file import JudgeConfigError
from evaluator.rubrics.rubric import RubricError
from evaluator.rubrics.schema import UnboundedSchemaError
from evaluator.run.engines import RayClusterError
from evaluator.run.preflight import ModelFolderError, OutputPathError
from evaluator.run.resume import ResumeConflict

USER_ERRORS: tuple[type[Exception], ...] = (
    RubricError, JudgeConfigError, InputFileError, BackendUnavailable, UnboundedSchemaError,
    EmbeddedJudgeError, ResumeConflict, ResultsFileDamaged, RayClusterError, OutputRefused,
    ModelFolderError, OutputPathError, ScoreModeError,
)
