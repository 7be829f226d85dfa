"""A judge the site already serves: an OpenAI-compatible HTTP server (``vllm serve``, SGLang,
llama.cpp's server, TGI) reached with ``requests``.

Before any socket opens, every address (and the proxy, if one is named) passes the PHI
guard (:mod:`evaluator.judges.backends.server_guard`); then each replica gets its own
``requests.Session`` that takes nothing from the environment (no proxy, CA or netrc:
``trust_env = False``), checks certificates (the system's CAs or ``ca_bundle``), follows no
redirect, and retries with exponential backoff (``urllib3.util.Retry``, POST included) on
connection errors, 429 (honouring ``Retry-After`` up to :data:`RETRY_AFTER_CAP_S`) and
500/502/503/504, at most ``retries`` times. On start each replica's ``/models`` is asked
once: an unreachable server or one that does not serve ``served_model`` stops the run
before a case is sent.

Requests run on threads, ``in_flight`` at once over all replicas, and
:meth:`ServerBackend.stream` hands each generation back as it ends, reading the next request
only as a slot frees. Each request goes to the replica with the fewest open; one that fails
there for a reason another replica may not share (the connection refused or dropped, a
timeout, 429 or 5xx with the retries spent) is sent to the next replica, each at most once,
and the replica that failed is taken last for a cool-down
(:mod:`evaluator.judges.backends.server_replicas`). A request that still fails (on every
replica, or a 4xx, invalid JSON, a missing field: another replica would answer the same)
becomes an ``error`` generation with a one-line detail that names the server(s) and the
status, never the answer's text; the run writes it as a ``backend_error`` record, judged
again on resume.

Score distributions: with ``top_logprobs`` set, each request asks for the top
log-probabilities at every token, and :meth:`ServerBackend.score_distributions` reads each
score's distribution at its value's token (:mod:`evaluator.judges.backends.server_logprobs`:
exact, partial, or absent). :meth:`ServerBackend.provenance` is what the replicas reported
at start (model id, context length, owner, root, version), how many distributions were
exact, partial or absent and what each replica did with the requests, for the run's
manifest.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3.exceptions import (
    ConnectTimeoutError,
    NewConnectionError,
    ProtocolError,
    ReadTimeoutError,
    SSLError,
)
from urllib3.util.retry import Retry

from evaluator.common.record import Record
from evaluator.judges.backends.base import (
    BackendUnavailable,
    Chat,
    Generation,
    Request,
    Sampling,
    ScoreAnchor,
    ValueDistribution,
)
from evaluator.judges.backends.grammar import constraint_schema
from evaluator.judges.backends.server_guard import AddressRefused, ServerAddress, check_server_url
from evaluator.judges.backends.server_logprobs import EXACT_COVERAGE, distributions
from evaluator.judges.backends.server_protocol import chat_request, parse_answer
from evaluator.judges.backends.server_replicas import COOL_DOWN_S, ReplicaPool, ReplicaRequests

if TYPE_CHECKING:
    from evaluator.judges.backends.server_settings import ServerSettings

log = logging.getLogger(__name__)
# A request that failed with one of these may go to another replica: the connection
# (refused, dropped, TLS), a timeout, or 429/5xx with urllib3's retries spent. Anything else
# (a body that cannot be encoded, a bad URL) would fail the same on every replica.
PASSED_ON = (requests.ConnectionError, requests.Timeout,
             requests.exceptions.ChunkedEncodingError, requests.exceptions.RetryError)

#: Statuses retried (with backoff) before a request fails.
RETRIED_STATUSES = frozenset({429, 500, 502, 503, 504})
#: The longest ``Retry-After`` honoured, in seconds: a server asking for more is retried
#: after this long (the retries stay bounded in time).
RETRY_AFTER_CAP_S = 30.0
#: The longest wait between two tries.
BACKOFF_MAX_S = 30.0


class CappedRetry(Retry):
    """urllib3's ``Retry`` with ``Retry-After`` capped at :data:`RETRY_AFTER_CAP_S`."""

    def get_retry_after(self, response: Any) -> float | None:
        """The server's ``Retry-After`` in seconds, at most the cap."""
        after = super().get_retry_after(response)
        return None if after is None else min(after, RETRY_AFTER_CAP_S)


