"""The doctor's checks for a judge the site serves (a backend whose record says ``server``):
the address against the PHI guard, then, for each replica, reachable, TLS, the served model
listed, structured output honoured and log-probabilities returned.

:func:`probe_server` is the one probe that opens sockets (only after the guard took every
address; the HTTP client is imported only then, so a missing ``evaluator[server]`` is a
finding, not a crash); :func:`check_server` turns its findings into one line per check.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass, field

from evaluator.common.errors import UserError
from evaluator.doctor.report import Check, failed, ok, warning
from evaluator.judges.backends.base import Sampling, ScoreAnchor
from evaluator.judges.backends.server_guard import AddressRefused
from evaluator.judges.backends.server_logprobs import (
    EXACT_COVERAGE,
    anchor_distribution,
)
from evaluator.judges.models_file import JudgeSpec

#: The doctor's one tiny request: a verdict with one allowed value.
TRIVIAL_SCHEMA = {"type": "object", "properties": {"a": {"type": "integer", "enum": [1]}},
                  "required": ["a"], "additionalProperties": False}
_CHAT = [{"role": "user", "content": 'Answer with the JSON object {"a": 1}.'}]
_SAMPLING = Sampling(max_new_tokens=16)


@dataclass
class ReplicaFindings:
    """What one replica answered: ``error`` (it could not be asked at all: unreachable,
    TLS, a timeout, an HTTP error), the ``/models`` ids (None: no ``/models``), the trivial
    request's ``answer`` (its text, None when it failed: ``answer_error``), and the
    log-probabilities' coverage at its value (None: none returned; not asked when the
    judge's ``top_logprobs`` is 0)."""

    address: str
    error: str | None = None
    tls: bool = False
    models: list[str] | None = None
    answer: str | None = None
    answer_error: str | None = None
    coverage: float | None = None


@dataclass
class ServerFindings:
    """Every replica's findings, or why none could be asked (``refused``: the guard, the
    key or the CA file; ``install``: the HTTP client is missing)."""

    refused: str | None = None
    install: str | None = None
    replicas: list[ReplicaFindings] = field(default_factory=list)


def probe_server(name: str, spec: JudgeSpec) -> ServerFindings:
    """Ask each replica of server judge ``name``: ``/models``, then the trivial request
    (with log-probabilities when the judge asks for them). No socket opens unless the
    guard takes every address."""
    try:
        spec.addresses()  # type: ignore[attr-defined]
    except AddressRefused as exc:
        return ServerFindings(refused=str(exc))
    # The backend's module (it imports requests) is loaded by name, as load_backend does:
    # the doctor itself stays light, and a missing extra is a finding.
    try:
        module = importlib.import_module(spec.backend_info.factory.partition(":")[0])
    except ImportError:
        return ServerFindings(install=spec.backend_info.install)
    failure_detail = module.failure_detail
    try:
        backend = module.ServerBackend(name, spec, check_models=False)
    except UserError as exc:
        return ServerFindings(refused=str(exc))
    findings = ServerFindings()
    try:
        for index, address in enumerate(backend.addresses):
            found = ReplicaFindings(address)
            findings.replicas.append(found)
            try:
                status, body = backend.ask_models(index)
            except Exception as exc:  # noqa: BLE001 - the finding is what went wrong
                found.error = failure_detail(exc, address, backend.tries)
                found.tls = "TLS" in found.error
                continue
            if status == 200:
                try:
                    found.models = [str(m.get("id")) for m in json.loads(body)["data"]]
                except (ValueError, KeyError, TypeError, AttributeError):
                    found.error = f"server {address}'s /models answer is not a model list"
                    continue
            elif status != 404:
                found.error = f"server {address} answered HTTP {status} to GET /models"
                continue
            generation = backend.ask_chat(index, _CHAT, TRIVIAL_SCHEMA, _SAMPLING)
            if generation.finish_reason != "stop" or generation.text is None:
                found.answer_error = generation.detail or (
                    f"the answer ended with finish_reason {generation.finish_reason}")
                continue
            found.answer = generation.text
            if generation.token_logprobs:
                offset = generation.text.find(":1") + 1
                dist = anchor_distribution(generation.token_logprobs,
                                           ScoreAnchor("a", offset, (1,)), 0.0)
                found.coverage = dist.coverage if dist is not None else 0.0
    finally:
        backend.close()
    return findings


