"""Drawing a study (issue 48, item 2): one random sheet per system with the same cases and
labellers, and labels/study-draw.json with the plan's hash and text and each labeller's
seeded, system-blind queue; drawn once, refused in one line (exit 2) otherwise, and one
draw at a time (a second, while one is under way, is refused and replaces nothing)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from evaluator.cli.main import cli
from evaluator.data.results import read_results
from evaluator.data.sheet import (
    JournalEntry,
    append_label,
    now,
    read_sheet_info,
)
from evaluator.data.study_draw import (
    StudyDrawError,
    draw_lock_path,
    labels_dir,
    read_study_draw,
    sheet_folders,
    study_draw_path,
)
from evaluator.label.session import read_review
from evaluator.rubrics.load import load_rubric
from evaluator.rubrics.rubric import ItemsCriterion
from evaluator.study.draw import ACTIVE_REFUSED, queue, sheet_criteria
from evaluator.study.plan import PLAN_FILE, StudyPlan, load_plan
from tests.label_world import write_results
from tests.study_world import SYSTEMS, make_study, study_plan


def _draw(study):
    return CliRunner().invoke(cli, ["study", "draw", str(study)])


def _refused(run) -> str:
    """The one line of a refusal (exit 2, no traceback)."""
    assert run.exit_code == 2, run.output
    assert "Traceback" not in run.output
    lines = run.output.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_both_sheets_draw_the_same_cases_and_each_queue_holds_both_answers_once(tmp_path):
    study = make_study(tmp_path / "study")
    run = _draw(study)
    assert run.exit_code == 0, run.output
    loaded = load_plan(study)
    labels = labels_dir(study)
    draw = read_study_draw(labels)
    assert f"sha256 {loaded.sha256}" in run.output
    assert "cases: 6," in run.output
    assert f"evaluator study label {study}" in run.output
    infos = [read_sheet_info(folder) for folder in sheet_folders(labels, draw)]
    assert [f.name for f in sheet_folders(labels, draw)] == ["system-1", "system-2"]
    ids = [read_review(folder, info, False)[0]
           for folder, info in zip(sheet_folders(labels, draw), infos, strict=True)]
    assert ids[0] == ids[1] == draw.cases and len(draw.cases) == 6
    assert infos[0].assignment == infos[1].assignment
    assert infos[0].overlap_cases == infos[1].overlap_cases
    assert all(info.blind and info.design == "random" for info in infos)
    assert infos[0].criteria == ["accuracy", "clarity"]  # the endpoints' criteria
    for name in ("ana", "ben"):
        assert f"  {name}: {len(draw.queues[name])} item(s)" in run.output
        expected = Counter((k, c) for k in (0, 1) for c in infos[0].assignment[name])
        assert Counter(draw.queues[name]) == expected  # each (system, case) exactly once
        assert max(expected.values()) == 1
    # The record: the plan as drawn, each system's results hash and sheet.
    text = (study / PLAN_FILE).read_text(encoding="utf-8")
    assert draw.plan_text == text
    assert draw.plan_sha256 == hashlib.sha256(text.encode()).hexdigest() == loaded.sha256
    assert draw.seed == 7
    for index, ((name, results, _), system) in enumerate(zip(SYSTEMS, draw.systems,
                                                             strict=True)):
        assert (system.name, system.results, system.sheet) == (name, results,
                                                               f"system-{index + 1}")
        digest = hashlib.sha256((study / results).read_bytes()).hexdigest()
        assert system.results_sha256 == digest == infos[index].results[0].sha256
        assert system.fingerprint == infos[index].fingerprint
    assert stat.S_IMODE(study_draw_path(labels).stat().st_mode) == 0o600


def test_the_queues_are_seeded_with_a_secret_and_differ_between_labellers(tmp_path):
    first = read_study_draw(labels_dir(_drawn(make_study(tmp_path / "one"))))
    second = read_study_draw(labels_dir(_drawn(make_study(tmp_path / "two"))))
    # The same cases and items, in another order: the plan and results alone (which a
    # clinician may have) do not give the order; the draw's own record does.
    assert first.cases == second.cases and first.queues != second.queues
    assert {k: sorted(v) for k, v in first.queues.items()} == {
        k: sorted(v) for k, v in second.queues.items()}
    # Shuffled: not each case's two answers side by side in system order.
    for items in first.queues.values():
        in_order = [(k, c) for c in dict.fromkeys(c for _, c in items) for k in (0, 1)]
        assert items != in_order
    cases = [f"q-{i:04d}" for i in range(10)]
    assert queue(7, "ana", cases, 2) == queue(7, "ana", cases, 2)
    assert queue(7, "ana", cases, 2) != queue(7, "ben", cases, 2)
    assert queue(7, "ana", cases, 2) != queue(8, "ana", cases, 2)
    assert queue(7, "ana", cases, 2, "s1") != queue(7, "ana", cases, 2, "s2")


def _drawn(study):
    run = _draw(study)
    assert run.exit_code == 0, run.output
    return study


def test_a_study_is_drawn_once(tmp_path):
    study = _drawn(make_study(tmp_path / "study"))
    before = study_draw_path(labels_dir(study)).read_bytes()
    line = _refused(_draw(study))
    draw = read_study_draw(labels_dir(study))
    assert "already drawn on " + draw.drawn[:10] in line
    assert draw.plan_sha256[:12] in line and "its labels belong to that draw" in line
    assert study_draw_path(labels_dir(study)).read_bytes() == before
    # A damaged record is not replaced either.
    study_draw_path(labels_dir(study)).write_text("{")
    assert "never replaced" in _refused(_draw(study))


def test_a_draw_stopped_before_its_record_is_drawn_again_unless_a_sheet_has_labels(tmp_path):
    study = _drawn(make_study(tmp_path / "study"))
    labels = labels_dir(study)
    first = read_study_draw(labels)
    study_draw_path(labels).unlink()  # as if the draw stopped after writing the sheets
    again = read_study_draw(labels_dir(_drawn(study)))
    assert again.cases == first.cases  # drawn again: the same cases (the queues' secret is new)
    study_draw_path(labels).unlink()
    sheet = sheet_folders(labels, first)[1]
    info = read_sheet_info(sheet)
    append_label(sheet, JournalEntry(labeller="ana", time=now(), case_id=first.cases[0],
                                     criterion="accuracy", value=4.0, sheet=info.fingerprint,
                                     rubric_hash=info.rubric_hash))
    line = _refused(_draw(study))
    assert "system-2 holds saved labels" in line and "move the labels folder aside" in line
    assert not study_draw_path(labels).exists()


def test_systems_that_judged_different_cases_ok_are_refused(tmp_path):
    study = make_study(tmp_path / "study")
    target = study / SYSTEMS[1][1]
    records = read_results(target)
    changed = [r.model_copy(update={"status": "backend_error", "scores": None,
                                    "distributions": None})
               if r.case_id in ("q-0001", "q-0002") else r for r in records]
    write_results(target, changed)
    line = _refused(_draw(study))
    assert "Zephyrix has 2 that Quorvane has not, Quorvane 0 that Zephyrix has not" in line
    assert "a study compares both on the same cases; judge them again" in line
    assert not labels_dir(study).exists()
    # study check says so too (it ran the same check before the draw would)
    assert _refused(CliRunner().invoke(cli, ["study", "check", str(study)])) == line


def test_an_active_design_is_refused(tmp_path):
    study = make_study(tmp_path / "study", plan=study_plan(design="active"))
    assert _refused(_draw(study)) == f"error: {ACTIVE_REFUSED}"
    assert not labels_dir(study).exists()


def test_a_run_without_its_manifest_is_refused(tmp_path):
    study = make_study(tmp_path / "study", manifests=False)
    line = _refused(_draw(study))
    assert "zephyrix_answers.jsonl: its run's manifest records no cases file" in line


def test_a_changed_cases_file_is_refused(tmp_path):
    study = make_study(tmp_path / "study")
    (study / SYSTEMS[0][2]).write_text("{}\n")
    assert "changed since the run" in _refused(_draw(study))


def test_the_sheets_ask_the_endpoints_criteria_or_every_one_for_an_aggregate():
    trial = load_rubric("trial_eligibility")
    assert sheet_criteria(StudyPlan.model_validate(study_plan()), trial) == ("accuracy",
                                                                             "clarity")
    # An aggregate (load_plan checks it is one; "overall" stands for it here): every
    # criterion, build_review's default, as clinicians label an aggregate through its parts.
    plan = StudyPlan.model_validate({**study_plan(), "secondary": [{"criterion": "overall"}]})
    assert sheet_criteria(plan, trial) == ()
    # An aggregate named after its one items criterion (ecg_interpretation's): that one.
    ecg = load_rubric("ecg_interpretation")
    key = ecg.aggregates[0].name
    assert any(isinstance(f, ItemsCriterion) and f.key == key for f in ecg.output)
    plan = StudyPlan.model_validate({**study_plan(), "rubric": ecg.name,
                                     "primary": {"criterion": key}, "secondary": []})
    assert sheet_criteria(plan, ecg) == (key,)


@pytest.mark.parametrize("damage", [
    "{", "[]", json.dumps({"format": 2}),
    "QUEUE",  # an item naming no drawn case
])
def test_a_damaged_or_other_format_record_is_refused_in_one_line(tmp_path, damage):
    study = _drawn(make_study(tmp_path / "study"))
    target = study_draw_path(labels_dir(study))
    if damage == "QUEUE":
        data = json.loads(target.read_text())
        data["queues"]["ana"][0][1] = "no-such-case"
        damage = json.dumps(data)
    target.write_text(damage)
    with pytest.raises(StudyDrawError) as caught:
        read_study_draw(labels_dir(study))
    assert "\n" not in str(caught.value) and "no-such-case" not in str(caught.value)


def test_the_plan_as_a_file_draws_beside_it(tmp_path):
    study = make_study(tmp_path / "study", plan=study_plan(labellers=("ana",)))
    run = CliRunner().invoke(cli, ["study", "draw", str(study / PLAN_FILE)])
    assert run.exit_code == 0, run.output
    draw = read_study_draw(labels_dir(study))
    assert list(draw.queues) == ["ana"] and len(draw.queues["ana"]) == 12
    assert yaml.safe_load(draw.plan_text)["labels"]["labellers"] == ["ana"]


# The first draw, in a process of its own: the real CLI, paused (with the draw's lock held)
# after writing its sheets and before its record, until the file ``go`` appears.
PAUSED_DRAW = """
import sys, time
from pathlib import Path
import evaluator.study.draw as draw
study, reached, go = map(Path, sys.argv[1:4])
real = draw.write_study_draw
def paused(labels, record):
    reached.write_text("")
    deadline = time.monotonic() + 120
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return real(labels, record)
draw.write_study_draw = paused
from evaluator.cli.main import cli
cli.main(["study", "draw", str(study)])
"""


def _paused_draw(study, tmp_path):
    """Start the first draw in another process; return it once it is paused between its
    sheets and its record, with the file that lets it go on."""
    reached, go = tmp_path / "reached", tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    first = subprocess.Popen([sys.executable, "-c", PAUSED_DRAW, str(study), str(reached),
                              str(go)], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while not reached.exists():
        if first.poll() is not None or time.monotonic() > deadline:
            first.kill()
            raise AssertionError(f"the first draw did not reach its record: "
                                 f"{first.communicate()[0]}")
        time.sleep(0.05)
    return first, go


def _sheet_bytes(labels):
    return {p.relative_to(labels): p.read_bytes()
            for p in sorted(labels.glob("system-*/*")) if p.is_file()}


def test_a_second_draw_while_one_is_under_way_is_refused_and_replaces_nothing(tmp_path):
    study = make_study(tmp_path / "study")
    labels = labels_dir(study)
    first, go = _paused_draw(study, tmp_path)
    try:
        sheets = _sheet_bytes(labels)
        assert sheets and not study_draw_path(labels).exists()  # between sheets and record
        line = _refused(_draw(study))
        assert "a draw of this study is already under way" in line
        assert "study-draw.evaluator-lock" in line and "nothing was written" in line
        assert _sheet_bytes(labels) == sheets and not study_draw_path(labels).exists()
    finally:
        go.write_text("")
        try:
            output = first.communicate(timeout=120)[0]
        except subprocess.TimeoutExpired:
            first.kill()
            raise
    assert first.returncode == 0, output
    record = study_draw_path(labels).read_bytes()
    draw = read_study_draw(labels)
    # The record is the first draw's, over the first draw's sheets, untouched.
    assert _sheet_bytes(labels) == sheets
    assert [s.fingerprint for s in draw.systems] == [
        read_sheet_info(folder).fingerprint for folder in sheet_folders(labels, draw)]
    assert "already drawn on" in _refused(_draw(study))
    assert study_draw_path(labels).read_bytes() == record


def test_a_crashed_draw_leaves_its_lock_file_and_blocks_no_later_draw(tmp_path):
    study = make_study(tmp_path / "study")
    labels = labels_dir(study)
    first, _ = _paused_draw(study, tmp_path)
    os.kill(first.pid, signal.SIGKILL)  # a crash: no cleanup of any kind
    first.communicate(timeout=60)
    assert first.returncode == -signal.SIGKILL
    assert draw_lock_path(labels).is_file() and not study_draw_path(labels).exists()
    # The lock went with its process: the study is drawn (its stopped draw's sheets replaced).
    _drawn(study)
    draw = read_study_draw(labels)
    assert [s.fingerprint for s in draw.systems] == [
        read_sheet_info(folder).fingerprint for folder in sheet_folders(labels, draw)]


def test_a_foreign_file_at_the_draw_lock_is_refused_with_what_to_do(tmp_path):
    """A file of the lock's name that this tool did not write is never used or changed:
    refused in one line saying to move it away (not the run's "--output stem", an option
    `study draw` does not have: review finding); nothing is drawn."""
    study = make_study(tmp_path / "study")
    labels = labels_dir(study)
    labels.mkdir(parents=True, exist_ok=True)
    lock = draw_lock_path(labels)
    lock.write_text("a clinician's note\n", encoding="utf-8")
    line = _refused(_draw(study))
    assert "is not a lock file of this tool" in line and "move it away" in line
    assert "--output" not in line
    assert lock.read_text(encoding="utf-8") == "a clinician's note\n"
    assert not study_draw_path(labels).exists()
