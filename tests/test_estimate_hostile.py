"""Hostile review of issue 25 (designs, estimate): each test states a requirement the
current code breaks; see review_repros/REPORT.md for the reproductions and figures.
Every test here fails on 9eda258 and should pass once its finding is fixed."""

from __future__ import annotations

import json

import pytest

np = pytest.importorskip("numpy", reason="needs the stats extra")
pytest.importorskip("scipy", reason="needs the stats extra")

from click.testing import CliRunner

from evaluator.analysis.designs import LabelDesign, inclusion_probabilities
from evaluator.analysis.estimate import ppi
from evaluator.analysis.estimate.estimate import estimate, estimate_outcome
from evaluator.analysis.estimate.inputs import System
from evaluator.cli.main import cli
from tests.conftest import label_source
from tests.label_world import SECRET, fill_sheet, read_rows, world, write_results, write_rows


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def one_line_exit_2(run) -> bool:
    return (run.exit_code == 2 and len(run.output.strip().splitlines()) == 1
            and "internal error" not in run.output and "Traceback" not in run.output)




@pytest.fixture
def system_a(tmp_path):
    records, truth = world(300, seed=1, prefix="q")
    return write_results(tmp_path / "A.jsonl", records), truth


def sheet(tmp_path, results, truth, *args, name="s"):
    run = invoke("review", results, "--out", tmp_path / name, *args)
    assert run.exit_code == 0, run.output
    return fill_sheet(tmp_path / name / "review.csv", tmp_path / f"{name}.csv", truth)


# --- 1. Wrong numbers: PPI++ with the labelled cases inside 'Yhat_unlabeled' ---------------

def test_every_case_labelled_ppi_ci_is_not_narrower_than_the_labels_own(tmp_path):
    """n = N: PPI++'s point estimate IS the labels' mean, so its CI cannot honestly be
    narrower than the labels-only CI, nor be 'worth' more labels than there are cases."""
    records, truth = world(60, seed=3, prefix="q")
    results = write_results(tmp_path / "A.jsonl", records)
    filled = sheet(tmp_path, results, truth, "--design", "random", "--n", "60", "--seed", "1")
    (row,) = estimate([results], label_source([filled], "accuracy.label")).estimates
    assert row.ppi_estimate == pytest.approx(row.classical_estimate)
    width = row.ppi_ci[1] - row.ppi_ci[0]
    assert width >= (row.classical_ci[1] - row.classical_ci[0]) - 1e-9
    assert row.effective_labels is None or row.effective_labels <= 60 + 1e-9


def _random_system(y, f, drawn):
    ids = [f"c{i:04d}" for i in range(len(f))]
    design = LabelDesign("random", {ids[i]: len(drawn) / len(f) for i in drawn},
                         population=len(f))
    system = System(path="A.jsonl", name="A", labels_path="s.csv", rubric=None,
                    population=ids, labels={ids[i]: float(y[i]) for i in drawn},
                    design=design, unlabelled_rows=0)
    system.values["accuracy"] = [float(v) for v in f]
    return system


def test_random_design_ppi_covers_when_most_cases_are_labelled():
    """The estimate's own code path (estimate_outcome) on a random sheet of n = 45 of
    N = 50 cases: the 95% CI should cover the clinicians' mean in >= 92% of replicates
    (it does ~88% today; 94% with the judge on the N - n unlabelled cases)."""
    p = np.array([0.1, 0.2, 0.3, 0.25, 0.15])
    truth = float((np.arange(1, 6) * p).sum())
    covered = []
    for seed in range(1000):
        rng = np.random.default_rng(seed)
        y = rng.choice(np.arange(1, 6), 50, p=p).astype(float)
        sd = np.where(rng.random(50) < 0.3, 1.5, 0.3)
        f = np.clip(np.round(y + 0.5 + rng.normal(0, sd)), 1, 5)
        row = estimate_outcome(_random_system(y, f, rng.choice(50, 45, replace=False)),
                               "accuracy", None)
        covered.append(row.ppi_ci[0] <= truth <= row.ppi_ci[1])
    assert np.mean(covered) >= 0.92, np.mean(covered)


# --- 2. Wrong numbers: zero-width "95% CIs" -----------------------------------------------

