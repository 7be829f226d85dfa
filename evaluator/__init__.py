"""Offline clinical LLM-judge evaluator.

``import evaluator`` imports no torch, transformers or vLLM: backends load by name when a run
needs them. The public API lives in :mod:`evaluator.api` and is re-exported here.
"""

from evaluator.api import (
    USER_ERRORS,
    RunResult,
    available_rubrics,
    evaluate,
    load_models_file,
    load_rubric,
    output_json_schema,
    resolve_judge,
)

__version__ = "0.1.0"

__all__ = [
    "USER_ERRORS", "RunResult", "__version__", "available_rubrics", "evaluate",
    "load_models_file", "load_rubric", "output_json_schema", "resolve_judge",
]
