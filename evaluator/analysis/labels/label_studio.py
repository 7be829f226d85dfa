"""The reader of a Label Studio JSON export (``--labels export.json``): Label Studio's full
"JSON" export, a list of tasks, each with its ``id``, its ``data`` and its
``annotations`` (each with its ``id``, ``completed_by``, a ``result`` list,
``was_cancelled``, ``created_at``, ``updated_at``), as a
:class:`~evaluator.analysis.labels.labelset.LabelSet`.

* **Annotators are labellers**, named by ``completed_by``: its email when the export gives
  one, else ``annotator-<id>``.
* **Results are labels** by criterion name: a ``choices`` result whose ``from_name`` is a
  criterion's key holds the choice's alias (a value on the criterion's scale, A/B/tie on a
  pairwise sheet, or :data:`CANNOT_JUDGE`); a ``rating`` or ``number`` result its number.
  Other results (a text area) are not labels. ``predictions`` are never read as labels.
* **The last annotation counts**, per annotator, case and criterion (by ``updated_at``,
  else the export's order), as the journal's last line does; cancelled (skipped)
  annotations and "cannot judge" are left out and counted in a note.
* **The sheet it was exported from** (``evaluator label SHEET --label-studio``): its tasks
  carry the sheet's fingerprint (:data:`FINGERPRINT`); the sheet folder found beside the
  export (its folder, its parent, or a folder in either) gives the rows (review.jsonl, the
  design intact), the criteria, the labellers and assignment it allows, and blindness.
  Tasks with a fingerprint whose sheet is not found are refused (the design is the
  sheet's: a priority sheet's labels give no unbiased estimate). Tasks without one (a
  project of the site's own): one row per task (``case_id`` from its data), the design
  and blindness unknown.

A label the sheet's rules refuse (an annotator the sheet does not list, a case it did not
draw or assign, a criterion it does not rate, a value off the scale) is refused in one line
naming the file, the task and annotation ids, never case text. The file is read whole,
bounded (:data:`~evaluator.common.limits.MAX_LABEL_STUDIO_BYTES`), a key given twice in an
object refused.
"""

from __future__ import annotations

import json
import math
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from evaluator.analysis.journal_rules import rubric_scales
from evaluator.analysis.labels.labelset import LabelSet, LabelSetError, Ratings
from evaluator.analysis.labels.sheet_reader import drawn_sheet
from evaluator.common.limits import MAX_LABEL_STUDIO_BYTES
from evaluator.common.readable import NotARegularFile, check_regular_file
from evaluator.data.files import show_path
from evaluator.data.sheet import (
    REVIEW_JSONL,
    SheetError,
    SheetInfo,
    is_sheet_dir,
    read_sheet_info,
)
from evaluator.rubrics.rubric import ChoiceCriterion, IntegerCriterion, ItemsCriterion, Rubric

NOUN = "Label Studio export"
# A task's data keys the writer (evaluator.label.label_studio) sets and this reader reads.
CASE_ID = "case_id"
FINGERPRINT = "sheet_fingerprint"
CANNOT_JUDGE = "x"  # the alias of the "cannot judge" choice
SNIFF_BYTES = 64 * 1024
MAX_NAME = 254  # an email's longest
LABEL_TYPES = ("choices", "rating", "number")
_SHOWN_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def claims(path: Path) -> bool:
    """Whether ``path`` looks like a Label Studio JSON export: a ``.json`` file whose top
    level is a list of tasks (it opens ``[`` and, in its first bytes, names ``data`` or
    ``annotations``). Cheap: a labels .jsonl or .csv is never claimed."""
    path = Path(path)
    if path.suffix.lower() != ".json" or not path.is_file():
        return False
    try:
        with path.open("rb") as handle:
            head = handle.read(SNIFF_BYTES)
    except OSError:
        return False
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    return text.startswith(b"[") and (b'"data"' in text or b'"annotations"' in text
                                      or text[1:].strip() == b"]")


class _Duplicated(dict):
    """An object of the export that held a key twice (found, and named by its task, after
    parsing: the JSON hook does not know where it is)."""


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            return _Duplicated(pairs)
        out[key] = value
    return out


