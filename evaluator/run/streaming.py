"""Cases streamed through an engine that batches continuously (vLLM): no barrier per batch.

:func:`judge_stream` hands a :class:`~evaluator.judges.backends.StreamingBackend` one
request per prompt of each case (a pair's two orders, ``--samples`` k times), reading the
input only as the engine frees a slot, and makes a case's record the moment its last
generation ends, with the rubric kind's ``finish`` — the same function a batch ends
in, so a streamed case gets the record a batched one does (only ``batch_seconds``, here
the case's own time in the engine, and ``batch_size``, the requests in flight, differ).

A crash loses at most the cases in flight: every record is written as it is made. A backend
that raises gives the cases in flight a ``backend_error`` record, as a failing batch does,
and the stream starts again with the next case.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Hashable, Iterator
from dataclasses import dataclass, field, replace

from evaluator.data.cases import Case
from evaluator.data.results import ResultRecord
from evaluator.judges.backends import Generation, Request, StreamingBackend
from evaluator.run.judging import RunSetup, case_bases

log = logging.getLogger(__name__)


@dataclass
class _Open:
    """A case with requests in the engine: its generations so far, per sample and prompt."""

    case: Case
    chats: list[list[dict[str, str]]]
    runs: list[list[Generation | None]]
    started: float
    left: int = field(init=False)

    def __post_init__(self) -> None:
        self.left = sum(len(run) for run in self.runs)


class _Flight:
    """The cases of one stream that are in the engine, keyed by their number."""

    def __init__(self, setup: RunSetup, in_flight: int):
        self.setup = setup
        self.in_flight = in_flight
        self.open: dict[int, _Open] = {}
        self.input_error: Exception | None = None
        self._numbers = itertools.count()

    def requests(self, cases: Iterator[Case]) -> Iterator[Request]:
        """Each case's requests, a case opened as its first request is taken. An error
        reading or rendering the next case ends the requests and is kept in
        ``input_error``: :func:`judge_stream` raises it, unchanged, once the cases in flight
        are written (as a batched run raises it), so the backend never mistakes it for its
        own."""
        setup = self.setup
        while True:
            try:
                case = next(cases, None)
                if case is None:
                    return
                chats = setup.chats(case)
            except Exception as exc:
                self.input_error = exc
                return
            number = next(self._numbers)
            self.open[number] = _Open(case, chats, [[None] * len(chats)
                                                    for _ in range(setup.samples)],
                                      time.perf_counter())
            for k in range(setup.samples):
                sampling = replace(setup.sampling, seed=setup.sampling.seed + k)
                for j, chat in enumerate(chats):
                    yield Request((number, k, j), chat, sampling)

    def done(self, key: Hashable, generation: Generation,
             backend: StreamingBackend) -> ResultRecord | None:
        """Take one generation; the case's record when it was the case's last."""
        number, k, j = key  # type: ignore[misc]
        case = self.open[number]
        case.runs[k][j] = generation
        case.left -= 1
        if case.left:
            return None
        del self.open[number]
        elapsed = time.perf_counter() - case.started
        bases = case_bases([case.case], [case.chats], self.setup, self.in_flight)
        runs = [list(run) for run in case.runs]
        if any(g is None for run in runs for g in run):  # a key handed back twice
            raise RuntimeError("the engine returned a request twice")
        return self.setup.kind.finish([case.case], self.setup, backend, runs, [elapsed],
                                      bases)[0]

    def fail(self, reason: str) -> list[ResultRecord]:
        """``backend_error`` records for every case still in the engine."""
        cases = list(self.open.values())
        self.open.clear()
        bases = case_bases([c.case for c in cases], [c.chats for c in cases], self.setup,
                           self.in_flight)
        return [ResultRecord(status="backend_error", reason=reason, **base) for base in bases]


def judge_stream(cases: Iterator[Case], setup: RunSetup, backend: StreamingBackend,
                 in_flight: int) -> Iterator[ResultRecord]:
    """One record per case, in the order the cases finish, with at most ``in_flight``
    requests in the engine."""
    while True:
        flight = _Flight(setup, in_flight)
        stream = backend.stream(flight.requests(cases), setup.schema_text,
                                setup.template_kwargs, in_flight)
        try:
            while True:
                try:
                    key, generation = next(stream)
                except StopIteration:
                    if flight.open:  # a backend that dropped requests: never silently
                        yield from flight.fail("the engine finished without this case's "
                                               "verdict; re-run the same command to judge it")
                    if flight.input_error is not None:
                        raise flight.input_error from None
                    return
                except Exception as exc:  # one failing engine must not kill the run
                    log.error("backend error with %d case(s) in flight: %s",
                              len(flight.open), type(exc).__name__)
                    if not flight.open:
                        raise
                    yield from flight.fail(
                        f"backend raised {type(exc).__name__}; see the log for details. "
                        "Re-run the same command to judge these cases again.")
                    break
                record = flight.done(key, generation, backend)
                if record is not None:
                    yield record
        finally:
            stream.close()

