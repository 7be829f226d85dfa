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
# A word of an input's name: a run of capitals not followed by a small letter (``ECG`` in
# ``ECGText``), a word with at most one leading capital, or a number; digits stay with the
# word before them (``lead2``).
_WORD = re.compile(r"(?:[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9])[0-9]*")


def input_title(name: str) -> str:
    """A readable title for a rubric input's name: its words (split at ``_`` and at capitals)
    in sentence case, known abbreviations in capitals (``trial_id`` → "Trial ID",
    ``DiagnosisAccuracy`` → "Diagnosis accuracy"); the name itself when it has no words."""
    words = _WORD.findall(name)
    if not words:
        return name
    shown = [ACRONYMS.get(w.lower(), w if w.isupper() else w.lower()) for w in words]
    shown[0] = shown[0][:1].upper() + shown[0][1:]
    return " ".join(shown)


def rated_input(rubric: Rubric) -> str | None:
    """The input holding the answer being rated, which the page shows beside the choices:
    the one the rubric describes as "being evaluated" (every built-in rubric that rates one
    answer has one; ``agree`` measures its length). None when there is not exactly one (the
    page then shows every field as context: it does not guess), and on a rubric whose
    ``candidates`` are the answers (the page shows those two side by side)."""
    return None if rubric.candidates else evaluated_field(rubric)
