"""``samples``: each case judged N times, every sample kept, a reduced verdict, and the
intra-judge agreement in the summary."""

from __future__ import annotations

import json

import pytest

from evaluator.data.results import read_results
from evaluator.judges.backends.fake import FakeBackend
from evaluator.judges.models_file import JudgeConfigError, JudgeSpec, SamplingConfig
from evaluator.run.resume import ResumeConflict
from evaluator.run.runner import evaluate
from evaluator.run.task import Judge, RunOptions, Task
from tests.conftest import run_options, write_jsonl

SAMPLED = JudgeSpec(backend="fake", sampling=SamplingConfig(temperature=0.8, seed=40))


def _verdict(c, a, comp, o):
    return json.dumps({"critical_finding_concordance": c, "factual_accuracy": a,
                       "factual_completeness": comp, "overall_equivalence": o,
                       "reasoning": "r"}, separators=(",", ":"))


def _rows(n):
    return [{"case_id": f"c{i}", "reference_report": "ref", "generated_report": f"gen {i}"}
            for i in range(n)]


def _run(tmp_path, backend, rows, spec=SAMPLED, **kwargs):
    return evaluate(*run_options(
        rubric="pathology_report", input_path=write_jsonl(tmp_path / "in.jsonl", rows),
        output_path=tmp_path / "results.jsonl", backend=backend, judge="fake",
        judge_spec=spec, batch_size=2, **kwargs))


def test_every_sample_is_kept_and_reduced(tmp_path):
    # 3 cases in batches of 2, 3 samples: generate is called per batch and sample, in order
    backend = FakeBackend([
        _verdict(1, 2, 3, 4), _verdict(2, 2, 2, 2),   # batch 1 (c0, c1), sample 0
        _verdict(3, 2, 3, 4), _verdict(2, 3, 2, 2),   # batch 1, sample 1
        _verdict(3, 3, 1, 4), _verdict(2, 2, 2, 2),   # batch 1, sample 2
        _verdict(4, 3, 3, 4),                          # batch 2 (c2), samples 0, 1, 2
        "{not json", _verdict(4, 3, 3, 4)])
    result = _run(tmp_path, backend, _rows(3), samples=3)
    seeds = [call[2].seed for call in backend.calls]
    temperatures = {call[2].temperature for call in backend.calls}
    assert seeds == [40, 41, 42, 40, 41, 42] and temperatures == {0.8}

    c0, c1, c2 = read_results(result.results_path)
    assert [v.scores["critical_finding_concordance"] for v in c0.samples] == [1, 3, 3]
    assert c0.scores["critical_finding_concordance"] == 3          # median of 1, 3, 3
    assert c0.scores["factual_accuracy"] == 2 and c0.scores["factual_completeness"] == 3
    assert c1.status == "ok" and c1.scores["factual_accuracy"] == 2
    assert c0.reduction == {"integer": "median", "aggregates": "median", "other": "first"}
    # one invalid sample: the case has no verdict, but every sample is on file
    assert c2.status == "invalid_output" and c2.scores is None
    assert c2.reason.startswith("sample 2 of 3: verdict failed validation")
    assert [v.status for v in c2.samples] == ["ok", "invalid_output", "ok"]
    assert c2.samples[1].raw_output == "{not json"

    block = result.summary.self_consistency
    assert block.raters == ["sample 0", "sample 1", "sample 2"]
    assert block.cases == 3 and block.complete_cases == 2
    assert block.unanimous["overall_equivalence"] == 1.0
    assert block.unanimous["critical_finding_concordance"] == 0.5
    assert result.summary.failed_case_ids == ["c2"]


def test_reduction_can_be_chosen(tmp_path):
    backend = FakeBackend([_verdict(1, 1, 1, 1), _verdict(2, 2, 2, 2), _verdict(3, 3, 3, 3),
                           _verdict(3, 3, 3, 3)])
    result = _run(tmp_path, backend, _rows(1), samples=4, reduce="mean")
    (record,) = read_results(result.results_path)
    assert record.scores["factual_accuracy"] == 2.25
    # a reduced score between two allowed values is counted as itself, not rounded
    assert result.summary.criteria["factual_accuracy"].counts["2.25"] == 1
    assert result.summary.criteria["factual_accuracy"].counts["2"] == 0


def test_samples_need_a_temperature(tmp_path):
    greedy = JudgeSpec(backend="fake")
    with pytest.raises(JudgeConfigError, match="temperature 0 would be 3 identical"):
        _run(tmp_path, FakeBackend(), _rows(1), spec=greedy, samples=3)
    assert not (tmp_path / "results.jsonl").exists()
    result = _run(tmp_path, FakeBackend(), _rows(2), spec=greedy, samples=3, temperature=0.5)
    assert len(read_results(result.results_path)[0].samples) == 3


