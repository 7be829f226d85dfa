"""What the labelling page needs of a session, and nothing more: a sheet's
(:class:`~evaluator.label.session.LabelSession`) or a study's queue of two sheets
(:class:`~evaluator.label.study_session.StudySession`) serve the same pages
(:mod:`evaluator.label.app`, :mod:`evaluator.label.serve`).

A labeller's ``cases`` are the keys of her items in page order (page ``i`` is item
``i - 1``); the page never shows a key, only its position.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Protocol, TypeVar

from evaluator.label.session import CaseView
from evaluator.rubrics.rubric import Rubric


class Person(Protocol):
    """One labeller: her name, the token in her URL, her items' keys in page order, the
    keys she has labelled in full and those whose judge verdict she has been shown."""

    @property
    def name(self) -> str: ...

    @property
    def token(self) -> str: ...

    @property
    def cases(self) -> Sequence[str]: ...

    @property
    def done(self) -> AbstractSet[str]: ...

    @property
    def judge_shown(self) -> AbstractSet[str]: ...


P = TypeVar("P", bound=Person)


class Labelling(Protocol[P]):
    """A session the page serves (each method as :class:`~evaluator.label.session.
    LabelSession` documents it)."""

    @property
    def rubric(self) -> Rubric: ...

    @property
    def show_judge(self) -> bool: ...

    @property
    def unit(self) -> str:
        """What one page rates, as its pages count them: "case", or "answer" (a study's
        queue holds each case's answers as separate items)."""
        ...

    @property
    def broken(self) -> str | None: ...

    @property
    def labellers(self) -> Mapping[str, P]: ...

    def by_token(self, token: str) -> P | None: ...

    def refresh(self) -> None: ...

    def first_unlabelled(self, person: P, after: int = 0) -> int | None: ...

    def view(self, person: P, index: int, error: str | None = None,
             form: Mapping[str, str] | None = None) -> CaseView: ...

    def save(self, person: P, index: int, form: Mapping[str, str]) -> tuple[int, str | None]: ...
