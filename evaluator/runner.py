"""A run: wire cases, rubric and judge together, write one record per case, then a summary.

This module does no I/O to the terminal; the CLI passes a progress callback.
"""

from __future__ import annotations

import errno
import json
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evaluator.aggregate import compute_aggregates
from evaluator.backends import Backend, Generation, Sampling, load_backend
from evaluator.cases import Case, InputProblem, UniqueIds, iter_cases
from evaluator.files import check_path_name, exclusive_lock
from evaluator.judges import MAX_SEED, JudgeConfigError, JudgeSpec, resolve_judge
from evaluator.manifest import (
    build_settings,
    lock_path_for,
    manifest_path_for,
    model_dir_for,
    model_fingerprint,
    new_manifest,
    now,
    prompt_hash,
    read_manifest,
    run_entry,
    save_manifest,
    settings_hash,
)
from evaluator.panel import combine_verdicts, reduction_of
from evaluator.preflight import check_model_folder, check_output_path, template_errors
from evaluator.ray_options import ENGINES, RayOptions, load_ray_engine
from evaluator.render import render_messages
from evaluator.results import ResultRecord, ResultWriter, iter_records
from evaluator.resume import (
    ResumePlan,
    apply_plan,
    check_output_paths,
    move_aside,
    plan_resume,
)
from evaluator.rubric import Rubric, load_rubric
from evaluator.schema import build_output_model, max_new_tokens, output_json_schema
from evaluator.summary import summarize, summary_path_for, write_summary

log = logging.getLogger(__name__)

ProgressCallback = Callable[[int], None]


@dataclass(frozen=True)
class RunResult:
    """What a finished run produced."""

    results_path: Path
    summary_path: Path
    summary: dict[str, Any]

    @property
    def failed(self) -> int:
        """Number of cases without a verdict."""
        return len(self.summary["failed_case_ids"])


def _validation_reason(error: ValidationError) -> str:
    # include_input=False: pydantic would otherwise echo the judge's text, which can quote
    # the case (PHI), into the reason.
    parts = [f"{'.'.join(map(str, e['loc'])) or '$'}: {e['msg']}"
             for e in error.errors(include_input=False, include_url=False)[:5]]
    return "verdict failed validation: " + "; ".join(parts)


def judge_generation(rubric: Rubric, output_model: type, generation: Generation,
                     base: Mapping[str, Any]) -> ResultRecord:
    """Turn one generation into a record: validated scores, or a failure status and reason."""
    fields = dict(base, finish_reason=generation.finish_reason,
                  prompt_tokens=generation.prompt_tokens,
                  completion_tokens=generation.completion_tokens,
                  cached_tokens=generation.cached_tokens)
    if generation.finish_reason == "context_overflow":
        return ResultRecord(status="too_long", reason=generation.detail, **fields)
    if generation.finish_reason == "error":
        return ResultRecord(status="backend_error", reason=generation.detail, **fields)
    if generation.finish_reason == "length":
        return ResultRecord(status="truncated", raw_output=generation.text,
                            reason="the judge stopped on the token limit "
                                   f"({fields.get('max_new_tokens')}) before closing the verdict",
                            **fields)
    try:
        verdict = output_model.model_validate_json(generation.text or "")
    except ValidationError as exc:
        return ResultRecord(status="invalid_output", raw_output=generation.text,
                            reason=_validation_reason(exc), **fields)
    scores = verdict.model_dump(mode="json")
    return ResultRecord(status="ok", scores=scores,
                        aggregates=compute_aggregates(rubric, scores) or None, **fields)


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


class InputRejected(ValueError):
    """``strict``: a case could not be judged, so the run stopped (exit code 3)."""


class OutputWriteFailed(RuntimeError):
    """The disk (or the quota) filled up while the run was writing: it stopped, the records
    written so far are kept, and the manifest says ``failed``. Free some space and re-run
    the same command to resume."""


# errno values that mean "no room left to write".
_NO_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
# Trailing blanks written into the manifest at the start of a run: its final update (end
# time, status) then fits in the space the file already holds, so a run stopped by a full
# disk can still record that it failed (see save_manifest). JSON ignores them.
_MANIFEST_SPARE = 256


