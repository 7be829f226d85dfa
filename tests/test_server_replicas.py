"""Replica failover of a server judge (evaluator/judges/backends/server_replicas.py and
ServerBackend.request_one): the choice of replica, pure, on a scripted clock; then against
two fake servers on two loopback ports (tests/server_fake.py), one of them down or
answering 503: a request that fails on its replica for the connection or a 5xx/429 is
answered by the other, each replica tried at most once; a 4xx or an answer that does not
parse is not sent elsewhere; a run loses and duplicates nothing; the manifest says what
each replica did."""

from __future__ import annotations

import json
import logging
import time

import pytest

from evaluator.judges.backends import Sampling
from evaluator.judges.backends.server_backend import ServerBackend
from evaluator.judges.backends.server_replicas import ReplicaPool
from evaluator.judges.models_file import JudgeSpec
from tests.server_fake import FakeJudgeServer
from tests.test_server_backend import CHAT, SCHEMA, _records, _run

SAMPLING = Sampling(max_new_tokens=20)


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


# --- the choice of replica, pure -------------------------------------------------------------

def test_a_request_goes_to_the_least_busy_replica_not_yet_tried():
    pool = ReplicaPool(["a", "b", "c"], clock=Clock())
    assert [pool.take() for _ in range(3)] == [0, 1, 2]  # one open each
    pool.release(1)
    assert pool.take() == 1  # the fewest open
    assert pool.take(tried=[0, 1]) == 2
    assert pool.take(tried=[0, 1, 2]) is None  # each replica at most once per request


def test_a_replica_that_failed_is_taken_last_until_its_cool_down_ends():
    clock = Clock()
    pool = ReplicaPool(["a", "b"], cool_down_s=30.0, clock=clock)
    assert pool.failed(0) is True  # starts its cool-down
    assert pool.failed(0) is False  # already in one (extended)
    assert [pool.take() for _ in range(3)] == [1, 1, 1]  # though b has more open
    assert pool.take(tried=[1]) == 0  # still tried when nothing else is left
    for _ in range(3):
        pool.release(1)
    pool.release(0)
    clock.now += 30.1
    assert pool.take() == 0  # cool-down over: the fewest sent
    pool.release(0)
    pool.failed(0)
    assert pool.take() == 1
    pool.release(1)
    pool.answered(0, took_over=True)  # an answer ends the cool-down at once
    assert pool.take() == 0
    assert [r.to_json() for r in pool.requests()] == [
        {"address": "a", "answered": 1, "took_over": 1, "failed": 3},
        {"address": "b", "answered": 0, "took_over": 0, "failed": 0}]


# --- against two fake servers ------------------------------------------------------------------

@pytest.fixture
def pair():
    with FakeJudgeServer() as one, FakeJudgeServer() as two:
        yield one, two


def _backend(one, two, **settings) -> ServerBackend:
    spec = JudgeSpec(**{"backend": "server", "base_urls": [one.url, two.url],
                        "served_model": "judge", "retries": 2, "timeout_s": 0.5,
                        "connect_timeout_s": 0.5, **settings})
    return ServerBackend("site-judge", spec, backoff_s=0.01)


def _requests(backend: ServerBackend) -> list[tuple[int, int, int]]:
    return [(r["answered"], r["took_over"], r["failed"])
            for r in backend.provenance()["requests"]]


@pytest.mark.parametrize("fault, retries", [
    ("drop", 2), ("500", 2), ("503", 2), ("429", 0), ("slow", 1)])
def test_a_request_failed_on_its_replica_is_answered_by_the_next(pair, connects, fault,
                                                                 retries):
    one, two = pair
    one.slow_s = 1.0
    one.enqueue(*[fault] * (retries + 1))  # every try on the first replica fails
    backend = _backend(one, two, retries=retries)
    [generation] = backend.generate([CHAT], SCHEMA, SAMPLING)
    assert generation.finish_reason == "stop" and json.loads(generation.text) == {"score": 1}
    assert len(one.bodies) == retries + 1 and len(two.bodies) == 1
    assert _requests(backend) == [(0, 0, 1), (1, 1, 0)]
    # the other replica is one the PHI guard took: nothing but loopback was reached
    assert set(connects) == {"127.0.0.1"}
    backend.close()


@pytest.mark.parametrize("fault, finish, detail", [
    ("400", "error", "answered HTTP 400"),
    ("context", "context_overflow", "longer than the served model's context"),
    ("bad_json", "error", "answered with invalid JSON"),
    ("no_content", "error", "has no message content"),
    ("redirect", "error", "answered HTTP 307"),
    ("ignore_schema", "stop", None),  # the verdict's validation rejects it, later
])
def test_a_4xx_or_an_answer_that_does_not_parse_is_not_sent_elsewhere(pair, fault, finish,
                                                                     detail):
    one, two = pair
    one.enqueue(fault)
    backend = _backend(one, two)
    [generation] = backend.generate([CHAT], SCHEMA, SAMPLING)
    assert generation.finish_reason == finish
    if detail is not None:
        assert detail in generation.detail and one.url in generation.detail
        assert two.url not in generation.detail
    assert len(one.bodies) == 1 and two.bodies == []  # another replica would say the same
    assert _requests(backend) == [(1, 0, 0), (0, 0, 0)]
    backend.close()


