"""The judge's confidence in its own verdicts, from the records' score distributions: per
criterion the confidences (the probability the judge gave the value it chose) and the
lowest-confidence scores. Case ids, paths and numbers only: never case text.

An items criterion (e.g. the ECG rubric's findings) pools the scores of all its items
(``"Rhythm[*].Score"``); each low-confidence row names the item's own path. A score whose
chosen value is not an allowed one (the median 2.5 of two samples) has no confidence: it is
counted, not shown.
"""

from __future__ import annotations

from collections.abc import Iterable
from statistics import median
from typing import Any

from evaluator.data.results import ResultRecord
from evaluator.rubrics.rubric import IntegerCriterion, ItemsCriterion, Rubric
from evaluator.rubrics.score_paths import score_slots

DEFAULT_LOW_CONFIDENCE = 10


def confidence_criteria(rubric: Rubric) -> list[str]:
    """The criteria a confidence is shown for: integer criteria by key, items criteria as
    ``key[*].score_key``."""
    names = []
    for field in rubric.output:
        if isinstance(field, IntegerCriterion):
            names.append(field.key)
        elif isinstance(field, ItemsCriterion):
            names.append(f"{field.key}[*].{field.score_key}")
    return names


def _criterion_of(path: str) -> str:
    if "[" not in path:
        return path
    key, _, rest = path.partition("[")
    return f"{key}[*]{rest[rest.index(']') + 1:]}"


def _scores(rubric: Rubric, record: ResultRecord) -> list[dict[str, Any]]:
    """Every score of an ``ok`` record that has a distribution: path, criterion, chosen
    value, confidence, expected value."""
    dists = record.distributions or {}
    scores = record.scores or {}
    try:
        chosen = {slot.path: slot.value for slot in score_slots(rubric, scores)}
    except (KeyError, TypeError, ValueError):
        # A reduced verdict can hold a non-integer (2.5): read it as written instead.
        chosen = {}
    rows = []
    for path, dist in dists.items():
        value = chosen.get(path, scores.get(path))
        rows.append({"case_id": record.case_id, "path": path, "criterion": _criterion_of(path),
                     "chosen": value, "confidence": dist.confidence,
                     "expected": dist.expected})
    return rows


def judge_confidence(rubric: Rubric, records: Iterable[ResultRecord],
                     low_n: int = DEFAULT_LOW_CONFIDENCE) -> dict[str, Any]:
    """Per criterion (:func:`confidence_criteria`) the confidences of the ``ok`` records
    with distributions (``values``), how many scores had none (``undefined``), their mean and
    median; and the ``low_n`` lowest-confidence scores over all criteria (ties by case id,
    then path). ``with_distributions`` / ``ok``: how many ``ok`` records had them."""
    criteria = {name: {"values": [], "undefined": 0} for name in confidence_criteria(rubric)}
    every: list[dict[str, Any]] = []
    ok = with_distributions = 0
    for record in records:
        if record.status != "ok" or record.scores is None:
            continue
        ok += 1
        if not record.distributions:
            continue
        with_distributions += 1
        for row in _scores(rubric, record):
            entry = criteria.setdefault(row["criterion"], {"values": [], "undefined": 0})
            if row["confidence"] is None:
                entry["undefined"] += 1
                continue
            entry["values"].append(row["confidence"])
            every.append(row)
    for entry in criteria.values():
        values = sorted(entry["values"])
        entry["n"] = len(values)
        entry["mean"] = sum(values) / len(values) if values else None
        entry["median"] = median(values) if values else None
    every.sort(key=lambda row: (row["confidence"], row["case_id"], row["path"]))
    return {"ok": ok, "with_distributions": with_distributions, "criteria": criteria,
            "lowest": every[:low_n], "low_n": low_n}
