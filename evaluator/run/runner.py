"""A run: wire cases, rubric and judge together, write one record per case, then a summary.

:func:`evaluate` validates the input and plans the resume before the judge loads
(:mod:`evaluator.run.resume`), writes the manifest (:mod:`evaluator.run.manifest`), hands the
cases still to judge to an engine (:mod:`evaluator.run.local_engine` or
:mod:`evaluator.run.ray_engine`, both over :mod:`evaluator.run.judging`), and summarises the
results file (:mod:`evaluator.analysis.summary.summary`). This module does no I/O to the terminal;
the CLI passes callbacks.
"""

from __future__ import annotations

import errno
import importlib
import json
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any, TypeGuard

from evaluator.analysis.kinds import analysis_kind
from evaluator.analysis.panel import reduction_of
from evaluator.analysis.summary.records import RunSummary
from evaluator.analysis.summary.summary import summary_path_for, write_summary
from evaluator.common.errors import UserError
from evaluator.data.cases import Case, InputProblem, UniqueIds, iter_cases
from evaluator.data.files import check_path_name, exclusive_lock
from evaluator.data.pairs import iter_pairs
from evaluator.data.results import iter_records, one_rubric
from evaluator.judges.backends import Backend, DescribedBackend, Sampling
from evaluator.judges.backends.base import BackendUnavailable
from evaluator.judges.backends.torch_threads import ThreadChoice
from evaluator.judges.models_file import MAX_SEED, JudgeConfigError, resolve_judge, with_threads
from evaluator.rubrics.load import load_rubric
from evaluator.rubrics.rubric import Rubric
from evaluator.rubrics.schema import build_output_model, max_new_tokens, output_json_schema
from evaluator.run import local_engine
from evaluator.run.engines import ENGINES, RayOptions
from evaluator.run.judging import InputRejected, RunSetup
from evaluator.run.kinds import run_kind
from evaluator.run.manifest import (
    build_settings,
    lock_path_for,
    manifest_path_for,
    model_dir_for,
    model_fingerprint,
    new_manifest,
    now,
    read_manifest,
    run_entry,
    save_manifest,
    served_model_changed,
    settings_hash,
)
from evaluator.run.preflight import check_model_folder, check_output_path, template_errors
from evaluator.run.resume import (
    ResumeConflict,
    apply_plan,
    check_output_paths,
    move_aside,
    plan_resume,
)
from evaluator.run.task import Judge, RunOptions, RunStart, Task

log = logging.getLogger(__name__)


class OutputWriteFailed(UserError, RuntimeError):
    """The disk (or the quota) filled up while the run was writing: it stopped, the records
    written so far are kept, and the manifest says ``failed``. Free some space and re-run
    the same command to resume (exit code 1)."""

    exit_code = 1


RAY_INSTALL_HINT = "pip install 'evaluator[ray]'"
_RAY_MODULES = ("ray", "pyarrow", "numpy")  # Ray Data's own imports

# errno values that mean "no room left to write".
_NO_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
# Trailing blanks written into the manifest at the start of a run: its final update (end
# time, status) then fits in the space the file already holds, so a run stopped by a full
# disk can still record that it failed (see save_manifest). JSON ignores them.
_MANIFEST_SPARE = 256


def disk_full(exc: BaseException) -> TypeGuard[OSError]:
    """``exc`` says there is no room left to write (disk full, quota, file too large)."""
    return isinstance(exc, OSError) and exc.errno in _NO_SPACE


def _disk_full_error(output_path: Path, exc: BaseException) -> OutputWriteFailed:
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "disk full"
    return OutputWriteFailed(f"cannot write {output_path} and the files beside it ({reason}); "
                             "the results written so far are kept: free some space and re-run "
                             "the same command to resume")


def load_ray_engine() -> ModuleType:
    """:mod:`evaluator.run.ray_engine`, or :class:`BackendUnavailable` naming the install when
    Ray (or its ``data`` part) is missing."""
    try:
        # Ray, pyarrow and numpy at its top: loaded here, only when --engine ray is chosen
        return importlib.import_module("evaluator.run.ray_engine")
    except ImportError as exc:
        missing = exc.name or "ray"
        if missing.partition(".")[0] not in _RAY_MODULES:
            raise  # a bug in this package, not a missing install
        raise BackendUnavailable(f"--engine ray needs Ray, which is not installed (no module "
                                 f"{missing!r}); install it with: {RAY_INSTALL_HINT}") from None


