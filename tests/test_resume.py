"""Resuming into an existing results file: exactly once, torn lines, changed settings."""

from __future__ import annotations

import json

import pytest

from evaluator.data.results import ResultsFileDamaged, read_results
from evaluator.judges.backends.base import Generation
from evaluator.judges.backends.fake import FakeBackend
from evaluator.judges.models_file import JudgeSpec, SamplingConfig
from evaluator.run.judging import InputRejected
from evaluator.run.resume import ResumeConflict
from evaluator.run.runner import evaluate
from tests.conftest import run_options, write_jsonl

FAKE = JudgeSpec(backend="fake")


def _rows(n, marker="text"):
    return [{"case_id": f"c{i}", "reference_report": f"ref {marker} {i}",
             "generated_report": f"gen {marker} {i}"} for i in range(n)]


def _run(tmp_path, rows, backend=None, spec=FAKE, **kwargs):
    path = write_jsonl(tmp_path / "in.jsonl", rows)
    backend = backend if backend is not None else FakeBackend()
    kwargs.setdefault("rubric", "pathology_report")
    kwargs.setdefault("judge", "fake-judge")
    result = evaluate(*run_options(input_path=path, output_path=tmp_path / "results.jsonl",
                                   backend=backend, judge_spec=spec, **kwargs))
    return result, backend


def _judged(backend):
    return sum(len(call[0]) for call in backend.calls)


def _ids(path):
    return [r.case_id for r in read_results(path)]


def test_resume_judges_only_what_is_left(tmp_path):
    rows = _rows(10)
    first, backend = _run(tmp_path, rows, limit=4, batch_size=3)
    assert _judged(backend) == 4
    second, backend = _run(tmp_path, rows, batch_size=3)
    assert _judged(backend) == 6
    assert sorted(_ids(second.results_path)) == sorted(r["case_id"] for r in rows)
    assert second.summary.cases == 10 and second.summary.status_counts == {"ok": 10}
    before = second.results_path.read_bytes()
    third, backend = _run(tmp_path, rows)
    assert _judged(backend) == 0 and third.results_path.read_bytes() == before


def test_torn_last_line_is_repaired_and_its_case_judged_again(tmp_path, caplog):
    rows = _rows(5)
    result, _ = _run(tmp_path, rows)
    lines = result.results_path.read_bytes().splitlines(keepends=True)
    # A crash in the middle of writing the last record: its first 37 bytes reached the file.
    result.results_path.write_bytes(b"".join(lines[:-1]) + lines[-1][:37])
    assert len(read_results(result.results_path)) == 4  # the torn line is never a result
    resumed, backend = _run(tmp_path, rows)
    assert _judged(backend) == 1
    assert sorted(_ids(resumed.results_path)) == [f"c{i}" for i in range(5)]
    assert "torn last line" in caplog.text


def test_nul_filled_tail_after_power_loss_is_repaired(tmp_path):
    rows = _rows(3)
    result, _ = _run(tmp_path, rows)
    lines = result.results_path.read_bytes().splitlines(keepends=True)
    result.results_path.write_bytes(b"".join(lines[:-1]) + b"\0" * 300 + b"\n" + b"\0" * 20)
    resumed, backend = _run(tmp_path, rows)
    assert _judged(backend) == 1 and sorted(_ids(resumed.results_path)) == ["c0", "c1", "c2"]


def test_a_damaged_line_in_the_middle_is_refused_with_its_line_number(tmp_path):
    rows = _rows(4)
    result, _ = _run(tmp_path, rows)
    lines = result.results_path.read_bytes().splitlines(keepends=True)
    lines[1] = b'{"case_id": "c1", "oops": true}\n'
    result.results_path.write_bytes(b"".join(lines))
    with pytest.raises(ResultsFileDamaged, match=r"line 2 .*--force-new"):
        _run(tmp_path, rows)


def test_a_case_twice_in_the_results_file_is_refused(tmp_path):
    rows = _rows(3)
    result, _ = _run(tmp_path, rows)
    lines = result.results_path.read_bytes().splitlines(keepends=True)
    result.results_path.write_bytes(b"".join(lines + lines[:1]))
    with pytest.raises(ResultsFileDamaged, match="'c0' twice"):
        _run(tmp_path, rows)


