"""``evaluator agree`` and :mod:`evaluator.analysis.agreement.agreement`: figures checked against
direct library calls on the same joined pairs, on the real trial data with a scripted fake judge."""

from __future__ import annotations

import json
import re

import pytest

pytest.importorskip("scipy", reason="needs the stats extra")
pytest.importorskip("sklearn", reason="needs the stats extra")
pytest.importorskip("krippendorff", reason="needs the stats extra")
pytest.importorskip("pingouin", reason="needs the stats extra")

import numpy as np
from click.testing import CliRunner

from evaluator.analysis.agreement.agreement import AgreementError, agreement, criterion_agreement
from evaluator.cli.main import cli
from evaluator.data.sources import CaseSource
from evaluator.judges.backends.fake import FakeBackend
from evaluator.judges.models_file import JudgeSpec
from evaluator.run.runner import evaluate
from evaluator.run.task import Judge, RunOptions, Task
from tests.conftest import SHARED_DATA, label_source, refused_in_one_line, write_jsonl
from tests.label_world import world, write_results, write_rows

needs_trial_data = pytest.mark.skipif(not SHARED_DATA.is_file(),
                                      reason=f"shared dev data absent: {SHARED_DATA}")


def scripted_accuracy(row: dict) -> int:
    """A fake judge's accuracy that tracks the expert label (and the generator's own verdict):
    correlated with expert_qrel, but not identical to it."""
    score = 2 + 2 * (row["expert_qrel"] - 1) + (1 if row["generator_eligibility_score"] > 0 else 0)
    return max(1, min(5, score))


def verdict(row: dict, index: int) -> str:
    return json.dumps({"hallucination": 4 + index % 2, "hallucination_reasoning": "ok",
                       "accuracy": scripted_accuracy(row), "accuracy_reasoning": "ok",
                       "clarity": 1 + index % 5, "clarity_reasoning": "ok"})


def fake_results(rows: list[dict], out_dir, extra_outputs: tuple[str, ...] = ()):
    """Judge ``rows`` with the trial rubric and a scripted fake judge; the results path."""
    input_path = write_jsonl(out_dir / "cases.jsonl", rows)
    outputs = [verdict(row, i) for i, row in enumerate(rows)] + list(extra_outputs)
    result = evaluate(Task("trial_eligibility", input_path),
                      Judge("fake-judge", spec=JudgeSpec(backend="fake"),
                            backend=FakeBackend(outputs)),
                      RunOptions(out_dir / "results.jsonl"))
    return result.results_path


@pytest.fixture(scope="module")
def trial_data() -> list[dict]:
    if not SHARED_DATA.is_file():
        pytest.skip(f"shared dev data absent: {SHARED_DATA}")
    return [json.loads(line) for line in SHARED_DATA.read_text(encoding="utf-8").splitlines()
            if line]


@pytest.fixture(scope="module")
def trial_results(trial_data, tmp_path_factory):
    return fake_results(trial_data, tmp_path_factory.mktemp("agree"))


@needs_trial_data
def test_figures_match_direct_library_calls(trial_data, trial_results):
    from krippendorff import alpha
    from scipy.stats import kendalltau, spearmanr
    from sklearn.metrics import cohen_kappa_score

    report = agreement(trial_results, label_source(SHARED_DATA, "expert_qrel"), resamples=200)
    assert report.joined == len(trial_data) == 109
    assert report.unmatched_results == report.unmatched_labels == 0
    assert list(report.criteria) == ["hallucination", "accuracy", "clarity"]
    judge = np.array([scripted_accuracy(r) for r in trial_data], dtype=float)
    label = np.array([r["expert_qrel"] for r in trial_data], dtype=float)
    acc = report.criteria["accuracy"]
    assert acc["n"] == 109
    direct = spearmanr(judge, label)
    assert acc["spearman"]["value"] == pytest.approx(direct.statistic)
    assert acc["spearman"]["p"] == pytest.approx(direct.pvalue)
    assert acc["spearman"]["value"] > 0.5
    assert acc["kendall_tau_b"]["value"] == pytest.approx(kendalltau(judge, label).statistic)
    assert acc["kappa_quadratic"]["value"] == pytest.approx(
        cohen_kappa_score(judge.astype(int), label.astype(int), weights="quadratic"))
    assert acc["krippendorff_alpha_ordinal"]["value"] == pytest.approx(
        alpha(reliability_data=np.vstack([judge, label]), level_of_measurement="ordinal"))
    assert acc["exact"]["value"] == pytest.approx(np.mean(judge == label))
    low, high = acc["spearman"]["ci95"]
    assert low < acc["spearman"]["value"] < high
    assert sum(map(sum, acc["confusion"]["matrix"])) == 109
    # Seeded: the same call gives the same intervals.
    again = agreement(trial_results, label_source(SHARED_DATA, "expert_qrel"), resamples=200,
                      criteria=["accuracy"])
    assert again.criteria["accuracy"] == acc


