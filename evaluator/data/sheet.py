"""A labelling sheet's folder: what ``evaluator review --out SHEET_DIR`` drew, recorded in
``SHEET_DIR/sheet.json`` (:class:`SheetInfo`), and the clinicians' labels, appended to
``SHEET_DIR/journal.jsonl`` one JSON line per saved label (:class:`JournalEntry`).

The journal is the labels' only store: a save is one line, written in one ``write`` under an
exclusive ``flock`` of the journal itself and fsynced before the save is acknowledged, so two
servers (or two browsers on one server) on one sheet lose nothing, and a SIGKILL at any moment
leaves at most a torn last line that was never acknowledged; it is cut off by the next append
and skipped by :func:`read_journal`. A changed label is a new line: the last line for a
(labeller, case, criterion) counts (:func:`latest_labels`), the history stays.
No case text is written to either file (a comment is the labeller's own words; the page says
it stays local and may hold PHI).
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Literal

from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator

from evaluator.common.errors import UserError
from evaluator.common.record import Record
from evaluator.data.files import open_private_append, show_path, write_bytes_atomic

SHEET_JSON = "sheet.json"
JOURNAL = "journal.jsonl"
REVIEW_JSONL = "review.jsonl"  # the drawn cases, one line each (written by `review`)
SHEET_FORMAT = 1
# A pairwise label, in terms of the run's two systems (never the screen's left/right).
PAIRWISE_VALUES = ("A", "B", "tie")


class SheetError(UserError, ValueError):
    """A sheet folder that cannot be read (no sheet.json, damaged, another format)."""


class FileRef(Record):
    """A file the sheet was drawn from: its path as given and its SHA-256."""

    path: str
    sha256: str


class CasesRef(FileRef):
    """The cases file a run read and how it read it (from the run's manifest)."""

    mapping: dict[str, str] = Field(default_factory=dict)
    id_column: str = "case_id"
    versus: str | None = None
    # The SHA-256 the --versus file had when the run read it (a pairwise run of two files).
    versus_sha256: str | None = None
    answer_column: str | None = None


class SheetInfo(Record):
    """What a sheet is: written once by ``review`` when it draws the sheet.

    ``fingerprint``: SHA-256 of ``review.jsonl`` (every journal line carries it, so labels
    are never read against another draw). ``kind``: ``single`` (a score per criterion) or
    ``pairwise`` (A/B/tie per criterion). ``blind``: the judge's verdict, expected score,
    confidence, distribution and reasoning are in no file a labeller is shown (``review.csv``,
    ``review.jsonl``) and never sent to a browser. ``criteria``: the keys a labeller rates.
    ``labellers`` (empty: anyone) and ``assignment`` (labeller -> the case ids that labeller
    is given; empty: every labeller every case); ``overlap``: the share of the drawn cases
    given to every labeller (``overlap_cases``), the rest split between them."""

    format: int = SHEET_FORMAT
    fingerprint: str
    rubric: str
    rubric_hash: str
    kind: Literal["single", "pairwise"] = "single"
    design: str
    blind: bool
    criteria: list[str]
    results: list[FileRef]
    cases: CasesRef | None = None
    labellers: list[str] = Field(default_factory=list)
    overlap: float | None = None
    overlap_cases: list[str] = Field(default_factory=list)
    assignment: dict[str, list[str]] = Field(default_factory=dict)
    seed: int | None = None
    created: str

    def cases_of(self, labeller: str, all_cases: Iterable[str]) -> list[str]:
        """The case ids ``labeller`` is given, in sheet order."""
        cases = list(all_cases)
        if not self.assignment:
            return cases
        mine = set(self.assignment.get(labeller, ()))
        return [c for c in cases if c in mine]


class JournalEntry(Record):
    """One saved label. ``value``: a number on the criterion's scale, or for a pairwise
    sheet one of :data:`PAIRWISE_VALUES` in terms of the run's systems; None with
    ``cannot_judge`` (the reason). ``shown_left``: on a pairwise sheet, which system ("A" or
    "B") the page showed on the left. ``judge_seen``: the judge's verdict had been shown to
    this labeller for this case before this save.

    Read strictly (a line edited by hand is refused, never guessed at): no type is
    converted (``true`` is not 1, ``"4"`` is not a number), a number is finite, ``time`` is
    an ISO 8601 time with its UTC offset, and a line has exactly one of ``value`` and
    ``cannot_judge``. Whether a value fits its sheet (its criterion's scale, A/B/tie) is
    :mod:`evaluator.analysis.journal_rules`'s."""

    model_config = ConfigDict(strict=True)

    labeller: str
    time: str
    case_id: str
    criterion: str
    value: Annotated[float, Field(allow_inf_nan=False)] | str | None
    cannot_judge: str | None = None
    comment: str | None = None
    judge_seen: bool = False
    shown_left: Literal["A", "B"] | None = None
    sheet: str
    rubric_hash: str

    @field_validator("time")
    @classmethod
    def _a_real_time(cls, value: str) -> str:
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError("not an ISO 8601 time (such as 2026-12-06T13:34:35.123+00:00)"
                             ) from None
        if parsed.tzinfo is None:
            raise ValueError("an ISO 8601 time without its UTC offset")
        return value

    @model_validator(mode="after")
    def _value_or_reason(self) -> JournalEntry:
        if (self.value is None) == (self.cannot_judge is None):
            raise ValueError("a label has exactly one of value and cannot_judge (a reason)")
        if self.cannot_judge is not None and not self.cannot_judge.strip():
            raise ValueError("cannot_judge needs its reason")
        return self


def now() -> str:
    """The time a label is saved, UTC, ISO 8601 to the millisecond."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def sheet_path(sheet_dir: Path) -> Path:
    return Path(sheet_dir) / SHEET_JSON


def journal_path(sheet_dir: Path) -> Path:
    return Path(sheet_dir) / JOURNAL


def is_sheet_dir(path: Path) -> bool:
    """``path`` is a folder holding a ``sheet.json`` (a ``--labels`` given as a sheet)."""
    return Path(path).is_dir() and sheet_path(path).is_file()


def journal_with_labels(folder: Path) -> bool:
    """Whether ``folder`` is a sheet's folder whose journal holds saved labels (advice for
    a worksheet of it whose label cells are empty: the page never writes the CSV)."""
    journal = journal_path(folder)
    try:
        return is_sheet_dir(folder) and journal.is_file() and journal.stat().st_size > 0
    except OSError:
        return False


def write_sheet_info(sheet_dir: Path, info: SheetInfo) -> Path:
    """Write ``sheet.json`` (0600, atomically)."""
    target = sheet_path(sheet_dir)
    write_bytes_atomic(target, (json.dumps(info.to_json(), indent=1, ensure_ascii=False)
                                + "\n").encode("utf-8"))
    return target


def read_sheet_info(sheet_dir: Path) -> SheetInfo:
    """``sheet.json`` of a sheet folder; :class:`SheetError` in one line when it is missing,
    damaged or of another format."""
    target = sheet_path(sheet_dir)
    try:
        raw = target.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SheetError(f"{show_path(sheet_dir)} is not a labelling sheet (no {SHEET_JSON}); "
                         "draw one with `evaluator review RESULTS --out DIR`") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SheetError(f"cannot read {show_path(target)} ({exc})") from None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise SheetError(f"{show_path(target)} line {exc.lineno}: not valid JSON") from None
    if isinstance(data, dict) and data.get("format") != SHEET_FORMAT:
        raise SheetError(f"{show_path(target)}: sheet format {data.get('format')!r}; this "
                         f"version reads format {SHEET_FORMAT} (draw the sheet again)")
    try:
        return SheetInfo.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise SheetError(f"{show_path(target)}: field {where!r}: {first['msg']}") from None


def _tail_start(fd: int, size: int) -> int:
    """Where the journal's last line starts (just after its last newline; 0: none)."""
    end = size
    while end > 0:
        start = max(0, end - (1 << 16))
        cut = os.pread(fd, end - start, start).rfind(b"\n")
        if cut >= 0:
            return start + cut + 1
        end = start
    return 0