@pytest.mark.parametrize(("change", "named"), [
    ({"spec": JudgeSpec(backend="fake", sampling=SamplingConfig(temperature=0.7))},
     "sampling.temperature"),
    ({"judge": "another-judge"}, "judge"),
    ({"spec": JudgeSpec(backend="fake", chat_template_kwargs={"reasoning_effort": "low"})},
     "chat_template_kwargs.reasoning_effort"),
])
def test_changed_settings_are_refused_naming_the_setting(tmp_path, change, named):
    rows = _rows(3)
    result, _ = _run(tmp_path, rows)
    before = result.results_path.read_bytes()
    with pytest.raises(ResumeConflict, match=rf"differ.*{named}.*--force-new"):
        _run(tmp_path, rows, **change)
    assert result.results_path.read_bytes() == before


def test_changed_rubric_is_refused(tmp_path):
    rows = [{"case_id": "a", "Truth": "x", "Resp": "y"}]
    _run(tmp_path, rows, rubric="drug_monograph_similarity")
    with pytest.raises(ResumeConflict, match="judge_config.system_role"):
        _run(tmp_path, rows, rubric="drug_monograph_similarity",
             spec=JudgeSpec(backend="fake", system_role=False))
    with pytest.raises(ResumeConflict, match="rubric, rubric_file_hash, sampling.max_new_tokens, "
                                             "schema_hash, template_hash"):
        _run(tmp_path, [{"case_id": "a", "groundtruth": "x", "generated": "y"}],
             rubric="ecg_interpretation")


def test_force_new_keeps_the_old_file(tmp_path):
    rows = _rows(3)
    first, _ = _run(tmp_path, rows)
    old = first.results_path.read_bytes()
    spec = JudgeSpec(backend="fake", sampling=SamplingConfig(temperature=0.7))
    second, backend = _run(tmp_path, rows, spec=spec, force_new=True)
    assert _judged(backend) == 3
    kept = sorted(tmp_path.glob("results.superseded-*.jsonl"))
    assert len(kept) == 1 and kept[0].read_bytes() == old
    assert len(list(tmp_path.glob("results.manifest.superseded-*.json"))) == 1
    assert len(read_results(second.results_path)) == 3


def test_changed_case_text_is_refused_without_echoing_it(tmp_path):
    rows = _rows(3)
    _run(tmp_path, rows)
    rows[1]["generated_report"] = "PHI-MARKER-EDITED"
    with pytest.raises(ResumeConflict, match=r"case 'c1' \(input line 2\)") as info:
        _run(tmp_path, rows)
    assert "PHI-MARKER" not in str(info.value)


def test_backend_errors_are_judged_again_on_resume(tmp_path):
    rows = _rows(4)
    first, _ = _run(tmp_path, rows, backend=FakeBackend(fail_with=RuntimeError("device lost")))
    assert {r.status for r in read_results(first.results_path)} == {"backend_error"}
    second, backend = _run(tmp_path, rows)
    assert _judged(backend) == 4
    records = read_results(second.results_path)
    assert sorted(r.case_id for r in records) == ["c0", "c1", "c2", "c3"]
    assert {r.status for r in records} == {"ok"}


def test_a_fixed_input_row_is_judged_on_resume(tmp_path):
    rows = _rows(3)
    rows[2]["generated_report"] = "   "
    first, _ = _run(tmp_path, rows)
    assert [r.status for r in read_results(first.results_path)] == ["input_error", "ok", "ok"]
    again, backend = _run(tmp_path, rows)
    assert _judged(backend) == 0  # still broken: its record stands
    rows[2]["generated_report"] = "now fixed"
    fixed, backend = _run(tmp_path, rows)
    assert _judged(backend) == 1
    assert sorted((r.case_id, r.status) for r in read_results(fixed.results_path)) == [
        ("c0", "ok"), ("c1", "ok"), ("c2", "ok")]


