"""Where a command's labels and cases come from: one record for each, built once from the
command line by :mod:`evaluator.cli.options` and passed down whole."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class LabelSource:
    """``--labels`` (one labels path, or one per results file: a labels file, a sheet folder,
    a Label Studio export; read by :mod:`evaluator.analysis.labels.readers`),
    ``--label-field`` (None: not given; with labels that name their criteria, the criterion
    KEY or KEY.label), ``--label-id-column`` and ``--label-scale`` (None: the rubric's or
    the observed values)."""

    paths: tuple[Path, ...]
    field: str | None
    id_column: str = "case_id"
    scale: tuple[float, ...] | None = None

    @property
    def path(self) -> Path | None:
        """The labels file of a command that takes one (None: not given)."""
        return self.paths[0] if self.paths else None


@dataclass(frozen=True)
class CaseSource:
    """The cases file a run read and how it read it: ``--cases`` (None: the one the records
    name), ``--map`` (rubric field -> column) and ``--case-id-column``."""

    path: Path | None = None
    mapping: Mapping[str, str] = field(default_factory=dict)
    id_column: str = "case_id"