def _duplicated(value: Any) -> bool:
    """Whether ``value`` holds, at any depth, an object that held a key twice (walked with
    a stack: a deeply nested file is no recursion limit)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, _Duplicated):
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _load(path: Path) -> list[Any]:
    """The export's tasks: a JSON list, at most :data:`MAX_LABEL_STUDIO_BYTES` bytes."""
    where = show_path(path)
    try:
        check_regular_file(path, NOUN)
        with path.open("rb") as handle:
            data = handle.read(MAX_LABEL_STUDIO_BYTES + 1)
    except NotARegularFile as exc:
        raise LabelSetError(str(exc)) from None
    except OSError as exc:
        raise LabelSetError(f"{where}: cannot read the {NOUN} ({exc.strerror})") from None
    if len(data) > MAX_LABEL_STUDIO_BYTES:
        raise LabelSetError(f"{where}: larger than {MAX_LABEL_STUDIO_BYTES:,} bytes, the "
                            f"most a {NOUN} may be; export fewer tasks (a project per sheet)")
    try:
        tasks = json.loads(data.decode("utf-8-sig"), object_pairs_hook=_unique)
    except UnicodeDecodeError:
        raise LabelSetError(f"{where}: not UTF-8 text; give the export as Label Studio "
                            "wrote it") from None
    except json.JSONDecodeError as exc:
        raise LabelSetError(f"{where} line {exc.lineno}: not valid JSON ({exc.msg}); give "
                            "Label Studio's JSON export as it wrote it") from None
    except RecursionError:
        raise LabelSetError(f"{where}: JSON nested too deep to be a {NOUN}") from None
    if tasks == []:
        raise LabelSetError(f"{where}: an export with no task; export the project after "
                            "importing its tasks")
    if not isinstance(tasks, list):
        raise LabelSetError(f"{where}: not a {NOUN} (its top level is not a list of tasks); "
                            "export the project as JSON (not JSON-MIN, CSV or a snapshot)")
    return tasks


def _finite(value: float) -> bool:
    """Whether a JSON number is finite as a float (an integer of 400 digits is not)."""
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _shown(value: Any, fallback: str) -> str:
    """An id as a message shows it: a number, or a short plain name; else its position."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, str) and _SHOWN_ID.fullmatch(value):
        return value
    return fallback


def _annotator(who: Any) -> str | None:
    """A labeller's name from ``completed_by``: its email, else ``annotator-<id>``."""
    if isinstance(who, dict):
        email = who.get("email")
        if isinstance(email, str) and email.strip():
            return email.strip()
        who = who.get("id")
    if isinstance(who, int) and not isinstance(who, bool):
        return f"annotator-{who}"
    return None


def _when(annotation: dict[str, Any]) -> datetime | None:
    for name in ("updated_at", "created_at"):
        text = annotation.get(name)
        if isinstance(text, str):
            try:
                moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
            except ValueError:
                continue
            return moment if moment.tzinfo else None
    return None


def _in_order(annotations: list[Any]) -> list[tuple[int, Any]]:
    """The annotations with their positions, oldest first: by ``updated_at`` when every one
    has it, else in the export's order (the last one counts)."""
    numbered = list(enumerate(annotations, start=1))
    times = [_when(a) if isinstance(a, dict) else None for _, a in numbered]
    if all(t is not None for t in times):
        order = sorted(range(len(numbered)), key=lambda i: (times[i], i))
        return [numbered[i] for i in order]
    return numbered


def _find_sheet(path: Path, fingerprint: str) -> Path | None:
    """The sheet folder whose sheet.json has ``fingerprint``: the export's folder, its
    parent, or a folder in either."""
    places = [path.parent, path.parent.parent]
    candidates = list(places)
    for place in places:
        try:
            candidates += sorted(p for p in place.iterdir() if p.is_dir())
        except OSError:
            continue
    for folder in dict.fromkeys(candidates):
        if not is_sheet_dir(folder):
            continue
        try:
            if read_sheet_info(folder).fingerprint == fingerprint:
                return folder
        except SheetError:
            continue
    return None


def _rateable(rubric: Rubric) -> list[str]:
    """The keys of a rubric a labeller can rate (as the labelling page's criteria)."""
    return [f.key for f in rubric.output
            if isinstance(f, (IntegerCriterion, ChoiceCriterion, ItemsCriterion))] + [
        a.name for a in rubric.aggregates]


