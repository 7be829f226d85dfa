"""``evaluator compare``: the JSON document's keys, the 80-column text, Bradley-Terry over
three systems, labels, and every refusal as one line on stderr with exit 2, never case
text."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from evaluator.cli.main import cli
from tests.label_world import world
from tests.label_world import write_results as write_absolute
from tests.pairwise_world import (
    CRITERIA,
    SECRET,
    always_first,
    honest,
    pair_record,
    run_judge,
    write_records,
)

pytest.importorskip("sklearn")


def invoke(*args):
    return CliRunner().invoke(cli, ["compare", *(str(a) for a in args)])


def refused(result, *phrases):
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output and SECRET not in result.output
    for phrase in phrases:
        assert phrase in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def honest_file(tmp_path):
    return write_records(tmp_path / "ab.jsonl",
                         run_judge(honest, 60, seed=1, edge=0.5, criteria=CRITERIA))


def test_json_document(honest_file):
    result = invoke(honest_file, "--criterion", "accuracy", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert set(report) == {"files", "rubric", "criteria", "comparisons", "bradley_terry",
                           "notes"}
    assert report["criteria"] == ["accuracy"] and report["bradley_terry"] == []
    assert report["files"][0]["systems"] == {"A": "alpha", "B": "beta"}
    entry = report["comparisons"][0]
    assert {"win_rate", "position_consistency", "position_bias", "length_bias"} <= set(entry)
    assert set(entry["length_bias"]) >= {"slope", "controlled_win_rate", "longer_wins"}
    for figure in (entry["win_rate"], entry["position_consistency"], entry["position_bias"],
                   entry["length_bias"]["slope"]):
        assert {"value", "ci95", "method"} <= set(figure)
    assert any("counted as ties" in note for note in report["notes"])
    assert SECRET not in result.output


def test_text_fits_80_columns_and_names_every_figure(honest_file):
    result = invoke(honest_file)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert max(map(len, lines)) <= 80
    for name in ("win rate of A", "position consistency", "position bias", "length slope",
                 "length-controlled win", "longer answer wins", "counted as ties"):
        assert name in result.stdout
    assert all(c in result.stdout for c in CRITERIA)
    assert SECRET not in result.output and "case-0001" not in result.output


def test_three_systems_get_bradley_terry(tmp_path):
    files = [write_records(tmp_path / f"{a}-{b}.jsonl",
                           run_judge(honest, 40, seed=i, edge=edge, systems=(a, b)))
             for i, (a, b, edge) in enumerate([("x", "y", 0.5), ("y", "z", 0.5),
                                               ("x", "z", 1.0)])]
    result = invoke(*files, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    [block] = report["bradley_terry"]
    assert block["criterion"] == "accuracy" and block["battles"] == 120
    assert [s["name"] for s in block["systems"]] == ["x", "y", "z"]
    assert abs(sum(s["strength"] for s in block["systems"])) < 1e-9
    text = invoke(*files).stdout
    assert "Bradley-Terry" in text and max(map(len, text.splitlines())) <= 80


def test_labels_agreement(tmp_path):
    records = run_judge(honest, 50, seed=4, criteria=CRITERIA)
    path = write_records(tmp_path / "ab.jsonl", records)
    labels = tmp_path / "labels.csv"
    rows = ["case_id,preference"]
    for r in records:
        outcome = r.scores["accuracy"]
        rows.append(f"{r.case_id},{'TIE' if outcome == 'inconsistent' else outcome.lower()}")
    labels.write_text("\n".join(rows) + "\n")
    result = invoke(path, "--criterion", "accuracy", "--labels", labels, "--label-field",
                    "preference", "--json")
    assert result.exit_code == 0, result.output
    entry = json.loads(result.stdout)["comparisons"][0]
    assert entry["labels"]["kappa"]["value"] == 1.0 and entry["labels"]["n"] == 50


def test_always_first_judge_through_the_cli(tmp_path):
    path = write_records(tmp_path / "ab.jsonl", run_judge(always_first, 30, seed=2))
    entry = json.loads(invoke(path, "--json").stdout)["comparisons"][0]
    assert entry["position_consistency"]["value"] == 0
    assert entry["position_bias"]["value"] == 1
    assert entry["win_rate"]["inconsistent"] == 30


def test_a_constant_judge_shows_no_point_as_an_interval_and_says_why(tmp_path):
    """The always-first judge: every pair inconsistent, so its outcome is constant (a tie)
    and kappa with any labels is 0 by construction, in every resample. That is a point,
    not a 95% CI: no "[0.000, 0.000]", and the line's CI note says why."""
    records = run_judge(always_first, 30, seed=2)
    path = write_records(tmp_path / "ab.jsonl", records)
    labels = tmp_path / "labels.csv"
    labels.write_text("case_id,preference\n" + "".join(
        f"{r.case_id},{'AB'[i % 2]}\n" for i, r in enumerate(records)))
    args = (path, "--labels", labels, "--label-field", "preference")
    kappa = json.loads(invoke(*args, "--json").stdout)["comparisons"][0]["labels"]["kappa"]
    assert kappa["value"] == 0 and kappa["ci95"] is None
    assert "no interval" in kappa["method"] and "same outcome" in kappa["method"]
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert max(map(len, lines)) <= 80
    # No figure is shown with a zero-width interval.
    for value in ("0.000", "0.500", "1.000"):
        assert f"[{value}, {value}]" not in result.stdout
    [line] = [x for x in lines if x.strip().startswith("kappa with labels")]
    assert line.split()[3:5] == ["0.000", "-"], line
    mark = line.split()[5]
    assert mark.startswith("[") and mark.endswith("]"), line
    legend = " ".join(x.strip() for x in lines[lines.index(next(
        x for x in lines if x.strip().startswith("CI:"))):])
    assert f"{mark} no interval: the judge gave every pair the same outcome" in legend
    assert SECRET not in result.output


