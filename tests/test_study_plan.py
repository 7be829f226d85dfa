"""A study's plan (issue 48, item 1): read strictly, checked against the rubric and the
files, every problem one line naming the file and the key; its SHA-256 is the bytes'."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from evaluator.cli.main import cli
from evaluator.rubrics.load import load_rubric
from evaluator.study.plan import PLAN_FILE, StudyPlanError, load_plan
from tests.label_world import SECRET, world, write_results

PLAN = {
    "title": "New eligibility assistant vs the current one",
    "rubric": "trial_eligibility",
    "systems": [{"name": "Current", "results": "A.jsonl"},
                {"name": "New", "results": "runs/B.jsonl"}],
    "primary": {"criterion": "accuracy", "statistic": "mean"},
    "comparison": {"type": "non-inferiority", "reference": "Current", "margin": 0.25},
    "confidence": 0.95,
    "secondary": [{"criterion": "clarity"},
                  {"criterion": "accuracy", "statistic": "pass_rate", "gate": "accuracy>=4"}],
    "labels": {"design": "random", "n": 60, "labellers": ["ana", "ben"], "overlap": 0.2,
               "seed": 7},
}


def write(folder, plan=PLAN, text=None, cases=80):
    """A study folder: the plan, and two results files of trial_eligibility sharing
    ``cases`` ok cases."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "runs").mkdir(exist_ok=True)
    for seed, target in ((1, folder / "A.jsonl"), (2, folder / "runs" / "B.jsonl")):
        records, _ = world(cases, seed=seed, prefix="q")
        write_results(target, records)
    path = folder / PLAN_FILE
    path.write_text(text if text is not None else yaml.safe_dump(plan, sort_keys=False),
                    encoding="utf-8")
    return folder


def changed(**parts):
    plan = {**PLAN}
    for key, value in parts.items():
        if isinstance(value, dict) and isinstance(plan.get(key), dict):
            plan[key] = {**plan[key], **value}
        else:
            plan[key] = value
    return plan


def test_a_plan_is_read_with_its_hash_and_its_systems_resolved(tmp_path):
    study = write(tmp_path / "study")
    loaded = load_plan(study)
    assert loaded.sha256 == hashlib.sha256((study / PLAN_FILE).read_bytes()).hexdigest()
    assert loaded.results == (study / "A.jsonl", study / "runs" / "B.jsonl")
    plan = loaded.plan
    assert (plan.reference.name, plan.candidate.name) == ("Current", "New")
    assert plan.hypothesis() == ("is New at worst 0.25 below Current on mean accuracy (higher "
                                 "is better)? non-inferiority: the lower end of the 95% CI of "
                                 "New - Current above -0.25 (one-sided 2.5%)")
    assert plan.secondary[1].describe() == "pass rate of accuracy>=4"
    assert load_plan(study / PLAN_FILE).sha256 == loaded.sha256  # the folder or the file
    superiority = load_plan(write(tmp_path / "sup", changed(
        comparison={"type": "superiority", "reference": "Current", "margin": None})))
    assert superiority.plan.hypothesis() == (
        "is New better than Current on mean accuracy (higher is better)? superiority: the "
        "lower end of the 95% CI of New - Current above 0 (one-sided 2.5%)")
    lower = load_plan(write(tmp_path / "low", changed(
        primary={"criterion": "hallucination", "statistic": "pass_rate",
                 "gate": "hallucination<=2", "better": "lower"}, secondary=[])))
    assert lower.plan.hypothesis() == (
        "is New at worst 0.25 above Current on pass rate of hallucination<=2 (lower is "
        "better)? non-inferiority: the upper end of the 95% CI of New - Current below +0.25 "
        "(one-sided 2.5%)")