def append_label(sheet_dir: Path, entry: JournalEntry) -> None:
    """Append ``entry`` to the sheet's journal (created 0600): under an exclusive ``flock``
    of the journal, a last line without its newline is ended when it is whole JSON (a
    file saved by an editor that drops the final newline; whether it is a valid entry is
    for the readers to say, naming its line), cut off when it is torn (:func:`is_torn`: a
    writer killed mid-line, never acknowledged) or blank, and refused
    (:class:`SheetError`) otherwise; the line is written in one ``write`` and
    fsynced. Returns once it is on disk."""
    line = (json.dumps(entry.to_json(), ensure_ascii=False, separators=(",", ":"))
            + "\n").encode("utf-8")
    with open_private_append(journal_path(sheet_dir), readable=True) as handle:
        fd = handle.fileno()
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                start = _tail_start(fd, size)
                tail = os.pread(fd, size - start, start)
                if tail.strip() and _whole_json(tail):
                    line = b"\n" + line
                elif not tail.strip() or is_torn(tail):
                    os.ftruncate(fd, start)
                else:
                    number = os.pread(fd, start, 0).count(b"\n") + 1
                    raise SheetError(f"{show_path(journal_path(sheet_dir))} line {number}: "
                                     "the last line is neither a whole entry nor a torn "
                                     "save: correct or delete that line in a text editor")
            os.write(fd, line)
            os.fsync(fd)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)


