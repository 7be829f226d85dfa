"""``evaluator agree --pass``: :mod:`evaluator.analysis.gates` — the judge's pass/fail
against the labels' with the same threshold, TP/FP/FN/TN and the four rates with Wilson
CIs checked against scipy, undefined rates said as such, malformed specs exit 2."""

from __future__ import annotations

import json
import math

import pytest

pytest.importorskip("scipy", reason="needs the stats extra")
pytest.importorskip("sklearn", reason="needs the stats extra")
pytest.importorskip("krippendorff", reason="needs the stats extra")
pytest.importorskip("pingouin", reason="needs the stats extra")

from click.testing import CliRunner
from scipy.stats import binomtest

from evaluator.analysis.agreement.agreement import AgreementError, agreement
from evaluator.analysis.gates import Gate, GateError, gate_table, parse_gate
from evaluator.analysis.score_mode import ScoreModeError
from evaluator.cli.main import cli
from tests.conftest import label_source
from tests.test_score_mode import write_records

# accuracy >= 4 over 20 cases: 6 TP, 2 FP, 3 FN, 9 TN (judge score, label).
PAIRS = ([(5, 4)] * 4 + [(4, 5)] * 2 + [(4, 2)] * 2 + [(2, 4)] * 2 + [(3, 5)]
         + [(1, 1)] * 5 + [(3, 2)] * 4)


def wilson(k: int, n: int) -> list[float]:
    ci = binomtest(k, n).proportion_ci(method="wilson")
    return [ci.low, ci.high]


def test_parse_gate_operators_and_malformed_specs():
    assert parse_gate("accuracy>=4") == Gate("accuracy", ">=", 4.0)
    assert parse_gate(" accuracy < 2.5 ") == Gate("accuracy", "<", 2.5)
    assert parse_gate("overall>3").passes(3.5) and not parse_gate("overall>3").passes(3)
    assert parse_gate("x<=2").passes(2) and not parse_gate("x<2").passes(2)
    for bad in ("accuracy", "accuracy=>4", "accuracy>=", ">=4", "accuracy>=four",
                "accuracy==4", "accuracy>=4>=5", "accuracy>=nan"):
        with pytest.raises(GateError, match="expected CRITERION>=THRESHOLD"):
            parse_gate(bad)


def test_known_table_and_wilson_intervals_match_scipy():
    judge, labels = zip(*PAIRS)
    table = gate_table(parse_gate("accuracy>=4"), judge, labels)
    assert (table["tp"], table["fp"], table["fn"], table["tn"]) == (6, 2, 3, 9)
    assert table["n"] == 20 and table["positive_class"] == "pass"
    for name, k, n in (("sensitivity", 6, 9), ("specificity", 9, 11), ("ppv", 6, 8),
                       ("npv", 9, 12)):
        entry = table[name]
        assert (entry["k"], entry["n"], entry["undefined"]) == (k, n, None)
        assert entry["value"] == pytest.approx(k / n)
        assert entry["ci95"] == pytest.approx(wilson(k, n))
        assert entry["ci_method"] == "Wilson"


def test_undefined_rates_say_why_never_zero_or_nan():
    # Nobody passes by the labels, and the judge passes nobody either.
    table = gate_table(parse_gate("accuracy>=5"), [1, 2, 3], [1, 4, 2])
    assert (table["tp"], table["fp"], table["fn"], table["tn"]) == (0, 0, 0, 3)
    for name in ("sensitivity", "ppv"):
        assert table[name]["value"] is None and table[name]["ci95"] is None
        assert "= 0" in table[name]["undefined"]
    assert table["specificity"]["value"] == 1.0 and table["npv"]["value"] == 1.0
    assert not any(isinstance(v, float) and math.isnan(v)
                   for entry in table.values() if isinstance(entry, dict)
                   for v in entry.values())


def _gate_files(tmp_path):
    rows = [(f"g{i}", judge, label) for i, (judge, label) in enumerate(PAIRS)]
    results = write_records(tmp_path / "r.jsonl", [(cid, j, None) for cid, j, _ in rows])
    labels = tmp_path / "l.jsonl"
    labels.write_text("".join(json.dumps({"case_id": cid, "grade": lab}) + "\n"
                              for cid, _, lab in rows))
    return results, labels


