"""``evaluator.common.columns`` and the 80-column rule: wrapping never cuts a word, a number
or a path, a long row's tail goes on under it, notes are numbered once; and the commands
whose output ran wider (``agree`` with gates, subgroups and verbosity, ``review`` and its
PHI warning, ``validate``, ``models``, ``rubrics``; ``estimate``, ``summary``) print no
line over 80 columns on realistic inputs (real trial cases, real group names, a deep
folder, a models.yaml with a long description)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from evaluator.cli.main import cli
from evaluator.common.columns import WIDTH, Notes, row, whole, wrap
from evaluator.judges.backends.fake import FakeBackend
from evaluator.judges.models_file import JudgeSpec
from evaluator.run.runner import evaluate
from evaluator.run.task import Judge, RunOptions, Task
from tests.conftest import ROOT, write_jsonl

CASES = 60


def test_wrap_breaks_at_spaces_only_and_keeps_whole_phrases():
    text = ("half-width 0.087; about 60 labelled cases for a half-width of 0.1 "
            f"{whole('[0.656, 0.829]')} /a/very/long/path/" + "x" * 90 + " end")
    lines = wrap(text, "  ", "  ")
    assert " ".join(" ".join(lines).split()) == " ".join(text.replace("\u00a0", " ").split())
    assert "[0.656, 0.829]" in " ".join(lines)
    long = [line for line in lines if "xxx" in line]
    assert len(long) == 1 and long[0].strip() == "/a/very/long/path/" + "x" * 90
    assert all(len(line) <= WIDTH for line in lines if "xxx" not in line)
    assert all(line.startswith("  ") for line in lines)


def test_row_puts_a_long_tail_under_itself():
    head = f"    {'win rate of A':<22}{'0.500':>7}  [0.332, 0.668]   [1]  "
    assert row(head, "30 pairs") == [head + "30 pairs"]
    lines = row(head, "A won 120, B won 80, tie 30, inconsistent 70, of 300 pairs")
    assert lines[0].startswith(head) and len(lines) > 1
    assert all(len(line) <= WIDTH for line in lines)
    assert all(line.startswith(" " * len(head)) for line in lines[1:])
    narrow = row(" " * 70, "a tail that cannot fit beside it")
    assert narrow[0] == "" and all(len(line) <= WIDTH for line in narrow)


def test_notes_number_each_text_once():
    notes = Notes()
    assert not notes and notes.mark(None) == "" and notes.lines("CI:") == []
    assert [notes.mark("Wilson"), notes.mark("bootstrap"), notes.mark("Wilson")] == \
        ["[1]", "[2]", "[1]"]
    assert notes.lines("CI:") == ["  CI:", "    [1] Wilson", "    [2] bootstrap"]


# ------------------------------------------------ the commands, on realistic inputs

def _verdict(i: int, label: int) -> str:
    """A judge that mostly follows the label, with a reasoning whose length varies."""
    score = max(1, min(5, label + (i % 3) - 1))
    reasoning = "The answer matches the criteria. " * (1 + i % 4)
    return json.dumps({"hallucination": 1 + i % 5, "hallucination_reasoning": reasoning,
                       "accuracy": score, "accuracy_reasoning": reasoning,
                       "clarity": max(1, min(5, score + i % 2)), "clarity_reasoning": reasoning})


@pytest.fixture(scope="module")
def trial_run(trial_rows, tmp_path_factory):
    """A fake-judged run of 60 real trial cases (the dev data, else the examples again
    under new ids) in a deep folder, labels on 1-5 per case with the generator model (a
    real --by column), and a labels file with half of them for review."""
    base = tmp_path_factory.mktemp("w")
    rows = [dict(trial_rows[i % len(trial_rows)], case_id=f"case-{i:03d}")
            for i in range(CASES)]
    labels = {r["case_id"]: 2 + 2 * (int(r.get("expert_qrel", 1 + i % 2)) - 1) + i % 2
              for i, r in enumerate(rows)}
    cases = write_jsonl(base / "cases.jsonl", rows)
    outputs = [_verdict(i, labels[r["case_id"]]) for i, r in enumerate(rows)]
    judge = Judge("fake-judge", spec=JudgeSpec(backend="fake"), backend=FakeBackend(outputs))
    results = evaluate(Task("trial_eligibility", cases), judge,
                       RunOptions(base / "results.jsonl")).results_path
    label_rows = [{"case_id": r["case_id"], "expert": labels[r["case_id"]],
                   "generator_model": r.get("generator_model", "gpt-4o")} for r in rows]
    all_labels = write_jsonl(base / "labels.jsonl", label_rows)
    half = write_jsonl(base / "half.jsonl", label_rows[::2])
    return {"base": base, "results": results, "labels": all_labels, "half": half}


def _run(*args, cwd: Path | None = None, monkeypatch=None) -> str:
    if cwd is not None:
        monkeypatch.chdir(cwd)
    done = CliRunner().invoke(cli, [str(a) for a in args])
    assert done.exit_code == 0, done.output
    return done.output


def _fits(output: str) -> None:
    wide = [f"{len(line)}: {line}" for line in output.splitlines() if len(line) > WIDTH]
    assert not wide, "\n".join(wide)


def test_agree_with_gates_subgroups_and_verbosity_fits_80_columns(trial_run, monkeypatch):
    monkeypatch.chdir(trial_run["base"])
    output = _run("agree", "results.jsonl", "--labels", "labels.jsonl", "--label-field",
                  "expert", "--resamples", "200", "--by", "generator_model",
                  "--pass", "accuracy>=4", "--pass", "clarity<3")
    for shown in ("Spearman rho", "verbosity", "by 'generator_model'", "gates (",
                  "sensitivity", "CI: the method of each 95% CI"):
        assert shown in output
    _fits(output)


def test_review_fits_80_columns(trial_run, monkeypatch):
    monkeypatch.chdir(trial_run["base"])
    output = _run("review", "results.jsonl", "--out", "clinician-review/round-1", "--pass",
                  "accuracy>=4", "--labels", "half.jsonl", "--label-field", "expert")
    assert "label columns:" in output and "estimate for results.jsonl" in output
    _fits(output)
    _fits(_run("review", "results.jsonl", "--out", "clinician-review/random", "--design",
               "random", "--n", "20"))


def test_estimate_and_summary_fit_80_columns(trial_run, monkeypatch):
    monkeypatch.chdir(trial_run["base"])
    _fits(_run("estimate", "results.jsonl", "--labels", "labels.jsonl", "--label-field",
               "expert", "--criterion", "accuracy", "--pass", "accuracy>=4"))
    _fits(_run("summary", "results.jsonl"))


def test_models_fits_80_columns(tmp_path):
    _fits(_run("models"))
    models = tmp_path / "models.yaml"
    models.write_text(yaml.safe_dump({"default": "qwen3-8b-awq-hospital", "judges": {
        "qwen3-8b-awq-hospital": {
            "backend": "vllm", "path": "/opt/hospital-ai/models/Qwen3-8B-AWQ-2025-06",
            "description": "Qwen3-8B, AWQ 4-bit, served by vLLM on the radiology GPU node; "
                           "validated against 200 clinician-labelled trial cases (kappa 0.71)"
                           " in June; use for pathology and trial eligibility."},
        "fake": {"backend": "fake"}}}))
    output = _run("models", "--models-file", models)
    assert "radiology GPU node" in " ".join(output.split())
    _fits(output)


def test_rubrics_fits_80_columns():
    listing = _run("rubrics")
    names = [p.stem for p in (ROOT / "prompts").glob("*.yaml")]
    assert all(name in listing for name in names)
    _fits(listing)
    for name in names:
        _fits(_run("rubrics", name))


def test_validate_fits_80_columns():
    """Its "ok  rubric ..." lines ran 148-184 columns: each now wraps, the rubric's path
    whole (on a line of its own when long: only such a one-word line may be wider)."""
    output = _run("validate")
    assert "ok  rubric trial_eligibility:" in output and "token budget" in output
    wide = [line for line in output.splitlines()
            if len(line) > WIDTH and len(line.split()) > 1]
    assert not wide, "\n".join(wide)
    assert sum(line.startswith("ok  rubric ") for line in output.splitlines()) == len(
        list((ROOT / "prompts").glob("*.yaml")))


def test_review_phi_warning_fits_80_columns(trial_run, monkeypatch):
    """The PHI warning on stderr was one line of 118 columns."""
    monkeypatch.chdir(trial_run["base"])
    done = CliRunner().invoke(cli, ["review", "results.jsonl", "--out", "with-text", "--n",
                                    "3", "--show-text", "--cases", "cases.jsonl"])
    assert done.exit_code == 0, done.output
    assert "WARNING: the worksheet now holds case text (PHI)" in done.stderr
    _fits(done.stderr)
    _fits(done.stdout)
