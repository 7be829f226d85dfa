"""The pairwise kind (two candidates compared), run side: each pair judged in both orders
(:mod:`evaluator.run.pairing`), the two verdicts reconciled into one record; its systems
named; no jury, no self-consistency samples."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evaluator.data.cases import Case
from evaluator.data.files import same_file
from evaluator.data.results import ResultRecord
from evaluator.judges.backends import Backend, Generation
from evaluator.judges.models_file import JudgeConfigError
from evaluator.rubrics.rubric import Rubric
from evaluator.run.judging import RunSetup, choice_probabilities, judge_generation
from evaluator.run.manifest import prompt_hash
from evaluator.run.pairing import ORDERS, ordered_cases, pair_order, pair_record
from evaluator.run.task import Judge, Task


def prompts(setup: RunSetup, case: Case) -> list[list[dict[str, str]]]:
    """The pair's two orders (A first, then B first)."""
    return [setup.chat(order) for order in ordered_cases(setup.rubric, case)]


def finish(batch: Sequence[Case], setup: RunSetup, backend: Backend,
           runs: Sequence[Sequence[Generation]], seconds: Sequence[float],
           bases: Sequence[Mapping[str, Any]]) -> list[ResultRecord]:
    """A pairwise rubric's records: each pair's two orders (:mod:`evaluator.run.pairing`,
    generated together, once: ``runs[0]``) validated, with each choice's probabilities."""
    generations = runs[0]
    chats = [setup.chat(order) for case in batch
             for order in ordered_cases(setup.rubric, case)]
    judged = [judge_generation(setup.rubric, setup.output_model, generation,
                               {"case_id": "", "rubric": "", "judge": "",
                                "max_new_tokens": setup.sampling.max_new_tokens,
                                "prompt_hash": prompt_hash(chat)})
              for generation, chat in zip(generations, chats, strict=True)]
    probabilities = choice_probabilities(setup, backend, generations, judged)
    records = []
    for i, case in enumerate(batch):
        parts = [pair_order(setup.rubric, first, judged[2 * i + k], probabilities[2 * i + k])
                 for k, first in enumerate(ORDERS)]
        records.append(pair_record(setup.rubric, case, setup.systems, parts,
                                   dict(bases[i], batch_seconds=seconds[i])))
    return records


def systems(task: Task, judge: Judge, rubric: Rubric) -> tuple[str, str]:
    """The two systems' names: ``--systems``, else the two files' names (``--versus``),
    else the two candidate columns' (after ``--map``)."""
    if judge.samples > 1:
        raise JudgeConfigError("--samples: a pairwise rubric judges each pair once in each "
                               "order; self-consistency samples are for absolute rubrics")
    if (task.versus is None) != (task.answer_column is None):
        raise JudgeConfigError("--versus FILE and --answer-column COLUMN go together: the "
                               "second file, and the column holding each file's answer")
    if task.versus is not None and same_file(Path(task.versus), Path(task.input_path)):
        raise JudgeConfigError(f"{task.versus}: --versus is the --input file itself; give the "
                               "other system's answers")
    if task.systems is not None:
        names = tuple(task.systems)
    elif task.versus is not None:
        names = (Path(task.input_path).stem, Path(task.versus).stem)
    else:
        first, second = rubric.candidates or ("A", "B")
        mapping = dict(task.mapping or {})
        names = (mapping.get(first, first), mapping.get(second, second))
    if len(names) != 2 or any(not name.strip() or len(name) > 100 or not name.isprintable()
                              for name in names):
        given = ("--systems: give" if task.systems is not None else
                 "the candidates' names come from the file (or column) names, which do not "
                 "fit: give them with --systems,")
        raise JudgeConfigError(f"{given} two names, A,B (printable, at most 100 "
                               "characters each)")
    if names[0] == names[1]:
        raise JudgeConfigError(f"both candidates would be called {names[0]!r}; name them "
                               "with --systems A,B")
    return names[0], names[1]


def check_jury(jury_name: str) -> None:
    """A pairwise rubric is judged by one judge, in both orders: a jury is refused."""
    raise JudgeConfigError(f"jury {jury_name!r}: a pairwise rubric is judged by one judge "
                           "(in both orders); run it once per judge, with --model NAME")