def read_journal(sheet_dir: Path) -> Iterator[JournalEntry]:
    """Every entry of the journal in order (none: no journal yet). A last line without its
    newline counts when it is a whole entry and is skipped when torn (a writer killed
    mid-line: that save was never acknowledged); a damaged line before it is a
    :class:`SheetError` naming the line (never its content: a comment may hold PHI)."""
    for _, entry in read_journal_lines(sheet_dir):
        yield entry


def read_journal_lines(sheet_dir: Path) -> Iterator[tuple[int, JournalEntry]]:
    """:func:`read_journal`'s entries with their line numbers in the journal (1-based), for
    a message that names a line."""
    target = journal_path(sheet_dir)
    yield from journal_entries(read_journal_bytes(sheet_dir), target)


def read_journal_bytes(sheet_dir: Path) -> bytes:
    """The journal's bytes (empty: no journal yet); :class:`SheetError` when unreadable."""
    target = journal_path(sheet_dir)
    try:
        return target.read_bytes()
    except FileNotFoundError:
        return b""
    except OSError as exc:
        raise SheetError(f"cannot read {show_path(target)} ({exc.strerror})") from None


def journal_entries(data: bytes, target: Path, first: int = 1,
                    ) -> Iterator[tuple[int, JournalEntry]]:
    """The entries of the journal bytes ``data`` (read from ``target``; its first line is
    line ``first`` of the file) with their line numbers. A last line without its newline
    that is a torn write (:func:`is_torn`) is skipped; any other line that is not a valid
    entry is a :class:`SheetError` naming the line and what is wrong (never the content: a
    comment may hold PHI)."""
    lines = data.split(b"\n")
    last = len(lines) + first - 1
    for number, line in enumerate(lines, start=first):
        if not line.strip():
            continue
        try:
            entry = JournalEntry.model_validate_json(line)
        except ValidationError as exc:
            if number == last and is_torn(line):
                return
            problem = entry_problem(exc)
            if number == 1 and line.startswith(BOM):
                problem = "starts with a byte-order mark: save the journal as UTF-8 without one"
            elif b"\r" in line.rstrip(b"\r"):
                problem = ("holds a carriage return (CR) inside the line: save the journal "
                           "with LF line ends")
            raise SheetError(f"{show_path(target)} line {number}: {problem}: correct or "
                             "delete that line in a text editor") from None
        yield number, entry


def read_end(data: bytes) -> int:
    """Where :func:`journal_entries` stopped reading the journal bytes ``data``: after its
    last newline, or at the end when its last line, without a newline, was read (whole
    JSON, not a torn write, which the next append cuts off)."""
    start = data.rfind(b"\n") + 1
    tail = data[start:]
    return len(data) if tail.strip() and _whole_json(tail) else start


BOM = b"\xef\xbb\xbf"


def is_torn(tail: bytes) -> bool:
    """Whether a last line without its newline is a torn write (a writer killed mid-line,
    never acknowledged), as :func:`append_label` writes a line: it starts with ``{``, holds
    no carriage return, is not whole JSON, and lacks its closing ``}`` or stops inside a
    string. Anything else (a line typed by hand with a typo, CR line ends) is not torn: it
    is refused, never dropped."""
    text = tail.strip(b" \t")
    if not text.startswith(b"{") or b"\r" in text:
        return False
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return not text.endswith(b"}") or exc.msg.startswith("Unterminated string")
    except (ValueError, RecursionError):  # bytes cut inside a character; deep nesting
        return not text.endswith(b"}")
    return False


def entry_problem(exc: ValidationError) -> str:
    """What is wrong with a journal line, by field, without its content (nor the name of a
    field the format does not have: a hand-typed key may be anything)."""
    first = exc.errors()[0]
    if first["type"] in ("json_invalid", "json_type", "model_type", "model_attributes_type",
                         "recursion_loop"):
        return "not a journal entry (not a JSON object)"
    if first["type"] == "extra_forbidden":
        return "a field the journal's format does not have"
    where = str(first["loc"][0]) if first["loc"] else ""
    if where == "value":
        return ("field 'value': not a label value (a finite number, A, B or tie, or null "
                "beside cannot_judge; true, false and NaN are not labels)")
    message = str(first["msg"]).removeprefix("Value error, ")
    return f"field {where!r}: {message}" if where else message


def _whole_json(line: bytes) -> bool:
    try:
        json.loads(line)
    except (ValueError, RecursionError):
        return False
    return True


def latest_labels(entries: Iterable[JournalEntry],
                  ) -> dict[tuple[str, str, str], JournalEntry]:
    """(labeller, case id, criterion) -> the last entry saved for it (the one that counts)."""
    latest: dict[tuple[str, str, str], JournalEntry] = {}
    for entry in entries:
        latest[(entry.labeller, entry.case_id, entry.criterion)] = entry
    return latest
