"""Reading a labels file (JSONL or CSV) a user names: its rows with their line numbers, and a
label cell as a number. :mod:`evaluator.analysis.agreement` reads labels through it, and
:mod:`evaluator.analysis.designs` a worksheet's design columns."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

from evaluator.common.readable import NotARegularFile, check_regular_file


class AgreementError(ValueError):
    """The labels or results cannot be joined (missing field, no overlap, bad label)."""


def label_number(value: object) -> float | None:
    """A label as a float, or None when it is not a number (bools are not numbers)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def label_rows(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(line number, row) for every row of a JSONL or CSV labels file."""
    suffix = path.suffix.lower()
    try:
        check_regular_file(path, "labels file")
        text = path.read_text(encoding="utf-8")
    except NotARegularFile as exc:
        raise AgreementError(str(exc)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise AgreementError(f"{path}: cannot read labels file ({exc})") from None
    rows: list[tuple[int, dict[str, Any]]] = []
    if suffix == ".csv":
        reader = csv.DictReader(text.splitlines())
        for row in reader:
            rows.append((reader.line_num, row))
        return rows
    if suffix != ".jsonl":
        raise AgreementError(f"{path}: labels must be a .jsonl or .csv file")
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise AgreementError(f"{path} line {number}: not valid JSON ({exc.msg})") from None
        if not isinstance(row, dict):
            raise AgreementError(f"{path} line {number}: expected a JSON object")
        rows.append((number, row))
    return rows
