"""A run: wire cases, rubric and judge together, write one record per case, then a summary.

This module does no I/O to the terminal; the CLI passes a progress callback.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evaluator.aggregate import compute_aggregates
from evaluator.backends import Backend, Generation, Sampling, load_backend
from evaluator.cases import Case, InputProblem, read_cases
from evaluator.judges import JudgeSpec, resolve_judge
from evaluator.render import render_messages
from evaluator.results import OutputExistsError, ResultRecord, ResultWriter
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
                  completion_tokens=generation.completion_tokens)
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


def _problem_record(problem: InputProblem, rubric: Rubric, judge: str) -> ResultRecord:
    return ResultRecord(case_id=problem.case_id, rubric=rubric.name, judge=judge,
                        status="input_error", reason=problem.describe(),
                        input_file=problem.file, input_line=problem.line)


def _batches(items: Sequence[Case], size: int) -> list[Sequence[Case]]:
    return [items[i:i + size] for i in range(0, len(items), size)]


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
    on_cases_read: Callable[[int, int], None] | None = None,
    progress: ProgressCallback | None = None,
    overwrite: bool = False,
) -> RunResult:
    """Judge every case of ``input_path`` with a rubric and a judge; write results + summary.

    Input is validated before the model loads: bad rows become ``input_error`` records and
    the run goes on. Each record is flushed as its batch finishes. ``backend`` (with
    ``judge_spec``) injects a ready backend, e.g. the fake one in tests. An existing
    ``output_path`` is an error unless ``overwrite``.
    """
    output_path = Path(output_path)
    if output_path.exists() and not overwrite:
        raise OutputExistsError(f"{output_path} already exists; choose a new --output or pass "
                                "--overwrite to replace it")
    rubric_obj = rubric if isinstance(rubric, Rubric) else load_rubric(rubric, rubrics_dirs)
    if judge_spec is None:
        judge_name, judge_spec = resolve_judge(judge, models_path)
    else:
        judge_name = judge or "custom"
    items = read_cases(Path(input_path), rubric_obj, mapping=mapping, id_column=id_column,
                       limit=limit)
    cases = [item for item in items if isinstance(item, Case)]
    problems = [item for item in items if isinstance(item, InputProblem)]
    if on_cases_read is not None:
        on_cases_read(len(cases), len(problems))
    for problem in problems:
        log.warning("input problem: %s", problem.describe())

    schema = output_json_schema(rubric_obj)
    # Keys must stay unsorted: outlines emits properties in schema order, the rubric's order.
    schema_text = json.dumps(schema, separators=(",", ":"))
    output_model = build_output_model(rubric_obj)
    budget = max_new_tokens(schema)
    sampling = Sampling(max_new_tokens=budget, temperature=judge_spec.sampling.temperature,
                        top_p=judge_spec.sampling.top_p, seed=judge_spec.sampling.seed)
    template_kwargs = {**judge_spec.chat_template_kwargs, **rubric_obj.chat_template_kwargs}
    size = batch_size or judge_spec.batch_size

    records: list[ResultRecord] = []
    owned_backend = backend is None
    with ResultWriter(output_path, overwrite=overwrite) as writer:
        for problem in problems:
            record = _problem_record(problem, rubric_obj, judge_name)
            writer.write(record)
            records.append(record)
        if progress is not None and problems:
            progress(len(problems))
        if cases:
            if backend is None:
                backend = load_backend(judge_name, judge_spec)
            try:
                for batch in _batches(cases, size):
                    batch_records = _judge_batch(batch, rubric_obj, judge_name, judge_spec,
                                                 backend, schema_text, output_model, sampling,
                                                 template_kwargs, str(input_path))
                    for record in batch_records:
                        writer.write(record)
                    records.extend(batch_records)
                    if progress is not None:
                        progress(len(batch))
            finally:
                if owned_backend:
                    backend.close()

    summary = summarize(rubric_obj, judge_name, records)
    summary_path = summary_path_for(output_path)
    write_summary(summary_path, summary)
    return RunResult(output_path, summary_path, summary)


def _judge_batch(batch: Sequence[Case], rubric: Rubric, judge_name: str, spec: JudgeSpec,
                 backend: Backend, schema_text: str, output_model: type, sampling: Sampling,
                 template_kwargs: Mapping[str, Any], input_file: str) -> list[ResultRecord]:
    chats = [render_messages(rubric, case.fields, system_role=spec.system_role)
             for case in batch]
    bases = [dict(case_id=case.case_id, rubric=rubric.name, judge=judge_name,
                  input_file=input_file, input_line=case.line,
                  max_new_tokens=sampling.max_new_tokens, batch_size=len(batch))
             for case in batch]
    started = time.perf_counter()
    try:
        generations = backend.generate(chats, schema_text, sampling, template_kwargs)
    except Exception as exc:  # one failing batch must not kill the run
        log.error("backend error on a batch of %d case(s): %s", len(batch), type(exc).__name__)
        reason = f"backend raised {type(exc).__name__}; see the log for details"
        return [ResultRecord(status="backend_error", reason=reason, **base) for base in bases]
    elapsed = time.perf_counter() - started
    if len(generations) != len(batch):
        reason = f"backend returned {len(generations)} generations for {len(batch)} prompts"
        return [ResultRecord(status="backend_error", reason=reason, **base) for base in bases]
    return [judge_generation(rubric, output_model, gen, dict(base, batch_seconds=elapsed))
            for gen, base in zip(generations, bases)]