@pytest.mark.parametrize("plan, needles", [
    (changed(comparison={"type": "non-inferiority", "reference": "Current", "margin": None}),
     ["comparison", "needs its margin"]),
    (changed(comparison={"type": "non-inferiority", "reference": "Current", "margin": -1.0}),
     ["comparison", "positive number"]),
    (changed(comparison={"type": "superiority", "reference": "Current", "margin": 0.25}),
     ["comparison", "takes no margin"]),
    (changed(comparison={"type": "non-inferiority", "reference": "Old", "margin": 0.25}),
     ["must name one of the systems (Current, New)"]),
    (changed(primary={"criterion": "accuracy", "statistic": "pass_rate"}),
     ["primary", "needs its gate"]),
    (changed(primary={"criterion": "accuracy", "statistic": "pass_rate",
                      "gate": "clarity>=4"}), ["primary", "not on the endpoint's criterion"]),
    (changed(primary={"criterion": "accuracy", "gate": "accuracy>=4"}),
     ["primary", "a mean takes no gate"]),
    (changed(primary={"criterion": "acuracy"}),
     ["primary.criterion: 'acuracy' is not a scored criterion", "accuracy"]),
    (changed(primary={"criterion": "accuracy", "statistic": "pass_rate",
                      "gate": "accuracy>=1"}), ["primary.gate", "passed by every value"]),
    (changed(secondary=[{"criterion": "accuracy"}]), ["also listed as secondary"]),
    (changed(systems=[{"name": "New", "results": "A.jsonl"},
                      {"name": "New", "results": "runs/B.jsonl"}]), ["two systems have one name"]),
    (changed(systems=[{"name": "Current", "results": "A.jsonl"},
                      {"name": "New", "results": "missing.jsonl"}]),
     ["systems.1.results: no file", "missing.jsonl"]),
    (changed(systems=[{"name": "Current", "results": "A.jsonl"}]), ["systems"]),
    (changed(labels={"n": 10 ** 9}), ["labels.n"]),
    (changed(labels={"labellers": ["ana", "ana"]}), ["a labeller is named twice"]),
    (changed(labels={"labellers": ["ana\x07"]}), ["printable"]),
    (changed(confidence=0.9), ["confidence"]),  # 95% only: the figures are 95% CIs
    (changed(comparison={"type": "non-inferiority", "reference": "Current", "margin": 4.0}),
     ["comparison.margin: 4 is not below 'accuracy''s span (4)"]),
    (changed(primary={"criterion": "accuracy", "statistic": "pass_rate",
                      "gate": "accuracy>=4"}, secondary=[]), []),  # margin 0.25 of a rate: ok
    (changed(title="x\x1b]0;owned\x07"), ["title", "printable"]),
    (changed(title=" "), ["title"]),
    (changed(systems=[{"name": "Current", "results": "A.jsonl"},
                      {"name": "Current - New", "results": "runs/B.jsonl"}]), ["' - '"]),
    (changed(systems=[{"name": "Current", "results": "A.jsonl"},
                      {"name": "CURRENT", "results": "runs/B.jsonl"}]), ["ignoring case"]),
    (changed(systems=[{"name": "Current", "results": "A.jsonl"},
                      {"name": "New", "results": "A.jsonl"}]), ["one results file"]),
    (changed(systems=[{"name": "Current", "results": "A.jsonl"},
                      {"name": "New", "results": "runs/B\x00.jsonl"}]), ["systems.1.results"]),
    (changed(labels={"labellers": ["ana"]}), ["overlap needs two or more labellers"]),
    (changed(labels={"n": 81}), ["labels.n: 81 case(s)", "share 80 case(s)"]),
    (changed(rubric="ecg_interpretation", primary={"criterion": "DiagnosisAccuracy"},
             comparison={"type": "superiority", "reference": "Current", "margin": None},
             secondary=[]), ["not of the plan's rubric 'ecg_interpretation'",
                             "trial_eligibility"]),
    (changed(labels={"n": "60"}), ["labels.n"]),  # strict: "60" is no number
    (changed(rubric="no_such_rubric"), ["rubric:"]),
    ({**PLAN, "extra": 1}, ["extra"]),
])
def test_each_problem_is_one_line_naming_the_file_and_the_key(tmp_path, plan, needles):
    study = write(tmp_path / "study", plan)
    if not needles:  # a plan that is fine
        load_plan(study)
        return
    with pytest.raises(StudyPlanError) as caught:
        load_plan(study)
    message = str(caught.value)
    assert "\n" not in message and SECRET not in message, message
    assert str(study / PLAN_FILE) in message, message
    for needle in needles:
        assert needle in message, (needle, message)


@pytest.mark.parametrize("text, needle", [
    ("a: &x [1, 2]\nb: *x\n" * 1, "invalid study plan"),  # an alias is read, then refused
    ("title: t\ntitle: u\n", "duplicate key 'title'"),
    ("- a\n- b\n", "a mapping of keys"),
    ("x: [" * 5000 + "]" * 5000, ""),
])
def test_a_hostile_or_malformed_file_is_refused_in_one_line(tmp_path, text, needle):
    study = write(tmp_path / "study", text=text)
    with pytest.raises(StudyPlanError) as caught:
        load_plan(study)
    assert "\n" not in str(caught.value) and needle in str(caught.value)


