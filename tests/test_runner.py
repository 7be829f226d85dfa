"""The pipeline end to end with the scripted fake backend."""

from __future__ import annotations

import json
import os
import stat

from evaluator.data.results import read_results
from evaluator.judges.backends.base import Generation
from evaluator.judges.backends.fake import FakeBackend
from evaluator.judges.models_file import JudgeSpec
from evaluator.run.runner import evaluate
from tests.conftest import EXAMPLES, run_options, write_jsonl

FAKE = JudgeSpec(backend="fake")
GOOD = json.dumps({"critical_finding_concordance": 4, "factual_accuracy": 3,
                   "factual_completeness": 2, "overall_equivalence": 3,
                   "reasoning": "Same diagnosis; minor omission."})


def _run(tmp_path, backend, rubric="pathology_report", input_path=None, **kwargs):
    return evaluate(*run_options(rubric=rubric,
                                 input_path=input_path or EXAMPLES / f"{rubric}.jsonl",
                                 output_path=tmp_path / "out" / "results.jsonl", backend=backend,
                                 judge="fake-judge", judge_spec=FAKE, **kwargs))


def test_broken_outputs_become_statuses_never_scores(tmp_path):
    rows = [{"case_id": f"c{i}", "reference_report": "ref", "generated_report": "gen"}
            for i in range(7)]
    backend = FakeBackend([
        GOOD,
        GOOD.replace('"factual_accuracy": 3', '"factual_accuracy": 9'),   # out of range
        GOOD[:-10],                                                         # cut JSON
        Generation(text=GOOD[:40], finish_reason="length", prompt_tokens=10,
                   completion_tokens=50),
        Generation(text=None, finish_reason="context_overflow", prompt_tokens=9000,
                   detail="prompt 9000 + 919 > 8192"),
        json.dumps({**json.loads(GOOD), "extra": 1}),                       # extra key
        "",                                                                 # empty
    ])
    result = _run(tmp_path, backend, input_path=write_jsonl(tmp_path / "in.jsonl", rows))
    records = read_results(result.results_path)
    assert [r.status for r in records] == ["ok", "invalid_output", "invalid_output",
                                           "truncated", "too_long", "invalid_output",
                                           "invalid_output"]
    assert records[0].scores == json.loads(GOOD)
    for record in records[1:]:
        assert record.scores is None and record.aggregates is None and record.reason
    assert "factual_accuracy" in records[1].reason
    assert "9000" in records[4].reason
    assert result.summary.status_counts == {"invalid_output": 4, "ok": 1, "too_long": 1,
                                               "truncated": 1}
    assert result.summary.criteria["critical_finding_concordance"].n == 1
    assert result.failed == 6


def test_reason_never_echoes_the_judges_text(tmp_path):
    secret = "PATIENT-MARKER-55aa"
    bad = GOOD.replace("Same diagnosis", secret).replace('"overall_equivalence": 3',
                                                         '"overall_equivalence": "x"')
    result = _run(tmp_path, FakeBackend([bad]), limit=1)
    [record] = read_results(result.results_path)
    assert record.status == "invalid_output"
    assert secret not in record.reason and secret in record.raw_output


def test_input_errors_are_recorded_and_the_rest_is_judged(tmp_path):
    rows = [{"case_id": "a", "reference_report": "r", "generated_report": "g"},
            {"case_id": "b", "reference_report": "r"},
            {"case_id": "c", "reference_report": "r", "generated_report": "g"}]
    backend = FakeBackend([GOOD, GOOD])
    result = _run(tmp_path, backend, input_path=write_jsonl(tmp_path / "in.jsonl", rows))
    records = {r.case_id: r for r in read_results(result.results_path)}
    assert records["b"].status == "input_error" and "generated_report" in records["b"].reason
    assert records["a"].status == records["c"].status == "ok"
    assert sum(len(chats) for chats, *_ in backend.calls) == 2  # the bad case never ran


def test_batching_rendering_and_template_kwargs(tmp_path):
    backend = FakeBackend()
    result = _run(tmp_path, backend, batch_size=2)
    assert [len(chats) for chats, *_ in backend.calls] == [2, 1]
    chats, schema, sampling, kwargs = backend.calls[0]
    assert chats[0][0]["role"] == "system"
    assert kwargs == {"enable_thinking": False}
    assert sampling.max_new_tokens == 920 and sampling.temperature == 0
    assert json.loads(schema)["additionalProperties"] is False
    assert result.summary.status_counts == {"ok": 3}


def test_backend_exception_fails_only_that_batch(tmp_path):
    class Flaky(FakeBackend):
        def generate(self, chats, *args, **kwargs):
            if len(self.calls) == 1:
                self.calls.append((list(chats), "", None, {}))
                raise RuntimeError("device lost")
            return super().generate(chats, *args, **kwargs)

    result = _run(tmp_path, Flaky(), batch_size=1)
    statuses = [r.status for r in read_results(result.results_path)]
    assert statuses == ["ok", "backend_error", "ok"]


def test_ecg_records_carry_aggregates_and_aliases(tmp_path):
    result = _run(tmp_path, FakeBackend(), rubric="ecg_interpretation")
    [first, *_] = read_results(result.results_path)
    assert first.aggregates["DiagnosisAccuracy"] == 0.0
    assert first.aggregates["LeadAssessmentCoverage"] == 0.0  # one item scored 0
    summary = json.loads(result.summary_path.read_text())
    assert summary["aggregates"]["GroundedECGUnderstanding"]["alias"] == "ECGFeatureGrounding"
    assert summary["aliases"]["ClinicalDiagnosticFidelity"] == "RealisticDiagnosticProcess"


def test_output_files_are_private(tmp_path):
    result = _run(tmp_path, FakeBackend())
    manifest = result.results_path.with_name("results.manifest.json")
    for path in (result.results_path, result.summary_path, manifest):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
