"""Two runs on one output: the second is refused at once (exit code 2, one line) or, with
``--wait``, waits for the first and then resumes. Never two writers: no case twice."""

from __future__ import annotations

import csv
import fcntl
import json
import os
import subprocess
import sys
import time
from collections import Counter
from contextlib import contextmanager

import pytest
from click.testing import CliRunner

from evaluator.cli.main import cli
from evaluator.data.files import OutputBusy
from evaluator.data.results import scan_results
from evaluator.judges.backends.fake import FakeBackend
from evaluator.judges.models_file import JudgeSpec, JurySpec
from tests.conftest import ROOT, refused_in_one_line, run_options, write_jsonl
from tests.label_world import world, write_results

CASES = 30
FAKE = JudgeSpec(backend="fake")


def _rows(n=CASES):
    return [{"case_id": f"case-{i:03d}", "reference_report": f"reference {i}",
             "generated_report": f"generated {i}"} for i in range(n)]


def _env():
    return dict(os.environ, PYTHONPATH=str(ROOT))


def _slow_run(source, target, log, delay):
    """tests/fault_driver.py with the settings of ``evaluator run -m fake``, slowed down."""
    with log.open("ab") as stderr:
        return subprocess.Popen([sys.executable, str(ROOT / "tests" / "fault_driver.py"),
                                 str(source), str(target), str(delay), "fake"],
                                cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL, stderr=stderr)


def _cli_run(source, target, *extra, timeout=120):
    return subprocess.run([sys.executable, "-m", "evaluator", "run", "-r", "pathology_report",
                           "-m", "fake", "-i", str(source), "-o", str(target), "--no-progress",
                           *extra],
                          cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=timeout,
                          check=False)


def _wait_for_records(first, target, log, n=1):
    deadline = time.monotonic() + 60
    while not (target.exists() and target.read_bytes().count(b"\n") >= n):
        assert first.poll() is None, log.read_text()
        assert time.monotonic() < deadline, "the first run wrote nothing"
        time.sleep(0.02)


def _ids(path):
    scan = scan_results(path)
    assert scan.torn_bytes == 0
    return Counter(line.record.case_id for line in scan.lines)


def test_a_second_run_on_the_same_output_is_refused_at_once(tmp_path):
    source = write_jsonl(tmp_path / "cases.jsonl", _rows())
    target = tmp_path / "results.jsonl"
    log = tmp_path / "first.log"
    first = _slow_run(source, target, log, delay=0.3)  # 10 batches of 3: about 3 s
    try:
        _wait_for_records(first, target, log)
        started = time.monotonic()
        second = _cli_run(source, target)
        assert time.monotonic() - started < 30  # refused, not waiting
        assert first.poll() is None, "the first run ended before the second was refused"
    finally:
        assert first.wait(timeout=120) == 0, log.read_text()
    assert second.returncode == 2, second.stderr
    message = second.stderr.strip()
    assert "\n" not in message and "Traceback" not in second.stderr, second.stderr
    assert message.startswith("error: ") and "being written by another run" in message
    assert "--wait" in message and str(target) in message
    ids = _ids(target)
    assert len(ids) == CASES and set(ids.values()) == {1}  # every case once
    lock = (tmp_path / "results.evaluator-lock").read_text()  # kept: never stale
    assert lock.startswith("evaluator run lock for results.jsonl: held while a run writes")


def test_with_wait_the_second_run_waits_then_resumes_with_nothing_left(tmp_path):
    source = write_jsonl(tmp_path / "cases.jsonl", _rows())
    target = tmp_path / "results.jsonl"
    log = tmp_path / "first.log"
    first = _slow_run(source, target, log, delay=0.15)
    try:
        _wait_for_records(first, target, log)
        second = _cli_run(source, target, "--wait")
    finally:
        assert first.wait(timeout=120) == 0, log.read_text()
    # Every fifth verdict of the slow judge is invalid: exit code 1, nothing judged again.
    assert second.returncode == 1, second.stderr
    assert "Traceback" not in second.stderr
    assert "waiting for it to end" in second.stderr
    assert f"{CASES} case(s) already done" in second.stderr
    ids = _ids(target)
    assert len(ids) == CASES and set(ids.values()) == {1}


