"""The server backend (issue 49): a judge served over HTTP behind the PHI guard. Against the
fault-injecting fake server of tests/server_fake.py (127.0.0.1): every fault is retried to a
verdict or becomes a record with its reason; runs over the dev cases lose and duplicate
nothing, also across a server that went away and a resume; addresses off the site are
refused before any socket opens; the API key is never written anywhere."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import yaml

from evaluator.judges.backends import BackendUnavailable, Sampling, ScoreAnchor, load_backend
from evaluator.judges.backends.server_backend import (
    RETRY_AFTER_CAP_S,
    CappedRetry,
    ServerBackend,
)
from evaluator.judges.backends.server_guard import AddressRefused, check_server_url
from evaluator.judges.backends.server_protocol import chat_request, parse_answer
from evaluator.judges.backends.server_settings import ApiKeyRefused, ServerSettings
from evaluator.judges.models_file import JudgeConfigError, JudgeSpec, load_models_file
from evaluator.run.runner import evaluate
from evaluator.run.task import Judge, RunOptions, Task
from tests.conftest import write_jsonl
from tests.server_fake import REDIRECT_TARGET, FakeJudgeServer

SCHEMA = json.dumps({"type": "object", "properties": {"score": {"enum": [1, 2, 3]}},
                     "required": ["score"]})
CHAT = [{"role": "user", "content": "case text"}]
SECRET = "sk-test-0123456789abcdef-secret"


def spec_for(url: str, **settings) -> ServerSettings:
    """A server judge of ``url`` with short timeouts for tests."""
    return JudgeSpec(**{"backend": "server", "base_url": url, "served_model": "judge",
                        "retries": 2, "timeout_s": 0.5, "connect_timeout_s": 0.5,
                        **settings})


@pytest.fixture
def server():
    with FakeJudgeServer() as fake:
        yield fake


# --- the PHI guard ---------------------------------------------------------------------

@pytest.mark.parametrize("url, allow, expected", [
    ("http://127.0.0.1:8000/v1", (), "http://127.0.0.1:8000/v1"),
    ("http://localhost:8000/v1/", (), "http://localhost:8000/v1"),
    ("http://[::1]:8000/v1", (), "http://[::1]:8000/v1"),
    ("https://10.1.2.3/v1", (), "https://10.1.2.3:443/v1"),
    ("https://172.20.0.9:8443/v1", (), "https://172.20.0.9:8443/v1"),
    ("https://192.168.1.5:8000/v1", (), "https://192.168.1.5:8000/v1"),
    ("https://[fd00::5]:8000/v1", (), "https://[fd00::5]:8000/v1"),
    ("https://Judge.Site.Internal:8000/v1", ("judge.site.internal",),
     "https://judge.site.internal:8000/v1"),
])
def test_the_guard_takes_loopback_private_and_listed_hosts(url, allow, expected):
    assert check_server_url(url, allow).url == expected


@pytest.mark.parametrize("url, allow, words", [
    ("https://8.8.8.8/v1", (), "not a loopback or private address"),
    ("https://example.com/v1", (), "not in allow_hosts"),
    ("https://example.com.evil.org/v1", ("example.com",), "not in allow_hosts"),
    ("http://10.0.0.5:8000/v1", (), "needs https"),
    ("http://judge.site.internal:8000/v1", ("judge.site.internal",), "needs https"),
    ("https://169.254.169.254/v1", (), "not a loopback or private"),
    ("https://100.64.0.1/v1", (), "not a loopback or private"),
    ("https://0.0.0.0/v1", (), "not a loopback or private"),
    ("https://[::ffff:8.8.8.8]/v1", (), "not a loopback or private"),
    ("https://user:pw@10.0.0.5/v1", (), "credentials in the URL"),
    ("ftp://127.0.0.1/v1", (), "scheme"),
    ("file:///etc/passwd", (), "scheme"),
    ("http://127.0.0.1:22/v1", (), "port 22"),
    ("http://127.0.0.1:99999/v1", (), "valid host and port"),
    ("http://127.0.0.1:8000/v1?x=1", (), "no query"),
    ("http://127.0.0.1:8000/v 1", (), "not a URL"),
    ("http://exa\u00e9mple/v1", ("exa\u00e9mple",), "not a host name"),
])
def test_the_guard_refuses_the_rest_in_one_line(url, allow, words):
    with pytest.raises(AddressRefused) as caught:
        check_server_url(url, allow)
    assert words in str(caught.value) and "\n" not in str(caught.value)
    assert "pw" not in str(caught.value)


def test_allow_hosts_takes_names_only():
    with pytest.raises(ValueError, match="is an IP address"):
        spec_for("https://10.0.0.5/v1", allow_hosts=["8.8.8.8"])


@pytest.mark.parametrize("url", ["https://8.8.8.8/v1", "https://example.com/v1",
                                 "http://10.0.0.5:8000/v1", "http://192.168.0.2/v1"])
def test_an_address_off_the_site_is_refused_before_any_socket_opens(url, connects):
    with pytest.raises(ValueError, match="base_url"):
        spec_for(url)
    # The backend checks again (a spec built without validation): still no socket.
    unchecked = ServerSettings.model_construct(
        **spec_for("http://127.0.0.1:8000/v1").model_dump() | {"base_url": url})
    with pytest.raises(BackendUnavailable, match="base_url"):
        ServerBackend("j", unchecked)
    with pytest.raises(ValueError, match="proxy"):
        spec_for("http://127.0.0.1:8000/v1", proxy=url.replace("/v1", ""))
    assert connects == []


def test_a_redirect_is_an_error_and_its_target_never_reached(server, connects):
    backend = ServerBackend("j", spec_for(server.url), backoff_s=0.01)
    server.enqueue("redirect")
    [generation] = backend.generate([CHAT], SCHEMA, Sampling(max_new_tokens=20))
    assert generation.finish_reason == "error"
    assert "HTTP 307 (a redirect); redirects are never followed" in generation.detail
    # the fake server only (its /models, then the one chat request), never the target
    assert connects and set(connects) == {"127.0.0.1"} and len(server.bodies) == 1
    assert REDIRECT_TARGET.startswith("http://8.8.8.8/")


def test_no_proxy_is_taken_from_the_environment(server, monkeypatch, connects):
    monkeypatch.setenv("HTTP_PROXY", "http://8.8.8.8:3128")
    monkeypatch.setenv("HTTPS_PROXY", "http://8.8.8.8:3128")
    monkeypatch.setenv("ALL_PROXY", "http://8.8.8.8:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    backend = ServerBackend("j", spec_for(server.url), backoff_s=0.01)
    [generation] = backend.generate([CHAT], SCHEMA, Sampling(max_new_tokens=20))
    assert generation.finish_reason == "stop" and set(connects) == {"127.0.0.1"}


# --- settings ----------------------------------------------------------------------------

def _models_file(tmp_path: Path, judge: dict) -> Path:
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump({"default": "j", "judges": {"j": judge}}))
    return path


@pytest.mark.parametrize("judge, words", [
    ({"api_key": SECRET}, "a key is never written in models.yaml"),
    ({"apikey": SECRET}, "judges.j.apikey: Extra inputs are not permitted"),
    ({"api_key_env": SECRET + "!"}, "api_key_env names an environment variable"),
    ({"base_urls": ["http://127.0.0.1:8000/v1"]}, "exactly one of base_url"),
    ({"path": "/m"}, "remove 'path'"),
    ({"retries": 11}, "retries"),
    ({"structured_output": "xml"}, "structured_output"),
    ({"api_key_file": "key.txt"}, "absolute path"),
])
def test_bad_settings_are_refused_in_one_line_without_the_key(tmp_path, judge, words):
    entry = {"backend": "server", "base_url": "http://127.0.0.1:8000/v1",
             "served_model": "judge", **judge}
    with pytest.raises(JudgeConfigError) as caught:
        load_models_file(_models_file(tmp_path, entry))
    message = str(caught.value)
    assert words in message and "\n" not in message and SECRET not in message


def test_a_key_file_must_be_the_users_own_and_private(tmp_path):
    key = tmp_path / "key"
    key.write_text(SECRET + "\n")
    for mode in (0o644, 0o640, 0o604, 0o660):
        key.chmod(mode)
        with pytest.raises(ApiKeyRefused, match="chmod 600") as caught:
            spec_for("http://127.0.0.1:8000/v1", api_key_file=str(key)).api_key()
        assert SECRET not in str(caught.value)
    key.chmod(0o600)
    assert spec_for("http://127.0.0.1:8000/v1", api_key_file=str(key)).api_key() == SECRET
    key.chmod(0o400)
    assert spec_for("http://127.0.0.1:8000/v1", api_key_file=str(key)).api_key() == SECRET
    link = tmp_path / "link"
    link.symlink_to(key)
    with pytest.raises(ApiKeyRefused, match="symbolic link"):
        spec_for("http://127.0.0.1:8000/v1", api_key_file=str(link)).api_key()
    with pytest.raises(ApiKeyRefused, match="not set"):
        spec_for("http://127.0.0.1:8000/v1", api_key_env="NO_SUCH_KEY_VARIABLE_49").api_key()


def test_the_settings_hash_holds_the_servers_and_the_served_model():
    one = spec_for("http://127.0.0.1:8000/v1").identity()
    assert one["servers"] == ["http://127.0.0.1:8000/v1"] and one["served_model"] == "judge"
    assert spec_for("http://127.0.0.1:8001/v1").identity() != one
    assert spec_for("http://127.0.0.1:8000/v1", served_model="other").identity() != one
    # Timeouts, retries and in_flight do not change a verdict.
    assert spec_for("http://127.0.0.1:8000/v1", retries=0, timeout_s=9, in_flight=3,
                    connect_timeout_s=2).identity() == one
    two = JudgeSpec(backend="server", served_model="judge", base_urls=[
        "https://10.0.0.2/v1", "https://10.0.0.1/v1"]).identity()
    assert two["servers"] == ["https://10.0.0.1:443/v1", "https://10.0.0.2:443/v1"]


# --- the request and the answer -----------------------------------------------------------

def test_the_request_carries_the_constraint_budget_and_sampling():
    schema = json.loads(SCHEMA) | {"x-guidance": {"whitespace_flexible": False}}
    body = chat_request(CHAT, schema, Sampling(max_new_tokens=37, temperature=0.7, top_p=0.9,
                                               seed=3),
                        served_model="m", structured_output="vllm",
                        chat_template_kwargs={"enable_thinking": False})
    assert body["max_tokens"] == 37 and body["model"] == "m"
    assert body["structured_outputs"] == {"json": schema, "disable_any_whitespace": True}
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert body["temperature"] == 0.7 and body["top_p"] == 0.9 and 0 <= body["seed"] < 2**31
    again = chat_request(CHAT, schema, Sampling(max_new_tokens=37, temperature=0.7, seed=4),
                         served_model="m", structured_output="vllm")
    assert again["seed"] != body["seed"]  # samples of a case draw different streams
    openai = chat_request(CHAT, schema, Sampling(max_new_tokens=5), served_model="m",
                          structured_output="openai")
    assert openai["response_format"]["json_schema"]["schema"] == schema
    assert "structured_outputs" not in openai and "top_k" not in openai
    assert openai["temperature"] == 0.0 and "seed" not in openai


def test_an_answer_is_parsed_and_a_bad_one_never_quoted():
    ok = json.dumps({"choices": [{"message": {"content": '{"score":1}'},
                                  "finish_reason": "stop"}],
                     "usage": {"prompt_tokens": 9, "completion_tokens": 4,
                               "prompt_tokens_details": {"cached_tokens": 8}}}).encode()
    generation = parse_answer(200, ok, "S")
    assert (generation.text, generation.finish_reason, generation.prompt_tokens,
            generation.completion_tokens, generation.cached_tokens) == (
        '{"score":1}', "stop", 9, 4, 8)
    odd = json.dumps({"choices": [{"message": {"content": "x"},
                                   "finish_reason": "PATIENT JOHN DOE"}]}).encode()
    assert "JOHN" not in parse_answer(200, odd, "S").detail
    leak = b'{"error": {"message": "bad request for PATIENT JOHN DOE"}}'
    assert parse_answer(422, leak, "S").detail == "server S answered HTTP 422"


def test_retry_after_is_capped():
    class Answer:
        def __init__(self):
            self.headers = {"Retry-After": "3600"}

        def getheader(self, name, default=None):
            return self.headers.get(name, default)

    assert CappedRetry(total=2).get_retry_after(Answer()) == RETRY_AFTER_CAP_S


# --- faults --------------------------------------------------------------------------------

@pytest.mark.parametrize("fault, times, expected", [
    ("drop", 1, "stop"), ("500", 2, "stop"), ("503", 1, "stop"), ("slow", 1, "stop"),
    ("drop", 3, "dropped the connection (3 tries)"),
    ("500", 3, "answered HTTP 500 (3 tries)"),
    ("503", 3, "answered HTTP 503 (3 tries)"),
    ("slow", 3, "did not answer within timeout_s (3 tries)"),
    ("400", 1, "answered HTTP 400"),
    ("bad_json", 1, "answered with invalid JSON"),
    ("no_content", 1, "has no message content"),
    ("redirect", 1, "answered HTTP 307"),
    ("length", 1, "length"),
    ("context", 1, "context_overflow"),
])
def test_each_fault_is_retried_to_a_verdict_or_ends_with_its_reason(server, fault, times,
                                                                    expected):
    server.slow_s = 1.0
    backend = ServerBackend("j", spec_for(server.url), backoff_s=0.01)
    server.enqueue(*[fault] * times)
    [generation] = backend.generate([CHAT], SCHEMA, Sampling(max_new_tokens=20))
    if expected in ("stop", "length", "context_overflow"):
        assert generation.finish_reason == expected
        if expected == "stop":
            assert json.loads(generation.text) == {"score": 1}
    else:
        assert generation.finish_reason == "error" and expected in generation.detail
        assert server.url in generation.detail
    backend.close()


def test_429_waits_as_retry_after_says(server):
    import time

    backend = ServerBackend("j", spec_for(server.url), backoff_s=0.01)
    server.enqueue("429")
    started = time.monotonic()
    [generation] = backend.generate([CHAT], SCHEMA, Sampling(max_new_tokens=20))
    assert generation.finish_reason == "stop" and time.monotonic() - started >= 0.9


def test_an_unreachable_server_or_another_model_stops_the_start(server):
    with pytest.raises(BackendUnavailable, match="does not serve 'other'"):
        ServerBackend("j", spec_for(server.url, served_model="other"), backoff_s=0.01)
    port = server.port
    with FakeJudgeServer() as other:
        closed = other.port
    assert closed != port
    with pytest.raises(BackendUnavailable, match="could not be reached"):
        ServerBackend("j", spec_for(f"http://127.0.0.1:{closed}/v1"), backoff_s=0.01)


def test_replicas_share_the_requests_and_in_flight_bounds_them():
    with FakeJudgeServer() as one, FakeJudgeServer() as two:
        one.slow_s = two.slow_s = 0.05
        one.enqueue(*["slow"] * 20)
        two.enqueue(*["slow"] * 20)
        spec = JudgeSpec(backend="server", served_model="judge", base_urls=[one.url, two.url],
                         in_flight=4)
        backend = ServerBackend("j", spec, backoff_s=0.01)
        generations = backend.generate([CHAT] * 20, SCHEMA, Sampling(max_new_tokens=20))
        assert [g.finish_reason for g in generations] == ["stop"] * 20
        assert len(one.bodies) + len(two.bodies) == 20 and len(one.bodies) >= 5 \
            and len(two.bodies) >= 5
        assert one.max_open + two.max_open <= 4


# --- whole runs ------------------------------------------------------------------------------

def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _run(rows, tmp_path, backend, spec, **options):
    cases = write_jsonl(tmp_path / "cases.jsonl", rows)
    return evaluate(Task("trial_eligibility", cases), Judge("site-judge", spec=spec,
                                                             backend=backend),
                    RunOptions(tmp_path / "results.jsonl", **options))


def test_a_run_through_faults_loses_and_duplicates_nothing(server, trial_rows, tmp_path):
    rows = trial_rows[:24]
    spec = spec_for(server.url, in_flight=4)
    backend = ServerBackend("site-judge", spec, backoff_s=0.01)
    server.enqueue("drop", "500", "ok", "503", "ignore_schema", "bad_json", "429", "ok",
                   "400", "slow", "slow", "slow", "length")
    server.slow_s = 0.7
    _run(rows, tmp_path, backend, spec)
    records = _records(tmp_path / "results.jsonl")
    ids = [r["case_id"] for r in records]
    assert sorted(ids) == sorted(r["case_id"] for r in rows) and len(set(ids)) == len(ids)
    by_status: dict[str, list[dict]] = {}
    for record in records:
        by_status.setdefault(record["status"], []).append(record)
    # the schema-ignoring answer is never a score; each failure says why
    assert [r["reason"].split(":")[0] for r in by_status["invalid_output"]] == [
        "verdict failed validation"]
    assert all(r.get("scores") is None for s, rs in by_status.items() if s != "ok" for r in rs)
    assert {r["reason"].split(" answered ")[-1] for r in by_status["backend_error"]} >= {
        "with invalid JSON", "HTTP 400"}
    assert "truncated" in by_status and len(by_status["ok"]) >= len(rows) - 6


def test_a_server_gone_mid_run_is_judged_again_on_resume_once(server, trial_rows, tmp_path):
    rows = trial_rows[:20]
    spec = spec_for(server.url, in_flight=3, retries=1)
    server.down_after = 8
    _run(rows, tmp_path, ServerBackend("site-judge", spec, backoff_s=0.01), spec)
    first = _records(tmp_path / "results.jsonl")
    assert len(first) == len(rows) and len({r["case_id"] for r in first}) == len(rows)
    failed = {r["case_id"] for r in first if r["status"] == "backend_error"}
    assert len(failed) == len(rows) - 8
    assert all("dropped the connection" in r["reason"] or "could not be reached" in r["reason"]
               for r in first if r["status"] == "backend_error")
    server.down_after = None  # back up
    sent_before = len(server.bodies)
    _run(rows, tmp_path, ServerBackend("site-judge", spec, backoff_s=0.01), spec)
    final = _records(tmp_path / "results.jsonl")
    assert sorted(r["case_id"] for r in final) == sorted(r["case_id"] for r in rows)
    assert all(r["status"] == "ok" for r in final)
    # only the failed cases were sent again, each once
    assert len(server.bodies) - sent_before == len(failed)


def test_samples_and_the_loaded_backend_work_from_models_yaml(server, trial_rows, tmp_path,
                                                               monkeypatch, caplog):
    key = tmp_path / "key"
    key.write_text(SECRET)
    key.chmod(0o600)
    models = tmp_path / "models.yaml"
    models.write_text(yaml.safe_dump({"default": "site", "judges": {"site": {
        "backend": "server", "base_url": server.url, "served_model": "judge",
        "api_key_file": str(key), "sampling": {"temperature": 0.5}}}}))
    cases = write_jsonl(tmp_path / "cases.jsonl", trial_rows[:4])
    caplog.set_level(logging.DEBUG)
    evaluate(Task("trial_eligibility", cases), Judge("site", models_path=models, samples=2),
             RunOptions(tmp_path / "out" / "results.jsonl"))
    records = _records(tmp_path / "out" / "results.jsonl")
    assert [r["status"] for r in records] == ["ok"] * 4 and len(server.bodies) == 8
    assert {h["Authorization"] for h in server.headers} == {f"Bearer {SECRET}"}
    # The key is sent, and written nowhere: results, manifest, summary, logs.
    for path in (tmp_path / "out").rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text(errors="replace"), path
    assert SECRET not in caplog.text
    manifest = json.loads(next((tmp_path / "out").glob("*manifest*.json")).read_text())
    assert server.url in json.dumps(manifest)
    loaded = load_backend("site", load_models_file(models).judges["site"])
    assert isinstance(loaded, ServerBackend) and SECRET not in repr(vars(loaded))
    loaded.close()


def test_the_cli_runs_a_jury_and_a_pairwise_rubric_through_servers(tmp_path):
    from click.testing import CliRunner

    from evaluator.cli.main import cli
    from tests.conftest import EXAMPLES

    with FakeJudgeServer(served_model="a") as one, FakeJudgeServer(served_model="b") as two:
        models = tmp_path / "models.yaml"
        models.write_text(yaml.safe_dump({"default": "a", "judges": {
            "a": {"backend": "server", "base_url": one.url, "served_model": "a"},
            "b": {"backend": "server", "base_url": two.url, "served_model": "b",
                  "structured_output": "openai"}}}))
        jury = CliRunner().invoke(cli, [
            "run", "-r", "trial_eligibility", "-i", str(EXAMPLES / "trial_eligibility.jsonl"),
            "-o", str(tmp_path / "jury.jsonl"), "--models-file", str(models), "-m", "a",
            "-m", "b", "--no-progress"])
        assert jury.exit_code == 0, jury.output
        assert "response_format" in two.bodies[0] and "structured_outputs" in one.bodies[0]
        pairwise = CliRunner().invoke(cli, [
            "run", "-r", "trial_eligibility_pairwise", "-i",
            str(EXAMPLES / "trial_eligibility_pairwise.jsonl"), "-o",
            str(tmp_path / "pairs.jsonl"), "--models-file", str(models), "--no-progress"])
        assert pairwise.exit_code == 0, pairwise.output
        records = _records(tmp_path / "pairs.jsonl")
        assert records and all(r["status"] == "ok" for r in records)
        assert len(one.bodies) == 4 + 2 * len(records)  # the jury's 4, each pair's 2 orders


def test_parsing_a_server_judge_imports_no_http_client():
    import subprocess
    import sys

    code = ("import sys; from evaluator.judges.models_file import JudgeSpec; "
            "JudgeSpec(backend='server', base_url='http://127.0.0.1:8000/v1', "
            "served_model='m'); import evaluator.run.manifest; "
            "loaded = [m for m in ('requests', 'urllib3') if m in sys.modules]; "
            "print(loaded); sys.exit(1 if loaded else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr


# --- score distributions and provenance (issue 49, items 3 and 7) ----------------------------

DIST_SCHEMA = json.dumps({"type": "object", "properties": {
    "a": {"enum": [1, 2, 3]}, "b": {"enum": [1, 10, 20]}}, "required": ["a", "b"]})


def _distributions(server, mode: str, text_anchors, **settings):
    server.logprobs = mode
    backend = ServerBackend("site-judge", spec_for(server.url, **settings), backoff_s=0.01)
    [generation] = backend.generate([CHAT], DIST_SCHEMA, Sampling(max_new_tokens=32))
    assert generation.text == '{"a":1,"b":1}'
    out = backend.score_distributions(DIST_SCHEMA, [generation], [text_anchors])
    return out[0], backend


ANCHORS = [ScoreAnchor("a", 5, (1, 2, 3)), ScoreAnchor("b", 11, (1, 10, 20))]


def test_masked_log_probabilities_give_exact_distributions(server):
    (a, b), backend = _distributions(server, "masked", ANCHORS)
    assert server.bodies[-1]["logprobs"] is True and server.bodies[-1]["top_logprobs"] == 20
    assert a is not None and a.coverage >= 0.999
    assert a.probabilities == pytest.approx({1: 1 / 6, 2: 2 / 6, 3: 3 / 6})
    # "1" may be 1 or the start of 10 in one vocabulary: not readable from one position
    assert b is None
    assert backend.provenance()["distributions"] == {"exact": 1, "partial": 0, "absent": 1}


def test_unmasked_log_probabilities_give_partial_coverage_or_none(server):
    (a, _), backend = _distributions(server, "unmasked", ANCHORS)
    assert a is not None and a.coverage == pytest.approx(0.995)
    assert sum(a.probabilities.values()) == pytest.approx(1.0)
    assert backend.provenance()["distributions"]["partial"] == 1
    server.outside_mass = 0.3  # most of the mass off the grammar: below min_coverage
    (a, _), _ = _distributions(server, "unmasked", ANCHORS)
    assert a is None


def test_no_log_probabilities_or_a_split_value_give_none(server):
    (a, b), _ = _distributions(server, "none", ANCHORS)
    assert a is None and b is None
    (a, b), _ = _distributions(server, "split", ANCHORS)
    assert a is not None and b is None
    (a, b), _ = _distributions(server, "masked", ANCHORS, top_logprobs=0)
    assert "logprobs" not in server.bodies[-1] and a is None and b is None


def test_a_run_writes_distributions_that_score_expected_reads(server, trial_rows, tmp_path):
    from evaluator.analysis.score_mode import score_view
    from evaluator.data.results import ResultRecord
    from evaluator.rubrics.load import load_rubric

    rows = trial_rows[:6]
    spec = spec_for(server.url, in_flight=2, api_key_env="SERVER_TEST_KEY")
    import os
    os.environ["SERVER_TEST_KEY"] = SECRET
    try:
        _run(rows, tmp_path, ServerBackend("site-judge", spec, backoff_s=0.01), spec)
    finally:
        del os.environ["SERVER_TEST_KEY"]
    records = [ResultRecord.model_validate(r) for r in _records(tmp_path / "results.jsonl")]
    assert [r.status for r in records] == ["ok"] * len(rows)
    assert all(r.distributions and all(d.coverage >= 0.999 for d in r.distributions.values())
               for r in records)
    view = score_view(load_rubric("trial_eligibility"), records, "expected", "results.jsonl")
    assert view.left_out == 0 and len(view.values) == len(rows)
    manifest_text = (tmp_path / "results.manifest.json").read_text()
    backend = json.loads(manifest_text)["runs"][-1]["backend"]
    assert backend["replicas"] == [{
        "address": server.url, "model_id": "judge", "max_model_len": 4096, "owned_by": "vllm",
        "root": "/models/judge-7b", "version": "0.32.0"}]
    assert backend["distributions"]["exact"] > 0 and backend["distributions"]["absent"] == 0
    # no key and no case text in the manifest
    assert SECRET not in manifest_text
    for row in rows:
        for value in row.values():
            if isinstance(value, str) and len(value) > 20:
                assert value not in manifest_text


def test_a_server_without_version_is_recorded_without_one(server):
    server.version = None
    backend = ServerBackend("site-judge", spec_for(server.url), backoff_s=0.01)
    [replica] = backend.provenance()["replicas"]
    assert replica["version"] is None and replica["root"] == "/models/judge-7b"


def test_a_resume_against_another_model_under_the_same_name_is_refused(server, trial_rows,
                                                                        tmp_path):
    from evaluator.run.resume import ResumeConflict

    rows = trial_rows[:4]
    spec = spec_for(server.url)
    server.down_after = 2
    _run(rows, tmp_path, ServerBackend("site-judge", spec, backoff_s=0.01), spec)
    server.down_after = None
    server.root = "/models/another-13b"
    sent = len(server.bodies)
    with pytest.raises(ResumeConflict, match="another-13b"):
        _run(rows, tmp_path, ServerBackend("site-judge", spec, backoff_s=0.01), spec)
    # nothing judged by the new model; the first model's verdicts kept (the failed cases
    # are left to a resume against the first model, or a --force-new run)
    assert len(server.bodies) == sent
    assert [r["status"] for r in _records(tmp_path / "results.jsonl")] == ["ok", "ok"]
    # The same command again is refused again: the refused run recorded no provenance, so
    # the comparison is still with the model that judged the file (review finding).
    with pytest.raises(ResumeConflict, match="another-13b"):
        _run(rows, tmp_path, ServerBackend("site-judge", spec, backoff_s=0.01), spec)
    assert len(server.bodies) == sent
