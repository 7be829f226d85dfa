"""What is logged to a tracker, as pure functions (no MLflow): metric names made valid,
metrics read from the analysis dicts, params and tags from a manifest, where to log."""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

import pytest

from evaluator.analysis.agreement.records import AgreementReport
from evaluator.analysis.estimate.records import EstimateReport, EstimateRow
from evaluator.tracking.figures import agreement_metrics, estimate_metrics, summary_metrics
from evaluator.tracking.mlflow_store import destination, redact
from evaluator.tracking.names import key_part, metric_key
from evaluator.tracking.provenance import MAX_VALUE, run_params, run_tags, text

# MLflow 3.17.2's rule (mlflow/utils/validation.py), restated so these tests need no MLflow.
VALID = re.compile(r"^[/\w.\- :]*$")


def valid(key: str) -> bool:
    return (bool(VALID.match(key)) and len(key) <= 250 and posixpath.normpath(key) == key
            and not key.startswith("/"))


@pytest.mark.parametrize("part", ["accuracy", "DiagnosisAccuracy", "overall_equivalence",
                                  "a-b", "x1"])
def test_rubric_keys_are_kept(part):
    assert key_part(part) == part


@pytest.mark.parametrize("part", ["accuracy >= 4", "accuracy>=4", "a<3.5", "..", ".", "",
                                  "site: St. Mary's / ward 3", "é" * 10, "x" * 300,
                                  "a__b c", "/etc/passwd"])
def test_other_parts_become_valid_distinct_and_stable(part):
    made = key_part(part)
    assert valid(made) and "/" not in made and len(made) <= 64
    assert key_part(part) == made  # deterministic
    assert valid(metric_key("agreement_gate", part, "sensitivity"))


def test_gates_read_as_words_and_never_collide():
    assert key_part("accuracy >= 4").startswith("accuracy_ge_4-")
    assert key_part("accuracy > 4").startswith("accuracy_gt_4-")
    parts = ["accuracy >= 4", "accuracy>=4", "accuracy > 4", "accuracy <= 4", "accuracy_ge_4",
             "a b", "a_b", "a  b"]
    assert len({key_part(p) for p in parts}) == len(parts)


def test_a_key_longer_than_mlflow_allows_is_refused():
    with pytest.raises(ValueError, match="longer than 250"):
        metric_key(*["x" * 60] * 5)


def _figure(value, low, high):
    return {"value": value, "ci95": [low, high], "method": "m"}


def _summary(**fields):
    """A summary (pairwise with ``pairwise=``) of a rubric ``x`` by judge ``qwen``, with
    ``fields``; the rest empty."""
    from evaluator.analysis.summary.records import PairwiseSummary, Summary

    mode = {"mode": "argmax", "meaning": "", "left_out_no_distributions": 0, "note": None}
    scored = {"criteria": {}, "aggregates": {}, "aliases": {}, "pass_rates": {},
              "ci_method": "m", "score_mode": mode}
    kind = PairwiseSummary if "pairwise" in fields else Summary
    return kind.model_validate({
        "summary_version": 1, "rubric": "x", "judge": "qwen", "cases": 0, "status_counts": {},
        "failed_case_ids": [], **({} if kind is PairwiseSummary else scored), **fields})


def _stats(**fields):
    return {"n": 0, "mean": None, "sd": None, "median": None, "min": None, "max": None,
            "ci95": None, **fields}


