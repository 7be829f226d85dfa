"""``--engine ray``: the judging step of a run, spread over judge replicas on a Ray cluster.

The peer of :mod:`evaluator.run.local_engine`: the validation/resume pass before it and the
summary after it are :func:`evaluator.run.runner.evaluate`'s, and both engines drive the same
public judging step (:mod:`evaluator.run.judging`). Ray Data does the data-parallel part:

- **Input, streamed.** One read task, pinned to the driver's node (the input file is read
  where the run was started, as in the local engine), streams the input file with the same
  row functions (:func:`evaluator.data.cases.iter_cases`) and forms the batches with the same
  :func:`evaluator.run.judging.todo_batches` over this run's ``todo`` ids. Each batch is one row
  of the dataset (the batch's cases as JSON), so every replica call judges exactly the batch
  the local engine would have: same cases, same order, same padding. Ray Data's streaming
  executor pulls from the read generator only as fast as replicas take batches (bounded
  memory; nothing is loaded whole).
- **Replicas.** ``map_batches`` with an actor pool (``ActorPoolStrategy(size=replicas)``,
  ``num_gpus``/``num_cpus`` per replica). Each actor loads the judge once in ``__init__`` and
  turns each batch into result records with :func:`evaluator.run.judging.judge_batch`, returned
  as JSON strings.
- **Writing, exactly once.** The driver iterates the output as it arrives and appends each
  record with :class:`evaluator.data.results.ResultWriter` (flushed per record), so a crash of
  the driver loses only in-flight work and a re-run resumes as usual. It writes a case id
  only while it is still in this run's ``todo`` set, so a batch delivered twice (a retried
  task) can never produce a second record. A replica that dies loses only its in-flight
  batch: Ray restarts the actor (``max_restarts``) and re-sends the batch
  (``max_task_retries``).
- **Provenance.** A judge reached over HTTP is probed once from the driver before Ray
  starts (:func:`describe_judge`), so the manifest records what its servers report, and a
  resume against another model under the same name is refused, as in the local engine.
"""

from __future__ import annotations

import json
import logging
import math
import signal
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import ray
import ray.exceptions
from ray.data import ActorPoolStrategy, DataContext, Datasource, ReadTask
from ray.data.block import BlockMetadata
from ray.util.annotations import RayDeprecationWarning

from evaluator.common.errors import UserError
from evaluator.data.case_ids import CaseIds
from evaluator.data.cases import Case, InputProblem
from evaluator.data.results import ResultRecord, ResultWriter
from evaluator.judges.backends import BACKENDS, DescribedBackend, load_backend
from evaluator.judges.backends.base import Backend
from evaluator.judges.offline import OFFLINE_ENV, force_offline
from evaluator.rubrics.schema import build_output_model
from evaluator.run.engines import RayClusterError, RayOptions, RayRunFailed
from evaluator.run.judging import (
    ProgressCallback,
    RunSetup,
    judge_batch,
    reject_too_long,
    todo_batches,
    write_problems,
)
from evaluator.run.resume import ResumePlan

log = logging.getLogger(__name__)

ItemsFactory = Callable[[], Iterator[Case | InputProblem]]
BackendFactory = Callable[[str, Any], Backend]
DescribedCallback = Callable[[dict[str, Any]], None]


def encode_batch(batch: list[Case]) -> str:
    """A batch of cases as the JSON text of one dataset row."""
    return json.dumps([{"id": c.case_id, "line": c.line, "fields": c.fields} for c in batch])


def decode_batch(text: str) -> list[Case]:
    """The cases of one dataset row (:func:`encode_batch`'s text)."""
    return [Case(c["id"], c["line"], c["fields"]) for c in json.loads(text)]


class CaseBatches(Datasource):
    """The batches still to judge, as a Ray dataset of one row per batch (``cases``: the
    batch as JSON), read by one streaming task on the driver's node."""

    def __init__(self, items: ItemsFactory, todo: CaseIds, size: int):
        super().__init__()
        self._items = items
        self._todo = todo
        self._size = size

    @property
    def supports_distributed_reads(self) -> bool:
        """False: Ray runs the read on the driver's node, where the input file is."""
        return False

    def get_name(self) -> str:
        """The operator's name in Ray's logs."""
        return "CaseBatches"

    def estimate_inmemory_data_size(self) -> int | None:
        """Unknown before reading (case sizes vary)."""
        return None

    def get_read_tasks(self, parallelism: int, per_task_row_limit: int | None = None,
                       data_context: DataContext | None = None) -> list[ReadTask]:
        """One read task: the input is streamed once, in file order (batches must be the
        local engine's)."""
        items, todo, size = self._items, self._todo, self._size

        def read() -> Iterator[pa.Table]:
            # A copy: the task may run again after a failure and must start from the same set.
            for batch in todo_batches(items(), todo.copy(), size):
                yield pa.table({"cases": [encode_batch(batch)]})

        batches = math.ceil(len(todo) / size)
        metadata = BlockMetadata(num_rows=batches, size_bytes=None, input_files=None,
                                 exec_stats=None)
        return [ReadTask(read, metadata, per_task_row_limit=per_task_row_limit)]


