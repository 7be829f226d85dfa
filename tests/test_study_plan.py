"""A study's plan (issue 48, item 1): read strictly, checked against the rubric and the
files, every problem one line naming the file and the key; its SHA-256 is the bytes'."""

from __future__ import annotations

import hashlib

import pytest
import yaml
from click.testing import CliRunner

from evaluator.cli.main import cli
from evaluator.study.plan import PLAN_FILE, StudyPlanError, load_plan

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
SECRET = "PHI-SECRET-PLAN-7"


def write(folder, plan=PLAN, text=None):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "A.jsonl").write_text(f'{{"case_id": "{SECRET}"}}\n', encoding="utf-8")
    (folder / "runs").mkdir(exist_ok=True)
    (folder / "runs" / "B.jsonl").write_text("{}\n", encoding="utf-8")
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
    assert plan.hypothesis() == ("is New not worse than Current on mean accuracy by 0.25 or "
                                 "more? (non-inferiority: the 95% CI of New - Current above "
                                 "-0.25)")
    assert plan.secondary[1].describe() == "pass rate of accuracy>=4"
    assert load_plan(study / PLAN_FILE).sha256 == loaded.sha256  # the folder or the file
    superiority = load_plan(write(tmp_path / "sup", changed(
        comparison={"type": "superiority", "reference": "Current", "margin": None})))
    assert superiority.plan.hypothesis().startswith("is New better than Current on mean "
                                                   "accuracy?")


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
    (changed(confidence=0.5), ["confidence"]),
    (changed(labels={"n": "60"}), ["labels.n"]),  # strict: "60" is no number
    (changed(rubric="no_such_rubric"), ["rubric:"]),
    ({**PLAN, "extra": 1}, ["extra"]),
])
def test_each_problem_is_one_line_naming_the_file_and_the_key(tmp_path, plan, needles):
    study = write(tmp_path / "study", plan)
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
