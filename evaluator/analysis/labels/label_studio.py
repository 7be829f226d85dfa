"""The reader of a Label Studio JSON export (being built: issue 46 item 1)."""

from __future__ import annotations

from pathlib import Path

from evaluator.analysis.labels.labelset import LabelSet
from evaluator.rubrics.rubric import Rubric

NOUN = "Label Studio export"


def claims(path: Path) -> bool:
    return False


def criteria(path: Path) -> list[str]:
    raise NotImplementedError


def read_export(path: Path, *, rubric: Rubric | None = None, pairwise: bool = False) -> LabelSet:
    raise NotImplementedError