def test_changing_the_number_of_samples_is_refused_on_resume(tmp_path):
    _run(tmp_path, FakeBackend(), _rows(2), samples=3)
    with pytest.raises(ResumeConflict, match=r"panel\.samples"):
        _run(tmp_path, FakeBackend(), _rows(2), samples=5)
    with pytest.raises(ResumeConflict, match=r"panel\.reduction\.integer"):
        _run(tmp_path, FakeBackend(), _rows(2), samples=3, reduce="majority")
    # the same settings resume: nothing is judged again
    again = FakeBackend()
    _run(tmp_path, again, _rows(2), samples=3)
    assert again.calls == []


def test_one_sample_keeps_the_plain_record_and_settings(tmp_path):
    result = _run(tmp_path, FakeBackend(), _rows(1), spec=JudgeSpec(backend="fake"))
    (record,) = read_results(result.results_path)
    assert record.samples is None and record.reduction is None
    assert "self_consistency" not in result.summary
    manifest = json.loads((tmp_path / "results.manifest.json").read_text())
    assert "panel" not in manifest["settings"]  # files from before samples existed resume


def test_real_model_samples_differ_and_all_parse(tmp_path, tiny_backend):
    """tiny-random at temperature 1: samples are real draws (they differ), all parse."""
    rows = [{"case_id": f"c{i}", "reference_report": f"reference {i}",
             "generated_report": f"generated report {i}"} for i in range(2)]
    spec = JudgeSpec(backend="tiny-random", device="cpu",
                     sampling=SamplingConfig(temperature=1.0, seed=7))
    result = evaluate(Task("pathology_report", write_jsonl(tmp_path / "in.jsonl", rows)),
                      Judge("tiny-random", spec=spec, backend=tiny_backend, samples=3),
                      RunOptions(tmp_path / "results.jsonl", batch_size=2))
    records = read_results(result.results_path)
    assert all(r.status == "ok" and len(r.samples) == 3 for r in records), \
        [r.reason for r in records]
    draws = {json.dumps(v.scores, sort_keys=True) for r in records for v in r.samples}
    assert len(draws) > len(records)  # not every case's samples are identical
    assert set(result.summary.self_consistency.alpha) == {
        "critical_finding_concordance", "factual_accuracy", "factual_completeness",
        "overall_equivalence"}
    # Every sample has the real model's distributions; the case's is their mean (a mixture).
    for record in records:
        paths = set(record.distributions)
        assert paths == {"critical_finding_concordance", "factual_accuracy",
                         "factual_completeness", "overall_equivalence"}
        for path in paths:
            members = [v.distributions[path] for v in record.samples]
            mixed = record.distributions[path]
            assert mixed.probabilities == pytest.approx(
                {k: sum(m.probabilities[k] for m in members) / 3 for k in mixed.probabilities})
            assert mixed.expected == pytest.approx(sum(m.expected for m in members) / 3)
            assert sum(mixed.probabilities.values()) == pytest.approx(1.0)
            for member, verdict in zip(members, record.samples):
                assert member.confidence == member.probabilities[str(verdict.scores[path])]
                assert member.coverage == pytest.approx(1.0)
            assert mixed.confidence == mixed.probabilities[str(record.scores[path])]


def test_split_samples_give_a_flat_mixture_not_a_confident_one(tmp_path):
    """Fake distributions put 0.7 on the value written: samples that wrote 1 and 4 mix to
    0.35 on each, and the median 2.5 is no allowed value, so it has no confidence."""
    backend = FakeBackend([_verdict(1, 2, 3, 4), _verdict(4, 2, 3, 4)])
    result = _run(tmp_path, backend, _rows(1), samples=2)
    [record] = read_results(result.results_path)
    dist = record.distributions["critical_finding_concordance"]
    assert dist.probabilities["1"] == pytest.approx(0.35 + 0.1 / 2)
    assert dist.probabilities["4"] == pytest.approx(0.35 + 0.1 / 2)
    assert record.scores["critical_finding_concordance"] == 2.5
    assert dist.confidence is None
    agreed = record.distributions["factual_accuracy"]
    assert agreed.confidence == pytest.approx(0.7) and record.scores["factual_accuracy"] == 2
    assert agreed.expected == pytest.approx(0.7 * 2 + 0.15 * 1 + 0.15 * 3)
