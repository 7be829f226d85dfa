"""Text for an 80-column terminal: paragraphs and table rows wrapped at spaces only (a
word, a number or a path is never cut: one longer than a line stays whole, on a line of its
own), and numbered notes that keep a table narrow (a row shows ``[1]``; the notes under the
table say what each number means).

Built on :mod:`textwrap`; knows nothing of what the text says.
"""

from __future__ import annotations

import textwrap

WIDTH = 80
# textwrap breaks only at ASCII whitespace: a no-break space holds a phrase together.
_NO_BREAK = "\u00a0"


def whole(text: str) -> str:
    """``text`` that :func:`wrap` and :func:`row` keep on one line (e.g. an interval
    "[0.12, 0.34]" or "1: 120 (n 4)"): its spaces are made no-break spaces, written back as
    plain spaces in the lines they return."""
    return text.replace(" ", _NO_BREAK)


def _plain(lines: list[str]) -> list[str]:
    return [line.replace(_NO_BREAK, " ") for line in lines]


def wrap(text: str, indent: str = "", hang: str = "  ", width: int = WIDTH) -> list[str]:
    """``text`` in lines of at most ``width`` columns: the first indented ``indent``, the
    others ``indent + hang``; broken at spaces only, never at a hyphen or inside a word."""
    return _plain(textwrap.wrap(text, width, initial_indent=indent,
                                subsequent_indent=indent + hang, break_on_hyphens=False,
                                break_long_words=False))


def row(head: str, tail: str, width: int = WIDTH) -> list[str]:
    """A table row: ``head`` (its fixed columns, already laid out) then ``tail`` (free
    text). A tail that does not fit goes on under the row, lined up with where it starts
    (or, when the head leaves it under 20 columns, 6 columns in from the head's indent, at
    most a quarter of the width)."""
    if not tail:
        return _plain([head.rstrip()])
    if len(head) + len(tail) <= width:
        return _plain([head + tail])
    start = len(head)
    if width - start < 20:
        start = min(len(head) - len(head.lstrip()), width // 4) + 6
        return [head.rstrip(), *wrap(tail, " " * start, "", width)]
    return _plain(textwrap.wrap(tail, width, initial_indent=head,
                                subsequent_indent=" " * start, break_on_hyphens=False,
                                break_long_words=False))


class Notes:
    """Numbered notes for a table's cells: :meth:`mark` gives ``[1]`` for a text (the same
    number for the same text), :meth:`lines` lists them, each wrapped."""

    def __init__(self) -> None:
        self._numbers: dict[str, int] = {}

    def mark(self, text: str | None) -> str:
        """``[n]`` for ``text``; "" for no text."""
        if not text:
            return ""
        number = self._numbers.setdefault(text, len(self._numbers) + 1)
        return f"[{number}]"

    def __bool__(self) -> bool:
        return bool(self._numbers)

    def lines(self, title: str, indent: str = "  ") -> list[str]:
        """``title`` then one entry per note, ``[n] text``, wrapped under ``indent``."""
        if not self._numbers:
            return []
        out = [f"{indent}{title}"]
        for text, number in self._numbers.items():
            out += wrap(f"[{number}] {text}", indent + "  ", "    ")
        return out
