"""Summary statistics with uncertainty (:mod:`evaluator.analysis.stats`) and their place in the
summary: bootstrap CIs of means, pass rates from the rubric's ``pass_thresholds``."""

from __future__ import annotations

import json

import pytest
import yaml

pytest.importorskip("scipy", reason="needs the stats extra")

from evaluator.analysis.stats import mean_ci, pass_rate
from evaluator.judges.backends.fake import FakeBackend
from evaluator.judges.models_file import JudgeSpec
from evaluator.rubrics.load import load_rubric, load_rubric_file
from evaluator.rubrics.rubric import RubricError
from evaluator.run.runner import evaluate
from evaluator.run.task import Judge, RunOptions, Task
from tests.conftest import write_jsonl


def test_mean_ci_is_seeded_and_brackets_the_mean():
    values = [1.0, 2.0, 2.0, 3.0, 4.0, 4.0, 4.0, 1.0, 3.0, 2.0]
    low, high = mean_ci(values)
    assert low < sum(values) / len(values) < high
    assert mean_ci(values) == [low, high]


def test_mean_ci_edge_cases_without_warnings():
    assert mean_ci([]) is None
    assert mean_ci([3.0]) == [3.0, 3.0]
    assert mean_ci([2.0, 2.0, 2.0]) == [2.0, 2.0]


def test_pass_rate_uses_a_wilson_interval():
    from scipy.stats import binomtest

    entry = pass_rate([1, 2, 3, 4, 4, 3, 1, 4], 3)
    assert entry["n"] == 8 and entry["passed"] == 5 and entry["rate"] == 5 / 8
    ci = binomtest(5, 8).proportion_ci(method="wilson")
    assert entry["ci95"] == pytest.approx([ci.low, ci.high])
    assert pass_rate([], 3)["rate"] is None
    assert pass_rate([4, 4], 3)["ci95"][1] == pytest.approx(1.0)


def _verdict(concordance: int) -> str:
    return json.dumps({"critical_finding_concordance": concordance, "factual_accuracy": 3,
                       "factual_completeness": 2, "overall_equivalence": 3,
                       "reasoning": "scripted"})


def test_summary_has_ci_and_pass_rates_and_never_imputes(tmp_path):
    rows = [{"case_id": f"c{i}", "reference_report": "r", "generated_report": "g"}
            for i in range(6)]
    backend = FakeBackend([_verdict(4), _verdict(3), _verdict(1), _verdict(2), _verdict(4),
                           "not json"])
    result = evaluate(Task("pathology_report", write_jsonl(tmp_path / "in.jsonl", rows)),
                      Judge("fake-judge", spec=JudgeSpec(backend="fake"), backend=backend),
                      RunOptions(tmp_path / "results.jsonl"))
    summary = json.loads(result.summary_path.read_text())
    concordance = summary["criteria"]["critical_finding_concordance"]
    assert concordance["n"] == 5 and concordance["mean"] == pytest.approx(2.8)
    low, high = concordance["ci95"]
    assert 1 <= low < 2.8 < high <= 4
    # Every factual_accuracy verdict is 3: no interval (a point), and the summary says why.
    assert summary["criteria"]["factual_accuracy"]["ci95"] is None
    assert summary["criteria"]["factual_accuracy"]["ci_note"] == "no interval: all 5 scores equal"
    assert "ci_note" not in concordance
    rate = summary["pass_rates"]["critical_finding_concordance"]
    assert (rate["n"], rate["passed"], rate["not_judged"]) == (5, 3, 1)
    assert rate["rate"] == pytest.approx(0.6) and rate["rule"] == ">= 3"
    assert summary["failed_case_ids"] == ["c5"]


