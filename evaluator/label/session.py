"""One labelling session on a sheet: what each labeller is given, what the page shows for a
case, and what a save appends to the journal. No web framework here
(:mod:`evaluator.label.app` serves it).

Read once at start: ``sheet.json``, the rubric (its hash checked against the sheet's),
``review.jsonl`` (its SHA-256 is the sheet's fingerprint), the journal (every line must keep
the rules the analysis applies, :mod:`evaluator.analysis.journal_rules`, so that no case
counts as labelled on a line the analysis would refuse; lines another server appends are
checked as they are taken in, and one that breaks a rule stops this server's saves) and the
cases' text. On a blind sheet, or without ``show_judge``, the
judge's cells of ``review.jsonl`` are dropped as it is read: they are never held, so no page
can send them.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import secrets
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluator.analysis.journal_rules import JournalLineError, JournalRules
from evaluator.analysis.kinds import analysis_kind
from evaluator.analysis.review.assignment import check_labellers
from evaluator.common.errors import UserError
from evaluator.data.files import sha256_file, show_path
from evaluator.data.sheet import (
    REVIEW_JSONL,
    JournalEntry,
    SheetError,
    SheetInfo,
    append_label,
    journal_entries,
    journal_path,
    latest_labels,
    now,
    read_end,
    read_sheet_info,
)
from evaluator.data.sheet_cases import read_sheet_cases
from evaluator.label.criteria import (
    CANNOT_JUDGE,
    LabelCriterion,
    label_criteria,
    to_screen,
    to_systems,
)
from evaluator.label.fields import input_title, rated_input
from evaluator.rubrics.load import load_rubric, load_rubric_file
from evaluator.rubrics.rubric import Rubric, RubricError

MAX_TEXT = 4000  # a reason or comment, in characters
# What a labeller is told when the journal holds a line the analysis would refuse (the
# person running the server has the line's number and what is wrong on the terminal).
STOPPED = ("labelling has stopped: the sheet's journal has a line this tool refuses; tell "
           "the person who runs evaluator label (their terminal says which line)")


class LabelError(UserError, ValueError):
    """``evaluator label`` cannot start on this sheet with these options."""


@dataclass
class Labeller:
    """One labeller of this session: the token in her URL, her cases in sheet order, those
    she has labelled in full, and those whose judge verdict the page has shown her."""

    name: str
    token: str
    cases: list[str]
    done: set[str] = field(default_factory=set)
    judge_shown: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class Field:
    """One input field shown as text, under its title (:func:`input_title`)."""

    name: str
    description: str
    text: str
    title: str = ""


@dataclass
class CaseView:
    """Everything the case page shows (and nothing else)."""

    labeller: str
    index: int
    total: int
    done: int
    case_done: bool
    fields: list[Field]
    left: Field | None
    right: Field | None
    criteria: list[LabelCriterion]
    chosen: dict[str, str]
    reasons: dict[str, str]
    comment: str
    verdict: dict[str, str] | None
    next_unlabelled: int | None
    error: str | None = None
    answer: Field | None = None  # the answer being rated, above the choices (not in fields)


def read_review(sheet_dir: Path, info: SheetInfo, keep_judge: bool,
                ) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """The sheet's case ids, in order, from its ``review.jsonl`` (unchanged since the draw),
    and with ``keep_judge`` each case's judge cells (else none are kept)."""
    path = Path(sheet_dir) / REVIEW_JSONL
    try:
        digest = sha256_file(path)
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LabelError(f"{show_path(path)}: not found; a sheet folder holds the "
                         "review.jsonl its sheet.json was drawn from") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise LabelError(f"cannot read {show_path(path)} ({exc})") from None
    if digest != info.fingerprint:
        # Not "draw the sheet again": a new draw has a new fingerprint, and every label of
        # the journal (kept to this one) would be stranded.
        raise LabelError(f"{show_path(path)} has changed since the sheet was drawn (its "
                         "SHA-256 is not sheet.json's fingerprint); restore the "
                         "review.jsonl that review wrote (the journal's labels belong to it)")
    ids: list[str] = []
    judge: dict[str, dict[str, Any]] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            case_id = str(row["case_id"])
        except (ValueError, KeyError, TypeError):
            raise LabelError(f"{show_path(path)} line {number}: not a sheet row (no "
                             "case_id); draw the sheet again") from None
        ids.append(case_id)
        if keep_judge and isinstance(row.get("criteria"), dict):
            judge[case_id] = row["criteria"]
    if len(set(ids)) != len(ids):
        raise LabelError(f"{show_path(path)}: a case id appears twice; draw the sheet again")
    return ids, judge