def test_text_names_each_intervals_method(honest_file):
    """The CI column the docs promise: each figure's line carries a note number, and the
    notes under the file name the method (Wilson, bootstrap), as --json does."""
    result = invoke(honest_file, "--criterion", "accuracy")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert ["figure", "value", "95%", "CI", "CI", "counts"] in [x.split() for x in lines]
    report = json.loads(invoke(honest_file, "--criterion", "accuracy", "--json").stdout)
    entry = report["comparisons"][0]
    text = " ".join(x.strip() for x in lines)
    for name, figure in (("win rate of A", entry["win_rate"]),
                         ("position consistency", entry["position_consistency"])):
        [line] = [x for x in lines if x.strip().startswith(name)]
        mark = next(w for w in line.split() if w.startswith("[") and w.endswith("]")
                    and w[1:-1].isdigit())
        assert f"{mark} {figure['method']}" in text
    assert "Wilson" in text and "bootstrap" in text


def test_refusals(tmp_path, honest_file):
    refused(invoke(tmp_path / "missing.jsonl"), "cannot read", "missing.jsonl")
    absolute = write_absolute(tmp_path / "absolute.jsonl", world(5)[0])
    refused(invoke(absolute), "not a pairwise results file")
    failed = write_records(tmp_path / "failed.jsonl",
                           [pair_record("c1", "A", "A", status="invalid_output")])
    refused(invoke(failed), "no ok records")
    other = write_records(tmp_path / "other.jsonl",
                          [pair_record("c1", "A", "A", rubric="another_pairwise",
                                       systems=("x", "y"))])
    refused(invoke(honest_file, other), "different rubrics")
    refused(invoke(honest_file, "--criterion", "accuracy_reasoning"), "unknown --criterion")
    refused(invoke(honest_file, honest_file), "twice")
    refused(invoke(honest_file, other, "--labels", honest_file, "--label-field", "x"),
            "one RESULTS file")
    refused(invoke(honest_file, "--label-field", "x"), "--labels")
    (tmp_path / "bad.txt").write_text("nope\n")
    refused(invoke(tmp_path / "bad.txt"), "bad.txt")


def test_bad_labels_are_refused_without_their_value(tmp_path, honest_file):
    labels = tmp_path / "labels.csv"
    labels.write_text(f"case_id,preference\ncase-0000,A\ncase-0001,\"{SECRET} is better\"\n")
    line = refused(invoke(honest_file, "--labels", labels, "--label-field", "preference"),
                   "line 3", "'preference'", "A, B or tie")
    assert "better" not in line
    labels.write_text("case_id,other\ncase-0000,A\n")
    refused(invoke(honest_file, "--labels", labels, "--label-field", "preference"),
            "no row has the label field")
    labels.write_text("case_id,preference\nnobody,A\n")
    refused(invoke(honest_file, "--labels", labels, "--label-field", "preference"),
            "no labelled case")
    refused(invoke(honest_file, "--labels", tmp_path / "none.csv", "--label-field", "p"),
            "none.csv")


def test_an_outcome_its_two_orders_do_not_give_is_refused(tmp_path, honest_file):
    """Every outcome edited to "A": compare recomputed the outcome from the orders, while
    export wrote the stored "A" - two answers from one file."""
    records = [json.loads(line) for line in honest_file.read_text().splitlines()]
    first = None  # the first line whose outcome the edit changes
    for number, record in enumerate(records, start=1):
        outcome = (record["pairwise"] or {}).get("outcome")
        if outcome:
            if first is None and set(outcome.values()) != {"A"}:
                first = number
            record["pairwise"]["outcome"] = record["scores"] = {key: "A" for key in outcome}
    edited = tmp_path / "all-a.jsonl"
    edited.write_text("".join(json.dumps(record) + "\n" for record in records))
    refused(invoke(edited), f"all-a.jsonl line {first} ", "not what the two orders")
    pytest.importorskip("pyarrow")
    export = CliRunner().invoke(cli, ["export", str(edited), "--parquet",
                                      str(tmp_path / "x.parquet")])
    refused(export, f"all-a.jsonl line {first} ", "not what the two orders")
    assert not (tmp_path / "x.parquet").exists()