def test_a_request_failing_after_the_run_stopped_is_not_sent_on(pair):
    """Once the stream is closed (the run stopped: Ctrl-C, a full disk), a request that
    fails on its replica is not passed to the next one: its result would be dropped, and
    the case text sent again for nothing (review finding)."""
    import threading

    one, two = pair
    one.enqueue("503")
    backend = _backend(one, two, retries=0)
    stop = threading.Event()
    stop.set()
    generation = backend.request_one(CHAT, backend._schema(SCHEMA), SAMPLING, None, stop)
    assert generation.finish_reason == "error" and "answered HTTP 503" in generation.detail
    assert len(one.bodies) == 1 and two.bodies == []
    # Not stopped: the same failure goes on to the other replica.
    one.enqueue("503")
    generation = backend.request_one(CHAT, backend._schema(SCHEMA), SAMPLING, None,
                                     threading.Event())
    assert generation.finish_reason == "stop" and len(two.bodies) == 1
    backend.close()


def test_a_request_that_cannot_be_encoded_is_not_sent_elsewhere(pair, monkeypatch):
    """A failure the request itself causes (here: its body cannot be encoded, a
    requests.InvalidJSONError) would fail the same on every replica: not passed on."""
    import requests

    from evaluator.judges.backends import server_backend

    one, two = pair
    backend = _backend(one, two)

    def unencodable(*args, **kwargs):
        raise requests.exceptions.InvalidJSONError("not JSON")

    monkeypatch.setattr(server_backend, "chat_request", unencodable)
    [generation] = backend.generate([CHAT], SCHEMA, SAMPLING)
    assert generation.finish_reason == "error"
    assert one.bodies == [] and two.bodies == []
    assert _requests(backend) == [(0, 0, 0), (0, 0, 0)]  # no replica blamed nor credited
    backend.close()


def test_a_request_every_replica_fails_is_one_error_naming_each(pair):
    one, two = pair
    one.enqueue(*["drop"] * 3)
    two.enqueue(*["503"] * 3)
    backend = _backend(one, two)
    [generation] = backend.generate([CHAT], SCHEMA, SAMPLING)
    assert generation.finish_reason == "error"
    assert generation.detail == (f"server {one.url} dropped the connection (3 tries); "
                                 f"server {two.url} answered HTTP 503 (3 tries)")
    assert len(one.bodies) == 3 and len(two.bodies) == 3  # each tried once, its retries
    assert _requests(backend) == [(0, 0, 1), (0, 0, 1)]


def test_a_replica_that_failed_is_asked_last_for_the_cool_down(pair, caplog):
    one, two = pair
    one.down_after = 0
    spec = JudgeSpec(backend="server", base_urls=[one.url, two.url], served_model="judge",
                     retries=2, timeout_s=0.5, connect_timeout_s=0.5, in_flight=1)
    backend = ServerBackend("site-judge", spec, backoff_s=0.01, cool_down_s=2.0)
    caplog.set_level(logging.WARNING)
    generations = backend.generate([CHAT] * 6, SCHEMA, SAMPLING)
    assert [g.finish_reason for g in generations] == ["stop"] * 6
    # only the first request paid the down replica's retries; the rest went to the other
    assert len(one.bodies) == 3 and two.answered == 6
    assert _requests(backend) == [(0, 0, 1), (6, 1, 0)]
    [warning] = [r.getMessage() for r in caplog.records if r.name.endswith("server_backend")]
    assert warning == (f"server {one.url} dropped the connection (3 tries); other replicas "
                       "are asked first for the next 2 s")
    assert "case text" not in caplog.text
    one.down_after = None  # back up; once the cool-down is over it takes its share again
    time.sleep(2.1)
    backend.generate([CHAT] * 4, SCHEMA, SAMPLING)
    assert one.answered == 4 and _requests(backend) == [(4, 0, 1), (6, 1, 0)]
    backend.close()


# --- whole runs --------------------------------------------------------------------------------

@pytest.mark.parametrize("fault", ["drop", "503"])
def test_a_run_over_a_replica_that_goes_down_judges_every_case_once(pair, trial_rows,
                                                                     tmp_path, connects, fault):
    one, two = pair
    rows = trial_rows[:24]
    one.enqueue("ok", "ok", "ok", *[fault] * 200)  # three verdicts, then down or 503
    two.enqueue("ok", "400")  # the second request it gets is refused as the client's fault
    spec = JudgeSpec(backend="server", base_urls=[one.url, two.url], served_model="judge",
                     retries=1, timeout_s=2.0, connect_timeout_s=0.5, in_flight=4)
    _run(rows, tmp_path, ServerBackend("site-judge", spec, backoff_s=0.01), spec)
    records = _records(tmp_path / "results.jsonl")
    ids = [r["case_id"] for r in records]
    assert sorted(ids) == sorted(r["case_id"] for r in rows) and len(set(ids)) == len(ids)
    failed = [r for r in records if r["status"] != "ok"]
    assert [(r["status"], r["reason"]) for r in failed] == [
        ("backend_error", f"server {two.url} answered HTTP 400")]
    # the down replica's share was answered by the other; the 400 was sent once, nowhere else
    assert one.answered == 3 and two.answered == len(rows) - 4
    assert len(two.bodies) == len(rows) - 3
    backend = json.loads((tmp_path / "results.manifest.json").read_text())["runs"][-1][
        "backend"]
    first, second = backend["requests"]
    assert (first["address"], second["address"]) == (one.url, two.url)
    assert first["answered"] == 3 and second["answered"] == len(rows) - 3
    assert first["failed"] == second["took_over"] >= 1 and second["failed"] == 0
    assert len(one.bodies) == 3 + 2 * first["failed"]  # each failed request: its 2 tries
    assert set(connects) == {"127.0.0.1"}
