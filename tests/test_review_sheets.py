"""``evaluator review`` as issue 37 draws sheets: blind random and active sheets (no judge
column, no judge value), ``sheet.json`` beside the worksheet, the run's manifest keeping how
it read its cases (so ``--show-text`` needs no options, and a changed cases file is refused),
several labellers with an overlap, and pairwise sheets."""

from __future__ import annotations

import csv
import hashlib
import json
import re
from pathlib import Path

import pytest

pytest.importorskip("numpy", reason="needs the stats extra")
pytest.importorskip("scipy", reason="needs the stats extra")
pytest.importorskip("sklearn", reason="needs the stats extra")

from click.testing import CliRunner

from evaluator.analysis.review.assignment import assign
from evaluator.analysis.review.signals import ReviewError
from evaluator.cli.main import cli
from evaluator.data.sheet import CasesRef, JournalEntry, append_label, now, read_sheet_info
from evaluator.judges.backends.fake import FakeBackend
from evaluator.judges.models_file import JudgeSpec
from evaluator.rubrics.load import load_rubric
from evaluator.run.manifest import case_reading, manifest_path_for
from evaluator.run.runner import evaluate
from tests.conftest import run_options, write_jsonl
from tests.label_world import SECRET, fill_sheet, world, write_results

# The judge's reasoning in the runs below: it must reach no blind sheet.
REASONING = "JUDGE-REASONING-MARKER"
TEXT = "PATIENT-TEXT-MARKER"
JUDGE_WORDS = re.compile(r"score|expected|confidence|distribution|aggregate|spread|margin|"
                         r"reasoning|criteria")


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(newline="", encoding="utf-8-sig") as handle:  # review.csv has a BOM
        reader = csv.DictReader(handle)
        return list(reader.fieldnames or []), list(reader)


def one_line_error(result) -> str:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


def _values(value):
    """Every leaf value of a JSON value."""
    if isinstance(value, dict):
        for item in value.values():
            yield from _values(item)
    elif isinstance(value, list):
        for item in value:
            yield from _values(item)
    else:
        yield value


# --- 1. blind sheets ------------------------------------------------------------------------

@pytest.fixture
def synthetic(tmp_path):
    records, truth = world(80, seed=3)
    return write_results(tmp_path / "results.jsonl", records), truth


def _judge_cells(priority_dir: Path) -> set[str]:
    """The judge's values a priority sheet shows: expected scores, confidences,
    distributions, signals (floats with four decimals, told apart from any other cell)."""
    header, rows = read_csv(priority_dir / "review.csv")
    shown = {row[c] for row in rows for c in header
             if re.search(r"\.(expected|confidence|distribution)$|^min_confidence$", c)}
    return {cell for cell in shown if cell and not re.fullmatch(r"[0-9]", cell)}


@pytest.mark.parametrize("design", ["random", "active"])
def test_random_and_active_sheets_hold_no_judge_column_and_no_judge_value(
        tmp_path, synthetic, design):
    results, _ = synthetic
    priority = invoke("review", results, "--out", tmp_path / "p", "--n", "80")
    assert priority.exit_code == 0, priority.output
    judged = _judge_cells(tmp_path / "p")
    assert len(judged) > 20  # the search below looks for values a priority sheet does show
    header, _ = read_csv(tmp_path / "p" / "review.csv")
    assert any(JUDGE_WORDS.search(c) for c in header)

    run = invoke("review", results, "--out", tmp_path / "s", "--design", design, "--n", "40",
                 "--criterion", "accuracy")
    assert run.exit_code == 0, run.output
    header, rows = read_csv(tmp_path / "s" / "review.csv")
    assert rows and not [c for c in header if JUDGE_WORDS.search(c)], header
    assert {c for c in header if c.endswith(".label")} == {"accuracy.label"}
    cells = {cell for row in rows for cell in row.values()}
    assert not cells & judged
    records = [json.loads(line) for line in
               (tmp_path / "s" / "review.jsonl").read_text().splitlines()]
    assert not [k for r in records for k in r if JUDGE_WORDS.search(k)]
    leaves = {str(v) for r in records for v in _values(r)}
    assert not leaves & judged
    for name in ("review.csv", "review.jsonl", "sheet.json"):
        assert SECRET not in (tmp_path / "s" / name).read_text()  # the judge's reasoning
    for row in rows:
        assert re.fullmatch(rf"{design} draw \(probability [0-9.e-]+\)", row["reason"])
        assert float(row["inclusion_probability"]) > 0
    assert read_sheet_info(tmp_path / "s").blind is True
    assert read_sheet_info(tmp_path / "p").blind is False
    assert "blind: the sheet shows none of the judge's" in run.output
    assert "not blind" in priority.output