@contextmanager
def _stop_on_full_disk(output_path: Path) -> Iterator[None]:
    """A full disk while writing becomes :class:`OutputWriteFailed` (other errors pass)."""
    try:
        yield
    except OSError as exc:
        if disk_full(exc):
            raise _disk_full_error(output_path, exc) from None
        raise


@dataclass(frozen=True)
class RunResult:
    """What a finished run produced."""

    results_path: Path
    summary_path: Path
    summary: RunSummary

    @property
    def failed(self) -> int:
        """Number of cases without a verdict."""
        return len(self.summary.failed_case_ids)


def _panel_settings(samples: int, reduce: str, temperature: float,
                    seed: int = 0) -> dict[str, Any] | None:
    """The self-consistency settings (part of the settings hash), None for one sample."""
    if not 0.0 <= temperature <= 2.0:
        raise JudgeConfigError(f"temperature {temperature:g} is outside 0..2")
    if samples < 1:
        raise JudgeConfigError(f"samples must be at least 1, not {samples}")
    if not 0 <= seed <= MAX_SEED - (samples - 1):
        # Sample k is seeded with seed + k: the last one must still be a valid seed.
        raise JudgeConfigError(f"sampling.seed {seed} is out of range: with {samples} "
                               f"sample(s) it must be between 0 and {MAX_SEED - (samples - 1)}")
    reduction = reduction_of(reduce)
    if samples == 1:
        return None
    if temperature == 0:
        raise JudgeConfigError(f"{samples} samples at temperature 0 would be {samples} "
                               "identical greedy verdicts: pass --temperature (e.g. 0.7) or "
                               "set the judge's sampling.temperature in models.yaml")
    return {"samples": samples, "reduction": reduction}


def _told_threads(judge: Judge, run: RunOptions) -> Callable[[ThreadChoice], None] | None:
    """``run.on_threads``, told that a count the judge's spec gave came from ``--threads``
    when the run set it (the backend sees one spec)."""
    told = run.on_threads
    if told is None or judge.threads is None:
        return told

    def on_threads(choice: ThreadChoice) -> None:
        told(replace(choice, source="--threads") if choice.source == "models.yaml" else choice)

    return on_threads