def test_the_cli_prints_the_plan_or_one_line_and_exit_2(tmp_path):
    study = write(tmp_path / "study")
    run = CliRunner().invoke(cli, ["study", "check", str(study)])
    assert run.exit_code == 0, run.output
    loaded = load_plan(study)
    assert f"plan: {study / PLAN_FILE} (sha256 {loaded.sha256})" in run.output
    assert "system Current (reference)" in run.output and "system New (compared)" in run.output
    assert "secondary (reported, never decisive): pass rate of accuracy>=4" in run.output
    assert "random sheet of 60 case(s), labellers ana, ben, overlap 0.2, seed 7" in \
        " ".join(run.output.split())
    write(study, changed(primary={"criterion": "acuracy"}))
    bad = CliRunner().invoke(cli, ["study", "check", str(study)])
    assert bad.exit_code == 2 and "Traceback" not in bad.output
    assert len(bad.stderr.strip().splitlines()) == 1


def test_a_margin_yaml_reads_as_text_is_refused_with_how_to_write_it(tmp_path):
    study = write(tmp_path / "s", text=yaml.safe_dump(PLAN, sort_keys=False).replace(
        "margin: 0.25", "margin: 1e-1"))
    with pytest.raises(StudyPlanError) as caught:
        load_plan(study)
    message = str(caught.value)
    assert "comparison.margin: '1e-1' is text, not a number: write it as 0.25" in message
    assert "Value error" not in message and "\n" not in message


def test_a_name_mixing_scripts_is_refused(tmp_path):
    # "Nеw" with a Cyrillic е reads as "New".
    plan = {**PLAN, "systems": [{"name": "Current", "results": "A.jsonl"},
                                {"name": "N\u0435w", "results": "runs/B.jsonl"}],
            }
    with pytest.raises(StudyPlanError) as caught:
        load_plan(write(tmp_path / "s", plan=plan))
    assert "mixes letters of several scripts (Latin and Cyrillic)" in str(caught.value)
    plan["systems"][1]["name"] = "Новая"  # one script: a name like any other
    assert load_plan(write(tmp_path / "t", plan=plan)).plan.candidate.name == "Новая"


# trial_eligibility's criteria with aggregates of accuracy (1-5): their ranges follow from
# its scale and each one's operation.
AGGREGATES = [
    {"name": "acc_pct", "of": "accuracy", "reduce": "mean", "divide_by": 5, "scale": 100},
    {"name": "acc_good", "of": "accuracy", "reduce": "share_above", "threshold": 3},
    {"name": "acc_neg", "of": "accuracy", "reduce": "sum", "scale": -1},
    {"name": "acc_capped", "of": "accuracy", "reduce": "max", "cap": 3},
    {"name": "acc_count", "of": "accuracy", "reduce": "count"},
    {"name": "acc_odd", "of": "accuracy", "reduce": "sum", "scale": math.inf},
]


def _aggregates_rubric(folder):
    """A rubrics folder holding trial_eligibility with :data:`AGGREGATES` added (the results
    files name it, so a plan that passes is read to the end)."""
    folder.mkdir(parents=True, exist_ok=True)
    data = yaml.safe_load(Path(load_rubric("trial_eligibility").source_path).read_text())
    data["aggregates"] = AGGREGATES
    (folder / "trial_eligibility.yaml").write_text(yaml.safe_dump(data, sort_keys=False),
                                                   encoding="utf-8")
    return (folder,)


def _gated(gate):
    return changed(primary={"criterion": gate.split(">")[0].split("<")[0],
                            "statistic": "pass_rate", "gate": gate},
                   comparison={"type": "superiority", "reference": "Current", "margin": None},
                   secondary=[])