def sheet_rubric(sheet_dir: Path, info: SheetInfo, rubrics_dirs: Sequence[Path]) -> Rubric:
    """The sheet's rubric: by name in ``rubrics_dirs`` and the built-ins; without
    ``rubrics_dirs``, else a file named after it (``NAME.yaml``) beside a results file the
    sheet was drawn from, or beside the sheet folder, whose hash is the sheet's (``review``
    prints the ``label`` command without ``--rubrics-dir``, and a run's manifest does not
    record where its rubric file was)."""
    try:
        return load_rubric(info.rubric, list(rubrics_dirs))
    except RubricError:
        if rubrics_dirs:
            raise
    folders = [sheet_dir.parent]
    for ref in info.results:
        given = Path(ref.path)
        folders += [given.parent] if given.is_absolute() else [
            given.parent, sheet_dir.parent / given.parent]
    for folder in dict.fromkeys(f.resolve() for f in folders):
        for path in (folder / f"{info.rubric}.yaml", folder / f"{info.rubric}.yml"):
            if not path.is_file():
                continue
            try:
                rubric = load_rubric_file(path)
            except RubricError:
                continue
            if rubric.source_sha256 == info.rubric_hash:
                return rubric
    raise LabelError(f"rubric {info.rubric!r} of {show_path(sheet_dir / 'sheet.json')} is "
                     "not a built-in, nor beside the results it was drawn from: give the "
                     "folder of its file with --rubrics-dir DIR")


def checked_rubric(sheet_dir: Path, info: SheetInfo, rubrics_dirs: Sequence[Path]) -> Rubric:
    """The sheet's rubric (:func:`sheet_rubric`), refused when it has changed since the
    draw or does not fit the sheet's kind."""
    rubric = sheet_rubric(sheet_dir, info, rubrics_dirs)
    if rubric.source_sha256 != info.rubric_hash:
        raise LabelError(f"rubric {info.rubric!r} ({show_path(rubric.source_path or '')})"
                         " has changed since the sheet was drawn (its hash is not "
                         "sheet.json's rubric_hash); restore that rubric file")
    if info.kind != analysis_kind(rubric).SHEET:
        raise LabelError(f"sheet kind {info.kind!r} does not fit rubric "
                         f"{info.rubric!r} (kind {rubric.kind!r})")
    return rubric


def _verdict_cell(cell: Any) -> str:
    if isinstance(cell, dict):
        for name in ("score", "verdict", "choice", "value"):
            if name in cell:
                return _verdict_cell(cell[name])
        return ""
    if isinstance(cell, list):
        return ", ".join(_verdict_cell(c) for c in cell)
    return "" if cell is None else str(cell)


def _form_value(value: float | str | None) -> str:
    """A saved value as the form shows it: 4.0 as "4" (the scale's option), 0.75 as is."""
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    return "" if value is None else str(value)


def shown_left(info: SheetInfo, labeller: str, case_id: str) -> str:
    """Which system (``A`` or ``B``) a pairwise page shows on the left for this labeller and
    case: drawn from a hash of the sheet's fingerprint, the labeller's name and the case id,
    so it is random across cases and stable across restarts (tokens play no part)."""
    digest = hashlib.sha256(f"{info.fingerprint}\0{labeller}\0{case_id}".encode()).digest()
    return "A" if digest[0] & 1 == 0 else "B"