def _disk_full(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in _NO_SPACE


def _disk_full_error(output_path: Path, exc: BaseException) -> OutputWriteFailed:
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "disk full"
    return OutputWriteFailed(f"cannot write {output_path} and the files beside it ({reason}); "
                             "the results written so far are kept: free some space and re-run "
                             "the same command to resume")


@contextmanager
def _stop_on_full_disk(output_path: Path) -> Iterator[None]:
    """A full disk while writing becomes :class:`OutputWriteFailed` (other errors pass)."""
    try:
        yield
    except OSError as exc:
        if _disk_full(exc):
            raise _disk_full_error(output_path, exc) from None
        raise


@dataclass(frozen=True)
class RunStart:
    """What the run found before judging: shown by the CLI, sizes its progress bar."""

    valid: int
    input_errors: int
    already_done: int
    retried: int
    to_judge: int
    moved_aside: list[Path]


def _problem_record(problem: InputProblem, rubric: Rubric, judge: str,
                    settings_hash: str) -> ResultRecord:
    return ResultRecord(case_id=problem.case_id, rubric=rubric.name, judge=judge,
                        status="input_error", reason=problem.describe(),
                        input_file=problem.file, input_line=problem.line,
                        settings_hash=settings_hash)


@dataclass(frozen=True)
class _Setup:
    """Everything about a run that is the same for every case."""

    rubric: Rubric
    judge_name: str
    spec: JudgeSpec
    schema_text: str
    output_model: type
    sampling: Sampling
    template_kwargs: dict[str, Any]
    settings_hash: str
    input_file: str
    samples: int = 1
    reduce: str = "median"

    def chat(self, case: Case) -> list[dict[str, str]]:
        with template_errors(self.rubric):
            return render_messages(self.rubric, case.fields, system_role=self.spec.system_role)


def evaluate(
    *,
    rubric: str | Rubric,
    input_path: Path,
    output_path: Path,
    judge: str | None = None,
    models_path: Path | None = None,
    rubrics_dirs: Sequence[Path] = (),
    mapping: Mapping[str, str] | None = None,
    id_column: str = "case_id",
    limit: int | None = None,
    batch_size: int | None = None,
    backend: Backend | None = None,
    judge_spec: JudgeSpec | None = None,
    on_start: Callable[[RunStart], None] | None = None,
    progress: ProgressCallback | None = None,
    force_new: bool = False,
    strict: bool = False,
    samples: int = 1,
    temperature: float | None = None,
    reduce: str = "median",
    engine: str = "local",
    ray_options: RayOptions | None = None,
    wait: bool = False,
) -> RunResult:
    """Judge every case of ``input_path`` with a rubric and a judge; write results + summary.

    Input is validated before the model loads: bad rows become ``input_error`` records and
    the run goes on (``strict``: the first bad case raises :class:`InputRejected`, before the
    model loads when the input file shows it). An existing ``output_path`` is resumed: cases
    it already holds are skipped (see :mod:`evaluator.resume`); ``force_new`` moves it aside
    and starts again. Records are flushed one by one; a manifest describes the run.
    ``backend`` (with ``judge_spec``) injects a ready backend, e.g. the fake one in tests.

    ``samples`` > 1 judges each case that many times (sample k seeded with the judge's seed
    + k; needs a temperature above 0, from models.yaml or ``temperature``): records keep
    every sample and a verdict reduced by ``reduce`` (:mod:`evaluator.panel`); a case is
    ``ok`` only when every sample is.

    ``engine``: ``local`` judges in this process; ``ray`` spreads the batches over judge
    replicas on a Ray cluster (``ray_options``; :mod:`evaluator.ray_engine`), writing the
    same records to the same file with the same resume rules.

    The output's files are checked before anything is written (:func:`evaluator.resume.
    check_output_paths`: never the input, a symbolic link, or a manifest/summary of another
    results file) and the run holds ``<stem>.evaluator-lock`` beside the output until its summary is
    written: a second run on the same output raises :class:`evaluator.files.OutputBusy`
    at once, or with ``wait`` waits for the first to end (and then resumes).
    """
    output_path = Path(output_path)
    input_path = Path(input_path)
    rubric_obj = rubric if isinstance(rubric, Rubric) else load_rubric(rubric, rubrics_dirs)
    if judge_spec is None:
        judge_name, judge_spec = resolve_judge(judge, models_path)
    else:
        judge_name = judge or "custom"
    if engine not in ENGINES:
        raise JudgeConfigError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}")
    # Refuse a model folder or an output path that cannot work before reading any case.
    if judge_spec.path is not None:
        check_model_folder(judge_name, judge_spec.path)
    check_path_name(output_path)
    check_path_name(input_path, "--input")
    check_output_path(output_path, manifest_path_for(output_path), summary_path_for(output_path))
    ray_engine = load_ray_engine() if engine == "ray" else None  # a missing install: now
    if ray_engine is not None and backend is not None:
        raise JudgeConfigError("--engine ray loads the judge in each replica: pass "
                               "RayOptions(backend_factory=...) instead of a backend")
    # A picklable factory: the Ray engine reads the input again on the driver's node.
    items = partial(iter_cases, input_path, rubric_obj, mapping=mapping, id_column=id_column,
                    limit=limit)
    items()  # the file and mapping are checked now, before anything else

    schema = output_json_schema(rubric_obj)
    # Keys must stay unsorted: outlines emits properties in schema order, the rubric's order.
    schema_text = json.dumps(schema, separators=(",", ":"))
    spec_sampling = judge_spec.sampling
    panel = _panel_settings(samples, reduce, spec_sampling.temperature
                            if temperature is None else temperature, spec_sampling.seed)
    sampling = Sampling(max_new_tokens=max_new_tokens(schema),
                        temperature=spec_sampling.temperature if temperature is None
                        else temperature, top_p=spec_sampling.top_p, seed=spec_sampling.seed)
    template_kwargs = {**judge_spec.chat_template_kwargs, **rubric_obj.chat_template_kwargs}
    model = model_fingerprint(model_dir_for(judge_spec))
    with template_errors(rubric_obj):  # renders the template once, with placeholders
        settings = build_settings(judge_name=judge_name, spec=judge_spec, model=model,
                                  rubric=rubric_obj, schema_text=schema_text,
                                  sampling=asdict(sampling),
                                  chat_template_kwargs=template_kwargs, panel=panel)
    setup = _Setup(rubric_obj, judge_name, judge_spec, schema_text,
                   build_output_model(rubric_obj), sampling, template_kwargs,
                   settings_hash(settings), str(input_path), samples, reduce)

    # Nothing is written until the output's files are known to be safe to write, and then
    # only under the output's lock, held until the summary is written: a second run on the
    # same output is refused (or waits), never appends the same cases again.
    check_output_paths(output_path, [input_path])
    with exclusive_lock(lock_path_for(output_path), output_path, wait=wait):
        check_output_paths(output_path, [input_path])  # again, now that no run can change it
        return _run_locked(setup, settings, model, items, input_path, output_path,
                           id_column=id_column, backend=backend, on_start=on_start,
                           progress=progress, force_new=force_new, strict=strict,
                           ray_engine=ray_engine, batch_size=batch_size,
                           ray_options=ray_options)


