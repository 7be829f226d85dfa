"""A case's input fields as the labelling page shows them: a readable title for each
(``patient_profile`` → "Patient profile") and which one holds the answer being rated, which
the page puts beside the choices; the others are the case's context, in a column of their own.
"""

from __future__ import annotations

import re

from evaluator.analysis.case_fields import evaluated_field
from evaluator.rubrics.rubric import Rubric

# Words a title writes in capitals (``trial_id`` → "Trial ID").
ACRONYMS = {"id": "ID", "ids": "IDs", "ecg": "ECG", "nct": "NCT", "icd": "ICD", "url": "URL"}
# A part of an input's name (between underscores) in PascalCase: words of a capital and small
# letters, an acronym before one (``ECGText``, ``DiagnosisAccuracy``, ``Resp``). A part in
# any other mixed case (``eGFR``, ``SpO2``, ``HbA1c``) is a clinical name: kept as written.
_PASCAL_WORD = re.compile(r"[A-Z]{2,}(?=[A-Z][a-z])|[A-Z][a-z]+")
_PASCAL = re.compile(f"(?:{_PASCAL_WORD.pattern})+")
# A lower-case word that may be a known abbreviation with a number (``icd10``).
_LETTERS_DIGITS = re.compile(r"([a-z]+)([0-9]*)")


def _words(part: str) -> list[str]:
    if _PASCAL.fullmatch(part):
        return _PASCAL_WORD.findall(part)
    return [part]


def _shown(word: str, first: bool) -> str:
    """One word of a title: a PascalCase word in sentence case, a word with capitals of its
    own (an acronym, ``eGFR``) as written, a known abbreviation in capitals, and the
    first word capitalised."""
    if _PASCAL_WORD.fullmatch(word) and not word.isupper():
        return word if first else word.lower()
    if word != word.lower() or not word.isalnum():
        return word
    known = _LETTERS_DIGITS.fullmatch(word)
    if known and known.group(1) in ACRONYMS:
        return ACRONYMS[known.group(1)] + known.group(2)
    return word[:1].upper() + word[1:] if first else word


def input_title(name: str) -> str:
    """A readable title for a rubric input's name: its parts (split at ``_``, and a
    PascalCase part at its words) in sentence case, known abbreviations in capitals
    (``trial_id`` → "Trial ID", ``icd10_code`` → "ICD10 code", ``DiagnosisAccuracy`` →
    "Diagnosis accuracy"); a part in mixed case of its own (``eGFR``, ``SpO2``) as written;
    the name itself when it has no parts."""
    words = [w for part in name.split("_") if part for w in _words(part)]
    if not words:
        return name
    return " ".join(_shown(word, i == 0) for i, word in enumerate(words))


def rated_input(rubric: Rubric) -> str | None:
    """The input holding the answer being rated, which the page shows beside the choices:
    the one the rubric describes as "being evaluated" (every built-in rubric that rates one
    answer has one; ``agree`` measures its length). None when there is not exactly one (the
    page then shows every field as context: it does not guess), and on a rubric whose
    ``candidates`` are the answers (the page shows those two side by side)."""
    return None if rubric.candidates else evaluated_field(rubric)