def test_summary_metrics_take_every_figure_and_leave_out_undefined_ones():
    summary = _summary(
        cases=5, status_counts={"ok": 4, "invalid_output": 1},
        criteria={"accuracy": {"n": 4, "mean": 2.5, "sd": 1.2, "median": 2.5, "min": 1.0,
                               "max": 4.0, "ci95": [1.5, 3.5], "counts": {"1": 1}},
                  "clarity": {"n": 1, "mean": 3.0, "sd": None, "median": 3.0, "min": 3.0,
                              "max": 3.0, "ci95": None, "counts": None}},
        aggregates={"total": _stats(n=4, mean=float("nan"))},
        pass_rates={"accuracy": {"threshold": 3.0, "rule": ">= 3", "n": 4, "passed": 2,
                                 "rate": 0.5, "ci95": [0.15, 0.85], "not_judged": 1}},
        self_consistency={"complete_cases": 4, "alpha": {"accuracy": 0.7, "clarity": None},
                          "unanimous": {"accuracy": 0.25}, "reduction": None, "raters": []},
    )
    metrics = summary_metrics(summary)
    assert metrics["cases"] == 5 and metrics["status/ok"] == 4
    assert metrics["status/invalid_output"] == 1 and metrics["status/backend_error"] == 0
    assert metrics["criterion/accuracy/mean"] == 2.5
    assert metrics["criterion/accuracy/mean_ci95_low"] == 1.5
    assert metrics["criterion/accuracy/mean_ci95_high"] == 3.5
    assert metrics["criterion/clarity/n"] == 1
    assert "criterion/clarity/sd" not in metrics
    assert "criterion/clarity/mean_ci95_low" not in metrics
    assert "aggregate/total/mean" not in metrics and metrics["aggregate/total/n"] == 4
    assert metrics["pass_rate/accuracy/rate"] == 0.5
    assert metrics["pass_rate/accuracy/rate_ci95_high"] == 0.85
    assert metrics["pass_rate/accuracy/not_judged"] == 1
    assert metrics["self_consistency/accuracy/alpha"] == 0.7
    assert "self_consistency/clarity/alpha" not in metrics
    assert metrics["self_consistency/complete_cases"] == 4
    assert all(valid(key) for key in metrics)
    # No key is both a metric and a folder of others (MLflow's file store).
    assert not any(other.startswith(key + "/") for key in metrics for other in metrics)


def test_a_constant_criterion_logs_no_point_as_a_ci_and_a_tag_says_why():
    """factual_accuracy is 3 in every record: its mean is logged, but no ci95 low/high pair
    (it would be the point [3, 3]); a tag named after the metric gives the summary's
    reason. A varied criterion logs its CI as before."""
    pytest.importorskip("scipy", reason="needs the stats extra")
    from evaluator.analysis.summary.summary import summarize
    from evaluator.data.results import ResultRecord
    from evaluator.rubrics.load import load_rubric
    from evaluator.tracking.figures import interval_tags

    records = [ResultRecord(case_id=f"c{i}", rubric="pathology_report", judge="j",
                            status="ok", scores={"critical_finding_concordance": c,
                                                 "factual_accuracy": 3,
                                                 "factual_completeness": 1 + i % 2,
                                                 "overall_equivalence": 3, "reasoning": "r"})
               for i, c in enumerate((4, 3, 1, 2, 4))]
    summary = summarize(load_rubric("pathology_report"), "j", records)
    metrics = summary_metrics(summary)
    assert metrics["criterion/factual_accuracy/mean"] == 3.0
    assert not any(key.startswith("criterion/factual_accuracy/mean_ci95") for key in metrics)
    assert metrics["criterion/critical_finding_concordance/mean_ci95_low"] < \
        metrics["criterion/critical_finding_concordance/mean_ci95_high"]
    tags = interval_tags(summary)
    assert tags["evaluator.no_ci/criterion/factual_accuracy/mean"] == \
        "no interval: all 5 scores equal"
    assert tags["evaluator.no_ci/criterion/overall_equivalence/mean"] == \
        "no interval: all 5 scores equal"
    assert not any("critical_finding_concordance" in key for key in tags)
    assert all(valid(key.removeprefix("evaluator.no_ci/")) for key in tags)


def test_pairwise_summary_metrics():
    summary = _summary(cases=3, status_counts={"ok": 3}, pairwise={
        "systems": {"A": "old", "B": "new"}, "note": "n",
        "criteria": {"accuracy": {"n": 3, "a_wins": 1, "b_wins": 1, "ties": 0,
                                  "inconsistent": 1,
                                  "win_rate": _figure(0.5, 0.1, 0.9),
                                  "position_consistency": _figure(0.66, 0.2, 0.9),
                                  "position_bias": _figure(None, None, None)}}})
    metrics = summary_metrics(summary)
    assert metrics["pairwise/accuracy/win_rate"] == 0.5
    assert metrics["pairwise/accuracy/win_rate_ci95_low"] == 0.1
    assert metrics["pairwise/accuracy/position_consistency_ci95_high"] == 0.9
    assert metrics["pairwise/accuracy/inconsistent"] == 1
    assert not any("position_bias" in key for key in metrics)