class _Reader:
    """One export being read: its path, the sheet found for it (or None) and the rules."""

    def __init__(self, path: Path, rubric: Rubric | None, pairwise: bool,
                 folder: Path | None, info: SheetInfo | None, drawn: set[str]):
        self.path, self.pairwise, self.folder, self.info = path, pairwise, folder, info
        self.scales = rubric_scales(rubric)
        self.drawn = drawn
        if info is not None:
            self.known: list[str] | None = list(info.criteria)
            self.rates = f"the sheet {show_path(folder or '')} rates"
        elif rubric is not None:
            self.known = _rateable(rubric)
            self.rates = f"rubric {rubric.name!r} has"
        else:
            self.known, self.rates = None, ""

    def refuse(self, where: str, problem: str) -> LabelSetError:
        return LabelSetError(f"{show_path(self.path)} {where}: {problem}")

    def value(self, where: str, result: dict[str, Any], key: str) -> float | str | None:
        """The label a result holds (None: cannot judge), checked against the scale."""
        content = result.get("value")
        kind = result.get("type")
        raw: Any = None
        if isinstance(content, dict) and kind == "choices":
            chosen = content.get("choices")
            if not (isinstance(chosen, list) and len(chosen) == 1
                    and isinstance(chosen[0], str)):
                raise self.refuse(where, f"the result for {key!r} is not one choice (the "
                                  "labelling config gives each criterion choice=\"single\")")
            raw = chosen[0]
            if raw == CANNOT_JUDGE:
                return None
            if not self.pairwise:
                raw = float(raw) if _NUMBER.fullmatch(raw) else raw
        elif isinstance(content, dict):
            raw = content.get(kind)  # {"rating": n} or {"number": n}
        scale = self.scales.get(key)
        if self.pairwise:
            allowed = scale or ("A", "B", "tie")
            if raw not in allowed:
                raise self.refuse(where, f"the value on {key!r} is not "
                                  f"{', '.join(map(str, allowed))}")
            return raw
        if (not isinstance(raw, (int, float)) or isinstance(raw, bool)
                or not _finite(raw)):
            raise self.refuse(where, f"the value on {key!r} is not a number on its scale (a "
                              "choice's alias is the value: see docs/labelling.md)")
        if scale and float(raw) not in scale:
            raise self.refuse(where, f"the value on {key!r} is not on its scale "
                              f"({', '.join(f'{v:g}' for v in scale if isinstance(v, float))})")
        return float(raw)

    def labeller(self, where: str, annotation: dict[str, Any], case: str) -> str:
        name = _annotator(annotation.get("completed_by"))
        if name is None:
            raise self.refuse(where, "no annotator (completed_by is neither a user id nor a "
                              "user with an id or email)")
        if len(name) > MAX_NAME or not name.isprintable() or ";" in name:
            raise self.refuse(where, f"the annotator's email is not a plain name (at most "
                              f"{MAX_NAME} printable characters, no ';')")
        info = self.info
        if info is not None and info.labellers and name not in info.labellers:
            raise self.refuse(where, "an annotator the sheet does not list (sheet.json's "
                              "labellers: Label Studio names an annotator by email, else "
                              "annotator-<id>); draw the sheet for those names, or without "
                              "--labeller")
        if info is not None and info.assignment and case not in info.assignment.get(name, ()):
            raise self.refuse(where, "a case the sheet did not assign to this annotator "
                              "(sheet.json's assignment)")
        return name

    def criterion(self, where: str, result: dict[str, Any]) -> str:
        key = result.get("from_name")
        if not isinstance(key, str):
            raise self.refuse(where, "a result without its from_name (the criterion)")
        if self.known is not None and key not in self.known:
            raise self.refuse(where, f"a result for a control that is not a criterion "
                              f"({self.rates} {', '.join(self.known)}); name each Choices "
                              "of the labelling config after its criterion")
        return key


def criteria(path: Path) -> list[str]:
    """The criteria the export rates: its sheet's, else those its results name."""
    return read_export(path).criteria


