"""``--score argmax|expected`` (:mod:`evaluator.analysis.score_mode`) on ``evaluator
summary``, ``agree`` and ``report``, and the report's judge-confidence section
(:mod:`evaluator.analysis.summary.confidence`), on hand-built records with score distributions."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytest.importorskip("scipy", reason="needs the stats extra")
pytest.importorskip("sklearn", reason="needs the stats extra")
pytest.importorskip("krippendorff", reason="needs the stats extra")
pytest.importorskip("pingouin", reason="needs the stats extra")

from click.testing import CliRunner

from evaluator.analysis.agreement.agreement import agreement
from evaluator.analysis.distributions import summarize as distribution
from evaluator.analysis.score_mode import ScoreModeError
from evaluator.analysis.summary.confidence import judge_confidence
from evaluator.analysis.summary.summary import summarize
from evaluator.cli.main import cli
from evaluator.data.results import ResultRecord, read_results
from evaluator.rubrics.load import load_rubric
from tests.conftest import label_source

CRITERIA = ("hallucination", "accuracy", "clarity")
SECRET = "SECRET-CASE-TEXT"


def record(case_id: str, score: int, probabilities: dict[int, float] | None) -> ResultRecord:
    """A trial_eligibility verdict giving ``score`` to every criterion, with the same
    distribution for each (none: a record_version 1 record)."""
    scores: dict = {key: score for key in CRITERIA}
    scores.update({f"{key}_reasoning": SECRET for key in CRITERIA})
    dists = (None if probabilities is None else
             {key: distribution(probabilities, score) for key in CRITERIA})
    return ResultRecord(record_version=1 if dists is None else 2, case_id=case_id,
                        rubric="trial_eligibility", judge="hand", status="ok", scores=scores,
                        distributions=dists)


def write_records(path: Path, rows) -> Path:
    """``rows``: (case id, score, probabilities or None); also a failed record."""
    records = [record(*row) for row in rows]
    records.append(ResultRecord(case_id="failed-1", rubric="trial_eligibility", judge="hand",
                                status="invalid_output", reason="not JSON"))
    path.write_text("".join(r.model_dump_json() + "\n" for r in records))
    return path


def coarse_judge(n: int = 40, without: int = 3) -> tuple[list, list[int]]:
    """A judge whose argmax is coarse (2 for labels 1-3, 4 for 4-5) but whose distribution
    puts 0.4 on the label: its expected scores track the labels better. The last
    ``without`` records have no distributions."""
    rows, labels = [], []
    for i in range(n):
        label = 1 + i % 5
        chosen = 2 if label <= 3 else 4
        probabilities = {chosen: 0.6}
        probabilities[label] = probabilities.get(label, 0.0) + 0.4
        rows.append((f"h{i:02d}", chosen, None if i >= n - without else probabilities))
        labels.append(label)
    return rows, labels


@pytest.fixture
def coarse(tmp_path):
    rows, labels = coarse_judge()
    results = write_records(tmp_path / "results.jsonl", rows)
    labels_path = tmp_path / "labels.jsonl"
    labels_path.write_text("".join(json.dumps({"case_id": row[0], "grade": label}) + "\n"
                                   for row, label in zip(rows, labels)))
    return results, labels_path


def test_summary_expected_scores_leave_out_and_count_records_without_distributions(coarse):
    results, _ = coarse
    rubric = load_rubric("trial_eligibility")
    records = read_results(results)
    argmax = summarize(rubric, "hand", records)
    expected = summarize(rubric, "hand", records, score_mode="expected")
    assert argmax.score_mode.mode == "argmax"
    assert argmax.score_mode.left_out_no_distributions == 0
    assert argmax.criteria["accuracy"].n == 40
    assert argmax.criteria["accuracy"].counts["2"] == 24
    acc = expected.criteria["accuracy"]
    assert acc.n == 37 and acc.counts is None
    # The expected score is 0.6 * argmax + 0.4 * label.
    wanted = [0.6 * (2 if 1 + i % 5 <= 3 else 4) + 0.4 * (1 + i % 5) for i in range(37)]
    assert acc.mean == pytest.approx(sum(wanted) / 37)
    assert expected.score_mode.left_out_no_distributions == 3
    assert "3 ok record(s) have no score distributions (record_version 1, or a backend " \
           "without probabilities)" in expected.score_mode.note
    assert expected.status_counts == {"invalid_output": 1, "ok": 40}


def test_summary_command_states_the_mode_in_text_and_json(coarse):
    results, _ = coarse
    runner = CliRunner()
    text = runner.invoke(cli, ["summary", str(results)])
    assert text.exit_code == 0, text.output
    assert "score mode: argmax" in text.output and re.search(r"accuracy +40 +2\.800", text.output)
    text = runner.invoke(cli, ["summary", str(results), "--score", "expected"])
    assert text.exit_code == 0, text.output
    assert "score mode: expected" in text.output
    assert "note: 3 ok record(s) have no score distributions" in text.output
    assert re.search(r"accuracy +37 ", text.output) and SECRET not in text.output
    done = runner.invoke(cli, ["summary", str(results), "--score", "expected", "--json"])
    assert json.loads(done.output)["score_mode"]["mode"] == "expected"


def test_expected_without_any_distributions_is_one_line_exit_2(tmp_path):
    results = write_records(tmp_path / "v1.jsonl", [(f"c{i}", 3, None) for i in range(4)])
    labels = tmp_path / "l.jsonl"
    labels.write_text("".join(json.dumps({"case_id": f"c{i}", "grade": 3}) + "\n"
                              for i in range(4)))
    runner = CliRunner()
    for args in (["summary", str(results)],
                 ["agree", str(results), "--labels", str(labels), "--label-field", "grade"],
                 ["report", str(results), "--html", str(tmp_path / "r.html")]):
        done = runner.invoke(cli, [*args, "--score", "expected"])
        assert done.exit_code == 2, (args, done.output)
        line = done.output.strip()
        assert len(line.splitlines()) == 1, line
        assert "none of its 4 ok record(s) has any" in line
        assert "re-run" in line and "fake, transformers and vLLM backends" in line
    assert not (tmp_path / "r.html").exists()
    # argmax still works on the same file.
    assert runner.invoke(cli, ["summary", str(results)]).exit_code == 0


def test_expected_scores_agree_better_than_argmax_and_categories_are_not_applicable(coarse):
    results, labels = coarse
    argmax = agreement(results, label_source(labels, "grade"), criteria=["accuracy"], resamples=200)
    expected = agreement(results, label_source(labels, "grade"), criteria=["accuracy"],
                         resamples=200, score_mode="expected")
    a, e = argmax.criteria["accuracy"], expected.criteria["accuracy"]
    assert argmax.joined == 40 and expected.joined == 37
    assert expected.score_mode.left_out_no_distributions == 3
    assert expected.unmatched_results == 0  # left out, not "without a label"
    assert e["spearman"]["value"] > a["spearman"]["value"]
    assert e["icc_a1"]["value"] > a["icc_a1"]["value"]
    # |0.6 * argmax + 0.4 * label - label| = 0.6 |argmax - label|.
    assert a["mean_abs_difference"]["value"] == pytest.approx(0.6)
    assert e["mean_abs_difference"]["value"] == pytest.approx(0.6 * 22 / 37)
    assert e["mean_abs_difference"]["value"] < a["mean_abs_difference"]["value"]
    for key in ("kappa_quadratic", "exact", "within_one"):
        assert e[key]["value"] is None and "not applicable" in e[key]["not_applicable"]
        assert a[key]["value"] is not None
    assert "confusion" in a and "confusion" not in e and "not applicable" in e["confusion_note"]


def test_agree_text_names_the_mode_and_marks_not_applicable(coarse):
    results, labels = coarse
    done = CliRunner().invoke(cli, ["agree", str(results), "--labels", str(labels),
                                    "--label-field", "grade", "--criterion", "accuracy",
                                    "--resamples", "200", "--score", "expected"])
    assert done.exit_code == 0, done.output
    out = done.output
    assert "score mode: expected" in out and "3 ok record(s) have no score distributions" in out
    assert re.search(r"exact agreement +n/a +not applicable to expected scores", out)
    assert re.search(r"mean \|judge - label\| +0\.3", out)
    assert "no confusion matrix" in out and SECRET not in out
    done = CliRunner().invoke(cli, ["agree", str(results), "--labels", str(labels),
                                    "--label-field", "grade", "--criterion", "accuracy",
                                    "--resamples", "200", "--json"])
    assert json.loads(done.output)["score_mode"]["mode"] == "argmax"


def test_judge_confidence_lowest_first():
    rubric = load_rubric("trial_eligibility")
    records = [record("a", 3, {3: 0.9, 2: 0.1}), record("b", 4, {4: 0.35, 5: 0.33, 3: 0.32}),
               record("c", 2, None), record("d", 5, {5: 0.55, 4: 0.45})]
    data = judge_confidence(rubric, records, low_n=4)
    assert data["ok"] == 4 and data["with_distributions"] == 3
    assert data["criteria"]["accuracy"]["values"] == pytest.approx([0.9, 0.35, 0.55])
    lowest = data["lowest"]
    assert [(r["case_id"], r["path"]) for r in lowest] == [
        ("b", "accuracy"), ("b", "clarity"), ("b", "hallucination"), ("d", "accuracy")]
    assert lowest[0]["chosen"] == 4 and lowest[0]["confidence"] == pytest.approx(0.35)
    assert lowest[0]["expected"] == pytest.approx(4 * 0.35 + 5 * 0.33 + 3 * 0.32)


def _svgs(html: str) -> list[str]:
    import base64

    return [base64.b64decode(uri).decode() for uri in
            re.findall(r'src="data:image/svg\+xml;base64,([^"]+)"', html)]


def test_report_shows_confidence_histograms_and_lowest_cases_without_case_text(coarse,
                                                                               tmp_path):
    pytest.importorskip("matplotlib", reason="needs the report extra")
    results, labels = coarse
    page = tmp_path / "report.html"
    done = CliRunner().invoke(cli, ["report", str(results), "--html", str(page), "--labels",
                                    str(labels), "--label-field", "grade", "--resamples", "200",
                                    "--low-confidence", "5"])
    assert done.exit_code == 0, done.output
    html = page.read_text()
    assert SECRET not in html and SECRET not in "".join(_svgs(html))
    assert 'id="confidence"' in html and "Scores: <strong>argmax</strong>" in html
    for key in CRITERIA:
        assert f'alt="{key}: confidence histogram"' in html
    section = html[html.index('id="low-confidence"'):html.index('id="agreement"')]
    # 0.6 is the lowest confidence (label != argmax: h00, h02, ...; h01's is 1.0); ties by
    # case id then path.
    rows = re.findall(r'<td class="id">([^<]+)</td><td class="l">([^<]+)</td>', section)
    assert rows == [("h00", "accuracy"), ("h00", "clarity"), ("h00", "hallucination"),
                    ("h02", "accuracy"), ("h02", "clarity")]
    assert "<td>0.600</td><td>1.60</td>" in section
    assert "37 of 40 judged cases have score distributions" in html
    assert "confusion matrix" in html

    expected = tmp_path / "expected.html"
    done = CliRunner().invoke(cli, ["report", str(results), "--html", str(expected),
                                    "--labels", str(labels), "--label-field", "grade",
                                    "--resamples", "200", "--score", "expected"])
    assert done.exit_code == 0, done.output
    html = expected.read_text()
    assert "Scores: <strong>expected</strong>" in html
    assert "3 ok record(s) have no score distributions" in html
    assert "not categories" in html and "confusion matrix" not in html
    assert 'alt="accuracy: distribution and means"' in html and SECRET not in html


def test_report_without_distributions_says_so(tmp_path):
    pytest.importorskip("matplotlib", reason="needs the report extra")
    results = write_records(tmp_path / "v1.jsonl", [(f"c{i}", 1 + i % 5, None)
                                                    for i in range(6)])
    page = tmp_path / "r.html"
    done = CliRunner().invoke(cli, ["report", str(results), "--html", str(page)])
    assert done.exit_code == 0, done.output
    html = page.read_text()
    assert "The records have no score distributions" in html
    assert "confidence histogram" not in html and 'id="low-confidence"' not in html


def test_an_unknown_mode_is_refused():
    with pytest.raises(ScoreModeError, match="unknown score mode"):
        from evaluator.analysis.score_mode import score_view

        score_view(load_rubric("trial_eligibility"), [], "median", "x")


def test_items_criteria_pool_their_items_and_aggregates_read_as_numbers():
    from evaluator.analysis.score_mode import score_view
    from evaluator.rubrics.rubric import ItemsCriterion
    from evaluator.rubrics.score_paths import item_path

    rubric = load_rubric("ecg_interpretation")
    scores, dists = {}, {}
    for field in rubric.output:
        if isinstance(field, ItemsCriterion):
            low = min(field.allowed)
            scores[field.key] = [{field.score_key: low, field.explanation_key: SECRET},
                                 {field.score_key: low + 1, field.explanation_key: SECRET}]
            for i, item in enumerate(scores[field.key]):
                dists[item_path(field.key, i, field.score_key)] = distribution(
                    {low: 0.3, low + 1: 0.7}, item[field.score_key])
    ecg = ResultRecord(case_id="e1", rubric=rubric.name, judge="j", status="ok",
                       scores=scores, distributions=dists)
    data = judge_confidence(rubric, [ecg], low_n=2)
    assert data["criteria"]["DiagnosisAccuracy[*].Score"]["values"] == pytest.approx([0.3, 0.7])
    assert data["lowest"][0]["path"].endswith("[0].Score")
    assert data["lowest"][0]["criterion"].endswith("[*].Score")
    # An aggregate named like its items criterion reads as the aggregate's number.
    view = score_view(rubric, [ecg], "expected", "x")
    assert isinstance(view.value("e1", "DiagnosisAccuracy"), float)


def test_report_of_constant_expected_scores_renders(tmp_path):
    """Every case with the same non-integer expected score: the mean can land an ulp outside
    its bootstrap CI; the page still renders (no negative error bar)."""
    from evaluator.judges.backends.fake import FakeBackend
    from evaluator.judges.models_file import JudgeSpec
    from evaluator.run.runner import evaluate
    from tests.conftest import EXAMPLES, run_options

    rows = [json.loads(line) for line in (EXAMPLES / "pathology_report.jsonl")
            .read_text().splitlines() if line]
    result = evaluate(*run_options(rubric="pathology_report",
                                   input_path=EXAMPLES / "pathology_report.jsonl",
                                   output_path=tmp_path / "r.jsonl", backend=FakeBackend(),
                                   judge="fake", judge_spec=JudgeSpec(backend="fake")))
    assert len(rows) >= 2
    done = CliRunner().invoke(cli, ["report", str(result.results_path), "--html",
                                    str(tmp_path / "r.html"), "--score", "expected"])
    assert done.exit_code == 0, done.output
    assert "Judge confidence" in (tmp_path / "r.html").read_text()
