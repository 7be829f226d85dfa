"""The review worksheet's inputs: a file a user names, checked before it is read, and
labels so far, where an empty label means "not labelled yet" (a half-filled worksheet)."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

from evaluator.analysis.review_signals import ReviewError
from evaluator.common.readable import NotARegularFile, check_regular_file
from evaluator.data.files import show_path


def check_input_file(path: Path, what: str) -> None:
    """Raise :class:`ReviewError` in one line unless ``path`` is a readable regular file."""
    try:
        check_regular_file(path, what)
    except FileNotFoundError:
        raise ReviewError(f"{what} {show_path(path)} does not exist") from None
    except NotARegularFile as exc:
        raise ReviewError(str(exc)) from None
    except OSError as exc:
        raise ReviewError(f"cannot read {what} {show_path(path)} ({exc.strerror})") from None



def _label_value(value: object) -> float | None | str:
    """A label: a float, None for "not labelled yet" (empty or null), or "bad"."""
    if value is None or (isinstance(value, str) and value.strip() == ""):
        return None
    if isinstance(value, bool):
        return "bad"
    try:
        number = float(value.strip() if isinstance(value, str) else value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "bad"
    return number if math.isfinite(number) else "bad"


def _label_rows(path: Path) -> list[tuple[int, dict[str, Any]]]:
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".jsonl"):
        raise ReviewError(f"labels file {show_path(path)}: must be a .csv or .jsonl file")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ReviewError(f"labels file {show_path(path)} is not UTF-8 text") from None
    except OSError as exc:
        raise ReviewError(f"cannot read labels file {show_path(path)} ({exc.strerror})") from None
    if suffix == ".csv":
        reader = csv.DictReader(io.StringIO(text, newline=""))
        try:
            return [(reader.line_num, row) for row in reader]
        except csv.Error as exc:
            raise ReviewError(f"labels file {show_path(path)} line {reader.line_num}: not "
                              f"valid CSV ({exc})") from None
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ReviewError(f"labels file {show_path(path)} line {number}: not valid JSON "
                              f"({exc.msg})") from None
        if not isinstance(row, dict):
            raise ReviewError(f"labels file {show_path(path)} line {number}: expected a JSON "
                              "object")
        rows.append((number, row))
    return rows


def read_labelled(path: Path, label_field: str, id_column: str = "case_id") -> dict[str, float]:
    """Case id -> label for every row of a labels file (CSV or JSONL) with a label. Unlike
    ``evaluator agree``, a row whose label is empty (or null) is "not labelled yet" and left
    out, so a half-filled worksheet can be read; a label that is not a number, a row
    without an id and a repeated id are errors naming the line, never the id."""
    path = Path(path)
    check_input_file(path, "labels file")
    rows = _label_rows(path)
    if not any(label_field in row for _, row in rows):
        raise ReviewError(f"labels file {show_path(path)}: no row has the label field "
                          f"{label_field!r}")
    labels: dict[str, float] = {}
    first: dict[str, int] = {}
    for number, row in rows:
        case_id = row.get(id_column)
        if case_id is None or str(case_id).strip() == "":
            raise ReviewError(f"labels file {show_path(path)} line {number}: no case id in "
                              f"{id_column!r} (--id-column)")
        case_id = str(case_id)
        if case_id in first:
            raise ReviewError(f"labels file {show_path(path)} lines {first[case_id]} and "
                              f"{number} have the same case id (in {id_column!r})")
        first[case_id] = number
        value = _label_value(row.get(label_field))
        if value == "bad":
            raise ReviewError(f"labels file {show_path(path)} line {number}: field "
                              f"{label_field!r} is not a number")
        if isinstance(value, float):
            labels[case_id] = value
    return labels
