"""``engine="local"``: the judging step of a run, in this process, with one backend.

The peer of :mod:`evaluator.run.ray_engine`: both take the same :class:`RunSetup` and
:class:`ResumePlan` from :func:`evaluator.run.runner.evaluate`, write the input problems'
records first, then judge ``plan.todo`` in batches with :func:`evaluator.run.judging.judge_batch`,
appending each record as it is made (flushed one by one, so a crash loses only the batch in
flight).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from evaluator.data.cases import Case, InputProblem
from evaluator.data.results import ResultWriter
from evaluator.judges.backends import Backend, load_backend
from evaluator.run.judging import (
    ProgressCallback,
    RunSetup,
    judge_batch,
    reject_too_long,
    todo_batches,
    write_problems,
)
from evaluator.run.resume import ResumePlan


def judge_all(setup: RunSetup, plan: ResumePlan, items: Iterator[Case | InputProblem],
              output_path: Path, size: int, progress: ProgressCallback | None, strict: bool,
              backend: Backend | None = None) -> None:
    """Write the input problems' records, then judge ``plan.todo`` (streamed from
    ``items``) in batches of ``size``. ``backend``: a ready backend (kept open), else the
    judge's own is loaded here and closed at the end. ``strict``: the first case too long
    for the judge stops the run (:class:`evaluator.run.judging.InputRejected`)."""
    owned_backend = backend is None
    with ResultWriter(output_path) as writer:
        write_problems(writer, setup, plan, progress)
        if not plan.todo:
            return
        if backend is None:
            backend = load_backend(setup.judge_name, setup.spec)
        try:
            for batch in todo_batches(items, plan.todo, size):
                batch_records = judge_batch(batch, setup, backend)
                for record in batch_records:
                    writer.write(record)
                if progress is not None:
                    progress(len(batch))
                if strict:
                    reject_too_long(batch_records)
        finally:
            if owned_backend:
                backend.close()