@pytest.mark.parametrize("labelled", [1, 40])
def test_labels_all_equal_never_give_a_zero_width_ci(tmp_path, system_a, labelled):
    """One label, or every label the same (a pass rate where every labelled case passes -
    common for safety gates): a point 'CI' [1.000, 1.000] with p 0 is not a 95% CI."""
    results, truth = system_a
    filled = sheet(tmp_path, results, truth, "--design", "random", "--n", "40", "--seed", "7")
    rows = read_rows(filled)
    for i, row in enumerate(rows):
        row["accuracy.label"] = "5" if i < labelled else ""
    write_rows(filled, rows)
    report = estimate([results], label_source([filled], "accuracy.label"))
    for row in report.estimates:
        for key in ("ppi_ci", "classical_ci"):
            ci = getattr(row, key)
            assert ci is None or ci[1] > ci[0], (key, ci)


def test_active_estimator_covers_at_twenty_labels(monkeypatch):
    """The active (IPW, lambda and offset tuned in-sample) CI at an expected 20 labels of
    2,000, the tests' own judge: >= 90% coverage (today ~88%; 2-fold cross-fitting of
    lambda and m gives ~91%, fixed lambda = 1, m = 0 ~93%)."""
    # The estimator's own coverage below the 30-label floor `estimate` withholds active
    # intervals at (issue 47): the floor is lifted here.
    monkeypatch.setattr(ppi, "ACTIVE_MIN_LABELS", 1)
    p = np.array([0.1, 0.2, 0.3, 0.25, 0.15])
    truth = float((np.arange(1, 6) * p).sum())
    covered = []
    for seed in range(1000):
        rng = np.random.default_rng(seed)
        y = rng.choice(np.arange(1, 6), 2000, p=p).astype(float)
        sd = np.where(rng.random(2000) < 0.3, 1.5, 0.3)
        f = np.clip(np.round(y + 0.5 + rng.normal(0, sd)), 1, 5)
        pi = np.asarray(inclusion_probabilities(np.sqrt(sd ** 2 + 1 / 12), 20))
        taken = rng.random(2000) < pi
        if not taken.any():
            continue
        result = ppi.ipw_mean(f, [v if t else None for v, t in zip(y, taken)],
                              np.where(taken, pi, 1.0))
        covered.append(result.ci95[0] <= truth <= result.ci95[1])
    assert np.mean(covered) >= 0.90, np.mean(covered)


# --- 3. Wrong numbers: an edited sheet is taken at its word ---------------------------------

def _edited(tmp_path, filled, edit):
    rows = read_rows(filled)
    rows = edit(rows)
    return write_rows(tmp_path / "edited.csv", rows)


@pytest.mark.parametrize("edit", [
    # the rows labelled 1 or 2 deleted (selection on the outcome)
    lambda rows: [r for r in rows if r["accuracy.label"] not in ("1", "2")],
    # a labelled row's case id is not one of the draw's cases (Excel dropping zeros, a typo)
    lambda rows: [{**rows[0], "case_id": "not-a-case"}, *rows[1:]],
])
def test_a_random_sheet_with_rows_deleted_or_foreign_is_refused(tmp_path, system_a, edit):
    results, truth = system_a
    filled = sheet(tmp_path, results, truth, "--design", "random", "--n", "40", "--seed", "7")
    run = invoke("estimate", results, "--labels", _edited(tmp_path, filled, edit),
                 "--label-field", "accuracy.label")
    assert one_line_exit_2(run), run.output


def test_a_random_sheet_with_hand_picked_rows_added_is_refused(tmp_path, system_a):
    results, truth = system_a
    filled = sheet(tmp_path, results, truth, "--design", "random", "--n", "40", "--seed", "7")
    rows = read_rows(filled)
    have = {r["case_id"] for r in rows}
    picked = [c for c in sorted(truth) if c not in have and truth[c] == 5][:10]
    extra = [{**rows[0], "case_id": c, "accuracy.label": "5"} for c in picked]
    run = invoke("estimate", results, "--labels", write_rows(tmp_path / "more.csv",
                                                             rows + extra),
                 "--label-field", "accuracy.label")
    assert one_line_exit_2(run), run.output


# --- 4. Crashes (exit 70, "internal error") on files a user names --------------------------

