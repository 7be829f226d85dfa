"""The judging step both engines share: a batch of cases in, one result record per case out.

:class:`RunSetup` holds what is the same for every case of a run (rubric, judge, output
model, sampling, settings hash); :func:`todo_batches` cuts the cases still to judge into
batches, in input order; :func:`judge_batch` renders and generates a batch (once per
self-consistency sample), and the rubric's kind (:class:`RunKind`, one module per kind in
:mod:`evaluator.run.kinds`) builds each case's prompts and finishes a batch's generations
into records (an absolute rubric's: :func:`finish_scores`); :func:`write_problems` records the input problems first. The local engine
(:mod:`evaluator.run.local_engine`, which streams cases through an engine that can:
:mod:`evaluator.run.streaming`) and the Ray engine (:mod:`evaluator.run.ray_engine`) are
ways of driving these same functions, so a case gets the same record from each.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from pydantic import ValidationError

from evaluator.analysis.distributions import summarize as summarize_distribution
from evaluator.analysis.panel import combine_verdicts
from evaluator.common.errors import UserError
from evaluator.data.case_ids import CaseIds
from evaluator.data.cases import Case, InputProblem
from evaluator.data.results import ResultRecord, ResultWriter
from evaluator.judges.backends import (
    Backend,
    Chat,
    Generation,
    Sampling,
    ScoreAnchor,
    ScoringBackend,
    ValueDistribution,
)
from evaluator.judges.models_file import JudgeSpec
from evaluator.rubrics.aggregate import compute_aggregates
from evaluator.rubrics.render import render_messages
from evaluator.rubrics.rubric import Rubric
from evaluator.rubrics.score_paths import ScoreSlot, choice_slots, score_slots, value_offsets
from evaluator.run.manifest import prompt_hash
from evaluator.run.preflight import template_errors
from evaluator.run.resume import ResumePlan
from evaluator.run.task import Judge, Task

log = logging.getLogger(__name__)

ProgressCallback = Callable[[int], None]


class InputRejected(UserError, ValueError):
    """``strict``: a case could not be judged, so the run stopped (exit code 3)."""

    exit_code = 3


class RunKind(Protocol):
    """What a run needs of a rubric kind (:mod:`evaluator.run.kinds`)."""

    def prompts(self, setup: RunSetup, case: Case) -> list[list[dict[str, str]]]:
        """Every prompt ``case`` is judged with, in order."""

    def finish(self, batch: Sequence[Case], setup: RunSetup, backend: Backend,
               runs: Sequence[Sequence[Generation]], seconds: Sequence[float],
               bases: Sequence[Mapping[str, Any]]) -> list[ResultRecord]:
        """The records of ``batch`` from its generations (see :func:`finish_scores`)."""

    def systems(self, task: Task, judge: Judge, rubric: Rubric) -> tuple[str, str] | None:
        """The two candidates' names (None: not compared); refuses options the kind does
        not take."""

    def check_jury(self, jury_name: str) -> None:
        """Raise when a jury cannot judge this kind."""


@dataclass(frozen=True)
class RunSetup:
    """Everything about a run that is the same for every case."""

    rubric: Rubric
    kind: RunKind
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
    # A pairwise rubric's two systems (candidate A's name, candidate B's).
    systems: tuple[str, str] = ("A", "B")

    def chat(self, case: Case) -> list[dict[str, str]]:
        """The case rendered into the judge's chat messages."""
        with template_errors(self.rubric):
            return render_messages(self.rubric, case.fields, system_role=self.spec.system_role)

    def chats(self, case: Case) -> list[list[dict[str, str]]]:
        """Every prompt a case is judged with (the kind's: one, or a pair's two orders)."""
        return self.kind.prompts(self, case)

    def prompt_hash(self, case: Case) -> str:
        """The case's resume key: the hash of its prompt (a pair's: of both orders')."""
        return prompts_hash(self.chats(case))


def prompts_hash(chats: Sequence[Sequence[Mapping[str, str]]]) -> str:
    """The hash of a case's prompts, in order (one chat, or a pair's two orders)."""
    return prompt_hash([dict(message) for chat in chats for message in chat])


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