def test_a_constant_criterion_prints_no_interval_in_the_summary(tmp_path):
    """`evaluator summary` of a run whose factual_accuracy is always 3: the row says why it
    has no CI instead of showing the point [3.000, 3.000]; a varied criterion keeps its."""
    from click.testing import CliRunner

    from evaluator.cli.main import cli
    from evaluator.data.results import ResultRecord, ResultWriter

    path = tmp_path / "r.jsonl"
    with ResultWriter(path) as writer:
        for i, concordance in enumerate((4, 3, 1, 2)):
            writer.write(ResultRecord(case_id=f"c{i}", rubric="pathology_report", judge="j",
                                      status="ok", scores=json.loads(_verdict(concordance))))
    done = CliRunner().invoke(cli, ["summary", str(path)])
    assert done.exit_code == 0, done.output
    assert "[3.000, 3.000]" not in done.stdout and "[2.000, 2.000]" not in done.stdout
    rows = {line.split()[0]: line for line in done.stdout.splitlines() if line.startswith("  ")}
    assert rows["factual_accuracy"].split()[1:5] == ["4", "3.000", "-", "(all"], rows
    assert "(all equal)" in rows["factual_accuracy"]
    assert "[" in rows["critical_finding_concordance"]
    assert "A mean whose scores are all equal has none" in " ".join(done.stdout.split())
    as_json = json.loads(CliRunner().invoke(cli, ["summary", str(path), "--json"]).stdout)
    entry = as_json["criteria"]["factual_accuracy"]
    assert entry["ci95"] is None and entry["ci_note"] == "no interval: all 4 scores equal"


def test_pass_thresholds_are_validated(tmp_path):
    assert load_rubric("pathology_report").pass_thresholds == {"critical_finding_concordance": 3}
    data = yaml.safe_load(load_rubric("pathology_report").source_path.read_text())
    data["pass_thresholds"] = {"reasoning": 1}
    path = tmp_path / "pathology_report.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(RubricError, match="pass_thresholds"):
        load_rubric_file(path)
    data["pass_thresholds"] = {"critical_finding_concordance": "high"}
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(RubricError, match="pass_thresholds"):
        load_rubric_file(path)


def test_summary_without_the_stats_extra(monkeypatch):
    import evaluator.analysis.summary.summary as summary_module
    from evaluator.data.results import ResultRecord

    monkeypatch.setattr(summary_module, "stats_available", lambda: False)
    record = ResultRecord(case_id="a", rubric="pathology_report", judge="j", status="ok",
                          scores=json.loads(_verdict(4)))
    summary = summary_module.summarize(load_rubric("pathology_report"), "j", [record])
    assert summary.criteria["critical_finding_concordance"].ci95 is None
    assert summary.pass_rates["critical_finding_concordance"].passed == 1
    assert "pip install" in summary.stats_note


def test_the_summary_median_from_counts_is_statistics_median():
    """describe()'s median of scores (few distinct values) comes from their counts, not a
    sorted copy; it equals statistics.median, halves and many distinct values included."""
    import random
    import statistics
    from array import array

    from evaluator.analysis.summary.summary import describe

    rng = random.Random(3)
    pool = [1.0, 2.0, 2.5, 3.0, 4.0, 5.0, -1.0, 0.0]
    for _ in range(2000):
        values = array("d", [rng.choice(pool[:rng.randint(1, len(pool))])
                             for _ in range(rng.randint(1, 30))])
        assert describe(values)["median"] == statistics.median(values), list(values)
    spread = array("d", [rng.random() for _ in range(3001)])  # > 1024 distinct: sorted
    assert describe(spread)["median"] == statistics.median(spread)
    assert describe(array("d", [1.0, 3.0]))["median"] == 2.0


def test_the_summary_record_writes_the_keys_of_summary_json_in_their_order(monkeypatch):
    """The summary is a typed record written in field order: a key that only has a value
    sometimes (ci_note, alias, a panel block, stats_note) is absent without one, and an
    unknown field is refused."""
    import pydantic

    import evaluator.analysis.summary.summary as summary_module
    from evaluator.data.results import ResultRecord

    records = [ResultRecord(case_id=f"c{c}", rubric="pathology_report", judge="j",
                            status="ok", scores=json.loads(_verdict(c))) for c in (4, 2)]
    rubric = load_rubric("pathology_report")
    written = summary_module.summarize(rubric, "j", records).to_json()
    assert list(written) == ["summary_version", "rubric", "judge", "cases", "status_counts",
                             "failed_case_ids", "criteria", "aggregates", "aliases",
                             "pass_rates", "ci_method", "score_mode"]
    assert list(written["criteria"]["critical_finding_concordance"]) == [
        "n", "mean", "sd", "median", "min", "max", "ci95", "counts"]
    assert list(written["criteria"]["factual_accuracy"])[-2:] == ["ci_note", "counts"]
    with pytest.raises(pydantic.ValidationError, match="extra"):
        summary_module.PassRate(**written["pass_rates"]["critical_finding_concordance"],
                                typo=1)
    monkeypatch.setattr(summary_module, "stats_available", lambda: False)
    written = summary_module.summarize(rubric, "j", records).to_json()
    assert list(written)[-2:] == ["stats_note", "score_mode"]