def retry_policy(retries: int, backoff_s: float) -> CappedRetry:
    """Bounded retries with exponential backoff (urllib3's: the first retry at once, the
    n-th after ``backoff_s`` × 2^(n-1) seconds, at most :data:`BACKOFF_MAX_S`) on connection and
    read errors and :data:`RETRIED_STATUSES`, for any method (POST too); no redirects. When
    the statuses' retries are spent the last answer is returned (its status is reported)."""
    return CappedRetry(total=retries, connect=retries, read=retries, status=retries,
                       other=0, redirect=0, allowed_methods=None,
                       status_forcelist=sorted(RETRIED_STATUSES), backoff_factor=backoff_s,
                       backoff_max=BACKOFF_MAX_S, raise_on_status=False,
                       raise_on_redirect=False, respect_retry_after_header=True)


class ReplicaIdentity(Record):
    """What one replica reported about itself at start: ``model_id`` (the served model's
    id in ``/models``: always ``served_model``, else the judge does not start; None when
    the server has no ``/models``), ``max_model_len``, ``owned_by`` and ``root`` (vLLM: the
    model it loaded) where listed, and ``version`` from the server's ``/version`` (vLLM;
    None when it has none). Never a key, never case text."""

    address: str
    model_id: str | None = None
    max_model_len: int | None = None
    owned_by: str | None = None
    root: str | None = None
    version: str | None = None


class DistributionTally(Record):
    """How many score distributions were read exact (coverage >= 0.999), partial (written,
    with coverage below that) or absent (none: see ``server_logprobs``)."""

    exact: int = 0
    partial: int = 0
    absent: int = 0


class ServerProvenance(Record):
    """A server judge's runtime identity, for the run's manifest: the ``replicas``' own
    report, and what the judging counted: ``distributions`` and, per replica, ``requests``
    (None when this process judged nothing: a probe before a Ray run, whose replicas send
    the requests from their own processes)."""

    replicas: list[ReplicaIdentity]
    top_logprobs: int
    min_coverage: float
    distributions: DistributionTally | None
    requests: list[ReplicaRequests] | None = None


def _reported(value: Any) -> str | None:
    """A string a server reported, kept when short and printable (it goes in the manifest)."""
    if isinstance(value, str) and 0 < len(value) <= 512 and value.isprintable():
        return value
    return None


def _reported_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 \
        else None


@dataclass
class _Replica:
    address: ServerAddress
    session: requests.Session
    identity: ReplicaIdentity | None = None


def failure_detail(exc: BaseException, where: str, tries: int) -> str:
    """One line for a request that raised: what happened, never the exception's text."""
    reason: BaseException | None = exc
    seen = 0
    while reason is not None and seen < 8:  # requests wraps urllib3's MaxRetryError
        if isinstance(reason, NewConnectionError):  # a ConnectTimeoutError to urllib3
            return f"server {where} could not be reached ({tries} tries)"
        if isinstance(reason, (requests.exceptions.ReadTimeout, ReadTimeoutError)):
            return f"server {where} did not answer within timeout_s ({tries} tries)"
        if isinstance(reason, (requests.exceptions.ConnectTimeout, ConnectTimeoutError)):
            return (f"server {where} did not accept a connection within connect_timeout_s "
                    f"({tries} tries)")
        if isinstance(reason, (requests.exceptions.SSLError, SSLError)):
            return (f"server {where}: TLS certificate verification failed (set ca_bundle to "
                    "the site's CA file)")
        if isinstance(reason, ProtocolError):
            return f"server {where} dropped the connection ({tries} tries)"
        nested = getattr(reason, "reason", None)
        if nested is None and reason.args and isinstance(reason.args[0], BaseException):
            nested = reason.args[0]
        reason = nested if isinstance(nested, BaseException) else reason.__context__
        seen += 1
    if isinstance(exc, requests.exceptions.ConnectionError):
        return f"server {where} could not be reached ({tries} tries)"
    return f"request to server {where} failed ({type(exc).__name__})"