def test_agree_and_estimate_read_a_blind_sheet(tmp_path, synthetic):
    results, truth = synthetic
    run = invoke("review", results, "--out", tmp_path / "s", "--design", "random", "--n", "40")
    assert run.exit_code == 0, run.output
    header, _ = read_csv(tmp_path / "s" / "review.csv")
    assert "accuracy.score" not in header and "results_sha256" in header  # blind
    filled = fill_sheet(tmp_path / "s" / "review.csv", tmp_path / "filled.csv", truth)
    agree = invoke("agree", results, "--labels", filled, "--label-field", "accuracy.label")
    assert agree.exit_code == 0, agree.output
    assert "kappa" in agree.output.lower()
    estimate = invoke("estimate", results, "--labels", filled, "--label-field",
                      "accuracy.label")
    assert estimate.exit_code == 0, estimate.output
    assert "PPI++" in estimate.output and "WARNING" not in estimate.output
    # Another system's results with this sheet: warned, from the sheet's results_sha256.
    other_records, _ = world(80, seed=4)
    other = write_results(tmp_path / "other.jsonl", other_records)
    warned = invoke("estimate", other, "--labels", filled, "--label-field", "accuracy.label")
    assert "another system's answers" in " ".join(warned.output.split())


# --- runs with a manifest ---------------------------------------------------------------------

def _verdict(i: int) -> str:
    body = {}
    for key in ("hallucination", "accuracy", "clarity"):
        body[key] = 1 + i % 5
        body[f"{key}_reasoning"] = REASONING
    return json.dumps(body)


@pytest.fixture
def run(tmp_path):
    """A finished run of 12 cases whose id and answer columns have other names (--map,
    --id-column), with its manifest."""
    rows = [{"pid": f"p{i:02d}", "patient_profile": f"{TEXT} {i}", "trial_id": "NCT1",
             "trial_title": "A trial", "eligibility_criteria": "adults",
             "ground_truth_label": "eligible", "ground_truth_explanation": "",
             "answer": f"answer {i}"} for i in range(12)]
    cases = write_jsonl(tmp_path / "cases.jsonl", rows)
    out = tmp_path / "results.jsonl"
    evaluate(*run_options(rubric="trial_eligibility", input_path=cases, output_path=out,
                          judge_spec=JudgeSpec(backend="fake"),
                          backend=FakeBackend([_verdict(i) for i in range(12)]),
                          mapping={"workflow_answer": "answer"}, id_column="pid"))
    return out, cases


def test_the_manifest_keeps_how_the_run_read_its_cases(run, tmp_path):
    results, cases = run
    ref = case_reading(results)
    assert ref == CasesRef(path=str(cases.resolve()),
                           sha256=hashlib.sha256(cases.read_bytes()).hexdigest(),
                           mapping={"workflow_answer": "answer"}, id_column="pid")
    # A manifest written before the runs recorded it: nothing (review works as before).
    manifest_file = manifest_path_for(results)
    manifest = json.loads(manifest_file.read_text())
    for entry in manifest["runs"]:
        del entry["reading"]
    manifest_file.write_text(json.dumps(manifest))
    assert case_reading(results) is None


