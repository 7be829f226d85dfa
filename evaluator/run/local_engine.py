"""``engine="local"``: the judging step of a run, in this process, with one backend.

The peer of :mod:`evaluator.run.ray_engine`: both take the same :class:`RunSetup` and
:class:`ResumePlan` from :func:`evaluator.run.runner.evaluate`, write the input problems'
records first, then judge ``plan.todo``: streamed through the engine
(:func:`evaluator.run.streaming.judge_stream`) when the backend batches continuously and the
judge does not say ``stream: false``, else in batches with
:func:`evaluator.run.judging.judge_batch`. Each record is appended as it is made (flushed one
by one, so a crash loses only the cases in flight).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from evaluator.data.cases import Case, InputProblem
from evaluator.data.results import ResultRecord, ResultWriter
from evaluator.judges.backends import Backend, CpuThreadsBackend, StreamingBackend, load_backend
from evaluator.judges.backends.torch_threads import ThreadChoice
from evaluator.run.judging import (
    ProgressCallback,
    RunSetup,
    judge_batch,
    reject_too_long,
    todo_batches,
    write_problems,
)
from evaluator.run.resume import ResumePlan
from evaluator.run.streaming import judge_stream


def judge_all(setup: RunSetup, plan: ResumePlan, items: Iterator[Case | InputProblem],
              output_path: Path, size: int, progress: ProgressCallback | None, strict: bool,
              backend: Backend | None = None,
              on_threads: Callable[[ThreadChoice], None] | None = None,
              on_loaded: Callable[[Backend], None] | None = None) -> None:
    """Write the input problems' records, then judge ``plan.todo`` (streamed from
    ``items``) ``size`` at a time: streamed with ``size`` requests in flight where the
    backend can (:func:`streams`), else in batches of ``size``. ``backend``: a ready backend (kept open), else the
    judge's own is loaded here and closed at the end. ``strict``: the first case too long
    for the judge stops the run (:class:`evaluator.run.judging.InputRejected`).
    ``on_threads`` is told the judge's torch thread count once it has loaded, when it
    computes on the CPU; ``on_loaded`` is given the backend once it is ready (the
    manifest records what it reports about itself)."""
    owned_backend = backend is None
    with ResultWriter(output_path) as writer:
        write_problems(writer, setup, plan, progress)
        if not plan.todo:
            return
        if backend is None:
            backend = load_backend(setup.judge_name, setup.spec)
        try:
            if on_loaded is not None:
                on_loaded(backend)
            if (on_threads is not None and isinstance(backend, CpuThreadsBackend)
                    and backend.threads is not None):
                on_threads(backend.threads)
            for records in _judged(setup, plan, items, size, backend):
                for record in records:
                    writer.write(record)
                if progress is not None:
                    progress(len(records))
                if strict:
                    reject_too_long(records)
        finally:
            if owned_backend:
                backend.close()


def streams(setup: RunSetup, backend: Backend) -> bool:
    """Whether a run streams its cases: the backend batches continuously and the judge's
    ``stream`` setting does not turn it off."""
    return isinstance(backend, StreamingBackend) and setup.spec.stream is not False


def _judged(setup: RunSetup, plan: ResumePlan, items: Iterator[Case | InputProblem],
            size: int, backend: Backend) -> Iterator[list[ResultRecord]]:
    """The records of ``plan.todo``, a batch at a time or, streamed, a case at a time."""
    if streams(setup, backend):
        cases = (batch[0] for batch in todo_batches(items, plan.todo, 1))
        for record in judge_stream(cases, setup, backend, size):  # type: ignore[arg-type]
            yield [record]
    else:
        for batch in todo_batches(items, plan.todo, size):
            yield judge_batch(batch, setup, backend)
