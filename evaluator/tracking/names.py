"""MLflow key names for metrics and params, made valid deterministically.

MLflow accepts a metric or param key of at most 250 characters made of letters, digits,
``_ - . / :`` and spaces, that a path normaliser leaves unchanged (no ``..`` part, no
leading ``/``). Keys are built here from parts joined by ``/`` (MLflow's UI groups metrics
by that prefix): ``criterion/accuracy/mean``. A part made only of letters, digits, ``_`` and
``-`` (every rubric key is: the rubric format allows ``[A-Za-z_][A-Za-z0-9_]*``) is kept as
it is; any other part (a gate rule ``accuracy >= 4``, a name from a labels file) has each
run of other characters (and of ``_``) replaced by one ``_`` and gets ``-`` and the first 8
hex digits of the SHA-256 of the original part, so two different parts never share a key
and the same part always gets the same one. A part longer than 64 characters is cut to 55
and gets the same suffix. Comparison operators are spelled out first (``>=`` as ``_ge_``),
so a gate reads ``accuracy_ge_4-1a2b3c4d``.
"""

from __future__ import annotations

import hashlib
import re

MAX_KEY_LENGTH = 250
MAX_PART_LENGTH = 64
_KEPT = re.compile(r"^[A-Za-z0-9_-]+$")
_OTHER = re.compile(r"[^A-Za-z0-9_-]+")
# Longest first: ">=" before ">".
_OPERATORS = ((">=", "_ge_"), ("<=", "_le_"), (">", "_gt_"), ("<", "_lt_"))


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]


def key_part(text: str) -> str:
    """One part of a key: ``text`` itself when it is letters, digits, ``_`` and ``-`` (at
    most 64 characters); otherwise a readable form with a suffix from its hash (see the
    module docstring)."""
    text = str(text)
    if _KEPT.match(text) and len(text) <= MAX_PART_LENGTH:
        return text
    readable = text
    for operator, word in _OPERATORS:
        readable = readable.replace(operator, word)
    readable = re.sub(r"_{2,}", "_", _OTHER.sub("_", readable)).strip("_") or "x"
    return f"{readable[:MAX_PART_LENGTH - 9]}-{_digest(text)}"


def metric_key(*parts: object) -> str:
    """Parts joined by ``/``, each made valid by :func:`key_part`. Raises ValueError if the
    key would exceed MLflow's 250 characters (at most 3 parts of 64 and the fixed names
    used here cannot)."""
    key = "/".join(key_part(str(part)) for part in parts)
    if len(key) > MAX_KEY_LENGTH:
        raise ValueError(f"metric key longer than {MAX_KEY_LENGTH} characters: {key[:60]}...")
    return key