class LabelSession:
    """A sheet opened for labelling by ``labellers`` (each gets a new random token)."""

    unit = "case"  # what one page rates, as the pages count them

    def __init__(self, sheet_dir: Path, labellers: Sequence[str], *, show_judge: bool = False,
                 rubrics_dirs: Sequence[Path] = ()):
        self.sheet_dir = Path(sheet_dir)
        self.info = info = read_sheet_info(self.sheet_dir)
        self.show_judge = show_judge
        if show_judge and info.blind:
            raise LabelError(f"{show_path(self.sheet_dir)} is a blind sheet: --show-judge "
                             "is refused (its labels must not see the judge's verdict)")
        names = list(labellers)
        if not names:
            raise LabelError("name at least one labeller: --labeller NAME")
        try:  # the rules review applies to its --labeller names (a newline would fake a link)
            check_labellers(names, None)
        except UserError as exc:
            raise LabelError(str(exc)) from None
        unknown = [n for n in names if info.labellers and n not in info.labellers]
        if unknown:
            raise LabelError(f"labeller {unknown[0]!r} is not one of this sheet's labellers "
                             f"({', '.join(info.labellers)}); use one of those names")
        self.rubric: Rubric = checked_rubric(self.sheet_dir, info, rubrics_dirs)
        self.criteria = label_criteria(self.rubric, info.criteria)
        self.case_ids, self._judge = read_review(self.sheet_dir, info, show_judge)
        # The journal, read once: its lines are checked by the rules the analysis applies
        # (a line it would refuse must not count a case as labelled), and this server's
        # reading stops after its last whole line; lines appended later (by another server
        # on this sheet) are taken in, and checked, by _take_in.
        journal = journal_path(self.sheet_dir)
        self._rules = JournalRules.of(journal, info, self.case_ids, self.rubric)
        try:
            data, self._journal_id = _read_journal(journal, 0)
            entries = []
            for number, entry in journal_entries(data, journal):
                self._rules.check(number, entry)
                entries.append(entry)
        except (SheetError, JournalLineError) as exc:
            raise LabelError(f"{exc}; then start evaluator label again") from None
        except OSError as exc:
            raise LabelError(f"cannot read {show_path(journal)} ({exc.strerror})") from None
        self._offset = read_end(data)
        self._next_line = data.count(b"\n", 0, self._offset) + 1
        # The journal's last byte read: a file edited in place, not only appended to, has
        # another byte there (and then its line numbers and offsets would be wrong).
        self._last_byte = data[self._offset - 1:self._offset]
        # Why this server stopped taking saves (a line another server appended breaks the
        # sheet's rules), or None; ``notify`` (the CLI's) is told once, when it happens.
        self.broken: str | None = None
        self.notify: Callable[[str], None] | None = None
        self._latest = latest_labels(entries)
        self._lock = threading.Lock()
        self.cases = read_sheet_cases(self.sheet_dir, info, self.rubric, self.case_ids)
        self.labellers: dict[str, Labeller] = {}
        self._by_name: dict[str, Labeller] = {}
        for name in names:
            mine = info.cases_of(name, self.case_ids)
            person = Labeller(name, secrets.token_urlsafe(32), mine)
            person.done = {c for c in mine if self._complete(name, c)}
            self.labellers[person.token] = person
            self._by_name[name] = person

    def refresh(self) -> None:
        """Take in what other servers on this sheet have saved since the last look."""
        with self._lock:
            if self.broken is None:
                self._take_in()

    def _take_in(self) -> None:
        """Take in the whole lines appended to the journal since the last look (another
        server's saves for the same labeller included), so that pages and the "unchanged"
        check go by the journal, not by this server's memory; each is checked by the
        sheet's rules. A line that breaks them, or a journal changed otherwise than by
        appending (edited in place, shortened, replaced, removed), stops this server's saves
        (:attr:`broken`). Call under ``_lock``."""
        journal = journal_path(self.sheet_dir)
        try:
            data, ident = _read_journal(journal, self._offset, self._last_byte)
        except _Changed as exc:
            self._stop(f"{show_path(journal)} {exc} while this server ran (a journal is only "
                       "appended to): restore it, then start evaluator label again")
            return
        except OSError as exc:
            self._stop(f"cannot read {show_path(journal)} ({exc.strerror}): start evaluator "
                       "label again once it can be read")
            return
        if self._journal_id is None:
            self._journal_id = ident
        elif ident != self._journal_id:
            self._stop(f"{show_path(journal)} was replaced while this server ran (a journal is "
                       "only appended to): restore it, then start evaluator label again")
            return
        end = data.rfind(b"\n")
        if end < 0:
            return  # nothing new, or a line still being written
        try:
            for number, entry in journal_entries(data[:end + 1], journal, self._next_line):
                self._rules.check(number, entry)
                self._latest[(entry.labeller, entry.case_id, entry.criterion)] = entry
                person = self._by_name.get(entry.labeller)
                if person is not None and self._complete(entry.labeller, entry.case_id):
                    person.done.add(entry.case_id)
        except (SheetError, JournalLineError) as exc:
            # Nothing from that line on counts, and no save is taken (the page says so):
            # the analysis would refuse the journal.
            self._stop(f"{exc}; then start evaluator label again")
            return
        self._offset += end + 1
        self._next_line += data.count(b"\n", 0, end + 1)
        self._last_byte = b"\n"

    def _stop(self, problem: str) -> None:
        """Take no more saves, and tell the operator once."""
        self.broken = f"{problem} (this server takes no more saves)"
        if self.notify is not None:
            self.notify(self.broken)

    # -- reading ---------------------------------------------------------------------------

    def by_token(self, token: str) -> Labeller | None:
        """The labeller whose token this is (compared in constant time), else None."""
        found = None
        for known, person in self.labellers.items():
            if secrets.compare_digest(known.encode(), token.encode()):
                found = person
        return found

    def _complete(self, name: str, case_id: str) -> bool:
        return all((name, case_id, c.key) in self._latest for c in self.criteria)

    def first_unlabelled(self, person: Labeller, after: int = 0) -> int | None:
        """The 1-based position of the first case after ``after`` (wrapping round) that
        ``person`` has not labelled in full; None when all are."""
        n = len(person.cases)
        for step in range(n):
            i = (after + step) % n
            if person.cases[i] not in person.done:
                return i + 1
        return None

    def view(self, person: Labeller, index: int, error: str | None = None,
             form: Mapping[str, str] | None = None) -> CaseView:
        """The page for ``person``'s case at 1-based ``index``, with her labels as the
        journal has them (or, with ``form``, as a refused save sent them, to correct). With
        ``show_judge``, the judge's verdict is in the view only when she has saved her own
        label for the case, and showing it is remembered (her later saves record
        ``judge_seen``)."""
        self.refresh()
        case_id = person.cases[index - 1]
        fields = self.cases[case_id]
        candidates = self.rubric.candidates or ()
        # Two candidates are shown side by side, in an order drawn per labeller and case.
        side = shown_left(self.info, person.name, case_id) if candidates else None
        shown = [Field(name, spec.description, fields.get(name, ""), input_title(name))
                 for name, spec in self.rubric.inputs.items() if name not in candidates]
        rated = rated_input(self.rubric)
        answer = next((f for f in shown if f.name == rated), None)
        shown = [f for f in shown if f is not answer]
        left = right = None
        if side is not None:
            a, b = (fields.get(name, "") for name in candidates)
            left = Field("left", "Left answer", a if side == "A" else b, "Left answer")
            right = Field("right", "Right answer", b if side == "A" else a, "Right answer")
        chosen: dict[str, str] = {}
        reasons: dict[str, str] = {}
        comment = ""
        for c in self.criteria if form is None else ():
            entry = self._latest.get((person.name, case_id, c.key))
            if entry is None:
                continue
            if entry.cannot_judge is not None:
                chosen[c.key], reasons[c.key] = CANNOT_JUDGE, entry.cannot_judge
            elif c.kind == "choice":
                chosen[c.key] = to_screen(entry.value, entry.shown_left or side or "A") or ""
            else:
                chosen[c.key] = _form_value(entry.value)
            comment = entry.comment or comment
        if form is not None:
            chosen, reasons = _form_choices(self.criteria, form)
            comment = (form.get("comment") or "")[:MAX_TEXT]
        verdict = None
        done = case_id in person.done
        if self.show_judge and done and case_id in self._judge:
            cells = self._judge[case_id]
            verdict = {}
            for c in self.criteria:
                text = _verdict_cell(cells.get(c.key))
                if c.kind == "choice" and side is not None:
                    text = to_screen(text, side) or text
                verdict[c.key] = text
            person.judge_shown.add(case_id)
        return CaseView(person.name, index, len(person.cases), len(person.done), done, shown,
                        left, right, self.criteria, chosen, reasons, comment, verdict,
                        self.first_unlabelled(person, index), error, answer)

    # -- saving ----------------------------------------------------------------------------

    def save(self, person: Labeller, index: int, form: Mapping[str, str]) -> tuple[int, str | None]:
        """Append ``person``'s labels of the case at ``index`` to the journal (each line
        fsynced before this returns). Returns (lines written, the problem when nothing could
        be saved). Every criterion must be answered (a value, or cannot judge with its
        reason). A value the journal already holds as her last one writes nothing; any
        other is a new line (the last one counts). The journal's last line is looked up
        under an exclusive lock of the sheet folder, so that two servers on one sheet (the
        same labeller in both) judge "unchanged" by the journal, not by their memory."""
        case_id = person.cases[index - 1]
        side = shown_left(self.info, person.name, case_id) if self.rubric.candidates else None
        comment = (form.get("comment") or "").strip()[:MAX_TEXT] or None
        chosen, reasons = _form_choices(self.criteria, form)
        planned: list[tuple[LabelCriterion, float | str | None, str | None]] = []
        missing = []
        for c in self.criteria:
            raw = chosen.get(c.key, "")
            if not raw:
                missing.append(c.key)
                continue
            if raw == CANNOT_JUDGE:
                reason = reasons.get(c.key, "").strip()[:MAX_TEXT]
                if not reason:
                    return 0, (f"{c.key}: 'cannot judge' needs a reason; write it in "
                               f"{c.key}'s reason box")
                planned.append((c, None, reason))
                continue
            try:
                value = c.parse(raw)
            except ValueError:
                return 0, f"{c.key}: choose one of the values shown"
            if side is not None:
                value = to_systems(str(value), side)
            planned.append((c, value, None))
        if missing:
            return 0, (f"not saved: {', '.join(missing)} not answered; choose a value (or "
                       "cannot judge, with a reason) for each criterion, then save")
        written = 0
        with self._lock, _folder_lock(self.sheet_dir):
            if self.broken is None:
                self._take_in()
            if self.broken is not None:
                return 0, STOPPED
            seen = case_id in person.judge_shown
            for c, value, cannot in planned:
                old = self._latest.get((person.name, case_id, c.key))
                if old is not None and (old.value, old.cannot_judge, old.comment) == (
                        value, cannot, comment):
                    continue
                entry = JournalEntry(labeller=person.name, time=now(), case_id=case_id,
                                     criterion=c.key, value=value, cannot_judge=cannot,
                                     comment=comment, judge_seen=seen, shown_left=side,
                                     sheet=self.info.fingerprint,
                                     rubric_hash=self.info.rubric_hash)
                try:
                    append_label(self.sheet_dir, entry)
                except SheetError as exc:  # a last line typed by hand, neither whole nor torn
                    self._stop(str(exc))
                    return written, STOPPED
                except OSError as exc:  # a full disk: nothing of this line was acknowledged
                    return written, (f"not saved: the journal could not be written "
                                     f"({exc.strerror}); tell the person who runs "
                                     "evaluator label")
                self._latest[(person.name, case_id, c.key)] = entry
                written += 1
            if self._complete(person.name, case_id):
                person.done.add(case_id)
        return written, None


