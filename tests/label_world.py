"""A synthetic run for the label-design and estimate tests: N trial_eligibility verdicts
whose judge is biased (+``bias``) and noisier where it is unsure (its score distribution is
wider there), with the clinicians' true label of every case kept aside. Clearly synthetic:
no case text (the reasoning fields hold a marker that must never be printed)."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

from evaluator.analysis.distributions import summarize as distribution
from evaluator.data.results import ResultRecord

CRITERIA = ("hallucination", "accuracy", "clarity")
SECRET = "SECRET-CASE-TEXT"
SCALE = (1, 2, 3, 4, 5)
LABEL_P = (0.1, 0.2, 0.3, 0.25, 0.15)


def _spread(centre: float, sd: float) -> dict[int, float]:
    weights = {v: math.exp(-((v - centre) ** 2) / (2 * sd * sd)) for v in SCALE}
    total = sum(weights.values())
    return {v: w / total for v, w in weights.items()}


def world(n: int, *, seed: int = 0, bias: float = 0.5, unsure_share: float = 0.3,
          prefix: str = "case", label_p: tuple[float, ...] = LABEL_P,
          ) -> tuple[list[ResultRecord], dict[str, int]]:
    """``n`` ok records (case ids ``prefix-0000``...) and the true labels by case id. Every
    criterion gets the same score; the judge's score is the true label + ``bias`` + noise
    (sd 0.3, or 1.5 on the unsure share), rounded into 1-5, and its distribution is centred
    on that score with the matching spread. ``label_p``: the true labels' distribution
    over 1..5."""
    import numpy as np

    rng = np.random.default_rng(seed)
    records, truth = [], {}
    for i in range(n):
        label = int(rng.choice(SCALE, p=list(label_p)))
        sd = 1.5 if rng.random() < unsure_share else 0.3
        score = int(min(5, max(1, round(label + bias + rng.normal(0, sd)))))
        case_id = f"{prefix}-{i:04d}"
        dist = distribution(_spread(score, sd), score)
        scores: dict = {key: score for key in CRITERIA}
        scores.update({f"{key}_reasoning": SECRET for key in CRITERIA})
        records.append(ResultRecord(case_id=case_id, rubric="trial_eligibility", judge="hand",
                                    status="ok", scores=scores,
                                    distributions={key: dist for key in CRITERIA}))
        truth[case_id] = label
    return records, truth


def write_results(path: Path, records: list[ResultRecord]) -> Path:
    path.write_text("".join(r.model_dump_json() + "\n" for r in records))
    return path


def read_rows(path: Path) -> list[dict[str, str]]:
    """A CSV file's rows (a worksheet), as dicts (utf-8-sig: review.csv starts with a
    byte-order mark)."""
    with path.open(newline="", encoding="utf-8-sig") as handle:
        return list(csv.DictReader(handle))


def write_rows(path: Path, rows: list[dict], *, fields: list[str] | None = None,
               delimiter: str = ",") -> Path:
    """``rows`` as a CSV file (columns: ``fields``, else the first row's keys)."""
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields or list(rows[0]), delimiter=delimiter)
        writer.writeheader()
        writer.writerows(rows)
    return path


def fill_sheet(sheet: Path, out: Path, truth: dict[str, float], column: str = "accuracy.label",
               *, skip: set[str] = frozenset()) -> Path:
    """A copy of a review.csv with ``column`` filled from ``truth`` (rows in ``skip`` left
    empty: not labelled yet)."""
    rows = read_rows(sheet)
    for row in rows:
        row[column] = "" if row["case_id"] in skip else str(truth[row["case_id"]])
    return write_rows(out, rows, fields=list(rows[0]) if rows else [column])


def write_labels(path: Path, labels: dict[str, float], field: str = "grade") -> Path:
    path.write_text("".join(json.dumps({"case_id": c, field: v}) + "\n"
                            for c, v in labels.items()))
    return path
