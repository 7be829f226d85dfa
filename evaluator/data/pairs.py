"""Pairs from two case files joined on case id: the same cases answered by two systems.

File A gives every input of a pairwise rubric except the second candidate; file B gives
the second candidate (``answer_column`` holds each file's answer). Each pass over the pairs
first indexes B (its answers, and a hash of any shared field it also has), then streams A, so a pair comes
out in A's order with A's line. Nothing is dropped silently: a case in one file only, a bad
row in B, or a shared field (the patient, the reference) that differs between the files is
an :class:`~evaluator.data.cases.InputProblem` that the run records as ``input_error``.
Messages name files, lines and fields, never case text.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from evaluator.data.cases import (
    Case,
    InputFileError,
    InputProblem,
    UniqueIds,
    iter_rows,
    line_word,
)
from evaluator.data.files import same_file
from evaluator.rubrics.rubric import InputField, Rubric


@dataclass(frozen=True)
class _Answer:
    line: int
    text: str | None                 # None: the row is a problem
    problem: InputProblem | None
    shared: dict[str, str]           # shared input -> sha256 of B's text (when given)


def _without_id(path: Path, item: Case, id_column: str) -> InputFileError:
    return InputFileError(f"{path} {line_word(path)} {item.line}: no case id in column "
                          f"{id_column!r}; --versus joins the two files on case id, so "
                          "every row of both needs one (name the id column with --id-column)")


def _answer_hint(problem: InputProblem, answer_column: str) -> InputProblem:
    """A problem in a file's answer column, with the hint that applies with --versus."""
    if problem.field != answer_column:
        return problem
    message = problem.message.split("; add it, or map another column", 1)[0]
    if message != problem.message:
        message += "; add it, or name the answers' column with --answer-column"
    return InputProblem(problem.case_id, problem.line, problem.field, message, problem.file)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class _Join:
    """What joining the two files needs: their paths, the second candidate's input, the
    shared inputs, the columns (``mapping``, ``answer_column``, ``id_column``)."""

    path_a: Path
    path_b: Path
    second: str
    shared: list[str]
    mapping: Mapping[str, str]
    answer_column: str
    id_column: str


def _index_b(rows_b: Iterator[Case | InputProblem], join: _Join) -> dict[str, _Answer]:
    ids = UniqueIds(join.path_b, join.id_column)
    index: dict[str, _Answer] = {}
    for item in rows_b:
        ids.add(item)
        if isinstance(item, InputProblem):
            index[item.case_id] = _Answer(item.line, None,
                                          _answer_hint(item, join.answer_column), {})
            continue
        if item.case_id == f"line-{item.line}":
            raise _without_id(join.path_b, item, join.id_column)
        index[item.case_id] = _Answer(
            item.line, item.fields[join.second], None,
            {name: _digest(item.fields[name]) for name in join.shared if item.fields[name]})
    ids.check()
    return index


def iter_pairs(path_a: Path, path_b: Path, rubric: Rubric, *, answer_column: str,
               mapping: Mapping[str, str] | None = None, id_column: str = "case_id",
               limit: int | None = None) -> Iterator[Case | InputProblem]:
    """Every case of ``path_a`` with its answer from ``path_b`` as the second candidate,
    then every case of ``path_b`` that ``path_a`` lacks (as an input problem; not with
    ``limit``). ``mapping`` maps the rubric's shared inputs to columns (in both files)."""
    if not rubric.pairwise or rubric.candidates is None:
        raise InputFileError(f"--versus pairs two files for a pairwise rubric; "
                             f"{rubric.name!r} is not one (see `evaluator rubrics`)")
    first, second = rubric.candidates
    mapping = dict(mapping or {})
    named = sorted(set(mapping) & {first, second})
    if named:
        raise InputFileError(f"--map names the candidates {named}; with --versus the "
                             "column holding each file's answer is --answer-column")
    unknown = sorted(set(mapping) - set(rubric.inputs))
    if unknown:
        raise InputFileError(f"--map names {unknown}, which are not inputs of rubric "
                             f"{rubric.name!r} (its inputs: {', '.join(rubric.inputs)})")
    if same_file(Path(path_a), Path(path_b)):
        raise InputFileError(f"{path_b}: --versus is the --input file itself; give the "
                             "other system's answers")
    shared = [name for name in rubric.inputs if name not in (first, second)]
    join = _Join(Path(path_a), Path(path_b), second, shared, mapping, answer_column,
                 id_column)
    inputs_a = {name: field for name, field in rubric.inputs.items() if name != second}
    inputs_b = {second: InputField(description="", required=True),
                **{name: InputField(description="", required=False) for name in shared}}
    # Both files are checked now; B is read (indexed) when the pairs are first iterated.
    rows_a = iter_rows(path_a, inputs_a, mapping={**mapping, first: answer_column},
                       id_column=id_column, limit=limit)
    rows_b = iter_rows(path_b, inputs_b, mapping={**mapping, second: answer_column},
                       id_column=id_column)
    return _joined(rows_a, rows_b, join, leftovers=limit is None)


def _joined(rows_a: Iterator[Case | InputProblem], rows_b: Iterator[Case | InputProblem],
            join: _Join, *, leftovers: bool) -> Iterator[Case | InputProblem]:
    index = _index_b(rows_b, join)
    path_a, path_b, answer_column = join.path_a, join.path_b, join.answer_column
    seen: set[str] = set()
    for item in rows_a:
        seen.add(item.case_id)
        if isinstance(item, InputProblem):
            yield _answer_hint(item, answer_column)
            continue
        if item.case_id == f"line-{item.line}":
            raise _without_id(path_a, item, join.id_column)
        answer = index.get(item.case_id)
        if answer is None:
            yield InputProblem(item.case_id, item.line, None,
                               f"no case with this id in {path_b.name} (--versus); both "
                               "files must hold every case", str(path_a))
            continue
        if answer.problem is not None:
            problem = answer.problem
            yield InputProblem(item.case_id, item.line, problem.field,
                               f"its row in {path_b.name} ({line_word(path_b)} "
                               f"{problem.line}) cannot be used: {problem.message}",
                               str(path_a))
            continue
        differs = [join.mapping.get(name, name) for name in join.shared
                   if name in answer.shared and answer.shared[name] != _digest(item.fields[name])]
        if differs:
            yield InputProblem(item.case_id, item.line, differs[0],
                               f"differs between {path_a.name} and {path_b.name} "
                               f"({line_word(path_b)} {answer.line}) for this case; both "
                               "files must describe the same case", str(path_a))
            continue
        yield Case(item.case_id, item.line, {**item.fields, join.second: answer.text or ""})
    if not leftovers:
        return
    for case_id, answer in index.items():
        if case_id in seen:
            continue
        if answer.problem is not None:
            yield answer.problem  # a bad row of B that matches no case of A
        else:
            yield InputProblem(case_id, answer.line, None,
                               f"no case with this id in {path_a.name} (--input); both "
                               "files must hold every case", str(path_b))
