"""Delimiting case text: ``| fence`` (a Markdown code block) and ``| inline`` (inline code),
each with a backtick run longer than any run inside the text, so the text cannot close its
own delimiter and pose as instructions. The text itself is never altered. The rubric
sandbox (:mod:`evaluator.rubrics.sandbox`) offers them as the only way to print case text.
"""

from __future__ import annotations

import re

_BACKTICK_RUNS = re.compile(r"`+")


def _longest_backtick_run(text: str) -> int:
    return max((len(m.group(0)) for m in _BACKTICK_RUNS.finditer(text)), default=0)


def fence(text: object) -> str:
    """Wrap text in a Markdown code block whose fence no backtick run in the text can close."""
    value = str(text)
    marker = "`" * max(3, _longest_backtick_run(value) + 1)
    newline = "" if value.endswith("\n") else "\n"
    return f"{marker}\n{value}{newline}{marker}"


def inline(text: object) -> str:
    """Wrap short text in inline code (Markdown rules: padded when it touches a backtick)."""
    value = str(text)
    marker = "`" * (_longest_backtick_run(value) + 1)
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    return f"{marker}{pad}{value}{pad}{marker}"
