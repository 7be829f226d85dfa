"""A study's labelling session (issue 48): one queue per clinician over both systems'
sheets, so that she rates answers without knowing which system gave them.

``evaluator study draw`` drew one ordinary sheet per system (``labels/system-K``) and each
labeller's queue (``labels/study-draw.json``, :mod:`evaluator.data.study_draw`): every
system's answer for each of her cases, as separate items in a seeded order. A
:class:`StudySession` opens each system's sheet as a :class:`LabelSession` (blind: no judge
verdict is held) and serves the queue through the same pages
(:class:`~evaluator.label.labelling.Labelling`): item ``i`` of her queue is (system K, case),
shown and saved by system K's session at her position on that sheet, so each label goes to
the journal of its system's sheet, the only record (server-side) of which system an item
was. The page's position, count and progress are the queue's; nothing sent names a system,
its results file or its sheet (a labeller's item keys are their positions).
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from evaluator.analysis.review.assignment import check_labellers
from evaluator.common.errors import UserError
from evaluator.data.files import show_path
from evaluator.data.study_draw import read_study_draw, sheet_folders
from evaluator.label.session import CaseView, LabelError, Labeller, LabelSession
from evaluator.rubrics.rubric import Rubric


@dataclass
class QueueLabeller:
    """One labeller of a study: her token, her queue's items (system index, case id) and,
    per system, her labeller on that system's sheet with her position of each case there.
    ``cases`` are her items' keys (``"1"``, ``"2"``, ...: positions, nothing more)."""

    name: str
    token: str
    items: list[tuple[int, str]]
    people: list[Labeller]
    positions: list[dict[str, int]]
    cases: list[str] = field(init=False)
    judge_shown: frozenset[str] = frozenset()  # a study's sheets are blind

    def __post_init__(self) -> None:
        self.cases = [str(i) for i in range(1, len(self.items) + 1)]

    @property
    def done(self) -> set[str]:
        """The keys of the items she has labelled in full (on their system's sheet, as its
        journal has them)."""
        return {key for key, (system, case_id) in zip(self.cases, self.items, strict=True)
                if case_id in self.people[system].done}


class StudySession:
    """A study's labels folder opened for labelling by ``labellers`` (default: every
    labeller of the draw); each gets a new random token."""

    show_judge = False  # a study's sheets are blind
    unit = "answer"  # each case's answers are separate items of the queue

    def __init__(self, labels: Path, labellers: Sequence[str] = (), *,
                 rubrics_dirs: Sequence[Path] = ()):
        self.labels = Path(labels)
        try:
            self.draw = draw = read_study_draw(self.labels)
        except UserError as exc:
            raise LabelError(str(exc)) from None
        names = list(labellers) or list(draw.queues)
        try:  # the rules review applies to its --labeller names (a newline would fake a link)
            check_labellers(names, None)
        except UserError as exc:
            raise LabelError(str(exc)) from None
        unknown = [n for n in names if n not in draw.queues]
        if unknown:
            raise LabelError(f"labeller {unknown[0]!r} is not one of the study's labellers "
                             f"({', '.join(draw.queues)}); use one of those names")
        self.sessions = [LabelSession(folder, names, rubrics_dirs=rubrics_dirs)
                         for folder in sheet_folders(self.labels, draw)]
        self._check_sheets()
        self.rubric: Rubric = self.sessions[0].rubric
        by_name = [{p.name: p for p in s.labellers.values()} for s in self.sessions]
        self.labellers: dict[str, QueueLabeller] = {}
        for name in names:
            people = [known[name] for known in by_name]
            positions = [{case_id: i for i, case_id in enumerate(p.cases, start=1)}
                         for p in people]
            items = list(draw.queues[name])
            expected = {(k, c) for k, p in enumerate(people) for c in p.cases}
            if set(items) != expected or len(items) != len(expected):
                raise LabelError(f"{show_path(self.labels)}: {name}'s queue is not her cases "
                                 "on every system's sheet; the draw was edited: restore it")
            person = QueueLabeller(name, secrets.token_urlsafe(32), items, people, positions)
            self.labellers[person.token] = person

    def _check_sheets(self) -> None:
        """Each sheet is the one drawn (its fingerprint), blind, of the drawn cases, and
        all ask the same criteria of one rubric."""
        draw = self.draw
        for system, session in zip(draw.systems, self.sessions, strict=True):
            where = show_path(session.sheet_dir)
            if session.info.fingerprint != system.fingerprint:
                raise LabelError(f"{where} is not the sheet the study drew (its fingerprint "
                                 "is not study-draw.json's); restore the folder as drawn")
            if not session.info.blind:
                raise LabelError(f"{where} is not blind; a study's sheets are")
            if session.case_ids != draw.cases:
                raise LabelError(f"{where} does not hold the study's drawn cases; restore "
                                 "the folder as drawn")
        first = self.sessions[0]
        for session in self.sessions[1:]:
            if (session.info.rubric_hash != first.info.rubric_hash
                    or [c.key for c in session.criteria] != [c.key for c in first.criteria]):
                raise LabelError(f"{show_path(session.sheet_dir)} asks other criteria or "
                                 f"another rubric than {show_path(first.sheet_dir)}")

    # -- what the page needs (evaluator.label.labelling.Labelling) --------------------------

    @property
    def broken(self) -> str | None:
        """Why saves have stopped (a system sheet's journal broke the rules), or None."""
        return next((s.broken for s in self.sessions if s.broken is not None), None)

    @property
    def notify(self) -> Callable[[str], None] | None:
        return self.sessions[0].notify

    @notify.setter
    def notify(self, callback: Callable[[str], None] | None) -> None:
        """Told once per sheet when its journal stops this server's saves."""
        for session in self.sessions:
            session.notify = callback

    def refresh(self) -> None:
        """Take in what other servers have saved on every system's sheet."""
        for session in self.sessions:
            session.refresh()

    def by_token(self, token: str) -> QueueLabeller | None:
        """The labeller whose token this is (compared in constant time), else None."""
        found = None
        for known, person in self.labellers.items():
            if secrets.compare_digest(known.encode(), token.encode()):
                found = person
        return found

    def first_unlabelled(self, person: QueueLabeller, after: int = 0) -> int | None:
        """The 1-based position of the first item after ``after`` (wrapping round) that
        ``person`` has not labelled in full; None when all are."""
        done, n = person.done, len(person.cases)
        for step in range(n):
            i = (after + step) % n
            if person.cases[i] not in done:
                return i + 1
        return None

    def _target(self, person: QueueLabeller, index: int) -> tuple[LabelSession, Labeller, int]:
        system, case_id = person.items[index - 1]
        return (self.sessions[system], person.people[system],
                person.positions[system][case_id])

    def view(self, person: QueueLabeller, index: int, error: str | None = None,
             form: Mapping[str, str] | None = None) -> CaseView:
        """Item ``index`` of ``person``'s queue, as its system's session shows the case,
        with the position, count and progress of her queue."""
        session, people, position = self._target(person, index)
        shown = session.view(people, position, error, form)
        return dataclasses.replace(shown, index=index, total=len(person.cases),
                                   done=len(person.done),
                                   next_unlabelled=self.first_unlabelled(person, index))

    def save(self, person: QueueLabeller, index: int,
             form: Mapping[str, str]) -> tuple[int, str | None]:
        """Save item ``index``'s labels to its system's sheet journal
        (:meth:`LabelSession.save`)."""
        session, people, position = self._target(person, index)
        return session.save(people, position, form)
