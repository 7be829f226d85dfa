"""Labelling sheets built directly for the label page's tests and benchmark: a cases file,
``review.jsonl`` rows (the judge's cells, with a marker in its reasoning, even on a blind
sheet: the page must never send them) and ``sheet.json`` (SheetInfo + write_sheet_info)
with a CasesRef to the cases file.

Single sheets use the real trial-eligibility cases of /work/shared/data (synthetic TREC
patients, no PHI) when present, else synthetic ones; the pairwise sheet's pathology reports
are synthetic (made up here)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from evaluator.data.sheet import CasesRef, FileRef, SheetInfo, now, write_sheet_info
from evaluator.rubrics.load import load_rubric

SHARED_CASES = Path("/work/shared/data/trial_eligibility_sigir2014.jsonl")
SINGLE_RUBRIC = "trial_eligibility"
PAIRWISE_RUBRIC = "pathology_report_pairwise"
SINGLE_CRITERIA = ["accuracy", "clarity"]
PAIRWISE_CRITERIA = ["critical_finding_concordance", "overall_equivalence"]
# In the judge's reasoning and as its expected score / confidence: a page that sent any of
# the judge's cells would send one of these.
MARKER = "JUDGE-MARKER-q7Zx"
EXPECTED, CONFIDENCE = 3.8765, 0.8123
SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=fetch('/x')>"
TRIAL_FIELDS = ("patient_profile", "trial_id", "trial_title", "eligibility_criteria",
                "ground_truth_label", "ground_truth_explanation", "workflow_answer")
# Every criterion a trial_eligibility sheet asks by default (review's integer criteria).
ALL_TRIAL_CRITERIA = ["hallucination", "accuracy", "clarity"]


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _shared_rows() -> list[dict]:
    """The shared trial cases (their rubric's fields), or none when the file is absent."""
    if not SHARED_CASES.is_file():
        return []
    with SHARED_CASES.open(encoding="utf-8") as handle:
        return [{"case_id": row["case_id"], **{f: row[f] for f in TRIAL_FIELDS}}
                for row in map(json.loads, handle)]


def _trial_rows(n: int) -> list[dict]:
    rows = _shared_rows()
    base = len(rows)
    while len(rows) < n:  # synthetic fillers beyond the shared file (benchmark sizes)
        i = len(rows)
        template = rows[i % base] if base else {f: f"synthetic {f} {i}" for f in TRIAL_FIELDS}
        rows.append({**template, "case_id": f"synthetic-{i:06d}"})
    return rows[:n]


def longest_trial_rows() -> list[dict]:
    """Two cases that test a page's layout: the shared data's longest case (the most text
    in its fields: 5,749 characters, 4,589 of them its eligibility criteria) and its case
    with the longest answer (1,225 characters); without the shared file, one synthetic case
    of those lengths."""
    rows = _shared_rows()
    if not rows:
        words = "synthetic text of a made-up case; "
        rows = [{**{f: f"synthetic {f}" for f in TRIAL_FIELDS}, "case_id": "synthetic-long",
                 "patient_profile": (words * 20)[:600],
                 "eligibility_criteria": ("Inclusion criteria:\n\n " + words * 140)[:4600],
                 "workflow_answer": (words * 40)[:1225]}]
    longest = max(rows, key=lambda r: sum(len(r[f]) for f in TRIAL_FIELDS))
    wordiest = max(rows, key=lambda r: len(r["workflow_answer"]))
    return [longest] + ([wordiest] if wordiest is not longest else [])


def _judge_cells(criteria: list[str], i: int, pairwise: bool) -> dict:
    if pairwise:
        return {k: {"verdict": "AB"[i % 2], "reasoning": MARKER} for k in criteria}
    return {k: {"score": 1 + i % 5, "expected": EXPECTED, "confidence": CONFIDENCE,
                "distribution": {"1": 0.0123, "5": 0.9877}} for k in criteria}


def _write_review(folder: Path, ids: list[str], criteria: list[str], pairwise: bool,
                  judge_in_file: bool) -> Path:
    path = folder / "review.jsonl"
    with path.open("w", encoding="utf-8") as handle:
        for i, case_id in enumerate(ids):
            row: dict = {"case_id": case_id}
            if judge_in_file:
                row |= {"criteria": _judge_cells(criteria, i, pairwise),
                        "reasoning": f"{MARKER} the judge's reasoning"}
            handle.write(json.dumps(row) + "\n")
    return path


def make_single_sheet(folder: Path, n: int = 10, *, blind: bool = True, hostile: bool = False,
                      labellers: list[str] | None = None,
                      assignment: dict[str, list[str]] | None = None,
                      judge_in_file: bool = True, criteria: list[str] | None = None,
                      rows: list[dict] | None = None) -> SheetInfo:
    """A single (score) sheet of ``n`` trial-eligibility cases in ``folder`` (or of
    ``rows``), asking ``criteria`` (default: accuracy and clarity); ``hostile``: the first
    case's answer holds a <script> and an <img onerror>."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = [dict(r) for r in rows] if rows is not None else _trial_rows(n)
    criteria = criteria or SINGLE_CRITERIA
    if hostile:
        rows[0]["workflow_answer"] = f"{SCRIPT} and {IMG} end"
    cases = folder / "cases.jsonl"
    cases.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    ids = [r["case_id"] for r in rows]
    review = _write_review(folder, ids, criteria, False, judge_in_file)
    rubric = load_rubric(SINGLE_RUBRIC)
    info = SheetInfo(fingerprint=sha256(review), rubric=SINGLE_RUBRIC,
                     rubric_hash=rubric.source_sha256 or "", design="random" if blind
                     else "priority", blind=blind, criteria=criteria,
                     results=[FileRef(path="results.jsonl", sha256="0" * 64)],
                     cases=CasesRef(path=str(cases), sha256=sha256(cases)),
                     labellers=labellers or [], assignment=assignment or {}, created=now())
    write_sheet_info(folder, info)
    return info


def make_pairwise_sheet(folder: Path, n: int = 6, *, blind: bool = True) -> SheetInfo:
    """A pairwise sheet of ``n`` synthetic pathology-report pairs (one file holding both
    candidates' columns)."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = [{"case_id": f"path-{i:03d}",
             "reference_report": f"Synthetic reference {i}: tubular adenoma, low-grade.",
             "generated_report_a": f"System A report {i}: tubular adenoma.",
             "generated_report_b": f"System B report {i}: hyperplastic polyp."}
            for i in range(n)]
    cases = folder / "pairs.jsonl"
    cases.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    review = _write_review(folder, [r["case_id"] for r in rows], PAIRWISE_CRITERIA, True, True)
    rubric = load_rubric(PAIRWISE_RUBRIC)
    info = SheetInfo(fingerprint=sha256(review), rubric=PAIRWISE_RUBRIC,
                     rubric_hash=rubric.source_sha256 or "", kind="pairwise",
                     design="random", blind=blind, criteria=PAIRWISE_CRITERIA,
                     results=[FileRef(path="results.jsonl", sha256="0" * 64)],
                     cases=CasesRef(path=str(cases), sha256=sha256(cases)), created=now())
    write_sheet_info(folder, info)
    return info
