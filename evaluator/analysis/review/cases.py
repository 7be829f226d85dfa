"""Which cases file a sheet's text comes from, and how it is read: the run's own (its
manifest records the file, its SHA-256 and the reading options), unless the user gives
``--cases``, ``--map`` or ``--case-id-column``, which override it one by one.

A file read for the sheet must be the one the run read: its SHA-256 is checked against the
manifest's, and a file changed since the run is refused in one line. A manifest written before
the runs recorded their reading options gives nothing here: the options are given as before.
A run of two files (``--versus``) gives each case's fields from both, as the run paired them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from evaluator.analysis.review.signals import ReviewError
from evaluator.data.cases import Case, InputFileError
from evaluator.data.files import sha256_file, show_path
from evaluator.data.pairs import iter_pairs
from evaluator.data.sheet import CasesRef
from evaluator.data.sources import CaseSource
from evaluator.rubrics.rubric import Rubric


@dataclass(frozen=True)
class Given:
    """Which of the reading options the user gave (the others are the run's)."""

    path: bool = False
    mapping: bool = False
    id_column: bool = False


def _check_unchanged(path: Path, recorded: str | None, what: str, manifest: str) -> None:
    # The --versus file has no option of review's: it is put back, or the run made again.
    fix = ("give the file the run read with --cases" if what == "cases file" else
           "put back the file the run read")
    if not path.is_file():
        raise ReviewError(f"{what} {show_path(path)} (the one {manifest} records) is not "
                          f"there: {fix}")
    try:
        digest = sha256_file(path)
    except OSError as exc:
        raise ReviewError(f"cannot read {what} {show_path(path)} ({exc.strerror})") from None
    if recorded is not None and digest != recorded:
        raise ReviewError(f"{what} {show_path(path)} changed since the run (its SHA-256 is "
                          f"not the one {manifest} records): {fix}, or run again on this "
                          "one")


def sheet_reading(recorded: CasesRef | None, given: CaseSource, which: Given, *,
                  read: bool, manifest: str) -> tuple[CaseSource, CasesRef | None]:
    """(how to read the cases for ``--show-text``, the :class:`CasesRef` sheet.json records)
    from the run's reading (``recorded``, from its manifest; None for an older one) and the
    options the user gave (``given``; ``which`` says which were given). The path is made
    absolute (the labelling page may run from another folder). ``read``: the file will be
    read (``--show-text``): it, and a pairwise run's ``--versus`` file, must be the ones the
    run read (SHA-256), else :class:`ReviewError` in one line; a ``--cases`` given is
    checked too. ``manifest``: the manifest's name, for the messages."""
    if recorded is None:
        if given.path is None or not Path(given.path).is_file():
            return given, None
        # An older manifest: the file the user names, as it is now.
        return given, CasesRef(path=str(Path(given.path).resolve()),
                               sha256=sha256_file(Path(given.path)),
                               mapping=dict(given.mapping), id_column=given.id_column)
    path = Path(given.path) if which.path and given.path is not None else Path(recorded.path)
    mapping: Mapping[str, str] = given.mapping if which.mapping else recorded.mapping
    id_column = given.id_column if which.id_column else recorded.id_column
    if read or which.path:
        _check_unchanged(path, recorded.sha256, "cases file", manifest)
        if read and recorded.versus is not None:
            _check_unchanged(Path(recorded.versus), recorded.versus_sha256, "--versus file",
                             manifest)
    ref = recorded.model_copy(update={"path": str(path.resolve()), "mapping": dict(mapping),
                                      "id_column": id_column})
    return CaseSource(path, dict(mapping), id_column), ref


def pair_texts(ids: set[str], rubric: Rubric, ref: CasesRef) -> dict[str, dict[str, str]]:
    """A run of two files (``--versus``): each drawn case's fields, candidate B's answer
    from the second file, read as the run read them."""
    try:
        items = iter_pairs(Path(ref.path), Path(str(ref.versus)), rubric,
                           answer_column=str(ref.answer_column), mapping=ref.mapping,
                           id_column=ref.id_column)
        return {item.case_id: dict(item.fields) for item in items
                if isinstance(item, Case) and item.case_id in ids}
    except (InputFileError, OSError) as exc:
        raise ReviewError(f"the cases files cannot be read ({exc})") from None
