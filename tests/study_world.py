"""A two-system study folder for the draw and labelling tests: per system a cases file (its
own answers to the same synthetic trial cases), a results file of trial_eligibility
(``label_world.world``) and the manifest of a finished run that read that cases file, and
the plan. The systems' names and files are distinctive (``Zephyrix``, ``Quorvane``) so a
test can search every response for them; no answer or case text names a system."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from evaluator.run.manifest import manifest_path_for, run_entry
from evaluator.study.plan import PLAN_FILE
from tests.label_world import world, write_results

# (name, results file, cases file), in the plan's order.
SYSTEMS = (("Zephyrix", "zephyrix_answers.jsonl", "zephyrix_cases.jsonl"),
           ("Quorvane", "quorvane_answers.jsonl", "quorvane_cases.jsonl"))
# Each system's answers, told apart by their wording only (the tests read a label from it).
ANSWERS = ("The patient is eligible: every inclusion criterion is met (answer {i}).",
           "Not eligible, as one exclusion criterion applies (answer {i}).")


def study_plan(n: int = 6, labellers: tuple[str, ...] = ("ana", "ben"), overlap: float = 0.5,
               seed: int = 7, design: str = "random") -> dict:
    """The plan: accuracy's mean, Quorvane's superiority over Zephyrix."""
    return {
        "title": "Two eligibility assistants",
        "rubric": "trial_eligibility",
        "systems": [{"name": name, "results": results} for name, results, _ in SYSTEMS],
        "primary": {"criterion": "accuracy"},
        "comparison": {"type": "superiority", "reference": SYSTEMS[0][0]},
        "secondary": [{"criterion": "clarity"}],
        "labels": {"design": design, "n": n, "labellers": list(labellers),
                   "overlap": overlap if len(labellers) > 1 else 0.0, "seed": seed},
    }


def case_rows(system: int, cases: int) -> list[dict]:
    """The trial cases as ``system``'s run read them: the same context, its own answer."""
    return [{"case_id": f"q-{i:04d}",
             "patient_profile": f"Synthetic patient {i}: 58 years old, type 2 diabetes.",
             "trial_id": f"NCT0000{i:04d}", "trial_title": f"Synthetic trial {i}",
             "eligibility_criteria": "Inclusion: adults with type 2 diabetes.",
             "ground_truth_label": "eligible", "ground_truth_explanation": "Synthetic.",
             "workflow_answer": ANSWERS[system].format(i=i)} for i in range(cases)]


def make_study(folder: Path, *, cases: int = 12, plan: dict | None = None,
               manifests: bool = True) -> Path:
    """A study folder: the plan and, per system, its cases, results and run manifest."""
    folder.mkdir(parents=True, exist_ok=True)
    for k, (_, results_name, cases_name) in enumerate(SYSTEMS):
        cases_path = folder / cases_name
        cases_path.write_text("".join(json.dumps(r) + "\n" for r in case_rows(k, cases)),
                              encoding="utf-8")
        records, _ = world(cases, seed=k + 1, prefix="q")
        results = write_results(folder / results_name, records)
        if manifests:
            manifest_path_for(results).write_text(json.dumps({
                "manifest_version": 1, "results_file": results.name,
                "runs": [{**run_entry(cases_path), "status": "finished"}]}))
    (folder / PLAN_FILE).write_text(yaml.safe_dump(plan or study_plan(), sort_keys=False),
                                    encoding="utf-8")
    return folder
