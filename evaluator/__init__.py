"""Offline clinical LLM-judge evaluator.

``import evaluator`` imports no torch, transformers, vLLM or Ray: backends load by name when
a run needs them. The public API lives in :mod:`evaluator.api` and is re-exported here:
``evaluate(Task(...), Judge(...), RunOptions(...))``.

The packages, one per layer, each importing only the layers before it in this list:
:mod:`evaluator.common` (strict-config error text, version), :mod:`evaluator.rubrics` and
:mod:`evaluator.judges` (independent of each other), :mod:`evaluator.data` (cases in,
records out, safe files), :mod:`evaluator.analysis`, :mod:`evaluator.run`,
:mod:`evaluator.report`, then :mod:`evaluator.api` and :mod:`evaluator.cli`.
``tests/test_layers.py`` keeps it so.
"""

from evaluator.api import (
    Judge,
    RunOptions,
    RunResult,
    Task,
    UserError,
    available_rubrics,
    evaluate,
    load_models_file,
    load_rubric,
    output_json_schema,
    resolve_judge,
)
from evaluator.common.version import __version__

__all__ = [
    "Judge", "RunOptions", "RunResult", "Task", "UserError", "__version__",
    "available_rubrics", "evaluate", "load_models_file", "load_rubric", "output_json_schema",
    "resolve_judge",
]