class JudgeReplica:
    """One judge replica (a Ray actor): loads the judge once, then judges whole batches."""

    def __init__(self, setup: RunSetup, backend_factory: BackendFactory | None):
        force_offline()
        # The output model is a class built at run time: rebuilt here from the rubric.
        self.setup = replace(setup, output_model=build_output_model(setup.rubric))
        self.backend = (backend_factory or load_backend)(setup.judge_name, setup.spec)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Each input row is one batch of cases; each output row one record as JSON."""
        records = [record.model_dump_json()
                   for text in batch["cases"]
                   for record in judge_batch(decode_batch(str(text)), self.setup,
                                             self.backend)]
        return {"record": np.array(records, dtype=object)}


@contextmanager
def _connected(options: RayOptions) -> Iterator[None]:
    """Use the cluster this process is connected to, or connect for the run (and
    disconnect after). A private local cluster starts without a dashboard, with the
    offline switches in every worker's environment."""
    if ray.is_initialized():
        yield
        return
    kwargs: dict[str, Any] = {
        "address": options.address or "local",
        "runtime_env": {"env_vars": dict(OFFLINE_ENV)},
        # The caller's choice (the CLI: quiet unless -vv).
        "logging_level": logging.getLogger("ray").getEffectiveLevel(),
    }
    if options.address is None:
        # A private single-node cluster: no dashboard, and the node is 127.0.0.1, so Ray
        # does not look for the host's address by routing towards a public resolver.
        kwargs.update(include_dashboard=False, _node_ip_address="127.0.0.1")
    # ray.init replaces the SIGTERM handler with its own (exit at once). A handler the
    # caller installed wins: the CLI's turns SIGTERM into an interrupt, which stops the run
    # as Ctrl-C does (records kept, manifest "interrupted") and shuts Ray down below.
    main = threading.current_thread() is threading.main_thread()
    sigterm = signal.getsignal(signal.SIGTERM) if main else None
    ray.init(**kwargs)
    if callable(sigterm):
        signal.signal(signal.SIGTERM, sigterm)
    try:
        yield
    finally:
        ray.shutdown()


def _check_resources(options: RayOptions) -> None:
    """Refuse a pool the cluster can never hold (Ray would wait for it forever)."""
    total = ray.cluster_resources()
    for name, each in (("GPU", options.gpus_per_replica), ("CPU", options.cpus_per_replica)):
        needed = options.replicas * each
        if needed > total.get(name, 0.0) + 1e-9:
            raise RayClusterError(
                f"--replicas {options.replicas} with {each:g} {name}(s) each needs {needed:g} "
                f"{name}(s); the Ray cluster has {total.get(name, 0.0):g}. Use fewer replicas "
                "or add nodes.")