def test_show_text_needs_no_options_and_sheet_json_records_the_cases(run, tmp_path,
                                                                    monkeypatch):
    _results, cases = run
    monkeypatch.chdir(tmp_path)
    done = invoke("review", "results.jsonl", "--out", "sheet", "--design", "random", "--n",
                  "5", "--show-text")
    assert done.exit_code == 0, done.output
    header, rows = read_csv(tmp_path / "sheet" / "review.csv")
    assert len(rows) == 5 and "input.patient_profile" in header
    assert all(row["input.patient_profile"] == f"{TEXT} {int(row['case_id'][1:])}" and
               row["input.workflow_answer"] == f"answer {int(row['case_id'][1:])}"
               for row in rows)
    info = read_sheet_info(tmp_path / "sheet")
    assert info.cases is not None and Path(info.cases.path).is_absolute()
    assert info.cases.path == str(cases.resolve())
    assert info.cases.mapping == {"workflow_answer": "answer"} and info.cases.id_column == "pid"
    # An option given overrides the run's (here a wrong id column: no case matches).
    wrong = invoke("review", "results.jsonl", "--out", "other", "--design", "random", "--n",
                   "5", "--show-text", "--case-id-column", "trial_id")
    assert wrong.exit_code == 2 and "'trial_id'" in wrong.output


def test_a_cases_file_changed_since_the_run_is_refused_in_one_line(run, tmp_path):
    results, cases = run
    cases.write_text(cases.read_text().replace("answer 3", "answer three"))
    refused = invoke("review", results, "--out", tmp_path / "s", "--design", "random", "--n",
                     "5", "--show-text")
    line = one_line_error(refused)
    assert "cases.jsonl" in line and "changed since the run" in line and "--cases" in line
    assert TEXT not in line
    assert not (tmp_path / "s" / "review.csv").exists()
    # Without --show-text the file is not read: the sheet records what the run read.
    done = invoke("review", results, "--out", tmp_path / "s", "--design", "random", "--n", "5")
    assert done.exit_code == 0, done.output
    assert read_sheet_info(tmp_path / "s").cases.sha256 != hashlib.sha256(
        cases.read_bytes()).hexdigest()


def test_an_older_manifest_still_needs_the_options(run, tmp_path):
    results, cases = run
    manifest_file = manifest_path_for(results)
    manifest = json.loads(manifest_file.read_text())
    del manifest["runs"][-1]["reading"]
    manifest_file.write_text(json.dumps(manifest))
    refused = invoke("review", results, "--out", tmp_path / "s", "--n", "5", "--show-text")
    assert "--show-text needs --cases" in one_line_error(refused)
    done = invoke("review", results, "--out", tmp_path / "s", "--n", "5", "--show-text",
                  "--cases", cases, "--map", "workflow_answer=answer", "--case-id-column",
                  "pid")
    assert done.exit_code == 0, done.output
    info = read_sheet_info(tmp_path / "s")
    assert info.cases is not None and info.cases.id_column == "pid"


