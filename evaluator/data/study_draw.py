"""A study's draw (issue 48): ``STUDY_DIR/labels/study-draw.json`` (:class:`StudyDraw`),
written once by ``evaluator study draw`` and read by the study's labelling page and its
report.

It freezes what the labels belong to: the plan as it was at the draw (its SHA-256 and its
exact text, so a later edit of ``study.yaml`` is seen and the declared rule can still be
read), each system's results file and SHA-256 and its sheet folder (``labels/system-K``,
one ordinary sheet per system, :mod:`evaluator.data.sheet`), the drawn cases, and each
labeller's queue: every system's answer for every case given to her, as separate items in
a seeded order, so that neither order nor position tells the system. A queue item names its
system by index; only the server reads this file, no page shows it.

The report reads it with :func:`read_study_draw` and finds each system's labels with
:func:`sheet_folders` (system K's labels are the journal of its sheet folder).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Literal

from pydantic import ConfigDict, ValidationError, model_validator

from evaluator.common.errors import UserError
from evaluator.common.record import Record
from evaluator.data.files import lock_path_for, sha256_file, show_path, write_bytes_atomic
from evaluator.data.sheet import REVIEW_JSONL, SheetError, read_sheet_info

LABELS_DIR = "labels"  # STUDY_DIR/labels: the draw and the systems' sheets
STUDY_DRAW_JSON = "study-draw.json"
STUDY_DRAW_FORMAT = 1
# A system's sheet folder, inside the labels folder: never a path of the file's choosing.
SHEET_NAME = re.compile(r"system-[1-9][0-9]{0,2}")


class StudyDrawError(UserError, ValueError):
    """A study's draw that cannot be read (missing, damaged, another format)."""


class _Strict(Record):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


def sheet_name(index: int) -> str:
    """The sheet folder of the system at 0-based ``index`` in the plan: ``system-1``, ..."""
    return f"system-{index + 1}"


class DrawnSystem(_Strict):
    """A system as drawn: its ``name`` and ``results`` path as the plan gives them, the
    results file's SHA-256 at the draw, its ``sheet`` folder (``system-K``, inside the labels
    folder) and that sheet's ``fingerprint`` (the SHA-256 of its ``review.jsonl``, which every
    journal line carries)."""

    name: str
    results: str
    results_sha256: str
    sheet: str
    fingerprint: str


class StudyDraw(_Strict):
    """``study-draw.json`` (the module docstring). ``drawn``: UTC ISO 8601 time. ``cases``:
    the drawn case ids (every system's sheet holds exactly these). ``queues``: labeller ->
    her items in the order the page shows them, each ``(system index, case id)`` with the
    system's 0-based index in ``systems``."""

    format: Literal[1] = STUDY_DRAW_FORMAT
    plan_sha256: str
    plan_text: str
    drawn: str
    systems: list[DrawnSystem]
    cases: list[str]
    seed: int
    queues: dict[str, list[tuple[int, str]]]

    @model_validator(mode="after")
    def _consistent(self) -> StudyDraw:
        if hashlib.sha256(self.plan_text.encode("utf-8")).hexdigest() != self.plan_sha256:
            # The frozen plan is what a report applies: an edit to it would change the
            # decision under the hash the page cites.
            raise ValueError("plan_text: the frozen plan is not the text whose SHA-256 is "
                             "plan_sha256 (edited since the draw)")
        for index, system in enumerate(self.systems):
            if system.sheet != sheet_name(index):
                raise ValueError(f"systems.{index}.sheet must be {sheet_name(index)!r}")
        if len(set(self.cases)) != len(self.cases):
            raise ValueError("cases: a case id appears twice")
        drawn = set(self.cases)
        for labeller, items in self.queues.items():
            if len(set(items)) != len(items):
                raise ValueError(f"queues.{labeller}: an item appears twice")
            for system, case_id in items:
                if not 0 <= system < len(self.systems) or case_id not in drawn:
                    raise ValueError(f"queues.{labeller}: an item names no drawn system "
                                     "and case")
        return self