@contextmanager
def _held(lock_path):
    """The output's lock, held by this process as another run would hold it."""
    fd = os.open(lock_path, os.O_RDONLY | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
        lock_path.unlink(missing_ok=True)


def _evaluate(tmp_path, **kwargs):
    from evaluator.run.runner import evaluate

    source = tmp_path / "cases.jsonl"
    if not source.exists():
        write_jsonl(source, _rows(5))
    return evaluate(*run_options(rubric="pathology_report", input_path=source,
                                 output_path=tmp_path / "results.jsonl", judge="fake",
                                 judge_spec=FAKE, **kwargs))


def _files(folder):
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


def test_a_held_lock_refuses_a_run_before_it_changes_anything(tmp_path):
    _evaluate(tmp_path, backend=FakeBackend())
    results = tmp_path / "results.jsonl"
    # A torn tail: a run that went on would cut it (and judge its case again).
    results.write_bytes(results.read_bytes()[:-30])
    backend = FakeBackend()
    with _held(tmp_path / "results.evaluator-lock"):
        before = _files(tmp_path)
        with pytest.raises(OutputBusy, match="being written by another run"):
            _evaluate(tmp_path, backend=backend)
        with pytest.raises(OutputBusy):
            _evaluate(tmp_path, backend=backend, force_new=True)
        assert _files(tmp_path) == before and backend.calls == []
    _evaluate(tmp_path, backend=backend)  # free again: resumes
    assert len(backend.calls) == 1


def test_the_lock_is_held_from_the_plan_until_the_summary(tmp_path, monkeypatch):
    from evaluator.run import runner

    lock = tmp_path / "results.evaluator-lock"
    seen = []

    def probe(step):
        fd = os.open(lock, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            seen.append((step, "free"))
        except BlockingIOError:
            seen.append((step, "held"))
        finally:
            os.close(fd)

    def wrap(name):
        original = getattr(runner, name)

        def wrapped(*args, **kwargs):
            probe(name)
            return original(*args, **kwargs)

        monkeypatch.setattr(runner, name, wrapped)

    for name in ("plan_resume", "apply_plan", "write_summary"):
        wrap(name)
    _evaluate(tmp_path, backend=FakeBackend())
    assert seen == [("plan_resume", "held"), ("apply_plan", "held"), ("write_summary", "held")]
    assert lock.exists()  # never removed


def test_a_jury_holds_its_combined_output(tmp_path):
    from evaluator.run.jury import evaluate_jury
    from evaluator.run.task import Judge, RunOptions, Task

    source = write_jsonl(tmp_path / "cases.jsonl", _rows(3))
    jury = JurySpec(judges=["fake", "tiny-random"])  # refused before any member loads
    with _held(tmp_path / "results.evaluator-lock"), pytest.raises(OutputBusy):
        evaluate_jury(Task("pathology_report", source), "j", jury, Judge(),
                      RunOptions(tmp_path / "results.jsonl"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cases.jsonl"]


def test_the_ray_driver_runs_under_the_lock(tmp_path):
    pytest.importorskip("ray", reason="needs the ray extra: make install")
    from evaluator.run.engines import RayOptions

    with _held(tmp_path / "results.evaluator-lock"), pytest.raises(OutputBusy):
        _evaluate(tmp_path, engine="ray",
                  ray_options=RayOptions(backend_factory=lambda name, spec: FakeBackend()))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cases.jsonl"]


def test_a_users_own_lock_named_file_is_never_used_or_removed(tmp_path):
    # poetry.lock beside -o poetry.jsonl is the user's: the run's lock has its own ending.
    poetry = tmp_path / "poetry.lock"
    poetry.write_text("[[package]]\n")
    source = write_jsonl(tmp_path / "cases.jsonl", _rows(3))
    done = _cli_run(source, tmp_path / "poetry.jsonl")
    assert done.returncode == 0, done.stderr
    assert poetry.read_text() == "[[package]]\n"
    # A file at the lock's own name that this tool did not write: refused, untouched.
    mine = tmp_path / "other.evaluator-lock"
    mine.write_text("my notes\n")
    refused = _cli_run(source, tmp_path / "other.jsonl")
    assert refused.returncode == 2, refused.stderr
    message = refused.stderr.strip()
    assert "\n" not in message and "not a lock file of this tool" in message
    assert mine.read_text() == "my notes\n" and not (tmp_path / "other.jsonl").exists()


def test_a_deleted_lock_does_not_let_a_second_run_in(tmp_path):
    from evaluator.data.files import exclusive_lock

    lock = tmp_path / "results.evaluator-lock"
    target = tmp_path / "results.jsonl"
    with exclusive_lock(lock, target):
        assert lock.read_text().startswith("evaluator run lock for results.jsonl")
        with pytest.raises(OutputBusy), exclusive_lock(lock, target):
            pass
    assert lock.exists()  # released, never removed: there is nothing stale to delete
    with exclusive_lock(lock, target):
        pass
    assert lock.exists()


def test_a_lock_removed_while_held_is_reported(tmp_path, caplog):
    from evaluator.data.files import exclusive_lock

    lock = tmp_path / "results.evaluator-lock"
    with exclusive_lock(lock, tmp_path / "results.jsonl"):
        lock.unlink()  # what a user cleaning up "stale" lock files would do
    assert "removed or replaced while this run held it" in caplog.text


def test_a_fifo_at_the_lock_name_is_refused_without_blocking(tmp_path):
    source = write_jsonl(tmp_path / "cases.jsonl", _rows(3))
    os.mkfifo(tmp_path / "results.evaluator-lock")
    refused = _cli_run(source, tmp_path / "results.jsonl", timeout=60)
    assert refused.returncode == 2 and "not a regular file" in refused.stderr


# ------------------------------------------------- evaluator review and the run it reads


def _review(results, out, *extra):
    return CliRunner().invoke(cli, ["review", str(results), "--out", str(out), *extra])


def test_review_refuses_a_run_still_running_killed_or_interrupted(tmp_path):
    source = write_jsonl(tmp_path / "cases.jsonl", _rows())
    target = tmp_path / "results.jsonl"
    log = tmp_path / "first.log"
    first = _slow_run(source, target, log, delay=0.3)
    try:
        _wait_for_records(first, target, log)
        running = _review(target, tmp_path / "s1")
        assert first.poll() is None, "the run ended before review was tried"
        first.kill()  # a crash: the manifest still says running, no one holds the lock
    finally:
        first.wait(timeout=120)
    refused_in_one_line(running, "reference", "results.jsonl", "still running",
                        "results.evaluator-lock")
    crashed = _review(target, tmp_path / "s1")
    refused_in_one_line(crashed, "reference", "stopped without finishing",
                        "re-run the same `evaluator run` command")
    assert not (tmp_path / "s1").exists()
    resumed = _cli_run(source, target)
    assert resumed.returncode in (0, 1), resumed.stderr  # the slow judge's invalid verdicts
    done = _review(target, tmp_path / "s1")
    assert done.exit_code == 0, done.output
    manifest_path = tmp_path / "results.manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["runs"][-1]["status"] = "interrupted"  # what Ctrl-C or SIGTERM leaves
    manifest_path.write_text(json.dumps(manifest))
    refused_in_one_line(_review(target, tmp_path / "s2"), "reference",
                        "its last run is interrupted")


def test_a_second_review_on_the_same_out_is_refused_while_the_first_writes(tmp_path):
    pytest.importorskip("numpy", reason="needs the stats extra")
    records, _ = world(40)
    results = write_results(tmp_path / "results.jsonl", records)
    out = tmp_path / "sheet"
    out.mkdir()
    with _held(out / "review.evaluator-lock"):
        busy = _review(results, out, "--force")
    message = refused_in_one_line(busy, "SECRET", "review.csv",
                                  "being written by another `evaluator review`")
    assert "--wait" not in message and list(out.iterdir()) == []


def _draw(out):
    """The case ids and seed of the CSV and of the JSONL of a worksheet."""
    with (out / "review.csv").open(newline="", encoding="utf-8-sig") as handle:
        rows = list(csv.DictReader(handle))
    jsonl = [json.loads(line) for line in (out / "review.jsonl").read_text().splitlines()]
    return ([(r["case_id"], r["design_seed"]) for r in rows],
            [(r["case_id"], str(r["design_seed"])) for r in jsonl])


def test_two_reviews_started_together_never_both_replace_and_never_mix_draws(tmp_path):
    pytest.importorskip("numpy", reason="needs the stats extra")
    records, _ = world(3000)
    results = write_results(tmp_path / "results.jsonl", records)

    def start(out, seed, *extra):
        return subprocess.Popen([sys.executable, "-m", "evaluator", "review", str(results),
                                 "--out", str(out), "--design", "random", "--n", "2000",
                                 "--seed", str(seed), *extra],
                                cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)

    for attempt in range(4):
        out = tmp_path / f"sheet{attempt}"
        extra = ("--force",) if attempt >= 2 else ()
        if extra:  # a worksheet there already: both are asked to replace it
            first = start(out, 1)
            assert first.communicate(timeout=120)[1] == "" and first.returncode == 0
        seeds = (10 + 2 * attempt, 11 + 2 * attempt)
        both = [start(out, seed, *extra) for seed in seeds]
        errors = [p.communicate(timeout=120)[1].strip() for p in both]
        codes = [p.returncode for p in both]
        for code, error in zip(codes, errors, strict=True):
            assert code in (0, 2), error
            if code == 2:
                assert "\n" not in error and error.startswith("error: "), error
                assert "being written by another" in error or "pass --force" in error, error
        if not extra:
            assert sorted(codes) == [0, 2], errors  # never both "replacing"
        sheet, jsonl = _draw(out)
        assert sheet == jsonl  # the CSV and the JSONL of one draw
        winners = {str(seed) for seed, code in zip(seeds, codes, strict=True) if code == 0}
        assert {seed for _, seed in sheet} <= winners and len(sheet) == 2000