def test_sheet_json_describes_the_draw(run, tmp_path):
    results, _ = run
    done = invoke("review", results, "--out", tmp_path / "s", "--design", "random", "--n", "6",
                  "--seed", "5")
    assert done.exit_code == 0, done.output
    info = read_sheet_info(tmp_path / "s")
    jsonl = (tmp_path / "s" / "review.jsonl").read_bytes()
    assert info.fingerprint == hashlib.sha256(jsonl).hexdigest()
    rubric = load_rubric("trial_eligibility")
    manifest = json.loads(manifest_path_for(results).read_text())
    assert info.rubric == "trial_eligibility"
    assert info.rubric_hash == rubric.source_sha256 == manifest["settings"]["rubric_file_hash"]
    assert (info.kind, info.design, info.blind, info.seed) == ("single", "random", True, 5)
    header, _rows = read_csv(tmp_path / "s" / "review.csv")
    assert info.criteria == [c.removesuffix(".label") for c in header if c.endswith(".label")]
    assert info.criteria == ["hallucination", "accuracy", "clarity"]
    assert [(r.path, r.sha256) for r in info.results] == [
        (str(results), hashlib.sha256(results.read_bytes()).hexdigest())]
    assert info.labellers == [] and info.assignment == {} and info.overlap is None
    assert "assigned_to" not in header
    assert (tmp_path / "s" / "sheet.json").stat().st_mode & 0o077 == 0
    assert "sheet.json" in done.output
    # Drawn again over it (--force): the three files are of the new draw.
    again = invoke("review", results, "--out", tmp_path / "s", "--design", "random", "--n",
                   "4", "--seed", "6", "--force")
    assert again.exit_code == 0, again.output
    info = read_sheet_info(tmp_path / "s")
    assert info.fingerprint == hashlib.sha256(
        (tmp_path / "s" / "review.jsonl").read_bytes()).hexdigest()
    assert info.seed == 6 and len(read_csv(tmp_path / "s" / "review.csv")[1]) == 4


def test_force_never_draws_over_a_sheet_with_saved_labels(run, tmp_path):
    results, _ = run
    out = tmp_path / "s"
    assert invoke("review", results, "--out", out, "--design", "random", "--n", "4",
                  "--seed", "5").exit_code == 0
    info = read_sheet_info(out)
    case = json.loads((out / "review.jsonl").read_text().splitlines()[0])["case_id"]
    for value in (3, 4):
        append_label(out, JournalEntry(labeller="ana", time=now(), case_id=case,
                                       criterion="accuracy", value=value,
                                       sheet=info.fingerprint, rubric_hash=info.rubric_hash))
    before = {name: (out / name).read_bytes() for name in ("review.jsonl", "sheet.json")}
    line = one_line_error(invoke("review", results, "--out", out, "--design", "random",
                                 "--n", "4", "--seed", "6", "--force"))
    assert "2 saved label(s)" in line and "another --out" in line
    assert {name: (out / name).read_bytes() for name in before} == before


# --- overlap ----------------------------------------------------------------------------------

def test_overlap_gives_a_share_to_everyone_and_splits_the_rest_evenly():
    ids = [f"c{i:02d}" for i in range(10)]
    a = assign(ids, ["ann", "bob", "cy"], 0.2, seed=1)
    assert len(a.overlap_cases) == 2
    sizes = sorted(len(a.cases[name]) for name in ("ann", "bob", "cy"))
    assert sizes == [2 + 2, 2 + 3, 2 + 3]  # 8 others dealt 3, 3, 2
    for case_id in ids:
        given = a.of(case_id)
        assert len(given) == (3 if case_id in a.overlap_cases else 1)
    for cases in a.cases.values():
        assert cases == [c for c in ids if c in cases]  # sheet order
    assert assign(ids, ["ann", "bob", "cy"], 0.2, seed=1) == a
    many = [f"c{i:03d}" for i in range(100)]
    assert assign(many, ["ann", "bob"], 0.3, seed=1) != assign(many, ["ann", "bob"], 0.3,
                                                               seed=2)
    assert len(assign(many, ["ann", "bob"], 0.25, seed=1).overlap_cases) == 25
    half = assign(ids, ["ann", "bob"], 0.25, seed=1)  # 2.5 cases: rounded up
    assert len(half.overlap_cases) == 3
    assert assign(ids, ["ann", "bob"], None, seed=1).overlap_cases == []
    assert assign(ids, [], None, seed=1).cases == {}
    with pytest.raises(ReviewError):
        assign(ids, ["ann"], 0.5, seed=1)