def test_agreement_metrics_leave_out_meaningless_and_not_applicable_figures():
    report = {"joined": 20, "unmatched_results": 1, "unmatched_labels": 0,
              "not_ok_labelled": 2, "warnings": ["w1", "w2"],
              "criteria": {"accuracy": {
                  "n": 20, "spearman": {**_figure(0.6, 0.4, 0.8), "p": 0.001},
                  "kappa_quadratic": {**_figure(0.5, 0.2, 0.7)},
                  "within_one": {**_figure(0.9, 0.8, 0.95), "chance": 0.88,
                                 "meaningless": "fixed by the scores"},
                  "exact": {**_figure(0.4, 0.2, 0.6), "chance": 0.25},
                  "icc_a1": {"value": None, "ci95": None, "not_applicable": "expected"}}},
              "gates": [{"rule": "accuracy >= 4", "n": 20, "tp": 6, "fp": 2, "fn": 3, "tn": 9,
                         "sensitivity": _figure(0.667, 0.354, 0.879),
                         "ppv": {"value": None, "ci95": None, "undefined": "no pass"}}]}
    metrics = agreement_metrics(AgreementReport.model_construct(**report))
    assert metrics["agreement/joined"] == 20 and metrics["agreement/warnings"] == 2
    assert metrics["agreement/accuracy/spearman"] == 0.6
    assert metrics["agreement/accuracy/spearman_p"] == 0.001
    assert metrics["agreement/accuracy/exact_chance"] == 0.25
    assert not any("within_one" in key or "icc" in key for key in metrics)
    gate = key_part("accuracy >= 4")
    assert metrics[f"agreement_gate/{gate}/sensitivity_ci95_low"] == 0.354
    assert metrics[f"agreement_gate/{gate}/tn"] == 9
    assert not any(key.endswith("/ppv") for key in metrics)


def test_estimate_metrics_per_criterion_and_gate():
    row = {"criterion": "accuracy", "ppi_estimate": 3.1, "ppi_ci": [2.9, 3.3], "ppi_se": 0.1,
           "lam": 0.8, "judge_mean": 3.4, "judge_ci": [3.3, 3.5], "judge_bias": 0.3,
           "judge_bias_ci": [0.1, 0.5], "classical_estimate": 3.0, "classical_ci": [2.6, 3.4],
           "effective_labels": 40.5, "n_cases": 300, "n_labelled": 25}
    gate_row = {**row, "criterion": "accuracy>=4", "ppi_estimate": 0.6}
    metrics = estimate_metrics(EstimateReport.model_construct(
        estimates=[EstimateRow.model_construct(**r) for r in (row, gate_row)]))
    assert metrics["estimate/accuracy/ppi"] == 3.1
    assert metrics["estimate/accuracy/ppi_ci95_high"] == 3.3
    assert metrics["estimate/accuracy/judge_bias_ci95_low"] == 0.1
    assert metrics["estimate/accuracy/classical"] == 3.0
    assert metrics["estimate/accuracy/effective_labels"] == 40.5
    assert metrics[f"estimate/{key_part('accuracy>=4')}/ppi"] == 0.6


MANIFEST = {
    "settings_hash": "abcd1234abcd1234", "results_file": "r.jsonl",
    "settings": {"judge": "qwen", "judge_config": {"backend": "vllm", "dtype": "bfloat16",
                                                  "max_model_len": 16384, "system_role": True,
                                                  "engine": {"enforce_eager": True},
                                                  "embedded": None},
                 "model_hash": "m" * 64, "tokenizer_hash": "t" * 64, "rubric": "x",
                 "rubric_file_hash": "r" * 64, "template_hash": "p" * 64,
                 "schema_hash": "s" * 64,
                 "sampling": {"temperature": 0.7, "top_p": 1.0, "seed": 3,
                              "max_new_tokens": 512},
                 "panel": {"samples": 5, "reduction": "median"},
                 "chat_template_kwargs": {"enable_thinking": False}},
    "model": {"path": "/home/alice/models/Qwen3-8B", "model_hash": "m" * 64,
              "weight_list": {"file": "evaluator-weights.json", "sha256": "w" * 64,
                              "names_and_sizes_match": True}},
    "runs": [{"status": "finished", "host": "ward-pc-7", "input_file": "/home/alice/c.jsonl",
              "packages": {"evaluator": "0.1.0"}},
             {"status": "finished", "packages": {"evaluator": "0.2.0"}}],
}


