"""SIGKILL a run at random points and resume: every case ends up exactly once, every line
parses. (The torn-line cases a kill rarely hits are forced in tests/test_resume.py.)"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

from evaluator.data.results import read_results, scan_results
from tests.conftest import ROOT, write_jsonl

KILL_POINTS = 24
CASES = 90


def _start(source, target, log, streamed=False):
    # A batch of 3 sleeps 0.03 s; a streamed request 0.01 s: about the same run length.
    delay = 0.01 if streamed else 0.03
    env = dict(os.environ, PYTHONPATH=str(ROOT), FAULT_DRIVER_STREAM="1" if streamed else "")
    with log.open("ab") as stderr:
        return subprocess.Popen([sys.executable, str(ROOT / "tests" / "fault_driver.py"),
                                 str(source), str(target), str(delay)],
                                cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=stderr)


def _assert_intact(path):
    """Every complete line parses; no case twice. (A torn tail is allowed: resume fixes it.)"""
    if not path.exists():
        return Counter(), False
    scan = scan_results(path)
    ids = Counter(line.record.case_id for line in scan.lines)
    assert not [cid for cid, n in ids.items() if n > 1], "a case was written twice"
    return ids, scan.torn_bytes > 0


@pytest.mark.parametrize("streamed", [False, True], ids=["batched", "streamed"])
def test_sigkill_at_random_points_loses_and_duplicates_nothing(tmp_path, streamed):
    """Batched, and streamed through a continuously batching engine (cases finish out of
    input order, three in flight)."""
    rows = [{"case_id": f"case-{i:03d}", "reference_report": f"reference {i}",
             "generated_report": f"generated {i}"} for i in range(CASES)]
    source = write_jsonl(tmp_path / "cases.jsonl", rows)
    target = tmp_path / "results.jsonl"

    # How long a run takes here until its last record is written, so kill times spread over
    # start-up, judging and writing (the summary written after that is not the target).
    started = time.monotonic()
    log = tmp_path / "stderr.log"
    probe_path = tmp_path / "probe.jsonl"
    probe = _start(source, probe_path, log, streamed)
    duration = None
    while duration is None:
        if probe_path.exists() and probe_path.read_bytes().count(b"\n") >= CASES:
            duration = time.monotonic() - started
        elif probe.poll() is not None:
            raise AssertionError(log.read_text())
        time.sleep(0.005)
    assert probe.wait(timeout=120) == 0, log.read_text()

    rng = random.Random(20261122)
    killed_mid_run = 0
    progress = []
    torn_tails = 0
    for _ in range(3 * KILL_POINTS):
        if killed_mid_run == KILL_POINTS:
            break
        process = _start(source, target, log, streamed)
        time.sleep(rng.uniform(0.05, 1.0) * duration)
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
            killed_mid_run += 1
        process.wait(timeout=120)
        ids, torn = _assert_intact(target)
        progress.append(sum(ids.values()))
        torn_tails += torn
        # Every case on file (the run finished, or was killed while writing its summary):
        # start over, so later kill points hit a live run.
        if progress[-1] == CASES:
            target.unlink()
            (tmp_path / "results.manifest.json").unlink(missing_ok=True)

    final = _start(source, target, log, streamed)
    assert final.wait(timeout=120) == 0, log.read_text()
    records = read_results(target)
    counts = Counter(r.case_id for r in records)
    lost = [row["case_id"] for row in rows if counts[row["case_id"]] == 0]
    duplicated = [cid for cid, n in counts.items() if n > 1]
    print(f"{killed_mid_run} SIGKILLs mid-run, {torn_tails} left a torn line; cases on file "
          f"after each: {progress}; lost {len(lost)}, duplicated {len(duplicated)}")
    assert killed_mid_run == KILL_POINTS >= 20
    assert lost == [] and duplicated == []
    assert len(records) == CASES == len(target.read_bytes().splitlines())
    assert {r.status for r in records} <= {"ok", "invalid_output"}
    assert any(0 < p < CASES for p in progress), "no kill landed mid-judging"