def read_export(path: Path, *, rubric: Rubric | None = None, pairwise: bool = False) -> LabelSet:
    """The labels of the Label Studio JSON export ``path`` (see the module docstring).
    ``rubric``: the results' rubric (criteria and scales); ``pairwise``: the results are
    pairwise (values A/B/tie)."""
    path = Path(path)
    tasks = _load(path)
    where_of = [f"task {_shown(t.get('id') if isinstance(t, dict) else None, f'#{i}')}"
                for i, t in enumerate(tasks, start=1)]
    prints: dict[str, str] = {}
    for where, task in zip(where_of, tasks):
        if _duplicated(task):
            raise LabelSetError(f"{show_path(path)} {where}: an object holds one key twice "
                                "(JSON keeps only the last): give the export as Label Studio "
                                "wrote it")
        if not isinstance(task, dict) or not isinstance(task.get("data"), dict):
            raise LabelSetError(f"{show_path(path)} {where}: not a task (an object with its "
                                "data); export the project as JSON")
        mark = task["data"].get(FINGERPRINT)
        if isinstance(mark, str):
            prints.setdefault(mark, where)
    if len(prints) > 1:
        first, second = list(prints.values())[:2]
        raise LabelSetError(f"{show_path(path)}: {first} and {second} were exported from "
                            "two different sheets; import each sheet into a project of its own")
    fingerprint = next(iter(prints), None)
    folder = _find_sheet(path, fingerprint) if fingerprint else None
    notes: list[str] = []
    info = rows = None
    if folder is not None:
        info, rows = drawn_sheet(folder, pairwise, "the export of the sheet")
    elif fingerprint:
        # Its design (which cases were drawn, with what probability; a priority sheet's,
        # from which no estimate is unbiased) is the sheet's: never read without it.
        raise LabelSetError(f"{show_path(path)}: the sheet these tasks were exported from "
                            f"(fingerprint {fingerprint[:12]}) is not beside the export: its "
                            "design is the sheet's; put the export in the sheet's folder or "
                            "beside it")
    drawn = {str(row.get(CASE_ID)) for _, row in rows or ()}
    reader = _Reader(path, rubric, pairwise, folder, info, drawn)
    latest: dict[tuple[str, str, str], float | str | None] = {}
    cases: dict[str, str] = {}
    task_rows: list[tuple[int, dict[str, Any]]] = []
    cancelled = predictions = 0
    for number, (where, task) in enumerate(zip(where_of, tasks), start=1):
        case = task["data"].get(CASE_ID)
        if isinstance(case, int) and not isinstance(case, bool):
            case = str(case)
        if not isinstance(case, str) or not case:
            raise reader.refuse(where, f"no {CASE_ID} in its data; import the tasks "
                                "evaluator label --label-studio wrote, or give each task "
                                f"its {CASE_ID}")
        if case in cases:
            raise reader.refuse(where, f"the same case as {cases[case]} (one {CASE_ID} in "
                                "two tasks); import each case once")
        cases[case] = where
        if info is not None and case not in drawn:
            raise reader.refuse(where, "a case that is not on the sheet (its review.jsonl)")
        task_rows.append((number, {CASE_ID: case}))
        shown_predictions = task.get("predictions") or []
        if not isinstance(shown_predictions, list):
            raise reader.refuse(where, "its predictions are not a list")
        predictions += len(shown_predictions)
        annotations = task.get("annotations") or []
        if not isinstance(annotations, list):
            raise reader.refuse(where, "its annotations are not a list")
        for position, annotation in _in_order(annotations):
            ident = annotation.get("id") if isinstance(annotation, dict) else None
            at = f"{where} annotation {_shown(ident, f'#{position}')}"
            if not isinstance(annotation, dict):
                raise reader.refuse(at, "not an annotation (an object)")
            if annotation.get("was_cancelled") not in (None, True, False):
                raise reader.refuse(at, "its was_cancelled is not true or false")
            if annotation.get("was_cancelled") is True:
                cancelled += 1
                continue
            name = reader.labeller(at, annotation, case)
            results = annotation.get("result") or []
            if not isinstance(results, list):
                raise reader.refuse(at, "its result is not a list")
            done: set[str] = set()
            for result in results:
                if not isinstance(result, dict) or result.get("type") not in LABEL_TYPES:
                    continue  # a text area, a region: not a label
                key = reader.criterion(at, result)
                if key in done:
                    raise reader.refuse(at, f"two results for {key!r}")
                done.add(key)
                latest[(name, case, key)] = reader.value(at, result, key)
    criteria = (list(info.criteria) if info is not None
                else list(dict.fromkeys(k for _, _, k in latest)))
    if info is None and rubric is not None:
        order = _rateable(rubric)
        criteria.sort(key=order.index)
    ratings: Ratings = {key: {} for key in criteria}
    cannot = 0
    for (name, case, key), value in latest.items():
        if value is None:
            cannot += 1
        else:
            ratings[key].setdefault(case, {})[name] = value
    if cannot:
        notes.append(f"{cannot} label(s) chosen as \"cannot judge\": left out")
    if cancelled:
        notes.append(f"{cancelled} annotation(s) cancelled (skipped) in Label Studio: left out")
    if predictions:
        notes.append(f"{predictions} prediction(s) in the export: never read as labels")
    if info is not None and rubric is not None and rubric.source_sha256 != info.rubric_hash:
        notes.append(f"rubric {info.rubric!r} has changed since the sheet was drawn (its "
                     "file's hash is not sheet.json's): check that its criteria and scales "
                     "still mean what the labellers were shown")
    return LabelSet(origin=path, noun=NOUN,
                    design_path=folder / REVIEW_JSONL if folder is not None else path,
                    rows=rows if rows is not None else task_rows, criteria=criteria,
                    ratings=ratings, kind="pairwise" if pairwise else "single",
                    blind=info.blind if info is not None else None, cannot_judge=cannot,
                    notes=notes)