def test_params_name_the_model_by_its_hashes_never_its_folder():
    params = run_params(MANIFEST, _summary(), [2, 2, 1])
    assert params["model_hash"] == "m" * 64 and params["tokenizer_hash"] == "t" * 64
    assert params["weight_list_sha256"] == "w" * 64
    assert params["weight_list.names_and_sizes_match"] == "true"
    assert params["sampling.temperature"] == "0.7" and params["sampling.seed"] == "3"
    assert params["panel.samples"] == "5" and params["panel.reduction"] == "median"
    assert params["judge.backend"] == "vllm" and params["judge.engine"] == '{"enforce_eager":true}'
    assert params["chat_template_kwargs"] == '{"enable_thinking":false}'
    assert params["record_version"] == "1,2" and params["evaluator_version"] == "0.1.0,0.2.0"
    assert params["runs"] == "2" and params["settings_hash"] == "abcd1234abcd1234"
    assert "judge.embedded" not in params
    everything = " ".join([*params, *params.values()])
    assert "alice" not in everything and "ward-pc" not in everything
    assert all(len(v) <= MAX_VALUE for v in params.values())


def test_jury_params_and_tags():
    manifest = {"kind": "jury", "settings_hash": "j" * 16, "results_file": "r.jsonl",
                "jury": {"judges": ["a", "b"], "reduction": {"integer": "median"}},
                "members": [{"judge": "a", "results_file": "r.jury/a.jsonl",
                             "settings_hash": "1" * 16},
                            {"judge": "b", "results_file": "r.jury/b.jsonl",
                             "settings_hash": "2" * 16}]}
    members = {"a": {"settings": {"model_hash": "ma"}}, "b": None}
    summary = _summary(judge="jury(a,b)")
    params = run_params(manifest, summary, [2], members=members,
                        extra={"labels.file": "l.csv", "labels.criteria": None})
    assert params["jury.judges"] == '["a","b"]'
    assert params["jury.a.settings_hash"] == "1" * 16 and params["jury.a.model_hash"] == "ma"
    assert "jury.b.model_hash" not in params and params["labels.file"] == "l.csv"
    assert "labels.criteria" not in params
    tags = run_tags(Path("/home/alice/out/r.jsonl"), manifest, summary, with_results=False)
    assert tags == {"evaluator.results_file": "r.jsonl", "evaluator.version": "0.1.0",
                    "evaluator.rubric": "x", "evaluator.judge": "jury(a,b)",
                    "evaluator.settings_hash": "j" * 16, "evaluator.kind": "jury",
                    "evaluator.contains_case_text": "false"}


def test_long_values_are_cut_to_mlflows_limit():
    assert len(text("x" * 10_000)) == MAX_VALUE and text("x" * 10_000).endswith("(truncated)")
    assert text(None) is None and text(True) == "true" and text(3) == "3"


def test_where_to_log(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    default = destination(None)
    assert default.default and default.uri == (tmp_path / "mlruns").as_uri()
    assert default.local_folder == tmp_path / "mlruns"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://tracker:5000")
    assert destination(None).uri == "http://tracker:5000" and not destination(None).default
    assert destination(None).local_folder is None
    given = destination("runs/here")
    assert given.uri == "runs/here" and given.local_folder == tmp_path / "runs" / "here"


@pytest.mark.parametrize("uri, says", [
    ("127.0.0.1:5000", "has no scheme: for a tracking server write http://127.0.0.1:5000"),
    ("mlflow.hospital.local:5000/x", "write http://mlflow.hospital.local:5000/x"),
    ("bogus://host", "MLflow's client has no 'bogus' store"),
    ("ht!tp:::/x", "is neither a URI nor a folder name"),
    ("http://alice:s3cret@host:5000:", None),  # a URI MLflow may refuse later: not here
])
def test_a_tracking_uri_that_cannot_be_meant_is_refused_not_made_a_folder(monkeypatch,
                                                                          tmp_path, uri, says):
    """Without a scheme, host:port would be a local folder of that name, and the run would
    be logged there while the user believes it reached the server."""
    from evaluator.tracking.mlflow_store import TrackingError

    monkeypatch.chdir(tmp_path)
    if says is None:
        assert destination(uri).local_folder is None
        return
    with pytest.raises(TrackingError, match=re.escape(says)) as refused:
        destination(uri)
    assert "\n" not in str(refused.value) and list(tmp_path.iterdir()) == []
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    with pytest.raises(TrackingError, match="MLFLOW_TRACKING_URI"):
        destination(None)


def test_credentials_are_never_shown():
    assert redact("http://alice:s3cret@host:5000/x") == "http://***@host:5000/x"
    assert redact("API request to https://tok@host/api failed") == (
        "API request to https://***@host/api failed")
    assert redact("http://host:5000") == "http://host:5000"