def test_agree_gates_in_text_and_json(tmp_path):
    results, labels = _gate_files(tmp_path)
    base = ["agree", str(results), "--labels", str(labels), "--label-field", "grade",
            "--criterion", "accuracy", "--resamples", "100", "--pass", "accuracy>=4",
            "--pass", "accuracy<2"]
    done = CliRunner().invoke(cli, [*base, "--json"])
    assert done.exit_code == 0, done.output
    report = json.loads(done.output)
    first, second = report["gates"]
    assert (first["rule"], first["tp"], first["fp"], first["fn"], first["tn"]) == \
        ("accuracy >= 4", 6, 2, 3, 9)
    assert first["sensitivity"]["ci95"] == pytest.approx(wilson(6, 9))
    # accuracy < 2: the five (1, 1) pairs pass both ways; nothing else passes.
    assert (second["tp"], second["fp"], second["fn"], second["tn"]) == (5, 0, 0, 15)
    assert "positive class" in report["gates_note"]
    text = CliRunner().invoke(cli, base)
    assert text.exit_code == 0, text.output
    assert "pass is the positive class" in " ".join(text.output.split())
    assert "accuracy >= 4  (n = 20): TP 6  FP 2  FN 3  TN 9" in text.output
    assert "sensitivity   0.667" in text.output


def test_agree_gate_with_an_undefined_rate_in_text(tmp_path):
    results, labels = _gate_files(tmp_path)
    done = CliRunner().invoke(cli, ["agree", str(results), "--labels", str(labels),
                                    "--label-field", "grade", "--criterion", "accuracy",
                                    "--resamples", "100", "--pass", "accuracy>5"])
    assert done.exit_code == 0, done.output
    assert "sensitivity  undefined: no case passes by the labels (TP + FN = 0)" in done.output
    assert "ppv          undefined: the judge passes no case (TP + FP = 0)" in done.output


def test_malformed_or_unknown_pass_exits_2_in_one_line(tmp_path):
    results, labels = _gate_files(tmp_path)
    base = ["agree", str(results), "--labels", str(labels), "--label-field", "grade"]
    done = CliRunner().invoke(cli, [*base, "--pass", "accuracy=>4"])
    assert done.exit_code == 2
    assert "--pass" in done.output and "CRITERION>=THRESHOLD" in done.output
    done = CliRunner().invoke(cli, [*base, "--pass", "accurcy>=4"])
    assert done.exit_code == 2
    assert "unknown criterion 'accurcy'" in done.output
    assert len(done.output.strip().splitlines()) == 1
    with pytest.raises(AgreementError, match="unknown criterion"):
        agreement(results, label_source(labels, "grade"), gates=[parse_gate("nope>=1")],
                  resamples=100)


def test_gates_compare_expected_scores_in_expected_mode(tmp_path):
    # Argmax 4 everywhere; the expected score is 4.4 where the label passes and 3.4 where it
    # fails: argmax passes every case, the expected scores pass exactly the right ones.
    rows = [(f"e{i}", 4, {4: 0.6, 5: 0.4} if i % 2 else {4: 0.6, 2: 0.4}) for i in range(10)]
    results = write_records(tmp_path / "r.jsonl", rows)
    labels = tmp_path / "l.jsonl"
    labels.write_text("".join(json.dumps({"case_id": cid, "grade": 5 if i % 2 else 2}) + "\n"
                              for i, (cid, _, _) in enumerate(rows)))
    argmax = agreement(results, label_source(labels, "grade"), criteria=["accuracy"],
                       resamples=100, gates=[parse_gate("accuracy>=4")]).gates[0]
    assert (argmax["tp"], argmax["fp"], argmax["fn"], argmax["tn"]) == (5, 5, 0, 0)
    assert argmax["specificity"]["value"] == 0.0  # defined: 0 of 5
    expected = agreement(results, label_source(labels, "grade"), criteria=["accuracy"],
                         resamples=100, score_mode="expected",
                         gates=[parse_gate("accuracy>=4")]).gates[0]
    assert (expected["tp"], expected["fp"], expected["fn"], expected["tn"]) == (5, 0, 0, 5)
    # Without distributions there is nothing to compare in expected mode.
    bare = write_records(tmp_path / "bare.jsonl", [(cid, 4, None) for cid, _, _ in rows])
    with pytest.raises(ScoreModeError, match="none of its 10 ok record"):
        agreement(bare, label_source(labels, "grade"), resamples=100, score_mode="expected")


def test_a_gate_outside_the_compared_criteria_is_refused(tmp_path):
    """--criterion accuracy with labels for accuracy: a gate on hallucination would compare
    the judge's hallucination with accuracy labels."""
    results, labels = _gate_files(tmp_path)
    done = CliRunner().invoke(cli, ["agree", str(results), "--labels", str(labels),
                                    "--label-field", "grade", "--criterion", "accuracy",
                                    "--pass", "hallucination>=3"])
    assert done.exit_code == 2 and "not among --criterion" in done.output
    assert len(done.output.strip().splitlines()) == 1