def evaluate(task: Task, judge: Judge, run: RunOptions) -> RunResult:
    """Judge every case of ``task`` with ``judge``; write results + summary as ``run`` says.

    Input is validated before the model loads: bad rows become ``input_error`` records and
    the run goes on (``run.strict``: the first bad case raises :class:`InputRejected`, before
    the model loads when the input file shows it). An existing ``run.output_path`` is
    resumed: cases it already holds are skipped (see :mod:`evaluator.run.resume`);
    ``run.force_new`` moves it aside and starts again. Records are flushed one by one; a
    manifest describes the run. ``judge.backend`` (with ``judge.spec``) injects a ready
    backend, e.g. the fake one in tests.

    ``judge.samples`` > 1 judges each case that many times (sample k seeded with the judge's
    seed + k; needs a temperature above 0, from models.yaml or ``judge.temperature``):
    records keep every sample and a verdict reduced by ``judge.reduce`` (default median;
    :mod:`evaluator.analysis.panel`); a case is ``ok`` only when every sample is.

    ``run.engine``: ``local`` judges in this process; ``ray`` spreads the batches over judge
    replicas on a Ray cluster (``run.ray``; :mod:`evaluator.run.ray_engine`), writing the
    same records to the same file with the same resume rules.

    The output's files are checked before anything is written
    (:func:`evaluator.run.resume.check_output_paths`: never the input, a symbolic link, or a
    manifest/summary of another results file) and the run holds ``<stem>.evaluator-lock``
    beside the output until its summary is written: a second run on the same output raises
    :class:`evaluator.data.files.OutputBusy` at once, or with ``run.wait`` waits for the
    first to end (and then resumes).
    """
    output_path = Path(run.output_path)
    input_path = Path(task.input_path)
    rubric_obj = (task.rubric if isinstance(task.rubric, Rubric)
                  else load_rubric(task.rubric, task.rubrics_dirs))
    if judge.spec is None:
        judge_name, judge_spec = resolve_judge(judge.name, judge.models_path)
    else:
        judge_name, judge_spec = judge.name or "custom", judge.spec
    if judge.threads is not None:  # --threads replaces the judge's own
        judge_spec = with_threads(judge_name, judge_spec, judge.threads)
    if run.engine not in ENGINES:
        raise JudgeConfigError(f"unknown engine {run.engine!r}; choose one of "
                               f"{', '.join(ENGINES)}")
    # Refuse a model folder or an output path that cannot work before reading any case.
    if judge_spec.path is not None:
        check_model_folder(judge_name, judge_spec.path)
    check_path_name(output_path)
    check_path_name(input_path, "--input")
    check_output_path(output_path, manifest_path_for(output_path), summary_path_for(output_path))
    # A missing Ray install is reported now, before anything is read.
    ray_engine = load_ray_engine() if run.engine == "ray" else None
    if ray_engine is not None and judge.backend is not None:
        raise JudgeConfigError("--engine ray loads the judge in each replica: pass "
                               "RayOptions(backend_factory=...) instead of a backend")
    kind = run_kind(rubric_obj)  # the rubric's kind, chosen once
    systems = kind.systems(task, judge, rubric_obj)
    # A picklable factory: the Ray engine reads the input again on the driver's node.
    if task.versus is not None:
        check_path_name(Path(task.versus), "--versus")
        items = partial(iter_pairs, input_path, Path(task.versus), rubric_obj,
                        answer_column=task.answer_column or "", mapping=task.mapping,
                        id_column=task.id_column, limit=task.limit)
    else:
        items = partial(iter_cases, input_path, rubric_obj, mapping=task.mapping,
                        id_column=task.id_column, limit=task.limit)
    items()  # the file and mapping are checked now, before anything else
    inputs = [input_path] + ([Path(task.versus)] if task.versus is not None else [])

    schema = output_json_schema(rubric_obj)
    # Keys must stay unsorted: outlines emits properties in schema order, the rubric's order.
    schema_text = json.dumps(schema, separators=(",", ":"))
    spec_sampling = judge_spec.sampling
    temperature = spec_sampling.temperature if judge.temperature is None else judge.temperature
    reduce = judge.reduce or "median"
    panel = _panel_settings(judge.samples, reduce, temperature, spec_sampling.seed)
    sampling = Sampling(max_new_tokens=max_new_tokens(schema), temperature=temperature,
                        top_p=spec_sampling.top_p, seed=spec_sampling.seed)
    template_kwargs = {**judge_spec.chat_template_kwargs, **rubric_obj.chat_template_kwargs}
    model = model_fingerprint(model_dir_for(judge_spec))
    with template_errors(rubric_obj):  # renders the template once, with placeholders
        settings = build_settings(judge_name=judge_name, spec=judge_spec, model=model,
                                  rubric=rubric_obj, schema_text=schema_text,
                                  sampling=asdict(sampling),
                                  chat_template_kwargs=template_kwargs, panel=panel)
    if systems is not None:
        settings["pairwise"] = {"systems": list(systems)}
    setup = RunSetup(rubric_obj, kind, judge_name, judge_spec, schema_text,
                     build_output_model(rubric_obj), sampling, template_kwargs,
                     settings_hash(settings), str(input_path), judge.samples, reduce,
                     systems or ("A", "B"))

    # Nothing is written until the output's files are known to be safe to write, and then
    # only under the output's lock, held until the summary is written: a second run on the
    # same output is refused (or waits), never appends the same cases again.
    check_output_paths(output_path, inputs)
    with exclusive_lock(lock_path_for(output_path), output_path, wait=run.wait):
        check_output_paths(output_path, inputs)  # again, now that no run can change it
        return _run_locked(setup, settings, model, items, task, judge, run, ray_engine)