def problem_record(problem: InputProblem, rubric: Rubric, judge: str,
                   settings_hash: str) -> ResultRecord:
    """The ``input_error`` record of a row that could not be read as a case."""
    return ResultRecord(case_id=problem.case_id, rubric=rubric.name, judge=judge,
                        status="input_error", reason=problem.describe(),
                        input_file=problem.file, input_line=problem.line,
                        settings_hash=settings_hash)


def todo_batches(items: Iterator[Case | InputProblem], todo: CaseIds | set[str],
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


def write_problems(writer: ResultWriter, setup: RunSetup, plan: ResumePlan,
                   progress: ProgressCallback | None) -> None:
    """Record the input problems still to record (both engines do this first)."""
    for problem in plan.problems:
        writer.write(problem_record(problem, setup.rubric, setup.judge_name,
                                    setup.settings_hash))
    if progress is not None and plan.problems:
        progress(len(plan.problems))


def reject_too_long(records: Sequence[ResultRecord]) -> None:
    """``strict``: raise :class:`InputRejected` for the first record whose case is too long
    for the judge (both engines check each batch's records as they are written)."""
    too_long = [r for r in records if r.status == "too_long"]
    if too_long:
        raise InputRejected(f"--strict: the case on input line "
                            f"{too_long[0].input_line} is too long for the judge: "
                            f"{too_long[0].reason}")


def _generate(backend: Backend, chats: Sequence[Chat], setup: RunSetup, samples: int,
              ) -> tuple[list[list[Generation]], float] | str:
    """Every chat generated ``samples`` times (sample k seeded with the judge's seed + k;
    sample 0 is the usual run), and the seconds it took; or, when the backend raises or
    returns the wrong number of generations, the ``backend_error`` reason for the batch."""
    started = time.perf_counter()
    runs: list[list[Generation]] = []
    try:
        for k in range(samples):
            sampling = replace(setup.sampling, seed=setup.sampling.seed + k)
            runs.append(backend.generate(chats, setup.schema_text, sampling,
                                         setup.template_kwargs))
    except Exception as exc:  # noqa: BLE001 - one failing batch must not kill the run
        log.error("backend error on a batch of %d prompt(s): %s", len(chats),
                  type(exc).__name__)
        return (f"backend raised {type(exc).__name__}; see the log for details. Re-run the "
                "same command to judge these cases again.")
    wrong = next((len(gens) for gens in runs if len(gens) != len(chats)), None)
    if wrong is not None:
        return f"backend returned {wrong} generations for {len(chats)} prompts"
    return runs, time.perf_counter() - started


def case_bases(batch: Sequence[Case], chats: Sequence[Sequence[Chat]], setup: RunSetup,
               batch_size: int) -> list[dict[str, Any]]:
    """The fields every record of ``batch`` starts from (``chats``: each case's prompts)."""
    return [dict(case_id=case.case_id, rubric=setup.rubric.name, judge=setup.judge_name,
                 input_file=setup.input_file, input_line=case.line,
                 max_new_tokens=setup.sampling.max_new_tokens, batch_size=batch_size,
                 settings_hash=setup.settings_hash, prompt_hash=prompts_hash(prompts))
            for case, prompts in zip(batch, chats, strict=True)]


def judge_batch(batch: Sequence[Case], setup: RunSetup, backend: Backend) -> list[ResultRecord]:
    """One record per case of ``batch``: rendered, generated ``setup.samples`` times
    (sample k seeded with the judge's seed + k) in one generate call per sample, then
    the kind's ``finish``. A backend that raises gives every case of the batch a
    ``backend_error`` record (re-run to judge them again) instead of stopping the run."""
    chats = [setup.chats(case) for case in batch]
    bases = case_bases(batch, chats, setup, len(batch))
    generated = _generate(backend, [chat for prompts in chats for chat in prompts], setup,
                          setup.samples)
    if isinstance(generated, str):
        return [ResultRecord(status="backend_error", reason=generated, **base) for base in bases]
    runs, elapsed = generated
    return setup.kind.finish(batch, setup, backend, runs, [elapsed] * len(batch), bases)


def finish_scores(batch: Sequence[Case], setup: RunSetup, backend: Backend,
                 runs: Sequence[Sequence[Generation]], seconds: Sequence[float],
                 bases: Sequence[Mapping[str, Any]]) -> list[ResultRecord]:
    """The records of ``batch`` from its generations: ``runs[k]`` holds sample k's, one per
    prompt of each case in turn (a pair's two orders are two prompts). Validated, given
    their score distributions and, for several samples, reduced; ``seconds``: each case's
    generation time (an absolute rubric's records). A batch streamed case by case gets the
    same records as one generated at once."""
    judged = [[judge_generation(setup.rubric, setup.output_model, generation,
                                dict(base, batch_seconds=elapsed))
               for generation, base, elapsed in zip(gens, bases, seconds, strict=True)]
              for gens in runs]
    if isinstance(backend, ScoringBackend):
        for gens, sample_records in zip(runs, judged):
            add_distributions(setup, backend, gens, sample_records)
    records = []
    for index in range(len(bases)):
        per_sample = [sample_records[index] for sample_records in judged]
        records.append(per_sample[0] if setup.samples == 1
                       else combine_verdicts(setup.rubric, per_sample, setup.reduce, "samples",
                                             list(range(setup.samples))))
    return records


def _walk(setup: RunSetup, backend: ScoringBackend, generations: Sequence[Generation],
          records: Sequence[ResultRecord],
          slots_of: Callable[[Rubric, Mapping[str, Any]], list[ScoreSlot]],
          ) -> list[tuple[int, list[ScoreSlot], list[ValueDistribution | None]]]:
    """The value distributions of the slots ``slots_of`` finds in every ``ok`` verdict, as
    (record index, slots, distributions). A failure here costs only the distributions: the
    verdicts are kept, and it is logged."""
    wanted: list[int] = []
    slots: list[list[ScoreSlot]] = []
    anchors: list[list[ScoreAnchor]] = []
    for index, (generation, record) in enumerate(zip(generations, records)):
        if record.status != "ok" or record.scores is None:
            continue
        found = slots_of(setup.rubric, record.scores)
        offsets = value_offsets(setup.rubric, record.scores, generation.text or "")
        if not found or offsets is None:
            continue
        wanted.append(index)
        slots.append(found)
        anchors.append([ScoreAnchor(s.path, offsets[s.path], s.allowed) for s in found])
    if not wanted:
        return []
    try:
        dists = backend.score_distributions(setup.schema_text,
                                            [generations[i] for i in wanted], anchors)
    except Exception as exc:  # the verdicts stand without their distributions
        log.error("score distributions failed for a batch of %d verdict(s): %s",
                  len(wanted), type(exc).__name__)
        return []
    return list(zip(wanted, slots, dists, strict=True))


def add_distributions(setup: RunSetup, backend: ScoringBackend, generations: Sequence[Generation],
                      records: list[ResultRecord]) -> None:
    """Give every ``ok`` record of one generate call its score distributions (in place)."""
    for index, found, per_anchor in _walk(setup, backend, generations, records, score_slots):
        out = {slot.path: summarize_distribution(dist.probabilities, slot.value, dist.coverage)
               for slot, dist in zip(found, per_anchor, strict=True) if dist is not None}
        if out:
            records[index] = records[index].model_copy(update={"distributions": out})


def choice_probabilities(setup: RunSetup, backend: Backend, generations: Sequence[Generation],
                         records: Sequence[ResultRecord],
                         ) -> list[dict[str, dict[str, float]] | None]:
    """Per record, the judge's exact probability of each choice of a pairwise verdict (in
    positions, as written); None where it has none."""
    out: list[dict[str, dict[str, float]] | None] = [None] * len(records)
    if not isinstance(backend, ScoringBackend):
        return out
    for index, found, per_anchor in _walk(setup, backend, generations, records, choice_slots):
        probs = {slot.path: {str(v): float(p) for v, p in dist.probabilities.items()}
                 for slot, dist in zip(found, per_anchor, strict=True) if dist is not None}
        out[index] = probs or None
    return out