def _parses(text: str) -> bool:
    try:
        return json.loads(text) == {"a": 1}
    except ValueError:
        return False


def check_server(spec: JudgeSpec, findings: ServerFindings) -> list[Check]:
    """One line per check: address, reachable, TLS, model listed, structured output,
    log-probabilities (the later ones only where the earlier passed)."""
    if findings.refused is not None:
        return [failed("server address", f"{findings.refused}; nothing was sent")]
    if findings.install is not None:
        return [ok("server address", "every address passes the PHI guard"),
                failed("server reachable", f"the HTTP client is not installed: "
                       f"{findings.install}")]
    served = spec.served_model  # type: ignore[attr-defined]
    checks = [ok("server address", "every address passes the PHI guard",
                 addresses=[r.address for r in findings.replicas])]
    down = [r for r in findings.replicas if r.error is not None]
    tls = [r for r in down if r.tls]
    if down:
        checks.append(failed("server reachable", "; ".join(r.error or "" for r in down)
                             + ": start the server, or check base_url, the firewall and "
                               "connect_timeout_s"))
    else:
        checks.append(ok("server reachable", f"{len(findings.replicas)} replica(s) answer "
                                             "GET /models"))
    https = [r for r in findings.replicas if r.address.startswith("https://")]
    if tls:
        checks.append(failed("server TLS", f"{tls[0].error}: the certificate is not "
                                           "trusted; set ca_bundle to the site's CA file"))
    elif https:
        checks.append(ok("server TLS", "certificates verified"))
    else:
        checks.append(ok("server TLS", "not used: loopback over http"))
    up = [r for r in findings.replicas if r.error is None]
    if not up:
        return checks
    missing = [r for r in up if r.models is not None and served not in r.models]
    unlisted = [r for r in up if r.models is None]
    if missing:
        listed = ", ".join(missing[0].models or []) or "none"
        checks.append(failed("served model", f"server {missing[0].address} does not serve "
                             f"{served!r} (it serves: {listed[:200]}): set served_model"))
        return checks
    if unlisted:
        checks.append(warning("served model", f"server {unlisted[0].address} has no "
                              f"/models: {served!r} is not checked"))
    else:
        checks.append(ok("served model", f"{served!r} is listed"))
    broken = [r for r in up if r.answer is None]
    ignored = [r for r in up if r.answer is not None and not _parses(r.answer)]
    if broken:
        # vLLM 0.32 on its default structured-output backend (xgrammar) answers a 500 to
        # the rubric's schemas (tests/test_vllm_server.py): the likeliest cause.
        checks.append(failed("structured output", f"the test request failed: "
                             f"{broken[0].answer_error}; a vLLM server must run with "
                             "--structured-outputs-config '{\"backend\": \"guidance\"}' "
                             "(docs/judges.md)"))
        return checks
    if ignored:
        checks.append(failed("structured output", f"server {ignored[0].address} ignored the "
                             "JSON schema (the answer does not parse as the verdict): every "
                             "verdict would be invalid_output; set structured_output to "
                             "openai for a server that takes response_format, or use a "
                             "server with structured outputs (vLLM)"))
        return checks
    checks.append(ok("structured output", "a schema-constrained test verdict parses"))
    if spec.top_logprobs == 0:  # type: ignore[attr-defined]
        checks.append(ok("log-probabilities", "not asked (top_logprobs: 0): no score "
                                              "distributions"))
        return checks
    coverage = [r.coverage for r in up]
    if any(c is None for c in coverage):
        checks.append(warning("log-probabilities", "the server returned none: no score "
                              "distributions (--score expected leaves such records out); "
                              "start vLLM with --max-logprobs 20 or more, or set "
                              "top_logprobs: 0"))
    elif min(c or 0.0 for c in coverage) < EXACT_COVERAGE:
        checks.append(warning("log-probabilities", "returned but not masked by the grammar: "
                              "distributions are partial (coverage below 1) or absent "
                              "under min_coverage"))
    else:
        checks.append(ok("log-probabilities", "returned and masked by the grammar: exact "
                                              "score distributions"))
    return checks
