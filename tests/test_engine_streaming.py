"""Cases streamed through a continuously batching engine (issue 27), the pipeline side: a
streamed run gives every case the record a batched run gives it, reads the input only as
slots free up, keeps at most the slots' worth of requests in flight, and a failing engine
costs only the cases in flight. (The real engine, vLLM, is tested in test_vllm_backend.py;
SIGKILL and resume of a streamed run in test_fault_injection.py.)"""

from __future__ import annotations

import hashlib
import json

import pytest

from evaluator.data.results import iter_records
from evaluator.judges.backends import Generation, StreamingBackend
from evaluator.judges.backends.fake import FakeBackend, StreamingFakeBackend
from evaluator.judges.models_file import JudgeConfigError, JudgeSpec, SamplingConfig
from evaluator.run.judging import InputRejected
from evaluator.run.runner import evaluate
from tests.conftest import run_options, write_jsonl

RUBRIC = "pathology_report"
# Fields a streamed record may differ in: its own time in the engine, and the slots.
TIMING = {"batch_seconds", "batch_size"}


def _choose(schema: dict, root: dict, draw: int):
    """A valid verdict whose values and reasoning length depend on ``draw``."""
    ref = schema.get("$ref")
    if ref is not None:
        return _choose(root["$defs"][ref.rsplit("/", 1)[-1]], root, draw)
    if "enum" in schema:
        return schema["enum"][draw % len(schema["enum"])]
    if schema.get("type") == "object":
        return {key: _choose(sub, root, draw // (i + 1))
                for i, (key, sub) in enumerate(schema["properties"].items())}
    if schema.get("type") == "array":
        return [_choose(schema["items"], root, draw)] * max(schema.get("minItems", 0), 1)
    if schema.get("type") == "string":
        return "x" * (1 + draw % 300)
    return False


def _answer(chat, sampling, json_schema: str) -> Generation:
    """The prompt's (and seed's) own answer: every fifth an invalid one, the rest valid
    verdicts of very different lengths, so in a streaming engine they finish out of order."""
    text = json.dumps([dict(m) for m in chat], sort_keys=True) + f"|{sampling.seed}"
    draw = int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big")
    if draw % 5 == 0:
        verdict = "{" + "y" * (draw % 97)
    else:
        schema = json.loads(json_schema)
        verdict = json.dumps(_choose(schema, schema, draw), separators=(",", ":"))
    return Generation(text=verdict, finish_reason="stop", prompt_tokens=10,
                      completion_tokens=len(verdict))


class PromptJudge(FakeBackend):
    """Answers each prompt by its content (see :func:`_answer`), in any call order."""

    def generate(self, chats, json_schema, sampling, chat_template_kwargs=None):
        self.calls.append((list(chats), json_schema, sampling, {}))
        if self.fail_with is not None and len(self.calls) > 4:
            raise self.fail_with
        return [_answer(chat, sampling, json_schema) for chat in chats]


class StreamingPromptJudge(PromptJudge, StreamingFakeBackend):
    """The same answers through a (simulated) continuously batching engine."""


def _rows(n: int) -> list[dict]:
    return [{"case_id": f"c{i:03d}", "reference_report": f"reference {i}",
             "generated_report": f"generated report {i}"} for i in range(n)]


def _run(tmp_path, backend, name, rows, spec=None, **options):
    source = write_jsonl(tmp_path / "in.jsonl", rows)
    result = evaluate(*run_options(rubric=options.pop("rubric", RUBRIC), input_path=source,
                                   output_path=tmp_path / f"{name}.jsonl", backend=backend,
                                   judge="fake-judge", judge_spec=spec or JudgeSpec(backend="fake"),
                                   **options))
    return result, list(iter_records(result.results_path))


def _by_case(records):
    return {r.case_id: {k: v for k, v in r.model_dump().items() if k not in TIMING}
            for r in records}


def test_the_fakes_say_which_can_stream():
    assert isinstance(StreamingPromptJudge(), StreamingBackend)
    assert not isinstance(PromptJudge(), StreamingBackend)


def test_a_streamed_run_gives_every_case_its_batched_record(tmp_path):
    rows = _rows(40)
    _, batched = _run(tmp_path, PromptJudge(), "batched", rows, batch_size=8)
    streamer = StreamingPromptJudge()
    result, streamed = _run(tmp_path, streamer, "streamed", rows, batch_size=8)
    assert _by_case(streamed) == _by_case(batched)
    assert {r.status for r in streamed} == {"ok", "invalid_output"}
    assert any(r.distributions for r in streamed)  # the fake's distributions came through
    # Short verdicts overtook long ones: the file is in the order cases finished.
    assert [r.case_id for r in streamed] != [r["case_id"] for r in rows]
    assert {r.batch_size for r in streamed} == {8}
    assert streamer.max_in_flight == 8 and streamer.taken == 40
    assert sum(result.summary.status_counts.values()) == 40


def test_the_input_is_read_only_as_slots_free_up(tmp_path):
    """When the k-th record is written, the engine has taken at most k + slots requests."""
    streamer = StreamingPromptJudge()
    seen = []

    def progress(n):
        seen.append((n, streamer.taken))

    _run(tmp_path, streamer, "lazy", _rows(30), batch_size=4, progress=progress)
    written = 0
    for n, taken in seen:
        written += n
        assert n == 1 and taken <= written + 4
    assert written == 30 and streamer.max_in_flight == 4


def test_samples_are_streamed_as_requests_and_reduced_as_in_a_batch(tmp_path):
    spec = JudgeSpec(backend="fake", sampling=SamplingConfig(temperature=0.7, seed=11))
    rows = _rows(12)
    _, batched = _run(tmp_path, PromptJudge(), "batched", rows, spec=spec, samples=3,
                      batch_size=5)
    streamer = StreamingPromptJudge()
    _, streamed = _run(tmp_path, streamer, "streamed", rows, spec=spec, samples=3,
                       batch_size=5)
    assert _by_case(streamed) == _by_case(batched)
    assert all(len(r.samples) == 3 for r in streamed)
    assert streamer.taken == 36
    assert sorted(call[2].seed for call in streamer.calls) == sorted([11, 12, 13] * 12)


def test_pairs_stream_both_orders_and_match_the_batched_records(tmp_path):
    shared = {"patient_profile": "A 58-year-old woman.", "trial_id": "NCT001",
              "trial_title": "A trial", "eligibility_criteria": "Adults.",
              "ground_truth_label": "Likely Eligible"}
    rows = [dict(shared, case_id=f"p{i}", gpt=f"answer {i} " * (i % 7 + 1), llama=f"other {i}")
            for i in range(10)]
    options = dict(rubric="trial_eligibility_pairwise",
                   mapping={"answer_a": "gpt", "answer_b": "llama"}, batch_size=3)
    _, batched = _run(tmp_path, PromptJudge(), "batched", rows, **options)
    streamer = StreamingPromptJudge()
    _, streamed = _run(tmp_path, streamer, "streamed", rows, **options)
    assert _by_case(streamed) == _by_case(batched)
    assert streamer.taken == 20
    assert all(r.pairwise is not None and len(r.pairwise.orders) == 2 for r in streamed)


def test_a_failing_engine_costs_only_the_cases_in_flight_and_a_rerun_judges_them(tmp_path):
    rows = _rows(20)
    streamer = StreamingPromptJudge(fail_with=RuntimeError("engine died"))
    _, records = _run(tmp_path, streamer, "fail", rows, batch_size=3)
    assert len(records) == 20 and len({r.case_id for r in records}) == 20
    failed = [r for r in records if r.status == "backend_error"]
    assert failed and all("RuntimeError" in r.reason and "Re-run" in r.reason for r in failed)
    # Four requests reached the engine and two of them finished before the fifth failed,
    # with three cases in flight (the slots); every later one fails alone, taking only its
    # own case down (a failing batch takes its whole batch).
    assert len(failed) == 18
    rerun, again = _run(tmp_path, StreamingPromptJudge(), "fail", rows, batch_size=3)
    assert {r.case_id for r in again if r.status != "backend_error"} == {r["case_id"] for r in rows}
    assert rerun.summary.status_counts.get("backend_error", 0) == 0


def test_strict_stops_a_streamed_run_at_the_first_case_too_long(tmp_path):
    class TooLong(StreamingPromptJudge):
        def generate(self, chats, json_schema, sampling, chat_template_kwargs=None):
            out = super().generate(chats, json_schema, sampling, chat_template_kwargs)
            if "report 5" in json.dumps(chats):
                return [Generation(text=None, finish_reason="context_overflow",
                                   prompt_tokens=9000, detail="prompt 9000 > 8192")]
            return out

    with pytest.raises(InputRejected, match="too long"):
        _run(tmp_path, TooLong(), "strict", _rows(12), batch_size=2, strict=True)


def test_stream_false_judges_in_batches_with_a_streaming_backend(tmp_path):
    streamer = StreamingPromptJudge()
    _, records = _run(tmp_path, streamer, "off", _rows(9),
                      spec=JudgeSpec(backend="fake", stream=False), batch_size=4)
    assert streamer.taken == 0 and len(streamer.calls) == 3
    assert {r.batch_size for r in records} == {4, 1}


def test_stream_is_refused_in_one_line_for_a_backend_that_cannot(tmp_path):
    models = tmp_path / "models.yaml"
    models.write_text("judges:\n  mine:\n    backend: tiny-random\n    stream: true\n")
    from evaluator.judges.models_file import resolve_judge

    with pytest.raises(JudgeConfigError, match="stream: true needs backend vllm") as info:
        resolve_judge("mine", models)
    assert "\n" not in str(info.value)


def test_a_fake_judge_with_stream_true_streams():
    from evaluator.judges.backends import load_backend

    assert isinstance(load_backend("f", JudgeSpec(backend="fake", stream=True)),
                      StreamingFakeBackend)
    assert not isinstance(load_backend("f", JudgeSpec(backend="fake")), StreamingBackend)


def test_a_case_that_cannot_render_stops_a_streamed_run_as_it_stops_a_batched_one(
        tmp_path, monkeypatch):
    """An error reading or rendering a case is the user's to fix: raised unchanged (exit 2
    from the CLI), never turned into a backend error, the cases before it kept."""
    import jinja2

    from evaluator.rubrics.rubric import RubricError
    from evaluator.run import judging

    real = judging.render_messages

    def render(rubric, fields, **kwargs):
        if "report 5" in fields.get("generated_report", ""):
            raise jinja2.UndefinedError("'x' is undefined")
        return real(rubric, fields, **kwargs)

    monkeypatch.setattr(judging, "render_messages", render)
    with pytest.raises(RubricError, match="cannot be rendered"):
        _run(tmp_path, StreamingPromptJudge(), "render", _rows(12), batch_size=3)
    records = list(iter_records(tmp_path / "render.jsonl"))
    assert {r.case_id for r in records} == {"c000", "c001", "c002", "c003", "c004"}
    assert {r.status for r in records} <= {"ok", "invalid_output"}
