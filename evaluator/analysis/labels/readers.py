"""The readers of ``--labels``, chosen by format from a small registry (:data:`READERS`,
first that claims the path): a labelling sheet's folder, a Label Studio JSON export, a
labels file. Each gives a :class:`~evaluator.analysis.labels.labelset.LabelSet`; no command
asks which one read it. A new labels format is a reader here (and its test).

:func:`field_needed` is the one rule for ``--label-field`` across commands: needed unless
every ``--labels`` is read by a reader whose labels name their criteria (a sheet, an
export); then it is optional, the criterion to read."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from evaluator.analysis.labels import file_reader, label_studio, sheet_reader
from evaluator.analysis.labels.labelset import LabelSet
from evaluator.data.sources import LabelSource
from evaluator.rubrics.rubric import Rubric


@dataclass(frozen=True)
class LabelReader:
    """One labels format: whether it ``claims`` a path, whether its labels name their
    criteria (``named``), how it reads them (``read(path, source, rubric, pairwise)``) and,
    for named ones, the criteria they rate without reading every label (``criteria``)."""

    noun: str
    claims: Callable[[Path], bool]
    named: bool
    read: Callable[[Path, LabelSource, Rubric | None, bool], LabelSet]
    criteria: Callable[[Path], list[str]] | None = None


def _sheet(path: Path, source: LabelSource, rubric: Rubric | None, pairwise: bool) -> LabelSet:
    return sheet_reader.read_sheet_labels(
        path, rubric=rubric, rubric_hash=rubric.source_sha256 if rubric else None,
        pairwise=pairwise)


def _label_studio(path: Path, source: LabelSource, rubric: Rubric | None,
                  pairwise: bool) -> LabelSet:
    return label_studio.read_export(path, rubric=rubric, pairwise=pairwise)


def _file(path: Path, source: LabelSource, rubric: Rubric | None, pairwise: bool) -> LabelSet:
    return file_reader.read_label_file(path, id_column=source.id_column)


READERS: tuple[LabelReader, ...] = (
    LabelReader(sheet_reader.NOUN, sheet_reader.claims, True, _sheet, sheet_reader.criteria),
    LabelReader(label_studio.NOUN, label_studio.claims, True, _label_studio,
                label_studio.criteria),
    LabelReader(file_reader.NOUN, file_reader.claims, False, _file),
)


def reader_for(path: Path) -> LabelReader:
    """The reader of ``path``: the first of :data:`READERS` that claims it."""
    return next(reader for reader in READERS if reader.claims(Path(path)))


def read_labels(source: LabelSource, path: Path | None = None, *, rubric: Rubric | None = None,
                pairwise: bool = False) -> LabelSet:
    """The labels of ``path`` (default: the source's one path), read by its reader.
    ``rubric``: the results' rubric (scales, names); ``pairwise``: the results are pairwise."""
    path = Path(str(source.path if path is None else path))
    return reader_for(path).read(path, source, rubric, pairwise)


def names_criteria(path: Path) -> bool:
    """Whether the labels at ``path`` name their criteria (``--label-field`` optional)."""
    return reader_for(Path(path)).named


def rated(path: Path) -> list[str]:
    """The criteria the labels at ``path`` name ([]: one column, a labels file)."""
    reader = reader_for(Path(path))
    if not reader.named or reader.criteria is None:
        return []
    return reader.criteria(Path(path))


FIELD_NEEDED = ("--labels needs --label-field, the labels file's column holding the label (a "
                "sheet folder or a Label Studio export names its criteria: none needed)")


def field_needed(source: LabelSource | None) -> bool:
    """Whether ``--label-field`` must be given: labels were given, without it, and one of
    them does not name its criteria (a labels file)."""
    return (source is not None and bool(source.paths) and not source.field
            and not all(names_criteria(p) for p in source.paths))