def test_a_semicolon_csv_is_one_line_not_a_crash(tmp_path, system_a):
    """Excel in many locales saves ';'-separated CSV; the distribution cells hold commas."""
    results, truth = system_a
    filled = sheet(tmp_path, results, truth, "--design", "random", "--n", "20")
    semi = write_rows(tmp_path / "semi.csv", read_rows(filled), delimiter=";")
    run = invoke("estimate", results, "--labels", semi, "--label-field", "accuracy.label")
    assert one_line_exit_2(run), run.output
    assert "semi.csv looks ';'-separated" in run.output, run.output


def test_a_near_zero_probability_is_one_line_not_a_crash(tmp_path, system_a):
    results, truth = system_a
    filled = sheet(tmp_path, results, truth, "--design", "active", "--criterion", "accuracy",
                   "--n", "40", "--seed", "7")
    rows = read_rows(filled)
    rows[0]["inclusion_probability"] = "1e-320"
    run = invoke("estimate", results, "--labels", write_rows(filled, rows),
                 "--label-field", "accuracy.label")
    assert run.exit_code in (0, 2) and "internal error" not in run.output, run.output


def test_expected_gate_with_an_all_zero_distribution_is_not_a_crash(tmp_path, system_a):
    """A schema-valid record (probabilities in [0, 1], at least one) whose probabilities
    are all 0: --score expected --pass divides by their sum."""
    results, truth = system_a
    filled = sheet(tmp_path, results, truth, "--design", "random", "--n", "40")
    lines = results.read_text().splitlines()
    record = json.loads(lines[0])
    dist = record["distributions"]["accuracy"]
    dist["probabilities"] = {k: 0.0 for k in dist["probabilities"]}
    lines[0] = json.dumps(record)
    results.write_text("\n".join(lines) + "\n")
    run = invoke("estimate", results, "--labels", filled, "--label-field", "accuracy.label",
                 "--score", "expected", "--pass", "accuracy>=4")
    assert run.exit_code in (0, 2) and "internal error" not in run.output, run.output


# --- 5. PHI --------------------------------------------------------------------------------

def test_a_csv_without_its_header_row_never_prints_case_ids_or_text(tmp_path, system_a):
    """The first data row becomes the header; the 'fields:' list of the error then quotes
    that row's cells: its case id and, with --show-text sheets, case text."""
    results, _ = system_a
    labels = tmp_path / "noheader.csv"
    labels.write_text(f"q-0001,{SECRET} 67-year-old with ...,4\nq-0002,other,3\n")
    run = invoke("estimate", results, "--labels", labels, "--label-field", "grade",
                 "--criterion", "accuracy")
    assert run.exit_code == 2
    assert SECRET not in run.output and "q-0001" not in run.output, run.output


# --- 6. Wrong numbers / UX ------------------------------------------------------------------

def test_the_same_results_file_twice_is_refused_in_one_line(tmp_path, system_a):
    """Two sheets of one system (e.g. a random and an active one) given as two systems: the
    first estimate vanished and the 'difference' was the second one minus itself (0, p 1).
    Now refused, naming the file, with what to do instead."""
    results, truth = system_a
    rand = sheet(tmp_path, results, truth, "--design", "random", "--n", "40", name="r")
    act = sheet(tmp_path, results, truth, "--design", "active", "--criterion", "accuracy",
                "--n", "40", name="a")
    run = invoke("estimate", results, results, "--labels", rand, "--labels", act,
                 "--label-field", "accuracy.label")
    assert one_line_exit_2(run), run.output
    assert "is given twice" in run.output and "estimate each on its own" in run.output


def test_json_output_keeps_the_warnings_the_text_prints(tmp_path, system_a):
    """--json drops every system note: the 'labels of another system?' WARNING, 'taken as
    a simple random sample', 'not labelled yet' are all gone."""
    results, truth = system_a
    records, _truth_b = world(300, seed=2, bias=0.2, prefix="q")
    other = write_results(tmp_path / "B.jsonl", records)
    filled = sheet(tmp_path, results, truth, "--design", "random", "--n", "40")
    text = invoke("estimate", other, "--labels", filled, "--label-field", "accuracy.label")
    assert "WARNING" in text.output
    as_json = invoke("estimate", other, "--labels", filled, "--label-field",
                     "accuracy.label", "--json")
    assert as_json.exit_code == 0 and "WARNING" in as_json.output