def _run_locked(setup: _Setup, settings: dict[str, Any], model: dict[str, Any],
                items: Callable[[], Iterator[Case | InputProblem]], input_path: Path,
                output_path: Path, *, id_column: str, backend: Backend | None,
                on_start: Callable[[RunStart], None] | None,
                progress: ProgressCallback | None, force_new: bool, strict: bool,
                ray_engine: Any, batch_size: int | None,
                ray_options: RayOptions | None) -> RunResult:
    """The run proper, with the output's lock held: plan, judge, manifest, summary."""
    manifest_path = manifest_path_for(output_path)
    # One pass over the input (streamed): validate every row, check ids and what an existing
    # results file already holds. With --force-new the old file is moved aside only after
    # this pass succeeds (and --strict accepted the input).
    plan = plan_resume(None if force_new else output_path, manifest_path, settings,
                       setup.settings_hash, items(), UniqueIds(input_path, id_column),
                       lambda case: prompt_hash(setup.chat(case)))
    if strict and plan.first_problem is not None:
        raise InputRejected(f"--strict: {plan.first_problem.describe(with_id=False)} "
                            f"({plan.input_errors} bad row(s) in all); nothing was judged")
    for problem in plan.problems:
        log.warning("input problem: %s", problem.describe(with_id=False))
    moved: list[Path] = []
    if force_new:
        moved = move_aside([output_path, manifest_path, summary_path_for(output_path)])
    with _stop_on_full_disk(output_path):
        apply_plan(output_path, plan)
    if on_start is not None:
        on_start(RunStart(plan.valid, plan.input_errors, plan.already_done, plan.retried,
                          len(plan.problems) + len(plan.todo), moved))

    manifest = read_manifest(manifest_path) if output_path.exists() else None
    if manifest is None or manifest.get("settings_hash") != setup.settings_hash:
        manifest = new_manifest(output_path, settings, model)
    entry = run_entry(input_path)
    manifest["runs"].append(entry)
    with _stop_on_full_disk(output_path):
        save_manifest(manifest_path, manifest, spare=_MANIFEST_SPARE)
    try:
        size = batch_size or setup.spec.batch_size
        if ray_engine is None:
            _judge_all(setup, plan, items(), output_path, backend, size, progress, strict)
        else:
            ray_engine.judge_all(setup, plan, items, output_path, size, progress, strict,
                                 ray_options or RayOptions())
        entry["status"] = "finished"
    except BaseException as exc:
        entry["status"] = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
        if _disk_full(exc):
            raise _disk_full_error(output_path, exc) from None
        raise
    finally:
        entry["ended"] = now()
        if entry["status"] == "finished":
            with _stop_on_full_disk(output_path):
                save_manifest(manifest_path, manifest)
        else:  # an error is on its way up: do not replace it with this one
            try:
                save_manifest(manifest_path, manifest)
            except OSError as exc:
                log.error("could not record the end of the run in %s (%s)", manifest_path,
                          exc.strerror or type(exc).__name__)

    summary = summarize(setup.rubric, setup.judge_name, iter_records(output_path))
    summary["results_file"] = output_path.name
    summary_path = summary_path_for(output_path)
    with _stop_on_full_disk(output_path):
        write_summary(summary_path, summary)
    return RunResult(output_path, summary_path, summary)


