"""A server judge under the faults a site meets (issue 49, item 5): ``evaluator run`` killed
with SIGKILL mid-run at several points and resumed, and the judge server restarted mid-run
(a new process on the same port): every case ends up in the results exactly once, judged
ok, and every complete line parses. The server is the fake of tests/server_fake.py, each
request slowed so that a kill lands with requests in flight."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import yaml

from evaluator.data.results import scan_results
from tests.conftest import ROOT, write_jsonl
from tests.server_fake import FakeJudgeServer

CASES = 40


def _models(folder: Path, url: str) -> Path:
    target = folder / "models.yaml"
    target.write_text(yaml.safe_dump({"default": "site", "judges": {"site": {
        "backend": "server", "base_url": url, "served_model": "judge", "in_flight": 3,
        "retries": 1, "timeout_s": 5, "connect_timeout_s": 1}}}))
    return target


def _run(cases: Path, out: Path, models: Path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, "-m", "evaluator", "run", "--rubric",
                             "trial_eligibility", "--input", str(cases), "--output", str(out),
                             "--models-file", str(models), "--no-progress"],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def _ids(out: Path) -> Counter:
    """Each complete line's case id (a torn last line is allowed: resume cuts it off)."""
    if not out.exists():
        return Counter()
    ids = Counter(line.record.case_id for line in scan_results(out).lines)
    assert max(ids.values(), default=1) == 1, "a case was written twice"
    return ids


def _wait_for(out: Path, lines: int, process: subprocess.Popen, limit: float = 60) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and process.poll() is None:
        if sum(_ids(out).values()) >= lines:
            return
        time.sleep(0.02)


def _slow(server: FakeJudgeServer) -> None:
    server.slow_s = 0.08
    server.enqueue(*["slow"] * 10_000)


def test_kill_9_and_a_server_restart_lose_and_duplicate_nothing(trial_rows, tmp_path):
    rows = [{**row, "case_id": f"case-{i:03d}"} for i, row in
            enumerate((trial_rows * 4)[:CASES])]
    cases = write_jsonl(tmp_path / "cases.jsonl", rows)
    out = tmp_path / "results.jsonl"
    with FakeJudgeServer() as server:
        _slow(server)
        models = _models(tmp_path, server.url)
        for lines in (3, 11, 19):  # SIGKILL with requests in flight, then resume
            process = _run(cases, out, models)
            _wait_for(out, lines, process)
            assert process.poll() is None, "the run ended before it could be killed"
            process.send_signal(signal.SIGKILL)
            process.wait()
            assert sum(_ids(out).values()) < CASES
        port = server.port
        process = _run(cases, out, models)
        _wait_for(out, 27, process)
        # The server goes away mid-run: every request from now on has its connection
        # dropped (kept-alive connections too), then the process stops.
        server.down_after = server.answered
        # The run goes on, its cases failing as backend_error.
        assert process.wait(timeout=120) in (0, 1)
    failed = sum(1 for line in scan_results(out).lines
                 if line.record.status == "backend_error")
    assert failed > 0  # the server did go away with cases left
    with FakeJudgeServer(port=port) as restarted:  # the same address, a new server
        _slow(restarted)
        done = _run(cases, out, models)
        assert done.wait(timeout=120) == 0
        assert len(restarted.bodies) == failed  # only the failed cases, each sent once
    records = [line.record for line in scan_results(out).lines]
    assert Counter(r.case_id for r in records) == Counter(r["case_id"] for r in rows)
    assert all(r.status == "ok" for r in records)