def _form_choices(criteria: Sequence[LabelCriterion], form: Mapping[str, str],
                  ) -> tuple[dict[str, str], dict[str, str]]:
    """What a posted form chose per criterion (screen terms; ``x``: cannot judge) and the
    reason written under each. ``reason`` without a criterion (a form of an earlier page)
    is every criterion's."""
    chosen, reasons = {}, {}
    shared = form.get("reason") or ""
    for c in criteria:
        raw = (form.get(f"v.{c.key}") or "").strip()
        if form.get(f"cj.{c.key}") == CANNOT_JUDGE:  # a typed-in number's checkbox
            raw = CANNOT_JUDGE
        if raw:
            chosen[c.key] = raw
        reason = form.get(f"reason.{c.key}") or shared
        if reason:
            reasons[c.key] = reason[:MAX_TEXT]
    return chosen, reasons


class _Changed(Exception):
    """The journal is not the one read so far, with lines appended (what changed)."""


def _read_journal(journal: Path, offset: int, last_byte: bytes = b"",
                  ) -> tuple[bytes, tuple[int, int] | None]:
    """The journal's bytes from ``offset`` and its identity (device, inode; None: no
    journal yet, then b""). :class:`_Changed` when a journal read up to ``offset`` is gone,
    shorter, or has another byte than ``last_byte`` just before ``offset``."""
    try:
        handle = journal.open("rb")
    except FileNotFoundError:
        if offset:
            raise _Changed("was removed") from None
        return b"", None
    with handle:
        stat = os.fstat(handle.fileno())
        if stat.st_size < offset:
            raise _Changed("was shortened")
        if offset:
            handle.seek(offset - 1)
            if handle.read(1) != last_byte:
                raise _Changed("was edited")
        return handle.read(), (stat.st_dev, stat.st_ino)


@contextmanager
def _folder_lock(folder: Path) -> Iterator[None]:
    """An exclusive ``flock`` of the sheet folder while a save reads the journal's last
    lines and appends (the journal's own lock covers only one append)."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing it releases the lock