def test_review_with_labellers_records_the_assignment(synthetic, tmp_path):
    results, _ = synthetic
    done = invoke("review", results, "--out", tmp_path / "s", "--design", "random", "--n", "20",
                  "--labeller", "Dr Ann", "--labeller", "bob", "--overlap", "0.5", "--seed",
                  "4")
    assert done.exit_code == 0, done.output
    info = read_sheet_info(tmp_path / "s")
    assert info.labellers == ["Dr Ann", "bob"] and info.overlap == 0.5
    assert len(info.overlap_cases) == 10
    assert {len(v) for v in info.assignment.values()} == {15}
    header, rows = read_csv(tmp_path / "s" / "review.csv")
    assert "assigned_to" in header
    for row in rows:
        names = row["assigned_to"].split(";")
        assert names == [n for n in info.labellers if row["case_id"] in info.assignment[n]]
        assert (len(names) == 2) == (row["case_id"] in info.overlap_cases)
    assert [r["case_id"] for r in rows if "bob" in r["assigned_to"]] == info.assignment["bob"]
    assert "evaluator label" in done.output and "--labeller 'Dr Ann'" in done.output
    assert max(len(line) for line in done.output.splitlines()
               if str(tmp_path) not in line) <= 80
    again = invoke("review", results, "--out", tmp_path / "t", "--design", "random", "--n",
                   "20", "--labeller", "Dr Ann", "--labeller", "bob", "--overlap", "0.5",
                   "--seed", "4")
    assert again.exit_code == 0
    assert read_sheet_info(tmp_path / "t").assignment == info.assignment


@pytest.mark.parametrize(("args", "message"), [
    (["--labeller", "ann", "--labeller", "ann"], "given twice"),
    (["--labeller", " "], "is empty"),
    (["--labeller", "x" * 65], "at most 64"),
    (["--labeller", "a\tb", "--labeller", "c"], "control character"),
    (["--labeller", "a;b", "--labeller", "c"], "holds ';'"),
    (["--labeller", "ann", "--overlap", "0.5"], "at least two"),
    (["--overlap", "0.5"], "at least two"),
    (["--labeller", "ann", "--labeller", "bob", "--overlap", "1.5"], "from 0 to 1"),
])
def test_bad_labellers_and_overlaps_are_one_line_exit_2(synthetic, tmp_path, args, message):
    results, _ = synthetic
    refused = invoke("review", results, "--out", tmp_path / "s", "--design", "random", *args)
    assert message in one_line_error(refused)
    assert not (tmp_path / "s").exists()


# --- pairwise ---------------------------------------------------------------------------------

def _pair_verdict(choice: str) -> str:
    body = {}
    for key in ("hallucination", "accuracy", "clarity"):
        body[key] = choice
        body[f"{key}_reasoning"] = REASONING
    return json.dumps(body)


@pytest.fixture
def pairwise_run(tmp_path):
    rows = [{"case_id": f"c{i}", "patient_profile": f"{TEXT} {i}", "trial_id": "NCT1",
             "trial_title": "A trial", "eligibility_criteria": "adults",
             "ground_truth_label": "Likely Eligible", "gpt": f"gpt says {i}",
             "llama": f"llama says {i}"} for i in range(8)]
    cases = write_jsonl(tmp_path / "pairs.jsonl", rows)
    out = tmp_path / "pairs_out.jsonl"
    # Both orders of each pair: A first says A, B first says B, so A wins every pair.
    evaluate(*run_options(rubric="trial_eligibility_pairwise", input_path=cases,
                          output_path=out, judge_spec=JudgeSpec(backend="fake"),
                          backend=FakeBackend([_pair_verdict(c) for _ in range(8)
                                               for c in ("A", "B")]),
                          mapping={"answer_a": "gpt", "answer_b": "llama"}))
    return out, cases