@pytest.mark.parametrize("gate, refused", [
    ("acc_pct>=20", "passed by every value of aggregate 'acc_pct' (from 20 to 100,"),
    ("acc_pct>100", "passed by no value of aggregate 'acc_pct' (from 20 to 100,"),
    ("acc_pct>=60", None),
    ("acc_good>=0", "passed by every value of aggregate 'acc_good' (from 0 to 1,"),
    ("acc_good>1", "passed by no value of aggregate 'acc_good'"),
    ("acc_good>=1", None),
    ("acc_neg<=-1", "passed by every value of aggregate 'acc_neg' (from -5 to -1,"),
    ("acc_neg>-1", "passed by no value"),
    ("acc_neg>=-2", None),
    ("acc_capped>=4", "passed by no value of aggregate 'acc_capped' (from 1 to 3,"),
    ("acc_capped>=3", None),
    ("acc_count>=1", "passed by every value of aggregate 'acc_count' (from 1 to 1,"),
    ("acc_count<1", "passed by no value"),
    ("acc_odd>=3", ("primary.gate: cannot be checked against the range of aggregate "
                    "'acc_odd', which cannot be derived (aggregate 'acc_odd': its scale is "
                    "not a finite number)")),
])
def test_a_gate_on_an_aggregate_must_split_its_range(tmp_path, gate, refused):
    dirs = _aggregates_rubric(tmp_path / "rubrics")
    study = write(tmp_path / "study", _gated(gate))
    if refused is None:
        assert load_plan(study, dirs).plan.primary.gate == gate
        return
    with pytest.raises(StudyPlanError) as caught:
        load_plan(study, dirs)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{study / PLAN_FILE}: primary.gate: ")
    assert refused in message, message
    # study check says it in one line, exit 2
    run = CliRunner().invoke(cli, ["study", "check", str(study), "--rubrics-dir", str(dirs[0])])
    assert run.exit_code == 2 and "Traceback" not in run.output
    assert run.stderr.strip().splitlines() == [f"error: {message}"]


@pytest.mark.parametrize("plan, needle", [
    # ecg_interpretation's aggregates of items: a sum of 1-8 items scored 0 or 1 (0 to 8); a
    # share of 1-12 leads, capped at 12, / 12, x 100 (0 to 100).
    (changed(rubric="ecg_interpretation",
             primary={"criterion": "AnalysisCompleteness", "statistic": "pass_rate",
                      "gate": "AnalysisCompleteness>8"}, secondary=[]),
     "passed by no value of aggregate 'AnalysisCompleteness' (from 0 to 8,"),
    (changed(rubric="ecg_interpretation",
             primary={"criterion": "LeadAssessmentCoverage", "statistic": "pass_rate",
                      "gate": "LeadAssessmentCoverage>=0"}, secondary=[]),
     "passed by every value of aggregate 'LeadAssessmentCoverage' (from 0 to 100,"),
    # A split gate passes this check; the results (trial_eligibility's) are refused next.
    (changed(rubric="ecg_interpretation",
             primary={"criterion": "AnalysisCompleteness", "statistic": "pass_rate",
                      "gate": "AnalysisCompleteness>=4"}, secondary=[]),
     "not of the plan's rubric 'ecg_interpretation'"),
])
def test_a_gate_on_an_aggregate_of_items_is_checked_against_its_range(tmp_path, plan, needle):
    with pytest.raises(StudyPlanError) as caught:
        load_plan(write(tmp_path / "study", plan))
    assert needle in str(caught.value), str(caught.value)


@pytest.mark.parametrize("criterion, margin, refused", [
    ("acc_pct", 80.0, ("comparison.margin: 80 is not below aggregate 'acc_pct''s span "
                       "(80: from 20 to 100)")),
    ("acc_pct", 79.0, None),
    ("acc_count", 0.5, "is not below aggregate 'acc_count''s span (0: from 1 to 1)"),
    ("acc_odd", 1.0, ("comparison.margin: cannot be checked against the range of "
                      "aggregate 'acc_odd', which cannot be derived")),
])
def test_a_margin_on_an_aggregates_mean_is_below_its_span(tmp_path, criterion, margin, refused):
    dirs = _aggregates_rubric(tmp_path / "rubrics")
    study = write(tmp_path / "study", changed(
        primary={"criterion": criterion},
        comparison={"type": "non-inferiority", "reference": "Current", "margin": margin},
        secondary=[]))
    if refused is None:
        assert load_plan(study, dirs).plan.comparison.margin == margin
        return
    with pytest.raises(StudyPlanError) as caught:
        load_plan(study, dirs)
    assert refused in str(caught.value) and "\n" not in str(caught.value), str(caught.value)
