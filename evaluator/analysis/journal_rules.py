"""The rules a labelling journal's every line keeps, in one place: the labelling page checks
them when it starts and on each line another server appends (:mod:`evaluator.label.session`),
and the analysis when it reads ``--labels SHEET_DIR`` (:mod:`evaluator.analysis.labels.sheet_reader`),
so that the page never counts a case as labelled on a line the analysis would refuse.

A line (already a strict :class:`~evaluator.data.sheet.JournalEntry`) must be of this draw
(its ``sheet`` fingerprint) and rubric version (its ``rubric_hash``); by a labeller
sheet.json lists (when it lists labellers); for a criterion the sheet rates and a case it
drew, assigned to that labeller (when it assigns cases); with no ``shown_left`` on a
single-answer sheet; with a value on the criterion's scale (A, B or tie on a pairwise sheet;
any finite number for an aggregate typed in); and not a copy of an earlier line (the same label, time and all).
Each refusal names the journal's line, never its labeller, case or comment.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from evaluator.common.errors import UserError
from evaluator.data.files import show_path
from evaluator.data.sheet import PAIRWISE_VALUES, JournalEntry, SheetInfo
from evaluator.rubrics.rubric import ChoiceCriterion, IntegerCriterion, Rubric

FIX = "correct or delete that line in a text editor"


class JournalLineError(UserError, ValueError):
    """A journal line that breaks the sheet's rules (one line naming it)."""


def rubric_scales(rubric: Rubric | None) -> dict[str, tuple[float | str, ...]]:
    """Each integer criterion's allowed values and each choice criterion's (A, B and, when
    the rubric allows it, tie); a criterion not here (an aggregate typed in) takes any
    finite number."""
    if rubric is None:
        return {}
    scales: dict[str, tuple[float | str, ...]] = {}
    for f in rubric.output:
        if isinstance(f, IntegerCriterion):
            scales[f.key] = tuple(float(v) for v in f.allowed)
        elif isinstance(f, ChoiceCriterion):
            scales[f.key] = tuple(v for v in PAIRWISE_VALUES if v != "tie" or "tie" in f.allowed)
    return scales


@dataclass
class JournalRules:
    """The rules of one sheet's journal. ``drawn``: the case ids of its ``review.jsonl``;
    ``scales``: :func:`rubric_scales` (empty: values checked for their type only)."""

    journal: Path
    info: SheetInfo
    drawn: frozenset[str]
    scales: Mapping[str, tuple[float | str, ...]] = field(default_factory=dict)
    _seen: set[JournalEntry] = field(default_factory=set, repr=False)
    # sheet.json's lists as sets, looked up once per line.
    _listed: frozenset[str] = field(init=False, repr=False)
    _assigned: dict[str, frozenset[str]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._listed = frozenset(self.info.labellers)
        self._assigned = {name: frozenset(cases)
                          for name, cases in self.info.assignment.items()}

    @classmethod
    def of(cls, journal: Path, info: SheetInfo, drawn: Iterable[str],
           rubric: Rubric | None) -> JournalRules:
        """The rules of ``info``'s journal; ``rubric``: the one its labels were given on
        (its scales), None: values checked for their type only."""
        return cls(journal, info, frozenset(drawn), rubric_scales(rubric))

    def check_all(self, numbered: Iterable[tuple[int, JournalEntry]]) -> None:
        """:meth:`check` each (line number, entry) in order."""
        for number, entry in numbered:
            self.check(number, entry)

    def check(self, number: int, entry: JournalEntry) -> None:
        """Refuse (:class:`JournalLineError`) line ``number`` when ``entry`` breaks a rule;
        lines are checked in the journal's order (a copy of an earlier line is
        refused)."""
        problem = self.problem(entry)
        if problem is None and entry in self._seen:
            problem = (f"a copy of an earlier line (the same label, time and all: the page "
                       f"saves a label once): {FIX}")
        if problem is not None:
            raise JournalLineError(f"{show_path(self.journal)} line {number}: {problem}")
        self._seen.add(entry)

    def problem(self, entry: JournalEntry) -> str | None:
        """What rule ``entry`` breaks and what to do, or None."""
        info = self.info
        if entry.sheet != info.fingerprint:
            return ("saved on another draw (its sheet fingerprint is not sheet.json's): "
                    "keep each sheet's journal in its own folder")
        if entry.rubric_hash != info.rubric_hash:
            return (f"given against another version of rubric {info.rubric!r} than "
                    "sheet.json's (rubric hash differs): keep each sheet's journal in its "
                    "own folder")
        if self._listed and entry.labeller not in self._listed:
            return ("a label by a labeller the sheet does not list (sheet.json's "
                    "labellers): delete that line or draw a sheet for that labeller")
        if entry.criterion not in info.criteria:
            return (f"a label for a criterion the sheet does not rate (it rates "
                    f"{', '.join(info.criteria)}): {FIX}")
        if entry.case_id not in self.drawn:
            return ("a label for a case that is not on the sheet (its review.jsonl): delete "
                    "that line")
        if self._assigned and entry.case_id not in self._assigned.get(entry.labeller, ()):
            return ("a label for a case the sheet did not assign to its labeller "
                    "(sheet.json's assignment): delete that line")
        pairwise = info.kind == "pairwise"
        if not pairwise and entry.shown_left is not None:
            return f"shown_left on a single-answer sheet (only a pairwise page shows two): {FIX}"
        return None if entry.value is None else self._value_problem(entry)

    def _value_problem(self, entry: JournalEntry) -> str | None:
        value, key = entry.value, entry.criterion
        scale = self.scales.get(key)
        if self.info.kind == "pairwise":
            allowed = scale or PAIRWISE_VALUES
            if not isinstance(value, str) or value not in allowed:
                return f"the value on {key!r} is not {', '.join(map(str, allowed))}: {FIX}"
            return None
        if isinstance(value, str):
            return f"the value on {key!r} is text, not a number: {FIX}"
        if scale and value not in scale:
            return (f"the value on {key!r} is not on its scale "
                    f"({', '.join(f'{v:g}' for v in scale if isinstance(v, float))}): {FIX}")
        return None