def test_perfect_agreement_gives_one():
    scores = [1, 2, 3, 4, 5, 3, 2, 4, 1, 5]
    stats = criterion_agreement(scores, scores, resamples=100)
    for key in ("spearman", "kendall_tau_b", "kappa_quadratic", "krippendorff_alpha_ordinal",
                "exact", "within_one", "icc_a1"):
        assert stats[key]["value"] == pytest.approx(1.0), key
    assert stats["confusion"]["matrix"] == np.diag([2, 2, 2, 2, 2]).tolist()


def test_constant_scores_give_none_not_warnings():
    stats = criterion_agreement([3, 3, 3, 3], [1, 2, 1, 2], resamples=100)
    assert stats["spearman"]["value"] is None and stats["spearman"]["ci95"] is None
    assert stats["exact"]["value"] == 0.0
    assert criterion_agreement([3], [3])["note"]
    same = criterion_agreement([2, 2], [2, 2], resamples=100)
    assert same["kappa_quadratic"]["value"] is None and same["exact"]["value"] == 1.0
    assert same["confusion"]["matrix"] == [[2]]


def _small_results(tmp_path, rows):
    return fake_results(rows, tmp_path)


SMALL = [{"case_id": f"c{i}", "patient_profile": "p", "trial_id": "NCT0", "trial_title": "t",
          "eligibility_criteria": "e", "ground_truth_label": "Likely Eligible",
          "ground_truth_explanation": "", "workflow_answer": "SECRET-CASE-TEXT",
          "expert_qrel": 1 + i % 2, "generator_eligibility_score": 1.0} for i in range(6)]


def test_failed_results_are_counted_not_scored(tmp_path):
    rows = [dict(r) for r in SMALL]
    outputs = [verdict(r, i) for i, r in enumerate(rows[:5])] + ["not json"]
    input_path = write_jsonl(tmp_path / "cases.jsonl", rows)
    result = evaluate(Task("trial_eligibility", input_path),
                      Judge("fake-judge", spec=JudgeSpec(backend="fake"),
                            backend=FakeBackend(outputs)),
                      RunOptions(tmp_path / "results.jsonl"))
    labels = write_jsonl(tmp_path / "labels.jsonl", [
        {"case_id": r["case_id"], "expert_qrel": r["expert_qrel"]} for r in rows[1:]])
    report = agreement(result.results_path, label_source(labels, "expert_qrel"), resamples=100)
    assert report.joined == 4          # c1..c4: c0 has no label, c5 failed
    assert report.unmatched_results == 1 and report.not_ok_labelled == 1
    assert report.not_ok_status_counts == {"invalid_output": 1}
    assert report.criteria["accuracy"]["n"] == 4


def test_csv_labels_and_id_column(tmp_path):
    results = _small_results(tmp_path, SMALL)
    labels = tmp_path / "labels.csv"
    labels.write_text("id,grade\n" + "".join(f"c{i},{1 + i % 2}\n" for i in range(6)))
    report = agreement(results, label_source(labels, "grade", id_column="id"),
                       criteria=["accuracy"], resamples=100)
    assert report.joined == 6 and list(report.criteria) == ["accuracy"]


def test_cli_table_json_and_errors(tmp_path):
    results = _small_results(tmp_path, SMALL)
    labels = write_jsonl(tmp_path / "labels.jsonl", [
        {"case_id": r["case_id"], "expert_qrel": r["expert_qrel"], "bad": "high" if i == 3
         else 1} for i, r in enumerate(SMALL)])
    runner = CliRunner()
    base = ["agree", str(results), "--labels", str(labels), "--resamples", "100"]
    done = runner.invoke(cli, base + ["--label-field", "expert_qrel"])
    assert done.exit_code == 0, done.output
    assert "Spearman rho" in done.output and "accuracy" in done.output
    assert "same scale" in done.output and "SECRET-CASE-TEXT" not in done.output
    done = runner.invoke(cli, base + ["--label-field", "expert_qrel", "--json",
                                      "--criterion", "accuracy"])
    assert done.exit_code == 0
    assert json.loads(done.output)["criteria"]["accuracy"]["n"] == 6

    done = runner.invoke(cli, base + ["--label-field", "nope"])
    assert done.exit_code == 2 and "'nope'" in done.output
    done = runner.invoke(cli, base + ["--label-field", "bad"])
    assert done.exit_code == 2
    # Lines, never case ids: --id-column may point at a field of case text.
    assert "line 4" in done.output and "c3" not in done.output and "'bad'" in done.output
    assert "not a number" in done.output
    other = write_jsonl(tmp_path / "other.jsonl", [{"case_id": "zz", "expert_qrel": 1}])
    done = runner.invoke(cli, ["agree", str(results), "--labels", str(other),
                               "--label-field", "expert_qrel"])
    assert done.exit_code == 2 and "no case id" in done.output
    done = runner.invoke(cli, base + ["--label-field", "expert_qrel", "--criterion", "zzz"])
    assert done.exit_code == 2 and "zzz" in done.output