def test_estimate_text_fits_80_columns_with_a_gate(tmp_path, system_a):
    results, truth = system_a
    filled = sheet(tmp_path, results, truth, "--design", "random", "--n", "40")
    run = invoke("estimate", results, "--labels", filled, "--label-field", "accuracy.label",
                 "--pass", "accuracy>=4")
    assert run.exit_code == 0
    long = [line for line in run.output.splitlines()
            if len(line) > 80 and str(tmp_path) not in line]
    assert not long, long


def test_report_numbers_each_systems_notes_by_its_system(tmp_path, system_a):
    """The template's inner loop reuses loop.index: system #2's warning is shown as '#1'."""
    results, truth = system_a
    records, _ = world(300, seed=2, bias=0.2, prefix="q")
    other = write_results(tmp_path / "B.jsonl", records)
    filled = sheet(tmp_path, results, truth, "--design", "random", "--n", "40")
    page = tmp_path / "r.html"
    run = invoke("report", results, other, "--labels", filled, "--labels", filled,
                 "--label-field", "accuracy.label", "--html", page, "--resamples", "100")
    assert run.exit_code == 0, run.output
    text = page.read_text()
    assert "#2: WARNING" in text, "system 2's warning is not numbered #2"


# --- issue 34: labels off the scale, a criterion the labels do not rate --------------------

@pytest.mark.parametrize("bad", ["3_0", "1000", "-3", "3.5"])
def test_a_sheet_label_off_the_criterions_scale_is_refused_naming_its_line(tmp_path, system_a,
                                                                          bad):
    """One cell '3_0' (read as 30) moved PPI++ from 3.33 [3.08, 3.58] to 3.89 [2.54, 5.23],
    past the top of the 1-5 scale, with only a generic note."""
    results, truth = system_a
    filled = sheet(tmp_path, results, truth, "--design", "random", "--n", "40")
    rows = read_rows(filled)
    rows[3]["accuracy.label"] = bad
    run = invoke("estimate", results, "--labels", write_rows(filled, rows),
                 "--label-field", "accuracy.label")
    assert one_line_exit_2(run), run.output
    assert "line 5" in run.output and "'accuracy.label'" in run.output
    assert SECRET not in run.output and "q-0" not in run.output
    if bad != "3_0":
        assert f"is {bad}, not on the scale of 'accuracy'" in run.output


def test_label_scale_takes_labels_on_another_scale(tmp_path, system_a):
    results, truth = system_a
    filled = sheet(tmp_path, results, truth, "--design", "random", "--n", "40")
    rows = read_rows(filled)
    for row in rows:  # the clinicians said pass (1) or fail (0) in the accuracy column
        row["accuracy.label"] = "1" if int(row["accuracy.label"]) >= 4 else "0"
    binary = write_rows(tmp_path / "binary.csv", rows)
    run = invoke("estimate", results, "--labels", binary, "--label-field", "accuracy.label")
    assert one_line_exit_2(run) and "--label-scale" in run.output, run.output
    run = invoke("estimate", results, "--labels", binary, "--label-field", "accuracy.label",
                 "--label-scale", "0,1", "--json")
    assert run.exit_code == 0, run.output
    (row,) = [json.loads(line) for line in run.output.splitlines()
              if json.loads(line)["type"] == "estimate"]
    assert 0 < row["classical_estimate"] < 1
    run = invoke("estimate", results, "--labels", binary, "--label-field", "accuracy.label",
                 "--label-scale", "1-5")
    assert one_line_exit_2(run) and "is 0, not on --label-scale (1-5)" in run.output


def test_a_criterion_other_than_the_one_the_label_column_names_is_refused(tmp_path, system_a):
    results, truth = system_a
    filled = sheet(tmp_path, results, truth, "--design", "random", "--n", "40")
    run = invoke("estimate", results, "--labels", filled, "--label-field", "accuracy.label",
                 "--criterion", "clarity")
    assert one_line_exit_2(run), run.output
    assert "'accuracy.label' rate 'accuracy'" in run.output
