"""Where a command's labels and cases come from: one record for each, built once from the
command line by :mod:`evaluator.cli.options` and passed down whole."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from evaluator.data.sheet import is_sheet_dir


@dataclass(frozen=True)
class LabelSource:
    """``--labels`` (one file or sheet folder, or one per results file), ``--label-field``
    (None: not given; with a sheet folder, the criterion KEY or KEY.label), ``--label-id-column`` and ``--label-scale`` (None: the rubric's or the
    observed values)."""

    paths: tuple[Path, ...]
    field: str | None
    id_column: str = "case_id"
    scale: tuple[float, ...] | None = None

    @property
    def path(self) -> Path | None:
        """The labels file of a command that takes one (None: not given)."""
        return self.paths[0] if self.paths else None

    def is_sheet(self, path: Path | None = None) -> bool:
        """Whether ``path`` (default: the one labels path) is a labelling sheet's folder
        (a folder holding ``sheet.json``, drawn by ``evaluator review``) rather than a
        labels file: its labels are read from the sheet's journal."""
        path = self.path if path is None else path
        return path is not None and is_sheet_dir(Path(path))


@dataclass(frozen=True)
class CaseSource:
    """The cases file a run read and how it read it: ``--cases`` (None: the one the records
    name), ``--map`` (rubric field -> column) and ``--case-id-column``."""

    path: Path | None = None
    mapping: Mapping[str, str] = field(default_factory=dict)
    id_column: str = "case_id"