def test_manifest_records_settings_and_every_run(tmp_path):
    rows = _rows(4, marker="PHI-MARKER-77")
    _run(tmp_path, rows, limit=2)
    result, _ = _run(tmp_path, rows)
    text = (tmp_path / "results.manifest.json").read_text()
    assert "PHI-MARKER" not in text
    manifest = json.loads(text)
    settings = manifest["settings"]
    for key in ("judge", "model_hash", "tokenizer_hash", "rubric", "rubric_file_hash",
                "template_hash", "schema_hash", "sampling", "chat_template_kwargs"):
        assert key in settings
    assert settings["sampling"]["temperature"] == 0.0
    assert [run["status"] for run in manifest["runs"]] == ["finished", "finished"]
    run = manifest["runs"][-1]
    assert run["ended"] >= run["started"] and run["packages"]["evaluator"]
    assert run["input_sha256"] and run["host"]
    records = read_results(result.results_path)
    assert {r.settings_hash for r in records} == {manifest["settings_hash"]}
    assert len({r.prompt_hash for r in records}) == 4


def test_strict_stops_before_the_model_loads(tmp_path):
    rows = _rows(3)
    rows[1]["reference_report"] = ""

    class NoLoad(FakeBackend):
        def generate(self, *args, **kwargs):
            raise AssertionError("the model must not run")

    with pytest.raises(InputRejected, match=r"in\.jsonl:2 field 'reference_report'"):
        _run(tmp_path, rows, backend=NoLoad(), strict=True)
    assert not (tmp_path / "results.jsonl").exists()


def test_strict_stops_at_a_case_too_long_for_the_judge(tmp_path):
    rows = _rows(4)
    too_long = Generation(text=None, finish_reason="context_overflow", prompt_tokens=9000,
                          detail="prompt is 9000 tokens")
    backend = FakeBackend(["{}", too_long, "{}", "{}"])
    backend._queue.clear()
    backend.enqueue([json.dumps({"critical_finding_concordance": 4, "factual_accuracy": 3,
                                 "factual_completeness": 2, "overall_equivalence": 3,
                                 "reasoning": "x"}), too_long])
    with pytest.raises(InputRejected, match="input line 2 is too long"):
        _run(tmp_path, rows, backend=backend, strict=True, batch_size=2)
    assert [r.status for r in read_results(tmp_path / "results.jsonl")] == ["ok", "too_long"]


def test_an_edited_score_is_refused_on_resume_and_the_file_kept(tmp_path):
    """A score the rubric cannot produce (99 on a 1-4 scale) would have been kept and counted
    in the summary the resumed run writes."""
    rows = _rows(4)
    result, _ = _run(tmp_path, rows, limit=3)
    lines = result.results_path.read_text().splitlines(keepends=True)
    record = json.loads(lines[1])
    record["scores"]["factual_accuracy"] = 99
    lines[1] = json.dumps(record) + "\n"
    result.results_path.write_text("".join(lines))
    before = result.results_path.read_bytes()
    with pytest.raises(ResultsFileDamaged, match=r"line 2 holds a verdict rubric "
                       r"'pathology_report' .*cannot produce \(scores\.factual_accuracy.*"
                       r"--force-new"):
        _run(tmp_path, rows)
    assert result.results_path.read_bytes() == before
    lines[1] = lines[1].replace('"factual_accuracy": 99', '"factual_accuracy": true')
    result.results_path.write_text("".join(lines))
    with pytest.raises(ResultsFileDamaged, match=r"line 2 .*true or false"):
        _run(tmp_path, rows)


def test_an_edited_last_line_without_its_newline_is_refused_not_cut(tmp_path):
    """A whole record is never a write cut short: a last line holding a score the rubric
    cannot produce, without its newline, is refused like any other line."""
    rows = _rows(3)
    result, _ = _run(tmp_path, rows)
    lines = result.results_path.read_text().splitlines()
    record = json.loads(lines[-1])
    record["scores"]["factual_accuracy"] = "3"
    result.results_path.write_text("\n".join(lines[:-1] + [json.dumps(record)]))
    before = result.results_path.read_bytes()
    with pytest.raises(ResultsFileDamaged, match="line 3 holds a verdict"):
        _run(tmp_path, rows)
    assert result.results_path.read_bytes() == before
