"""Reading cases (JSONL, CSV) and validating them against a rubric's input fields.

Every problem is reported with file, line, case id and field, and never with the case text
itself (it may be PHI). A bad row becomes an :class:`InputProblem`; the good rows go on.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from evaluator.rubric import Rubric

SUPPORTED_SUFFIXES = (".jsonl", ".csv")


class InputFileError(ValueError):
    """The input file as a whole cannot be used (unreadable, unknown format, duplicate ids)."""


@dataclass(frozen=True)
class Case:
    """One valid case: its id, where it came from, and the rubric's input fields."""

    case_id: str
    line: int
    fields: dict[str, str]


@dataclass(frozen=True)
class InputProblem:
    """A row that cannot be judged, with what to do about it."""

    case_id: str
    line: int
    field: str | None
    message: str
    file: str = ""

    def describe(self) -> str:
        """``file:line [case id] field: message`` with no case text."""
        where = f"{self.file}:{self.line}"
        column = f" field {self.field!r}:" if self.field else ""
        return f"{where} case {self.case_id!r}:{column} {self.message}"


@dataclass
class _Row:
    line: int
    data: dict[str, object] | None
    problem: str | None = None


def _decode_line(raw: bytes) -> str | None:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _read_jsonl(path: Path) -> Iterator[_Row]:
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            text = _decode_line(raw)
            if text is None:
                yield _Row(number, None, "line is not valid UTF-8; re-encode the file as UTF-8")
                continue
            if not text.strip():
                continue
            try:
                value = json.loads(text)
            except json.JSONDecodeError as exc:
                yield _Row(number, None, f"not valid JSON ({exc.msg} at column {exc.colno}); "
                                         "each line must be one JSON object")
                continue
            if not isinstance(value, dict):
                yield _Row(number, None, f"expected a JSON object, got {type(value).__name__}")
                continue
            yield _Row(number, value)


def _read_csv(path: Path) -> Iterator[_Row]:
    # surrogateescape keeps undecodable bytes as lone surrogates, so one bad row is
    # reported on its own instead of failing the whole file.
    with path.open("r", encoding="utf-8", errors="surrogateescape", newline="") as handle:
        reader = csv.DictReader(handle)
        if reader.fieldnames is None:
            return
        for record in reader:
            line = reader.line_num
            if None in record:
                yield _Row(line, None, f"row has {len(record) - 1 + len(record[None])} values "
                                       f"but the header has {len(reader.fieldnames)} columns")
                continue
            if any(isinstance(v, str) and _has_surrogates(v) for v in record.values()):
                yield _Row(line, None, "row is not valid UTF-8; re-encode the file as UTF-8")
                continue
            yield _Row(line, dict(record))


def _has_surrogates(text: str) -> bool:
    return any("\udc80" <= ch <= "\udcff" for ch in text)


def _rows(path: Path) -> Iterator[_Row]:
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return _read_jsonl(path)
    if suffix == ".csv":
        return _read_csv(path)
    raise InputFileError(f"{path}: unsupported input format {suffix!r}; use "
                         f"{' or '.join(SUPPORTED_SUFFIXES)}")


def _as_text(value: object) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return str(value)
    return None


def read_cases(path: Path, rubric: Rubric, *, mapping: Mapping[str, str] | None = None,
               id_column: str = "case_id", limit: int | None = None) -> list[Case | InputProblem]:
    """Read and validate every row, in file order.

    ``mapping`` maps a rubric input name to the column that holds it. A row without an id
    column gets ``line-N``. Duplicate case ids are an :class:`InputFileError` before any
    case runs: a result file keyed by case id must never hold two verdicts for one id.
    """
    path = Path(path)
    if not path.is_file():
        raise InputFileError(f"{path}: input file not found")
    mapping = dict(mapping or {})
    unknown = sorted(set(mapping) - set(rubric.inputs))
    if unknown:
        raise InputFileError(f"--map names {unknown}, which are not inputs of rubric "
                             f"{rubric.name!r} (its inputs: {', '.join(rubric.inputs)})")
    items: list[Case | InputProblem] = []
    for row in _rows(path):
        if limit is not None and len(items) >= limit:
            break
        items.append(_validate_row(row, rubric, mapping, id_column, str(path)))
    seen: dict[str, int] = {}
    duplicates: list[str] = []
    for item in items:
        if item.case_id in seen:
            duplicates.append(f"{item.case_id!r} (lines {seen[item.case_id]} and {item.line})")
        else:
            seen[item.case_id] = item.line
    if duplicates:
        shown = "; ".join(duplicates[:10]) + (" ..." if len(duplicates) > 10 else "")
        raise InputFileError(f"{path}: duplicate case ids: {shown}. Each case needs a unique "
                             f"id (column {id_column!r}).")
    return items


def _validate_row(row: _Row, rubric: Rubric, mapping: Mapping[str, str], id_column: str,
                  file: str) -> Case | InputProblem:
    fallback_id = f"line-{row.line}"
    if row.data is None:
        return InputProblem(fallback_id, row.line, None, row.problem or "unreadable row", file)
    raw_id = row.data.get(id_column)
    case_id = _as_text(raw_id) if raw_id is not None else fallback_id
    if case_id is None or not case_id.strip():
        return InputProblem(fallback_id, row.line, id_column,
                            "case id must be a non-empty string or number", file)
    fields: dict[str, str] = {}
    for name, spec in rubric.inputs.items():
        column = mapping.get(name, name)
        if column not in row.data:
            if spec.required:
                hint = f" (map another column with --map {name}=COLUMN)"
                return InputProblem(case_id, row.line, column, "required field is missing" + hint,
                                    file)
            fields[name] = ""
            continue
        value = row.data[column]
        text = _as_text(value)
        if text is None:
            if value is None and not spec.required:
                fields[name] = ""
                continue
            kind = "null" if value is None else type(value).__name__
            return InputProblem(case_id, row.line, column, f"expected text, got {kind}", file)
        if spec.required and not text.strip():
            return InputProblem(case_id, row.line, column, "required field is empty", file)
        fields[name] = text
    return Case(case_id, row.line, fields)