def test_load_labels_rejects_duplicates(tmp_path):
    from evaluator.analysis.label_files import load_labels

    path = write_jsonl(tmp_path / "l.jsonl", [{"case_id": "a", "y": 1}, {"case_id": "a", "y": 2}])
    with pytest.raises(AgreementError, match="lines 1 and 2 have the same case id"):
        load_labels(label_source(path, "y"))


# --- issue 17: figures that cannot mislead, and judge-bias diagnostics --------------------

def synthetic_rows(n: int, *, label, answer=lambda i: f"answer {i}", group=lambda i: "g",
                   ground_truth=lambda i: "Needs Confirmation") -> list[dict]:
    """Clearly synthetic trial cases (no real text): ``label(i)``, ``answer(i)`` (the
    evaluated text), ``group(i)`` and ``ground_truth(i)`` chosen by the test."""
    return [{"case_id": f"s{i}", "patient_profile": f"synthetic patient {i}", "trial_id": "NCT0",
             "trial_title": "synthetic", "eligibility_criteria": "synthetic",
             "ground_truth_label": ground_truth(i), "ground_truth_explanation": "",
             "workflow_answer": answer(i), "expert_qrel": label(i),
             "generator_model": group(i)} for i in range(n)]


def scripted_results(rows: list[dict], out_dir, score, reasoning=lambda i, s: "ok"):
    """Judge ``rows`` with a scripted fake judge giving ``score(i)`` for every criterion and
    ``reasoning(i, score)`` as its text (the verdict's length is its completion tokens)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    input_path = write_jsonl(out_dir / "cases.jsonl", rows)
    outputs = []
    for i in range(len(rows)):
        s, text = score(i), reasoning(i, score(i))
        outputs.append(json.dumps({"hallucination": s, "hallucination_reasoning": text,
                                   "accuracy": s, "accuracy_reasoning": text,
                                   "clarity": s, "clarity_reasoning": text}))
    result = evaluate(Task("trial_eligibility", input_path),
                      Judge("fake-judge", spec=JudgeSpec(backend="fake"),
                            backend=FakeBackend(outputs)),
                      RunOptions(out_dir / "results.jsonl"))
    return result.results_path, input_path


def test_constant_judge_is_said_first_and_every_statistic_marked(tmp_path):
    rows = synthetic_rows(46, label=lambda i: 1 + (i % 5 < 2))
    results, cases = scripted_results(rows, tmp_path, score=lambda i: 2)
    report = agreement(results, label_source(cases, "expert_qrel"), criteria=["accuracy"],
                       resamples=200)
    acc = report.criteria["accuracy"]
    assert "same value (2) to all 46 cases" in acc["warnings"][0]
    # The example: within-one 1.000 against 1-2 labels, exact = share of 2-labels.
    assert acc["within_one"]["value"] == 1.0 and acc["within_one"]["chance"] == 1.0
    assert acc["exact"]["value"] == pytest.approx(19 / 46)          # 0.413
    for key in ("spearman", "kendall_tau_b", "kappa_quadratic", "icc_a1",
                "krippendorff_alpha_ordinal", "exact", "within_one"):
        assert acc[key]["meaningless"] == "the judge gives one value", key
    done = CliRunner().invoke(cli, ["agree", str(results), "--labels", str(cases),
                                    "--label-field", "expert_qrel", "--criterion", "accuracy",
                                    "--resamples", "200"])
    assert done.exit_code == 0, done.output
    block = done.output.split("accuracy  (n = 46)")[1]
    assert block.index("WARNING: the judge gave the same value") < block.index("Spearman rho")
    assert re.search(r"within-one agreement +1\.000\* ", block)
    assert "meaningless here (the judge gives one value)" in block


def test_two_values_of_a_wide_scale_are_warned_and_fixed_figures_marked(tmp_path):
    # A judge answering only 1 or 5 on a 1-5 scale, labels 1-2: a 1 is always within one of
    # the label and a 5 never is, so within-one is the judge's share of 1s.
    rows = synthetic_rows(40, label=lambda i: 1 + (i % 2))
    results, cases = scripted_results(rows, tmp_path, score=lambda i: 5 if i % 4 else 1)
    acc = agreement(results, label_source(cases, "expert_qrel"), criteria=["accuracy"],
                    resamples=200).criteria["accuracy"]
    assert any("only 2 of the 5 values of its scale (1, 5)" in w for w in acc["warnings"])
    assert acc["within_one"]["value"] == pytest.approx(0.25)
    assert "judge's score distribution alone" in acc["within_one"]["meaningless"]
    assert "meaningless" not in acc["exact"] and "meaningless" not in acc["spearman"]


def test_undefined_resamples_are_counted_and_a_valid_interval_used():
    from evaluator.analysis.intervals import fisher_z_ci

    # 20 cases, the judge gives 2 on only two of them: ~12% of resamples hold only 1s and
    # have no correlation, which used to vanish and pull the interval away from zero.
    judge = [1] * 18 + [2, 2]
    labels = [1, 2] * 9 + [2, 1]
    stats = criterion_agreement(judge, labels, resamples=1000)
    rho = stats["spearman"]
    assert rho["bootstrap"]["undefined"] > 10   # more than the 1% limit of 1000
    assert rho["ci_method"].startswith("Fisher z, Bonett-Wright SE (the bootstrap was "
                                       "unreliable")
    assert rho["ci95"] == pytest.approx(fisher_z_ci(rho["value"], 20, "spearman")["ci95"])
    assert rho["ci95"][0] < 0 < rho["ci95"][1]      # agrees with its p-value (about 1)
    assert stats["kendall_tau_b"]["ci_method"].startswith("Fisher z, Fieller-Hartley-Pearson")
    assert stats["exact"]["ci_method"] == "Wilson"
    # A statistic with no valid alternative gets no interval, and the method says why.
    from evaluator.analysis.intervals import paired_bootstrap

    def rho(a, b):
        return criterion_agreement.__globals__["_spearman"](a, b)[0]

    out = paired_bootstrap(np.array(judge, float), np.array(labels, float), rho,
                           resamples=1000, seed=1)
    assert out["ci95"] is None and not out["reliable"]
    assert out["method"] == (f"bootstrap: unreliable, {out['undefined']} of 1000 resamples "
                             "undefined (more than 1%)")


def test_a_few_undefined_resamples_are_left_out_and_said():
    from evaluator.analysis.intervals import paired_bootstrap

    # 100 cases, six 2s: about 0.94^100 = 0.2% of resamples hold only 1s.
    judge = np.array([1.0] * 94 + [2.0] * 6)
    labels = np.array([1.0, 2.0] * 50)

    def rho(a, b):
        return criterion_agreement.__globals__["_spearman"](a, b)[0]

    out = paired_bootstrap(judge, labels, rho, resamples=1000, seed=7)
    assert 0 < out["undefined"] <= 10 and out["reliable"]
    assert out["method"] == (f"bootstrap percentile ({out['undefined']} of 1000 resamples "
                             "undefined, left out)")
    full = paired_bootstrap(np.arange(30.0), np.arange(30.0) % 7, rho, resamples=500, seed=7)
    assert full["undefined"] == 0 and full["method"] == "bootstrap BCa, 500 resamples"


def test_fisher_z_intervals_follow_their_formulas():
    from evaluator.analysis.intervals import fisher_z_ci

    r, n = 0.38, 20
    se = np.sqrt((1 + r * r / 2) / (n - 3))
    expected = np.tanh(np.arctanh(r) + np.array([-1.959964, 1.959964]) * se)
    assert fisher_z_ci(r, n, "spearman")["ci95"] == pytest.approx(expected.tolist(), abs=1e-6)
    se = np.sqrt(0.437 / (n - 4))
    expected = np.tanh(np.arctanh(r) + np.array([-1.959964, 1.959964]) * se)
    assert fisher_z_ci(r, n, "kendall")["ci95"] == pytest.approx(expected.tolist(), abs=1e-6)
    assert fisher_z_ci(0.5, 3, "spearman")["ci95"] is None


def test_circular_label_is_named_never_its_values(tmp_path):
    names = {1: "Needs Confirmation", 2: "Likely Eligible"}
    rows = synthetic_rows(30, label=lambda i: 1 + (i % 3 == 0),
                          ground_truth=lambda i: names[1 + (i % 3 == 0)])
    results, cases = scripted_results(rows, tmp_path, score=lambda i: 1 + 3 * (i % 3 == 0))
    labels = write_jsonl(tmp_path / "labels.jsonl", [
        {"case_id": r["case_id"], "grade": r["expert_qrel"]} for r in rows])
    report = agreement(results, label_source(labels, "grade"), resamples=100)
    assert [c["field"] for c in report.circular] == ["ground_truth_label"]
    assert report.circular[0]["one_to_one"]
    assert "'ground_truth_label' the judge is shown" in report.warnings[0]
    done = CliRunner().invoke(cli, ["agree", str(results), "--labels", str(labels),
                                    "--label-field", "grade", "--resamples", "100"])
    assert done.exit_code == 0
    assert "WARNING: circular labels: 'grade' can be read from the input field " \
           "'ground_truth_label'" in " ".join(done.output.split())
    assert "Likely Eligible" not in done.output and "Needs Confirmation" not in done.output
    assert "synthetic patient" not in done.output
    # Control: the same judge with the reference label unrelated to the grade.
    rows = synthetic_rows(30, label=lambda i: 1 + (i % 3 == 0),
                          ground_truth=lambda i: names[1 + (i % 2)])
    results, cases = scripted_results(rows, tmp_path / "control", score=lambda i: 2)
    report = agreement(results, label_source(cases, "expert_qrel"), resamples=100)
    assert report.circular == [] and report.warnings == []


def test_circular_fields_rules():
    from evaluator.analysis.diagnostics import circular_fields

    labels = [1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2]
    unique = [f"text {i}" for i in range(12)]           # unique per case: proves nothing
    numeric = [str(0.5 * i if lab == 2 else -0.5 * i - 1) for i, lab in enumerate(labels)]
    found = circular_fields({"free_text": unique, "score": numeric}, labels)
    assert [(f["field"], f["rule"]) for f in found] == [("score", "threshold")]
    assert circular_fields({"x": ["a"] * 12}, [1] * 12) == []   # constant labels: nothing


def test_confusion_axes_from_the_rubric_and_the_label_scale(tmp_path):
    rows = synthetic_rows(12, label=lambda i: 1 + (i % 2))
    results, cases = scripted_results(rows, tmp_path, score=lambda i: 2 + (i % 3 == 0))
    acc = agreement(results, label_source(cases, "expert_qrel"), criteria=["accuracy"],
                    resamples=100).criteria["accuracy"]
    confusion = acc["confusion"]
    # Judge axis: the rubric's 1-5 (1, 4, 5 never chosen are shown); labels: 1, 2 only (no
    # all-zero rows for values no label has).
    assert confusion["judge_values"] == [1, 2, 3, 4, 5]
    assert confusion["label_values"] == [1, 2]
    assert confusion["matrix"] == [[0, 4, 2, 0, 0], [0, 4, 2, 0, 0]]
    declared = agreement(results, label_source(cases, "expert_qrel", scale=[0.0, 1.0, 2.0]),
                         criteria=["accuracy"], resamples=100).criteria["accuracy"]["confusion"]
    assert declared["label_values"] == [0, 1, 2] and declared["matrix"][0] == [0] * 5
    runner = CliRunner()
    base = ["agree", str(results), "--labels", str(cases), "--label-field", "expert_qrel",
            "--resamples", "100"]
    done = runner.invoke(cli, base + ["--label-scale", "0-2"])
    assert done.exit_code == 0 and "rows: label, --label-scale" in done.output
    done = runner.invoke(cli, base + ["--label-scale", "1"])
    assert done.exit_code == 2 and "line 2" in done.output and "--label-scale" in done.output
    assert len(done.output.strip().splitlines()) == 1 and "Traceback" not in done.output
    done = runner.invoke(cli, base + ["--label-scale", "a,b"])
    assert done.exit_code == 2 and len(done.output.strip().splitlines()) == 1


def test_negative_zero_is_never_printed():
    from evaluator.analysis.intervals import clean, format_ci, format_number

    assert format_number(-0.0001) == "0.000" and format_number(-0.0) == "0.000"
    assert format_number(-0.0006) == "-0.001" and format_ci([-0.0004, 0.2]) == "[0.000, 0.200]"
    assert str(clean(-0.0)) == "0.0"
    # Uncorrelated data whose statistics are tiny negatives.
    judge = [1, 2, 3, 4, 5] * 4
    labels = [3, 1, 5, 2, 4, 4, 2, 5, 1, 3, 2, 4, 1, 3, 5, 5, 3, 1, 4, 2]
    from evaluator.analysis.agreement.records import AgreementReport
    from evaluator.analysis.agreement.text import format_agreement

    stats = criterion_agreement(judge, labels, resamples=100)
    text = format_agreement(AgreementReport(
        labels="l", label_field="y", results="r", joined=20, unmatched_results=0,
        unmatched_labels=0, not_ok_labelled=0, note="n", results_ok=20, labels_total=20,
        common_cases=None, unlabelled_rows=0, not_ok_status_counts={},
        bootstrap={"resamples": 100, "seed": 1, "method": "BCa", "undefined_limit": 0.01},
        label_scale=None, text_field=None, by=None, notes=[], warnings=[],
        design={"text": "", "weighted": False}, circular=[],
        score_mode={"mode": "argmax", "meaning": "m", "left_out_no_distributions": 0,
                    "note": None},
        criteria={"k": stats}, gates=[], gates_note=None))
    assert "-0.000" not in text and "-0.00 " not in text


def test_length_biased_judge_shows_in_the_verbosity_figures(tmp_path):
    # Scores follow the length of the evaluated text, not the label; the judge's verdict
    # grows with its score (the default judge's 5s were its longest verdicts).
    rows = synthetic_rows(40, label=lambda i: 1 + (i % 2),
                          answer=lambda i: "word " * (5 + (i * 7) % 40))
    length = [len(r["workflow_answer"]) for r in rows]
    cut = sorted(length)

    def score(i):
        return 1 + sum(length[i] > cut[k] for k in (8, 16, 24, 32))

    results, cases = scripted_results(rows, tmp_path, score,
                                      reasoning=lambda i, s: "because " * (4 * s))
    report = agreement(results, label_source(cases, "expert_qrel"), criteria=["accuracy"],
                       resamples=100)
    assert report.text_field == "workflow_answer"
    verbosity = report.criteria["accuracy"]["verbosity"]
    text = verbosity["text_chars"]
    assert text["correlation"]["rho"] > 0.95 and text["correlation"]["ci95"][0] > 0.8
    assert text["given_label"]["rho"] > 0.9 and text["given_label"]["ci95"][0] > 0.5
    tokens = verbosity["completion_tokens"]
    assert tokens["correlation"]["rho"] > 0.95
    medians = tokens["median_by_score"]
    assert medians["1"]["median"] < medians["5"]["median"]
    done = CliRunner().invoke(cli, ["agree", str(results), "--labels", str(cases),
                                    "--label-field", "expert_qrel", "--criterion", "accuracy",
                                    "--resamples", "100"])
    assert "evaluated text, characters: rho" in done.output
    # The verdict's length is a function of the score: a perfect ranking, no CI and so no
    # p-value (the p is the CI's own statistic), and the line says why.
    assert tokens["correlation"]["rho"] == pytest.approx(1.0)
    assert tokens["correlation"]["ci95"] is None and tokens["correlation"]["p"] is None
    assert ("judge's verdict, completion tokens: rho 1.000 (no CI or p-value: |r| = 1, a "
            "perfect ranking)") in " ".join(done.output.split())
    assert "word word" not in done.output
    # Control: an unbiased judge (the label) shows no length effect.
    fair, cases = scripted_results(rows, tmp_path / "fair", score=lambda i: 1 + 3 * (i % 2))
    fair_text = agreement(fair, label_source(cases, "expert_qrel"), criteria=["accuracy"],
                          resamples=100).criteria["accuracy"]["verbosity"]["text_chars"][
        "correlation"]
    assert fair_text["ci95"][0] < 0 < fair_text["ci95"][1]


def test_subgroup_biased_judge_is_a_finding_with_a_ci(tmp_path):
    # Same label distribution in both groups; the judge adds 2 for group "model-a".
    rows = synthetic_rows(48, label=lambda i: 1 + (i % 4 < 2),
                          group=lambda i: "model-a" if i % 2 else "model-b")
    results, cases = scripted_results(
        rows, tmp_path, score=lambda i: min(5, 1 + (i % 4 < 2) + 2 * (i % 2)))
    acc = agreement(results, label_source(cases, "expert_qrel"), criteria=["accuracy"],
                    resamples=100, by="generator_model").criteria["accuracy"]
    a = acc["subgroups"]["model-a"]
    assert a["n"] == 24 and a["mean_score"] - acc["subgroups"]["model-b"]["mean_score"] == 2
    assert a["vs_rest"]["score"]["difference"] == pytest.approx(2.0)
    assert a["vs_rest"]["score"]["ci95"][0] > 1.0          # the judge favours model-a
    low, high = a["vs_rest"]["label"]["ci95"]
    assert low < 0 < high                                   # the labels do not
    runner = CliRunner()
    base = ["agree", str(results), "--labels", str(cases), "--label-field", "expert_qrel",
            "--criterion", "accuracy", "--resamples", "100"]
    done = runner.invoke(cli, base + ["--by", "generator_model"])
    assert done.exit_code == 0 and "by 'generator_model'" in done.output
    assert "model-a" in done.output
    done = runner.invoke(cli, base + ["--by", "workflow_answer"])   # free text: refused
    assert done.exit_code == 2 and "not a grouping column" in done.output
    assert "answer" not in done.output.replace("'workflow_answer'", "")
    done = runner.invoke(cli, base + ["--by", "nope"])
    assert done.exit_code == 2 and len(done.output.strip().splitlines()) == 1


def test_an_undefined_correlation_says_why_instead_of_a_bare_dash(tmp_path):
    """Every answer the same length, and one group whose labels are all the same: Spearman
    is undefined there. The text says why ("rho undefined (every length the same)"), never
    "rho - - p -", and the subgroup tables explain each "-" under them; 80 columns."""
    rows = synthetic_rows(40, label=lambda i: 1 + (i % 4 < 2) if i % 2 else 2,
                          answer=lambda i: f"answer {i % 10}",
                          group=lambda i: "site-north" if i % 2 else "site-south")
    results, cases = scripted_results(rows, tmp_path, score=lambda i: 1 + (i % 4 < 2) + i % 3)
    done = CliRunner().invoke(cli, ["agree", str(results), "--labels", str(cases),
                                    "--label-field", "expert_qrel", "--criterion", "accuracy",
                                    "--resamples", "100", "--by", "generator_model"])
    assert done.exit_code == 0, done.output
    text = done.output
    assert "rho - -" not in text and "p -" not in text
    assert "evaluated text, characters: rho undefined (every length the same)" in text
    assert "same label: partial rho undefined (every length the same)" in text
    assert "- site-south: rho undefined (every label the same)" in text
    assert "- site-south: label - rest" not in text  # a varied group's labels have a CI
    assert max(map(len, text.splitlines())) <= 80


def test_case_fields_from_another_file_are_refused_in_a_note(tmp_path):
    rows = synthetic_rows(10, label=lambda i: 1 + (i % 2))
    results, cases = scripted_results(rows, tmp_path, score=lambda i: 1 + (i % 3))
    other = write_jsonl(tmp_path / "other.jsonl", list(reversed(rows)))
    report = agreement(results, label_source(cases, "expert_qrel"), resamples=100,
                       cases=CaseSource(other))
    assert any("does not match the run" in note for note in report.notes)
    assert report.text_field is None and "text_chars" not in \
        report.criteria["accuracy"]["verbosity"]
    done = CliRunner().invoke(cli, ["agree", str(results), "--labels", str(cases),
                                    "--label-field", "expert_qrel", "--text-field", "nope"])
    assert done.exit_code == 2 and "--text-field 'nope'" in done.output


# --- issue 34: a KEY.label column rates KEY; labels on its scale -------------------------

def _labelled_world(tmp_path, n=40):
    """A trial_eligibility results file and a labels CSV whose column ``accuracy.label``
    (a review worksheet's name for it) holds every case's true accuracy."""
    records, truth = world(n, seed=3)
    results = write_results(tmp_path / "results.jsonl", records)
    rows = [{"case_id": c, "accuracy.label": str(v)} for c, v in truth.items()]
    return results, write_rows(tmp_path / "labels.csv", rows), rows


def _agree(*args):
    return CliRunner().invoke(cli, ["agree", *map(str, args), "--resamples", "100"])


def test_a_key_label_column_is_compared_with_that_criterion_only(tmp_path):
    """`agree --label-field accuracy.label` without --criterion compared hallucination and
    clarity with the accuracy labels too."""
    results, labels, _ = _labelled_world(tmp_path)
    done = _agree(results, "--labels", labels, "--label-field", "accuracy.label", "--json")
    assert done.exit_code == 0, done.output
    assert list(json.loads(done.stdout)["criteria"]) == ["accuracy"]
    text = _agree(results, "--labels", labels, "--label-field", "accuracy.label")
    assert text.exit_code == 0 and "hallucination" not in text.stdout
    refused_in_one_line(_agree(results, "--labels", labels, "--label-field", "accuracy.label",
                               "--criterion", "clarity"),
                        "case-0", "--criterion 'clarity'", "'accuracy.label' rate 'accuracy'")
    refused_in_one_line(_agree(results, "--labels", labels, "--label-field", "accuracy.label",
                               "--pass", "clarity>=4"),
                        "case-0", "--pass 'clarity >= 4'", "drop the gate")
    same = _agree(results, "--labels", labels, "--label-field", "accuracy.label",
                  "--criterion", "accuracy", "--json")
    assert same.exit_code == 0 and list(json.loads(same.stdout)["criteria"]) == ["accuracy"]


@pytest.mark.parametrize("bad", ["3_0", "1000", "-3", "3.5"])
def test_a_label_off_the_criterions_scale_is_refused_naming_its_line(tmp_path, bad):
    """'3_0' was read as 30 (float() takes underscores) and became a confusion-matrix row;
    1000, -3 and 3.5 were taken as they are on a 1-5 scale."""
    results, _, rows = _labelled_world(tmp_path)
    rows[6]["accuracy.label"] = bad
    labels = write_rows(tmp_path / "bad.csv", rows)
    message = refused_in_one_line(
        _agree(results, "--labels", labels, "--label-field", "accuracy.label"),
        "case-0", "bad.csv line 8", "'accuracy.label'")
    assert ("not a number" in message if bad == "3_0" else
            f"is {bad}, not on the scale of 'accuracy' in rubric 'trial_eligibility' (1-5)"
            in message)


def test_label_scale_admits_another_scale_and_a_plain_label_column_any_number(tmp_path):
    results, _, rows = _labelled_world(tmp_path)
    for row in rows:  # pass/fail as 0/1
        row["accuracy.label"] = "1" if int(row["accuracy.label"]) >= 4 else "0"
    binary = write_rows(tmp_path / "binary.csv", rows)
    refused_in_one_line(_agree(results, "--labels", binary, "--label-field", "accuracy.label"),
                        "case-0", "is 0, not on the scale of 'accuracy'", "--label-scale")
    done = _agree(results, "--labels", binary, "--label-field", "accuracy.label",
                  "--label-scale", "0,1", "--json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["criteria"]["accuracy"]["label_values_used"] == [0, 1]
    plain = write_rows(tmp_path / "plain.csv", [{"case_id": r["case_id"], "label": v}
                                                for r, v in zip(rows, ["1000", "-3", "3.5"] * 20)])
    done = _agree(results, "--labels", plain, "--label-field", "label", "--criterion",
                  "accuracy", "--json")
    assert done.exit_code == 0, done.output
    for bad in ("3_0", "nan", "inf", "-Infinity"):
        odd = write_rows(tmp_path / "odd.csv", [{"case_id": "case-0001", "label": bad}])
        refused_in_one_line(_agree(results, "--labels", odd, "--label-field", "label",
                                   "--criterion", "accuracy"),
                            "case-0001", "odd.csv line 2", "not a number")


def test_a_point_within_float_rounding_is_no_interval():
    """Labels equal to the judge's scores printed "Spearman rho 1.000 [1.000, 1.000]": the
    bootstrap's ends were 0.9999999999999998 and 1.0, which an exact == let through; the
    ICC's F interval was never checked at all."""
    from evaluator.analysis.intervals import interval_or_reason

    assert interval_or_reason([0.9999999999999998, 1.0], "same")[0] is None
    assert interval_or_reason([0.9999999999999999, 1.0], "same")[1] == "no interval: same"
    assert interval_or_reason([0.999, 1.0], "same") == ([0.999, 1.0], None)
    scores = [1, 2, 3, 4, 5, 3, 2, 4, 1, 5, 2, 3]
    stats = criterion_agreement(scores, scores, resamples=200)
    for key in ("spearman", "kendall_tau_b", "icc_a1"):
        assert stats[key]["ci95"] is None, (key, stats[key])
        assert "no interval" in stats[key]["ci_method"], (key, stats[key])
    # Judge one above every label: pingouin's ICC(A,1) interval is NaN; the method says why.
    shifted = criterion_agreement(scores, [s + 1 for s in scores], resamples=200)["icc_a1"]
    assert shifted["ci95"] is None and "no interval: the F interval is undefined" in \
        shifted["ci_method"]


def test_a_fisher_z_interval_within_rounding_of_one_is_no_interval():
    from evaluator.analysis.intervals import fisher_z_ci

    for r in (0.9999999999999998, 1 - 1e-13):
        fixed = fisher_z_ci(r, 1000, "spearman")
        assert fixed["ci95"] is None and "no interval" in fixed["method"], fixed
    assert fisher_z_ci(0.9, 50, "spearman")["ci95"] is not None