class ServerBackend:
    """A judge behind an OpenAI-compatible chat-completions server (one or more replicas)."""

    name = "server"

    def __init__(self, judge_name: str, spec: ServerSettings, *, backoff_s: float = 0.5,
                 check_models: bool = True, cool_down_s: float = COOL_DOWN_S):
        """Check the addresses, read the API key, open a session per replica and (unless
        ``check_models`` is off) ask each replica's ``/models`` once. ``backoff_s``: the
        first retry's wait; ``cool_down_s``: how long a replica that failed a request is
        taken last (tests shorten both)."""
        self.judge_name = judge_name
        self.spec = spec
        self.max_model_len: int | None = spec.max_model_len
        self.in_flight = spec.in_flight
        self.tries = spec.retries + 1
        try:
            addresses = spec.addresses()
            proxy = (check_server_url(spec.proxy, spec.allow_hosts, setting="proxy").url
                     if spec.proxy is not None else None)
        except AddressRefused as exc:
            raise BackendUnavailable(f"judge {judge_name!r}: {exc}") from None
        if spec.ca_bundle is not None and not spec.ca_bundle.is_file():
            raise BackendUnavailable(f"judge {judge_name!r}: ca_bundle {spec.ca_bundle} is not "
                                     "a file")
        key = spec.api_key()
        pool = max(spec.in_flight or spec.batch_size, 1)
        self._replicas = [_Replica(address, self._session(key, proxy, pool, backoff_s))
                          for address in addresses]
        self._pool = ReplicaPool([a.url for a in addresses], cool_down_s=cool_down_s)
        self._lock = threading.Lock()
        self._schemas: dict[str, dict[str, Any]] = {}
        self._timeout = (spec.connect_timeout_s, spec.timeout_s)
        self._tally = DistributionTally()
        if check_models:
            for replica in self._replicas:
                self._check_models(replica)

    def _session(self, key: str | None, proxy: str | None, pool: int,
                 backoff_s: float) -> requests.Session:
        session = requests.Session()
        session.trust_env = False  # no proxy, CA bundle or netrc from the environment
        session.proxies = {"http": proxy, "https": proxy} if proxy else {}
        session.verify = str(self.spec.ca_bundle) if self.spec.ca_bundle else True
        if key is not None:
            session.headers["Authorization"] = f"Bearer {key}"
        adapter = HTTPAdapter(pool_connections=1, pool_maxsize=pool,
                              max_retries=retry_policy(self.spec.retries, backoff_s))
        session.mount("http://", adapter)
        session.mount("https://", adapter)
        return session

    def _check_models(self, replica: _Replica) -> None:
        """Refuse to start when a replica cannot be reached or does not list the served
        model (a server without ``/models`` is taken as it is)."""
        where = replica.address.url
        try:
            with replica.session.get(replica.address.endpoint("models"), timeout=self._timeout,
                                     allow_redirects=False) as response:
                status, body = response.status_code, response.content
        except requests.RequestException as exc:
            raise BackendUnavailable(f"judge {self.judge_name!r}: "
                                     f"{failure_detail(exc, where, self.tries)}") from None
        if status == 404:
            log.warning("server %s has no /models; served_model is not checked", where)
            replica.identity = ReplicaIdentity(address=where, version=self._version(replica))
            return
        if status != 200:
            raise BackendUnavailable(f"judge {self.judge_name!r}: server {where} answered "
                                     f"HTTP {status} to GET /models")
        try:
            listed = json.loads(body)["data"]
            ids = [m.get("id") for m in listed]
        except (ValueError, KeyError, TypeError, AttributeError):
            raise BackendUnavailable(f"judge {self.judge_name!r}: server {where}'s /models "
                                     "answer is not an OpenAI model list") from None
        if self.spec.served_model not in ids:
            shown = ", ".join(str(i) for i in ids[:10] if isinstance(i, str)) or "none"
            raise BackendUnavailable(f"judge {self.judge_name!r}: server {where} does not "
                                     f"serve {self.spec.served_model!r} (it serves: {shown}); "
                                     "set served_model")
        entry = next(m for m in listed if m.get("id") == self.spec.served_model)
        replica.identity = ReplicaIdentity(
            address=where, model_id=self.spec.served_model,
            max_model_len=_reported_int(entry.get("max_model_len")),
            owned_by=_reported(entry.get("owned_by")), root=_reported(entry.get("root")),
            version=self._version(replica))

    def _version(self, replica: _Replica) -> str | None:
        """The server's ``/version`` (at the address's root: vLLM answers there), or None
        when it has none or does not answer it (never a reason to stop)."""
        parts = urlsplit(replica.address.url)
        try:
            with replica.session.get(f"{parts.scheme}://{parts.netloc}/version",
                                     timeout=self._timeout, allow_redirects=False) as response:
                if response.status_code != 200:
                    return None
                answer = json.loads(response.content)
        except (requests.RequestException, ValueError):
            return None
        return _reported(answer.get("version")) if isinstance(answer, dict) else None

    def provenance(self, *, judged: bool = True) -> dict[str, Any]:
        """What the replicas reported at start, the distributions' tally and what each
        replica did with the requests (a :class:`ServerProvenance`, as JSON), for the run's
        manifest. ``judged`` False: this backend only probed the servers (the cases are
        judged in other processes), so the counts are None, not zeros."""
        with self._lock:
            tally = self._tally
        return ServerProvenance(
            replicas=[r.identity or ReplicaIdentity(address=r.address.url)
                      for r in self._replicas],
            top_logprobs=self.spec.top_logprobs, min_coverage=self.spec.min_coverage,
            distributions=tally if judged else None,
            requests=self._pool.requests() if judged else None).to_json()

    def score_distributions(self, json_schema: str, generations: Sequence[Generation],
                            anchors: Sequence[Sequence[ScoreAnchor]],
                            ) -> list[list[ValueDistribution | None]]:
        """Each anchor's distribution read from the top log-probabilities returned with its
        verdict (:mod:`evaluator.judges.backends.server_logprobs`); None where absent."""
        out = [distributions(g.text, g.token_logprobs, wanted, self.spec.min_coverage)
               for g, wanted in zip(generations, anchors, strict=True)]
        found = [d for per in out for d in per]
        exact = sum(1 for d in found if d is not None and d.coverage >= EXACT_COVERAGE)
        partial = sum(1 for d in found if d is not None) - exact
        with self._lock:
            self._tally = DistributionTally(exact=self._tally.exact + exact,
                                            partial=self._tally.partial + partial,
                                            absent=self._tally.absent + len(found) - exact
                                            - partial)
        return out

    def _schema(self, json_schema: str) -> dict[str, Any]:
        schema = self._schemas.get(json_schema)
        if schema is None:
            schema = self._schemas[json_schema] = json.loads(constraint_schema(json_schema))
        return schema

    def request_one(self, chat: Chat, schema: Mapping[str, Any], sampling: Sampling,
                    chat_template_kwargs: Mapping[str, Any] | None,
                    stop: threading.Event | None = None) -> Generation:
        """One chat sent to the least busy replica, and on to the next replica not yet
        tried while it fails for a reason another replica may not share (:meth:`_send`);
        never raises (a failure is an ``error`` generation naming each replica's). Once
        ``stop`` is set (the stream was closed: the run stopped), a failed request is not
        sent on: its result would be dropped, and the case text sent again for nothing."""
        tried: list[int] = []
        failures: list[str] = []
        while not (tried and stop is not None and stop.is_set()) and (
                index := self._pool.take(tried)) is not None:
            try:
                generation, passes_on, reached = self._send(
                    self._replicas[index], chat, schema, sampling, chat_template_kwargs)
            finally:
                self._pool.release(index)
            if not passes_on:
                if reached:  # a request that failed before it was sent credits no replica
                    self._pool.answered(index, took_over=bool(tried))
                return generation
            tried.append(index)
            failures.append(generation.detail or f"server {self._pool.addresses[index]} failed")
            if self._pool.failed(index) and len(self._replicas) > 1:
                log.warning("%s; other replicas are asked first for the next %g s",
                            failures[-1], self._pool.cool_down_s)
        return Generation(text=None, finish_reason="error", detail="; ".join(failures))

    def _send(self, replica: _Replica, chat: Chat, schema: Mapping[str, Any],
              sampling: Sampling, chat_template_kwargs: Mapping[str, Any] | None,
              ) -> tuple[Generation, bool, bool]:
        """The generation of one chat sent to ``replica``, whether it failed for a reason
        another replica may not share, so that another may be asked (the connection:
        refused, dropped, a timeout, TLS; or 429/5xx with the retries spent), and whether
        the replica was reached at all (a request that cannot be built or encoded never
        is). A 4xx or an answer that does not parse is the request's own: any replica would
        give the same."""
        where = replica.address.url
        try:
            body = chat_request(chat, schema, sampling, served_model=self.spec.served_model,
                                structured_output=self.spec.structured_output,
                                chat_template_kwargs=chat_template_kwargs,
                                top_logprobs=self.spec.top_logprobs)
            with replica.session.post(replica.address.endpoint("chat/completions"), json=body,
                                      timeout=self._timeout,
                                      allow_redirects=False) as response:
                status, content = response.status_code, response.content
        except Exception as exc:  # noqa: BLE001 - a failure is this request's record, not the run's
            passes_on = isinstance(exc, PASSED_ON)
            return (Generation(text=None, finish_reason="error",
                               detail=failure_detail(exc, where, self.tries)),
                    passes_on, passes_on)
        generation = parse_answer(status, content, where)
        if generation.finish_reason == "error" and status in RETRIED_STATUSES:
            generation = Generation(text=None, finish_reason="error",
                                    detail=f"{generation.detail} ({self.tries} tries)")
        return generation, generation.finish_reason == "error" and (status == 429
                                                                     or status >= 500), True

    @property
    def addresses(self) -> list[str]:
        """The replicas' base URLs, in the order of models.yaml."""
        return [r.address.url for r in self._replicas]

    def ask_models(self, index: int) -> tuple[int, bytes]:
        """(status, body) of replica ``index``'s ``GET /models`` (``evaluator doctor``);
        raises what ``requests`` raises (see :func:`failure_detail`)."""
        replica = self._replicas[index]
        with replica.session.get(replica.address.endpoint("models"), timeout=self._timeout,
                                 allow_redirects=False) as response:
            return response.status_code, response.content

    def ask_chat(self, index: int, chat: Chat, schema: Mapping[str, Any],
                 sampling: Sampling) -> Generation:
        """One chat sent to replica ``index`` alone (``evaluator doctor``); never raises."""
        return self._send(self._replicas[index], chat, schema, sampling, None)[0]

    def generate(self, chats: Sequence[Chat], json_schema: str, sampling: Sampling,
                 chat_template_kwargs: Mapping[str, Any] | None = None) -> list[Generation]:
        """Every chat sent (``in_flight``, or all of them, at once); generations in order."""
        requests_ = [Request(i, chat, sampling) for i, chat in enumerate(chats)]
        results: list[Generation | None] = [None] * len(chats)
        for key, generation in self.stream(requests_, json_schema, chat_template_kwargs,
                                           self.in_flight or max(len(chats), 1)):
            results[key] = generation  # type: ignore[index]
        return [g for g in results if g is not None]

    def stream(self, requests: Iterable[Request], json_schema: str,
               chat_template_kwargs: Mapping[str, Any] | None, in_flight: int,
               ) -> Iterator[tuple[Hashable, Generation]]:
        """(key, generation) as each request ends, ``in_flight`` (the judge's own
        ``in_flight`` if set) open at once; ``requests`` is read as slots free up. Closing
        early cancels the requests not yet sent; those already sent end on their threads
        and are dropped."""
        width = max(self.in_flight or in_flight, 1)
        schema = self._schema(json_schema)
        kwargs = dict(chat_template_kwargs or {})
        source = iter(requests)
        stop = threading.Event()
        executor = ThreadPoolExecutor(max_workers=width, thread_name_prefix="judge-server")
        running: dict[Future[Generation], Hashable] = {}
        exhausted = False
        failure: Exception | None = None
        try:
            while True:
                while not exhausted and len(running) < width:
                    try:
                        request = next(source, None)
                    except Exception as exc:  # noqa: BLE001 - raised once those in flight end
                        failure, request = exc, None
                    if request is None:
                        exhausted = True
                        break
                    future = executor.submit(self.request_one, request.chat, schema,
                                             request.sampling, kwargs, stop)
                    running[future] = request.key
                if not running:
                    if failure is not None:
                        raise failure
                    return
                done, _ = wait(list(running), return_when=FIRST_COMPLETED)
                for future in done:
                    yield running.pop(future), future.result()
        finally:
            stop.set()
            for future in running:
                future.cancel()
            executor.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        """Close the replicas' sessions (their pooled connections)."""
        for replica in getattr(self, "_replicas", ()):
            replica.session.close()
