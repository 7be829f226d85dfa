"""The case text of a labelling sheet: each drawn case's rubric input fields, read from the
cases file the run read, the way the run read it (``sheet.json``'s ``cases``: path, SHA-256,
``--map``, ``--id-column``, ``--versus``, ``--answer-column``), with the run's own readers
(:func:`~evaluator.data.cases.read_cases`, :func:`~evaluator.data.pairs.iter_pairs`).

A cases file whose bytes changed since the run, or a sheet that does not say how its cases
were read, is refused in one line. Messages name files, lines and fields, never case text.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from evaluator.data.cases import Case, read_cases
from evaluator.data.files import sha256_file, show_path
from evaluator.data.pairs import iter_pairs
from evaluator.data.sheet import SHEET_JSON, CasesRef, SheetError, SheetInfo
from evaluator.rubrics.rubric import Rubric


def locate(sheet_dir: Path, given: str) -> Path:
    """A path recorded in ``sheet.json``: as given (absolute, or relative to the current
    folder, as the run was given it), else relative to the sheet folder, else a file of
    its name in the sheet folder or the two folders above it (a study's folder holds its
    answers and ``labels/system-K``: the study moved elsewhere as a whole). The caller
    checks the file found against the SHA-256 recorded with it."""
    path = Path(given)
    if path.exists():
        return path
    sheet = Path(sheet_dir)
    candidates = [] if path.is_absolute() else [sheet / path]
    candidates += [folder / path.name for folder in (sheet, sheet.parent, sheet.parent.parent)]
    return next((c for c in candidates if c.exists()), path)


def _checked(sheet_dir: Path, ref: CasesRef) -> Path:
    path = locate(sheet_dir, ref.path)
    if not path.is_file():
        raise SheetError(f"{show_path(path)}: the cases file the run read is not there "
                         f"({SHEET_JSON} 'cases.path'); put it back at that path, or run "
                         "from the folder the run was started in")
    try:
        digest = sha256_file(path)
    except OSError as exc:
        raise SheetError(f"cannot read {show_path(path)} ({exc.strerror})") from None
    if digest != ref.sha256:
        raise SheetError(f"{show_path(path)} has changed since the run (SHA-256 differs from "
                         f"{SHEET_JSON} 'cases.sha256'); restore the file the run read, or "
                         "run and draw the sheet again")
    return path


def read_sheet_cases(sheet_dir: Path, info: SheetInfo, rubric: Rubric,
                     case_ids: Iterable[str]) -> dict[str, dict[str, str]]:
    """Case id -> the rubric's input fields, for every id of ``case_ids``. Raises
    :class:`~evaluator.data.sheet.SheetError` in one line when the sheet has no ``cases``,
    the file changed since the run, or a case of the sheet is not (validly) in it."""
    ref = info.cases
    if ref is None:
        raise SheetError(f"{show_path(Path(sheet_dir) / SHEET_JSON)}: the run predates "
                         "recorded case reading (no 'cases'); re-run it and draw the sheet "
                         "again, or label from review.csv (review --show-text)")
    path = _checked(sheet_dir, ref)
    wanted = set(case_ids)
    if ref.versus is not None:
        versus = locate(sheet_dir, ref.versus)
        items: Iterable[object] = iter_pairs(path, versus, rubric,
                                             answer_column=ref.answer_column or "",
                                             mapping=ref.mapping, id_column=ref.id_column)
    else:
        items = read_cases(path, rubric, mapping=ref.mapping, id_column=ref.id_column)
    found: dict[str, dict[str, str]] = {}
    for item in items:
        if isinstance(item, Case) and item.case_id in wanted:
            found[item.case_id] = item.fields
    missing = [c for c in wanted if c not in found]
    if missing:
        raise SheetError(f"{show_path(path)}: {len(missing)} case(s) of the sheet are not "
                         f"readable cases of this file (first: {min(missing)!r}); is "
                         "it the file the run read?")
    return found