def labels_dir(study_dir: Path) -> Path:
    """``STUDY_DIR/labels``: where a study's draw and sheets are."""
    return Path(study_dir) / LABELS_DIR


def study_draw_path(labels: Path) -> Path:
    """``study-draw.json`` in a study's labels folder."""
    return Path(labels) / STUDY_DRAW_JSON


def draw_lock_path(labels: Path) -> Path:
    """``study-draw.evaluator-lock`` in a study's labels folder: the lock file
    (:func:`~evaluator.data.files.exclusive_lock`) ``study draw`` holds from its check that
    the study is not drawn yet to its record written, so that two draws at once cannot both
    pass that check."""
    return lock_path_for(study_draw_path(labels))


def sheet_folders(labels: Path, draw: StudyDraw) -> list[Path]:
    """Each system's sheet folder, in the plan's order (``labels/system-1``, ...): the
    folder :class:`~evaluator.data.sources.LabelSource` and the labelling page read."""
    return [Path(labels) / system.sheet for system in draw.systems]


def checked_sheet_folders(labels: Path, draw: StudyDraw) -> list[Path]:
    """:func:`sheet_folders`, each checked to be the sheet drawn for its system: there, its
    ``sheet.json`` recording the fingerprint ``study-draw.json`` has for it, its
    ``review.jsonl`` unchanged (that fingerprint is its SHA-256), drawn from the results
    file drawn from. :class:`StudyDrawError` in one line otherwise (a folder removed,
    copied over from the other system's, or a link to it, would put one system's labels
    under the other's name)."""
    folders = sheet_folders(labels, draw)
    for system, folder in zip(draw.systems, folders, strict=True):
        where = f"{show_path(folder)} (the sheet of {system.name})"
        if folder.is_symlink() or not folder.is_dir():
            raise StudyDrawError(f"{where} is missing or not a folder; restore it as drawn")
        try:
            info = read_sheet_info(folder)
            review = sha256_file(folder / REVIEW_JSONL)
        except (SheetError, OSError):
            raise StudyDrawError(f"{where} cannot be read as the sheet drawn; restore it as "
                                 "drawn") from None
        if (info.fingerprint != system.fingerprint or review != system.fingerprint
                or [r.sha256 for r in info.results] != [system.results_sha256]):
            raise StudyDrawError(f"{where} is not the sheet the study drew for it (its "
                                 "fingerprint is not study-draw.json's); restore it as drawn")
    return folders


def write_study_draw(labels: Path, draw: StudyDraw) -> Path:
    """Write ``study-draw.json`` (0600, atomically)."""
    target = study_draw_path(labels)
    write_bytes_atomic(target, (json.dumps(draw.to_json(), indent=1, ensure_ascii=False)
                                + "\n").encode("utf-8"))
    return target


def read_study_draw(labels: Path) -> StudyDraw:
    """``study-draw.json`` of a study's labels folder; :class:`StudyDrawError` in one line
    when it is missing, damaged or of another format."""
    target = study_draw_path(labels)
    try:
        raw = target.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise StudyDrawError(f"{show_path(labels)} holds no study draw ({STUDY_DRAW_JSON}); "
                             "draw the study with `evaluator study draw STUDY_DIR`") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise StudyDrawError(f"cannot read {show_path(target)} ({exc})") from None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise StudyDrawError(f"{show_path(target)} line {exc.lineno}: not valid JSON") from None
    if not isinstance(data, dict):
        raise StudyDrawError(f"{show_path(target)}: not a study draw (a JSON object)")
    if data.get("format") != STUDY_DRAW_FORMAT:
        raise StudyDrawError(f"{show_path(target)}: study draw format "
                             f"{data.get('format')!r}; this version reads format "
                             f"{STUDY_DRAW_FORMAT}")
    try:
        # From the JSON text: strict, yet a JSON array is a queue item's pair.
        return StudyDraw.model_validate_json(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top)"
        raise StudyDrawError(f"{show_path(target)}: field {where!r}: {first['msg']}") from None
