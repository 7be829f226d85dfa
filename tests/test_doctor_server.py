"""``evaluator doctor`` for a server judge (evaluator/doctor/server.py), against the fake
server of tests/server_fake.py: one line per check, and no socket for a refused address."""

from __future__ import annotations

import dataclasses
import socket

import pytest

from evaluator.doctor.diagnose import diagnose
from evaluator.doctor.probes import Probes
from evaluator.doctor.server import ServerFindings, probe_server
from evaluator.judges.models_file import JudgeSpec
from tests.server_fake import FakeJudgeServer


def spec_for(url: str, **settings):
    return JudgeSpec(**{"backend": "server", "base_url": url, "served_model": "judge",
                        "retries": 0, "timeout_s": 2.0, "connect_timeout_s": 1.0,
                        **settings})


def server_checks(spec, probes: Probes | None = None) -> dict[str, tuple[str, str]]:
    """The server's lines of the doctor's report: name -> (status, message)."""
    report = diagnose("site", spec, probes=probes or Probes())
    names = [c.name for c in report.checks]
    assert "torch" not in names and not any("CPU" in c.message for c in report.checks)
    return {c.name: (c.status, c.message) for c in report.checks if c.name.startswith(
        ("server", "served", "structured", "log-"))}


@pytest.fixture
def server():
    with FakeJudgeServer() as fake:
        yield fake


def test_a_served_judge_passes_every_check(server):
    checks = server_checks(spec_for(server.url))
    assert {name: status for name, (status, _) in checks.items()} == {
        "server address": "ok", "server reachable": "ok", "server TLS": "ok",
        "served model": "ok", "structured output": "ok", "log-probabilities": "ok"}
    assert "exact" in checks["log-probabilities"][1]


def test_a_model_not_served_fails_with_what_to_set(server):
    checks = server_checks(spec_for(server.url, served_model="other"))
    status, message = checks["served model"]
    assert status == "failed" and "set served_model" in message and "judge" in message
    assert "structured output" not in checks


def test_a_server_down_fails_reachable():
    with FakeJudgeServer() as fake:
        url = fake.url
    checks = server_checks(spec_for(url))
    status, message = checks["server reachable"]
    assert status == "failed" and "could not be reached" in message
    assert "served model" not in checks


def test_a_server_that_ignores_the_schema_fails_structured_output(server):
    server.enqueue("ignore_schema")
    status, message = server_checks(spec_for(server.url))["structured output"]
    assert status == "failed" and "ignored the JSON schema" in message


@pytest.mark.parametrize("mode, words", [("none", "returned none"),
                                         ("unmasked", "not masked")])
def test_log_probabilities_missing_or_unmasked_is_a_warning(server, mode, words):
    server.logprobs = mode
    server.outside_mass = 0.2
    status, message = server_checks(spec_for(server.url))["log-probabilities"]
    assert status == "warning" and words in message


def test_a_public_address_fails_the_guard_without_a_socket(monkeypatch):
    spec = spec_for("http://127.0.0.1:8000/v1")
    public = spec.model_copy(update={"base_url": "https://8.8.8.8/v1"})  # as if edited after
    opened: list[object] = []
    monkeypatch.setattr(socket.socket, "connect", lambda self, a: opened.append(a))
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: opened.append(a))
    checks = server_checks(public)
    status, message = checks["server address"]
    assert status == "failed" and "8.8.8.8" in message and len(checks) == 1
    assert opened == []


def test_the_probe_is_injectable():
    probes = dataclasses.replace(Probes(), server=lambda name, spec: ServerFindings(
        install="pip install 'evaluator[server]'"))
    checks = server_checks(spec_for("http://127.0.0.1:9999/v1"), probes)
    assert checks["server reachable"][0] == "failed"
    assert "evaluator[server]" in checks["server reachable"][1]
    assert probe_server is Probes().server


def test_the_report_keeps_its_columns_with_the_servers_longer_check_names():
    from evaluator.cli.doctor_cmd import format_report
    from evaluator.doctor.report import DoctorReport, failed, ok

    report = DoctorReport.of("s", "server", [
        ok("python", "Python 3.11"), ok("server address", "every address passes"),
        failed("server reachable", "could not be reached " + "and more words " * 6)])
    lines = format_report(report).splitlines()[1:-1]
    column = len("ok      server reachable ")
    assert lines[1][:column] == "ok      server address   "
    assert lines[2].startswith("failed  server reachable could")
    assert len(lines) > 3 and all(line[:column].strip() == "" for line in lines[3:])
