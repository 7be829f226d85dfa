"""``evaluator agree`` and :mod:`evaluator.analysis.agreement`: figures checked against direct library
calls on the same joined pairs, on the real trial data with a scripted fake judge."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("scipy", reason="needs the stats extra")
pytest.importorskip("sklearn", reason="needs the stats extra")
pytest.importorskip("krippendorff", reason="needs the stats extra")
pytest.importorskip("pingouin", reason="needs the stats extra")

import numpy as np
from click.testing import CliRunner

from evaluator.analysis.agreement import AgreementError, agreement, criterion_agreement
from evaluator.cli.main import cli
from evaluator.judges.backends.fake import FakeBackend
from evaluator.judges.models_file import JudgeSpec
from evaluator.run.runner import evaluate
from evaluator.run.task import Judge, RunOptions, Task
from tests.conftest import SHARED_DATA, write_jsonl

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

    report = agreement(trial_results, SHARED_DATA, "expert_qrel", resamples=200)
    assert report["joined"] == len(trial_data) == 109
    assert report["unmatched_results"] == report["unmatched_labels"] == 0
    assert list(report["criteria"]) == ["hallucination", "accuracy", "clarity"]
    judge = np.array([scripted_accuracy(r) for r in trial_data], dtype=float)
    label = np.array([r["expert_qrel"] for r in trial_data], dtype=float)
    acc = report["criteria"]["accuracy"]
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
    again = agreement(trial_results, SHARED_DATA, "expert_qrel", resamples=200,
                      criteria=["accuracy"])
    assert again["criteria"]["accuracy"] == acc


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
    report = agreement(result.results_path, labels, "expert_qrel", resamples=100)
    assert report["joined"] == 4          # c1..c4: c0 has no label, c5 failed
    assert report["unmatched_results"] == 1 and report["not_ok_labelled"] == 1
    assert report["not_ok_status_counts"] == {"invalid_output": 1}
    assert report["criteria"]["accuracy"]["n"] == 4


def test_csv_labels_and_id_column(tmp_path):
    results = _small_results(tmp_path, SMALL)
    labels = tmp_path / "labels.csv"
    labels.write_text("id,grade\n" + "".join(f"c{i},{1 + i % 2}\n" for i in range(6)))
    report = agreement(results, labels, "grade", id_column="id", criteria=["accuracy"],
                       resamples=100)
    assert report["joined"] == 6 and list(report["criteria"]) == ["accuracy"]


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
    from evaluator.analysis.agreement import load_labels

    path = write_jsonl(tmp_path / "l.jsonl", [{"case_id": "a", "y": 1}, {"case_id": "a", "y": 2}])
    with pytest.raises(AgreementError, match="lines 1 and 2 have the same case id"):
        load_labels(path, "y")