def test_a_pairwise_run_gives_a_blind_random_sheet_compare_reads(pairwise_run, tmp_path):
    results, _ = pairwise_run
    done = invoke("review", results, "--out", tmp_path / "s", "--design", "random", "--n", "6",
                  "--show-text")
    assert done.exit_code == 0, done.output
    header, rows = read_csv(tmp_path / "s" / "review.csv")
    assert [c for c in header if c.endswith(".label")] == [
        "hallucination.label", "accuracy.label", "clarity.label"]
    assert not [c for c in header if JUDGE_WORDS.search(c) and not c.startswith("input.")]
    assert {(r["system_a"], r["system_b"]) for r in rows} == {("gpt", "llama")}
    assert all(r["input.answer_a"].startswith("gpt says") for r in rows)
    for name in ("review.csv", "review.jsonl", "sheet.json"):
        text = (tmp_path / "s" / name).read_text()
        assert REASONING not in text
    # No judge preference: the outcome "A" is in no cell but the labels the test fills in.
    assert not [k for r in rows for k, v in r.items() if v == "A"]
    info = read_sheet_info(tmp_path / "s")
    assert (info.kind, info.design, info.blind) == ("pairwise", "random", True)
    assert info.criteria == ["hallucination", "accuracy", "clarity"]
    assert "evaluator compare" in done.output and "A is gpt, B llama" in done.output
    assert max(len(line) for line in done.output.splitlines()
               if str(tmp_path) not in line) <= 80
    filled = tmp_path / "filled.csv"
    with filled.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=header)
        writer.writeheader()
        writer.writerows({**r, "accuracy.label": "AB"[i % 2]} for i, r in enumerate(rows))
    compared = invoke("compare", results, "--labels", filled, "--label-field",
                      "accuracy.label")
    assert compared.exit_code == 0, compared.output
    assert "6" in compared.output


@pytest.mark.parametrize("design", ["priority", "active"])
def test_a_pairwise_run_refuses_priority_and_active_sheets(pairwise_run, tmp_path, design):
    results, _ = pairwise_run
    refused = invoke("review", results, "--out", tmp_path / "s", "--design", design,
                     "--criterion", "accuracy")
    line = one_line_error(refused)
    assert "--design random" in line and "pairwise" in line


def test_a_pairwise_run_of_two_files_shows_both_answers_and_checks_both_files(tmp_path):
    shared = {"patient_profile": f"{TEXT}", "trial_id": "NCT1", "trial_title": "A trial",
              "eligibility_criteria": "adults", "ground_truth_label": "Likely Eligible"}
    gpt = write_jsonl(tmp_path / "gpt.jsonl", [dict(shared, case_id=f"c{i}", answer=f"gpt {i}")
                                              for i in range(5)])
    llama = write_jsonl(tmp_path / "llama.jsonl", [dict(shared, case_id=f"c{i}",
                                                        answer=f"llama {i}")
                                                   for i in range(5)])
    out = tmp_path / "out.jsonl"
    evaluate(*run_options(rubric="trial_eligibility_pairwise", input_path=gpt,
                          output_path=out, judge_spec=JudgeSpec(backend="fake"),
                          backend=FakeBackend(), versus=llama, answer_column="answer"))
    ref = case_reading(out)
    assert ref is not None and ref.versus == str(llama.resolve())
    assert ref.answer_column == "answer"
    assert ref.versus_sha256 == hashlib.sha256(llama.read_bytes()).hexdigest()
    done = invoke("review", out, "--out", tmp_path / "s", "--design", "random", "--n", "3",
                  "--show-text")
    assert done.exit_code == 0, done.output
    _, rows = read_csv(tmp_path / "s" / "review.csv")
    for row in rows:
        number = row["case_id"][1:]
        assert (row["input.answer_a"], row["input.answer_b"]) == (f"gpt {number}",
                                                                  f"llama {number}")
        assert (row["system_a"], row["system_b"]) == ("gpt", "llama")
    llama.write_text(llama.read_text().replace("llama 1", "llama one"))
    refused = invoke("review", out, "--out", tmp_path / "t", "--design", "random", "--n", "3",
                     "--show-text")
    line = one_line_error(refused)
    assert "llama.jsonl" in line and "changed since the run" in line