def _todo_batches(items: Iterator[Case | InputProblem], todo: set[str],
                  size: int) -> Iterator[list[Case]]:
    """The cases still to judge, streamed from the input, in batches. Each id is taken off
    ``todo`` as it is batched, so no case is judged twice in a run."""
    batch: list[Case] = []
    for item in items:
        if isinstance(item, Case) and item.case_id in todo:
            todo.discard(item.case_id)
            batch.append(item)
            if len(batch) == size:
                yield batch
                batch = []
    if batch:
        yield batch


def write_problems(writer: ResultWriter, setup: _Setup, plan: ResumePlan,
                   progress: ProgressCallback | None) -> None:
    """Record the input problems still to record (both engines do this first)."""
    for problem in plan.problems:
        writer.write(_problem_record(problem, setup.rubric, setup.judge_name,
                                     setup.settings_hash))
    if progress is not None and plan.problems:
        progress(len(plan.problems))


def _judge_all(setup: _Setup, plan: ResumePlan, items: Iterator[Case | InputProblem],
               output_path: Path, backend: Backend | None, size: int,
               progress: ProgressCallback | None, strict: bool) -> None:
    owned_backend = backend is None
    with ResultWriter(output_path) as writer:
        write_problems(writer, setup, plan, progress)
        if not plan.todo:
            return
        if backend is None:
            backend = load_backend(setup.judge_name, setup.spec)
        try:
            for batch in _todo_batches(items, plan.todo, size):
                batch_records = _judge_batch(batch, setup, backend)
                for record in batch_records:
                    writer.write(record)
                if progress is not None:
                    progress(len(batch))
                too_long = [r for r in batch_records if r.status == "too_long"]
                if strict and too_long:
                    raise InputRejected(f"--strict: the case on input line "
                                        f"{too_long[0].input_line} is too long for the judge: "
                                        f"{too_long[0].reason}")
        finally:
            if owned_backend:
                backend.close()


def _judge_batch(batch: Sequence[Case], setup: _Setup, backend: Backend) -> list[ResultRecord]:
    chats = [setup.chat(case) for case in batch]
    bases = [dict(case_id=case.case_id, rubric=setup.rubric.name, judge=setup.judge_name,
                  input_file=setup.input_file, input_line=case.line,
                  max_new_tokens=setup.sampling.max_new_tokens, batch_size=len(batch),
                  settings_hash=setup.settings_hash, prompt_hash=prompt_hash(chat))
             for case, chat in zip(batch, chats)]
    started = time.perf_counter()
    runs: list[list[Generation]] = []
    try:
        for k in range(setup.samples):
            # Sample k is seeded with the judge's seed + k (sample 0 is the usual run).
            sampling = replace(setup.sampling, seed=setup.sampling.seed + k)
            runs.append(backend.generate(chats, setup.schema_text, sampling,
                                         setup.template_kwargs))
    except Exception as exc:  # one failing batch must not kill the run
        log.error("backend error on a batch of %d case(s): %s", len(batch), type(exc).__name__)
        reason = (f"backend raised {type(exc).__name__}; see the log for details. Re-run the "
                  "same command to judge these cases again.")
        return [ResultRecord(status="backend_error", reason=reason, **base) for base in bases]
    elapsed = time.perf_counter() - started
    wrong = next((len(gens) for gens in runs if len(gens) != len(batch)), None)
    if wrong is not None:
        reason = f"backend returned {wrong} generations for {len(batch)} prompts"
        return [ResultRecord(status="backend_error", reason=reason, **base) for base in bases]
    records = []
    for index, base in enumerate(bases):
        per_sample = [judge_generation(setup.rubric, setup.output_model, gens[index],
                                       dict(base, batch_seconds=elapsed)) for gens in runs]
        records.append(per_sample[0] if setup.samples == 1
                       else combine_verdicts(setup.rubric, per_sample, setup.reduce, "samples",
                                             list(range(setup.samples))))
    return records