def _user_cause(exc: BaseException) -> BaseException | None:
    """The evaluator error (bad judge config, missing install, unreadable input) that a
    replica or the read task raised, unwrapped from Ray's exception, if that is what
    happened."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, UserError) and not isinstance(current, ray.exceptions.RayError):
            return current
        todo += [current.__cause__, current.__context__, getattr(current, "cause", None)]
    return None


def describe_judge(setup: RunSetup, on_described: DescribedCallback) -> None:
    """Probe a judge reached over HTTP once from the driver, before any replica starts, and
    hand what it reports to ``on_described`` (the manifest records it; a server now serving
    another model under the same name is refused there, before a case is sent). The probe
    is the judge's own start (:func:`evaluator.judges.backends.load_backend`: the same PHI
    guard, the same ``/models`` and ``/version`` requests its replicas make), closed at once;
    its counts are unknown (``judged=False``): the replicas judge in their own processes. A
    judge with a model of its own is not loaded here (each replica loads it)."""
    if not BACKENDS[setup.spec.backend].server:
        return
    backend = load_backend(setup.judge_name, setup.spec)
    try:
        if isinstance(backend, DescribedBackend):
            on_described(backend.provenance(judged=False))
    finally:
        backend.close()


def judge_all(setup: RunSetup, plan: ResumePlan, items: ItemsFactory, output_path: Path,
              size: int, progress: ProgressCallback | None, strict: bool,
              options: RayOptions, on_described: DescribedCallback | None = None) -> None:
    """The Ray counterpart of :func:`evaluator.run.local_engine.judge_all`: write the input problems'
    records, then judge ``plan.todo`` in batches of ``size`` on ``options.replicas``
    replicas, appending each record as it arrives. ``items`` makes a fresh stream of the
    input (it is read again, on the driver's node); each replica builds its backend with
    ``options.backend_factory`` (default :func:`evaluator.judges.backends.load_backend`).
    ``on_described`` is given what a judge reached over HTTP reports, probed from the
    driver before Ray starts (:func:`describe_judge`)."""
    with ResultWriter(output_path) as writer:
        write_problems(writer, setup, plan, progress)
        if not plan.todo:
            return
        if on_described is not None:
            describe_judge(setup, on_described)
        remaining = plan.todo.copy()
        with _connected(options):
            _check_resources(options)
            try:
                _stream(setup, plan.todo.copy(), items, size, options, writer, remaining,
                        progress, strict)
            except ray.exceptions.RayError as exc:
                cause = _user_cause(exc)
                if cause is not None:
                    raise cause from None
                if getattr(exc, "actor_init_failed", False):
                    # Raised before the replica saw any case, so its text is no case's.
                    # Ray keeps only the message: its last line is the error itself.
                    error = str(exc).strip().splitlines()[-1]
                    raise RayClusterError(f"a judge replica could not start: {error}") from None
                raise RayRunFailed(f"the Ray run stopped ({type(exc).__name__}; Ray's logs "
                                   f"have the details); finished results are in {output_path}: "
                                   "re-run the same command to resume") from None
        if remaining:
            raise RayRunFailed(f"{len(remaining)} case(s) came back from no replica; finished "
                               f"results are in {output_path}: re-run the same command to "
                               "judge them")


def _stream(setup: RunSetup, todo: CaseIds, items: ItemsFactory, size: int,
            options: RayOptions, writer: ResultWriter, remaining: CaseIds,
            progress: ProgressCallback | None, strict: bool) -> None:
    context = DataContext.get_current()
    with ExitStack() as stack:
        stack.callback(setattr, context, "enable_progress_bars", context.enable_progress_bars)
        context.enable_progress_bars = False  # the caller shows progress (the CLI's bar)
        dataset = _pipeline(setup, todo, items, size, options)
        blocks = iter(dataset.iter_batches(batch_size=None, batch_format="numpy"))
        # Closed explicitly on every way out (Ctrl-C, --strict): the executor then stops the
        # replicas at once instead of whenever the iterator is garbage-collected.
        stack.callback(getattr(blocks, "close", lambda: None))
        for block in blocks:
            arrived = [_write_once(str(text), writer, remaining) for text in block["record"]]
            written = [record for record in arrived if record is not None]
            if progress is not None and written:
                progress(len(written))
            if strict:
                reject_too_long(written)


def _write_once(text: str, writer: ResultWriter, remaining: CaseIds) -> ResultRecord | None:
    """Append a record unless its case was already written in this run (a batch that came
    back twice, e.g. after a retry): then None."""
    record = ResultRecord.model_validate_json(text)
    if record.case_id not in remaining:
        log.warning("case %r came back twice (a retried batch); kept the first record",
                    record.case_id)
        return None
    remaining.discard(record.case_id)
    writer.write(record)
    return record


def _pipeline(setup: RunSetup, todo: CaseIds, items: ItemsFactory, size: int,
              options: RayOptions) -> ray.data.Dataset:
    """Read the batches on the driver's node, judge them on the replica pool."""
    batches = ray.data.read_datasource(
        CaseBatches(items, todo, size),
        num_cpus=0,  # reading is light; the CPUs are the replicas' (a 0-CPU head works too)
    )
    with warnings.catch_warnings():
        # Ray 2.60-2.63 take actor restarts and task retries only as the deprecated
        # ``**ray_remote_args`` of map_batches (removed in 2.64, hence the pin). Without
        # them Ray Data restarts and retries forever: a batch that kills every replica
        # would loop instead of failing the run.
        warnings.filterwarnings("ignore", message=".*ray_remote_args.* is deprecated",
                                category=RayDeprecationWarning)
        return batches.map_batches(
            JudgeReplica,
            fn_constructor_kwargs={"setup": replace(setup, output_model=None),
                                   "backend_factory": options.backend_factory},
            batch_size=1,  # one row = one whole batch of cases
            compute=ActorPoolStrategy(size=options.replicas),
            num_cpus=options.cpus_per_replica,
            num_gpus=options.gpus_per_replica or None,
            max_restarts=options.max_restarts,
            max_task_retries=options.max_task_retries,
        )
