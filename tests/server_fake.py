"""An OpenAI-compatible judge server for tests: stdlib ``http.server`` on 127.0.0.1 in a
thread, answering ``GET /v1/models`` and ``POST /v1/chat/completions`` with the smallest
valid verdict for the schema the request carries, unless a fault is queued.

Faults, one per chat request in the order queued (:meth:`FakeJudgeServer.enqueue`):
``drop`` (close the connection without an answer), ``500``, ``503``, ``429`` (with
``Retry-After: 1``), ``400``, ``slow`` (answer after :attr:`slow_s`), ``bad_json``,
``ignore_schema`` (a prose answer that ignores the constraint), ``length`` (finish_reason
length), ``no_content``, ``redirect`` (307 to a public address), ``context`` (a 400 saying
the prompt is longer than the context). ``down_after``: after that many verdicts every
request is dropped (a server gone away) until it is set back to None.

Log-probabilities (when a request asks for them), as :attr:`FakeJudgeServer.logprobs` says:
``masked`` (the top entries at a score's value are exactly the allowed values, as vLLM's
grammar-masked ones: coverage 1), ``unmasked`` (the allowed values share 1 -
:attr:`outside_mass`, the rest is on a token the grammar forbids), ``split`` (every digit
is its own token, as in Qwen's vocabulary: a value of several digits cannot be read from
one position), ``none`` (no log-probabilities at all). The verdict is cut into tokens: a
run of digits (one digit each under ``split``), else one character. At a value the judge
puts probability on the allowed values in proportion 1, 2, 3, ... (the written one
included); elsewhere the written token has probability 1. ``/models`` lists the served
model with ``max_model_len``, ``owned_by`` and ``root``; ``/version`` answers
:attr:`version` (None: 404).
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from typing_extensions import Self

from evaluator.judges.backends.fake import minimal_instance

REDIRECT_TARGET = "http://8.8.8.8/v1/chat/completions"


def _integer_enums(schema: Any) -> list[list[int]]:
    """Every enum of integers anywhere in a schema (its criteria's allowed values)."""
    found: list[list[int]] = []
    if isinstance(schema, dict):
        enum = schema.get("enum")
        if isinstance(enum, list) and enum and all(isinstance(v, int) for v in enum):
            found.append(list(enum))
        for value in schema.values():
            found += _integer_enums(value)
    elif isinstance(schema, list):
        for value in schema:
            found += _integer_enums(value)
    return found


def verdict_logprobs(text: str, schema: dict[str, Any], mode: str, top: int,
                     outside_mass: float) -> list[dict[str, Any]]:
    """The OpenAI ``logprobs.content`` of a verdict, as :class:`FakeJudgeServer` describes."""
    enums = _integer_enums(schema)
    pieces = re.findall(r"[0-9]|[^0-9]" if mode == "split" else r"[0-9]+|[^0-9]", text)
    content = []
    for i, piece in enumerate(pieces):
        entries = [(piece, 0.0)]
        value_start = piece[0].isdigit() and (i == 0 or not pieces[i - 1][-1].isdigit())
        written = re.match(r"[0-9]+", text[sum(map(len, pieces[:i])):])
        allowed = next((e for e in enums if written and int(written.group()) in e), None)
        if value_start and allowed is not None:
            texts = [str(v)[0] if mode == "split" else str(v) for v in allowed]
            weights = [float(n) for n in range(1, len(texts) + 1)]
            inside = 1.0 - (outside_mass if mode == "unmasked" else 0.0)
            total = sum(weights)
            merged: dict[str, float] = {}
            for token, weight in zip(texts, weights):
                merged[token] = merged.get(token, 0.0) + inside * weight / total
            if mode == "unmasked" and outside_mass > 0:
                merged[" "] = outside_mass
            entries = sorted(((t, math.log(p)) for t, p in merged.items()),
                             key=lambda e: -e[1])[:top]
            entries = [(piece, dict(entries).get(piece, -30.0))] + [
                e for e in entries if e[0] != piece]
        content.append({"token": piece, "logprob": entries[0][1],
                        "bytes": list(piece.encode()),
                        "top_logprobs": [{"token": t, "logprob": lp, "bytes": list(t.encode())}
                                         for t, lp in sorted(entries, key=lambda e: -e[1])]})
    return content


def _schema_of(body: dict[str, Any]) -> dict[str, Any]:
    if "structured_outputs" in body:
        schema = body["structured_outputs"]["json"]
    else:
        schema = body["response_format"]["json_schema"]["schema"]
    schema = json.loads(schema) if isinstance(schema, str) else dict(schema)
    schema.pop("x-guidance", None)
    return schema


class FakeJudgeServer:
    """The server; use as a context manager. ``bodies``: every chat request's JSON body;
    ``headers``: their headers; ``max_open``: the most chat requests open at once."""

    def __init__(self, served_model: str = "judge", port: int = 0, slow_s: float = 2.0,
                 logprobs: str = "masked"):
        self.served_model = served_model
        self.logprobs = logprobs
        self.outside_mass = 0.005
        self.root = "/models/judge-7b"
        self.version: str | None = "0.32.0"
        self.models_listed = True
        self.slow_s = slow_s
        self.faults: deque[str] = deque()
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.answered = 0
        self.down_after: int | None = None
        self.open = 0
        self.max_open = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        """The port it listens on."""
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        """Its base URL (``.../v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def enqueue(self, *faults: str) -> None:
        """Queue faults for the next chat requests, one each."""
        self.faults.extend(faults)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _next_fault(self) -> str | None:
        with self._lock:
            if self.down_after is not None and self.answered >= self.down_after:
                return "drop"
            return self.faults.popleft() if self.faults else None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None,
                      raw: bytes | None = None) -> None:
                data = raw if raw is not None else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                try:
                    self.wfile.write(data)
                except OSError:  # the client gave up (a slow answer)
                    pass

            def do_GET(self) -> None:  # http.server's name
                if self.path.rstrip("/") == "/v1/models" and fake.models_listed:
                    self._send(200, {"object": "list", "data": [
                        {"id": fake.served_model, "object": "model", "owned_by": "vllm",
                         "root": fake.root, "max_model_len": 4096}]})
                elif self.path == "/version" and fake.version is not None:
                    self._send(200, {"version": fake.version})
                else:
                    self._send(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with fake._lock:
                    fake.bodies.append(body)
                    fake.headers.append(dict(self.headers))
                    fake.open += 1
                    fake.max_open = max(fake.max_open, fake.open)
                try:
                    self._answer(body, fake._next_fault())
                finally:
                    with fake._lock:
                        fake.open -= 1

            def _answer(self, body: dict[str, Any], fault: str | None) -> None:
                if fault == "drop":
                    self.close_connection = True
                    return
                if fault in ("500", "503", "400"):
                    self._send(int(fault), {"error": {"message": "failed"}})
                    return
                if fault == "429":
                    self._send(429, {"error": {"message": "busy"}}, {"Retry-After": "1"})
                    return
                if fault == "context":
                    self._send(400, {"error": {"message": "This model's maximum context "
                                                          "length is 64 tokens."}})
                    return
                if fault == "redirect":
                    self._send(307, {}, {"Location": REDIRECT_TARGET})
                    return
                if fault == "bad_json":
                    self._send(200, None, raw=b'{"choices": [{"message": ')
                    return
                if fault == "slow":
                    time.sleep(fake.slow_s)
                text = json.dumps(minimal_instance(_schema_of(body)), separators=(",", ":"))
                finish = "stop"
                if fault == "ignore_schema":
                    text = "The patient looks eligible to me."
                elif fault == "length":
                    text, finish = text[:5], "length"
                message: dict[str, Any] = {"role": "assistant", "content": text}
                if fault == "no_content":
                    message.pop("content")
                with fake._lock:
                    fake.answered += 1
                choice: dict[str, Any] = {"index": 0, "message": message,
                                          "finish_reason": finish}
                if body.get("logprobs") and fake.logprobs != "none" and "content" in message:
                    choice["logprobs"] = {"content": verdict_logprobs(
                        text, _schema_of(body), fake.logprobs, int(body.get("top_logprobs") or 0),
                        fake.outside_mass)}
                self._send(200, {"id": "x", "object": "chat.completion", "model": fake.served_model,
                                 "choices": [choice],
                                 "usage": {"prompt_tokens": 11, "completion_tokens": 7,
                                           "total_tokens": 18}})

        return Handler
