"""A run: wire cases, rubric and judge together, write one record per case, then a summary.

:func:`evaluate` validates the input and plans the resume before the judge loads
(:mod:`evaluator.run.resume`), writes the manifest (:mod:`evaluator.run.manifest`), hands the
cases still to judge to an engine (:mod:`evaluator.run.local_engine` or
:mod:`evaluator.run.ray_engine`, both over :mod:`evaluator.run.judging`), and summarises the
results file (:mod:`evaluator.analysis.summary`). This module does no I/O to the terminal;
the CLI passes callbacks.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

from evaluator.analysis.panel import reduction_of
from evaluator.analysis.summary import summarize, summary_path_for, write_summary
from evaluator.data.cases import UniqueIds, iter_cases
from evaluator.data.files import write_json_atomic
from evaluator.data.results import iter_records
from evaluator.judges.backends import Sampling
from evaluator.judges.models_file import JudgeConfigError, resolve_judge
from evaluator.rubrics.load import load_rubric
from evaluator.rubrics.rubric import Rubric
from evaluator.rubrics.schema import build_output_model, max_new_tokens, output_json_schema
from evaluator.run import local_engine
from evaluator.run.engines import ENGINES, RayOptions, load_ray_engine
from evaluator.run.judging import InputRejected, RunSetup
from evaluator.run.manifest import (
    build_settings,
    manifest_path_for,
    model_dir_for,
    model_fingerprint,
    new_manifest,
    now,
    prompt_hash,
    read_manifest,
    run_entry,
    settings_hash,
)
from evaluator.run.resume import apply_plan, move_aside, plan_resume
from evaluator.run.task import Judge, RunOptions, RunStart, Task

log = logging.getLogger(__name__)

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


def _panel_settings(samples: int, reduce: str, temperature: float) -> dict[str, Any] | None:
    """The self-consistency settings (part of the settings hash), None for one sample."""
    if not 0.0 <= temperature <= 2.0:
        raise JudgeConfigError(f"temperature {temperature:g} is outside 0..2")
    if samples < 1:
        raise JudgeConfigError(f"samples must be at least 1, not {samples}")
    reduction = reduction_of(reduce)
    if samples == 1:
        return None
    if temperature == 0:
        raise JudgeConfigError(f"{samples} samples at temperature 0 would be {samples} "
                               "identical greedy verdicts: pass --temperature (e.g. 0.7) or "
                               "set the judge's sampling.temperature in models.yaml")
    return {"samples": samples, "reduction": reduction}


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
    """
    output_path = Path(run.output_path)
    input_path = Path(task.input_path)
    rubric_obj = (task.rubric if isinstance(task.rubric, Rubric)
                  else load_rubric(task.rubric, task.rubrics_dirs))
    if judge.spec is None:
        judge_name, judge_spec = resolve_judge(judge.name, judge.models_path)
    else:
        judge_name, judge_spec = judge.name or "custom", judge.spec
    if run.engine not in ENGINES:
        raise JudgeConfigError(f"unknown engine {run.engine!r}; choose one of "
                               f"{', '.join(ENGINES)}")
    # A missing Ray install is reported now, before anything is read.
    ray_engine = load_ray_engine() if run.engine == "ray" else None
    if ray_engine is not None and judge.backend is not None:
        raise JudgeConfigError("--engine ray loads the judge in each replica: pass "
                               "RayOptions(backend_factory=...) instead of a backend")
    # A picklable factory: the Ray engine reads the input again on the driver's node.
    items = partial(iter_cases, input_path, rubric_obj, mapping=task.mapping,
                    id_column=task.id_column, limit=task.limit)
    items()  # the file and mapping are checked now, before anything else

    schema = output_json_schema(rubric_obj)
    # Keys must stay unsorted: outlines emits properties in schema order, the rubric's order.
    schema_text = json.dumps(schema, separators=(",", ":"))
    spec_sampling = judge_spec.sampling
    temperature = spec_sampling.temperature if judge.temperature is None else judge.temperature
    reduce = judge.reduce or "median"
    panel = _panel_settings(judge.samples, reduce, temperature)
    sampling = Sampling(max_new_tokens=max_new_tokens(schema), temperature=temperature,
                        top_p=spec_sampling.top_p, seed=spec_sampling.seed)
    template_kwargs = {**judge_spec.chat_template_kwargs, **rubric_obj.chat_template_kwargs}
    model = model_fingerprint(model_dir_for(judge_spec))
    settings = build_settings(judge_name=judge_name, spec=judge_spec, model=model,
                              rubric=rubric_obj, schema_text=schema_text,
                              sampling=asdict(sampling), chat_template_kwargs=template_kwargs,
                              panel=panel)
    setup = RunSetup(rubric_obj, judge_name, judge_spec, schema_text,
                     build_output_model(rubric_obj), sampling, template_kwargs,
                     settings_hash(settings), str(input_path), judge.samples, reduce)

    manifest_path = manifest_path_for(output_path)
    # One pass over the input (streamed): validate every row, check ids and what an existing
    # results file already holds. With --force-new the old file is moved aside only after
    # this pass succeeds (and --strict accepted the input).
    plan = plan_resume(None if run.force_new else output_path, manifest_path, settings,
                       setup.settings_hash, items(), UniqueIds(input_path, task.id_column),
                       lambda case: prompt_hash(setup.chat(case)))
    if run.strict and plan.first_problem is not None:
        raise InputRejected(f"--strict: {plan.first_problem.describe()} ({plan.input_errors} "
                            "bad row(s) in all); nothing was judged")
    for problem in plan.problems:
        log.warning("input problem: %s", problem.describe())
    moved: list[Path] = []
    if run.force_new:
        moved = move_aside([output_path, manifest_path, summary_path_for(output_path)])
    apply_plan(output_path, plan)
    if run.on_start is not None:
        run.on_start(RunStart(plan.valid, plan.input_errors, plan.already_done,
                              plan.retried, len(plan.problems) + len(plan.todo), moved))

    manifest = read_manifest(manifest_path) if output_path.exists() else None
    if manifest is None or manifest.get("settings_hash") != setup.settings_hash:
        manifest = new_manifest(output_path, settings, model)
    entry = run_entry(input_path)
    manifest["runs"].append(entry)
    output_path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(manifest_path, manifest)
    try:
        size = run.batch_size or judge_spec.batch_size
        if ray_engine is None:
            local_engine.judge_all(setup, plan, items(), output_path, size, run.progress,
                                   run.strict, judge.backend)
        else:
            ray_engine.judge_all(setup, plan, items, output_path, size, run.progress,
                                 run.strict, run.ray or RayOptions())
        entry["status"] = "finished"
    except BaseException as exc:
        entry["status"] = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
        raise
    finally:
        entry["ended"] = now()
        write_json_atomic(manifest_path, manifest)

    summary = summarize(rubric_obj, judge_name, iter_records(output_path))
    summary_path = summary_path_for(output_path)
    write_summary(summary_path, summary)
    return RunResult(output_path, summary_path, summary)