def _run_locked(setup: RunSetup, settings: dict[str, Any], model: dict[str, Any],
                items: partial[Iterator[Case | InputProblem]], task: Task, judge: Judge,
                run: RunOptions, ray_engine: Any) -> RunResult:
    """The run proper, with the output's lock held: plan, judge, manifest, summary."""
    output_path = Path(run.output_path)
    input_path = Path(task.input_path)
    manifest_path = manifest_path_for(output_path)
    # One pass over the input (streamed): validate every row, check ids and what an existing
    # results file already holds. With --force-new the old file is moved aside only after
    # this pass succeeds (and --strict accepted the input).
    plan = plan_resume(None if run.force_new else output_path, manifest_path, settings,
                       setup.settings_hash, items(), UniqueIds(input_path, task.id_column),
                       setup.prompt_hash, setup.rubric)
    if run.strict and plan.first_problem is not None:
        raise InputRejected(f"--strict: {plan.first_problem.describe(with_id=False)} "
                            f"({plan.input_errors} bad row(s) in all); nothing was judged")
    for problem in plan.problems:
        log.warning("input problem: %s", problem.describe(with_id=False))
    moved: list[Path] = []
    if run.force_new:
        moved = move_aside([output_path, manifest_path, summary_path_for(output_path)])
    with _stop_on_full_disk(output_path):
        apply_plan(output_path, plan)
    if run.on_start is not None:
        run.on_start(RunStart(plan.valid, plan.input_errors, plan.already_done,
                              plan.retried, len(plan.problems) + len(plan.todo), moved,
                              plan.null_ids))

    manifest = read_manifest(manifest_path) if output_path.exists() else None
    if manifest is None or manifest.get("settings_hash") != setup.settings_hash:
        manifest = new_manifest(output_path, settings, model)
    entry = run_entry(input_path, task.versus, mapping=task.mapping, id_column=task.id_column,
                      answer_column=task.answer_column)
    manifest["runs"].append(entry)
    with _stop_on_full_disk(output_path):
        save_manifest(manifest_path, manifest, spare=_MANIFEST_SPARE)
    described: list[DescribedBackend] = []
    refused: list[str] = []

    def on_described(provenance: dict[str, Any]) -> None:
        # What a backend reports about its runtime (a server's model id, version) is saved
        # before any case is judged (and, by the local engine's backend, again at the end
        # with what it counted); a server now serving another model stops the run here,
        # and its provenance is not recorded: the next resume compares with the models
        # that judged the file, not with the one refused (else a second try went through).
        changed = served_model_changed(manifest["runs"][:-1], provenance)
        if changed is not None:
            refused.append(changed)
            raise ResumeConflict(f"{output_path} cannot be resumed: {changed}. Results "
                                 "of two models are never mixed in one file: pass "
                                 "--force-new or choose another --output.")
        entry["backend"] = provenance
        with _stop_on_full_disk(output_path):
            save_manifest(manifest_path, manifest, spare=_MANIFEST_SPARE)

    def on_loaded(backend: Backend) -> None:
        if isinstance(backend, DescribedBackend):
            described.append(backend)
            on_described(backend.provenance())

    try:
        size = run.batch_size or setup.spec.batch_size
        if ray_engine is None:
            local_engine.judge_all(setup, plan, items(), output_path, size, run.progress,
                                   run.strict, judge.backend, _told_threads(judge, run),
                                   on_loaded)
        else:
            ray_engine.judge_all(setup, plan, items, output_path, size, run.progress,
                                 run.strict, run.ray or RayOptions(), on_described)
        entry["status"] = "finished"
    except BaseException as exc:
        entry["status"] = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
        if disk_full(exc):
            raise _disk_full_error(output_path, exc) from None
        raise
    finally:
        entry["ended"] = now()
        for backend in described if not refused else ():
            entry["backend"] = backend.provenance()
        if entry["status"] == "finished":
            with _stop_on_full_disk(output_path):
                save_manifest(manifest_path, manifest)
        else:  # an error is on its way up: do not replace it with this one
            try:
                save_manifest(manifest_path, manifest)
            except OSError as exc:
                log.error("could not record the end of the run in %s (%s)", manifest_path,
                          exc.strerror or type(exc).__name__)

    summary = analysis_kind(setup.rubric).summarize(
        setup.rubric, setup.judge_name, iter_records(output_path, one_rubric(setup.rubric))
    ).model_copy(update={"results_file": output_path.name})
    summary_path = summary_path_for(output_path)
    with _stop_on_full_disk(output_path):
        write_summary(summary_path, summary)
    return RunResult(output_path, summary_path, summary)
