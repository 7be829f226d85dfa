"""A run stopped from outside: SIGTERM (``docker stop``, schedulers) behaves like Ctrl-C,
and a disk that fills up mid-run stops it cleanly. Either way the records written are
intact, the manifest says what happened, and re-running the command completes the run with
every case exactly once."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from evaluator.cli.exit_codes import EXIT_OK, EXIT_SOME_FAILED, EXIT_TERMINATED
from evaluator.cli.main import cli
from evaluator.data.results import ResultWriter, read_results, scan_results
from tests.conftest import ROOT, write_jsonl

MARKER = "PHI-MARKER-7731"


def _setup(tmp_path: Path, n: int) -> tuple[Path, Path, Path]:
    rows = [{"case_id": f"c{i:03d}", "Resp": f"{MARKER} answer {i}", "Truth": f"truth {i}"}
            for i in range(n)]
    source = write_jsonl(tmp_path / "cases.jsonl", rows)
    models = tmp_path / "models.yaml"
    models.write_text(yaml.safe_dump({"default": "fake", "judges": {"fake": {"backend": "fake"}}}))
    return source, models, tmp_path / "out" / "results.jsonl"


def _args(source: Path, models: Path, output: Path, *extra: str) -> list[str]:
    return ["run", "-r", "drug_monograph_similarity", "-i", str(source), "-o", str(output),
            "--models-file", str(models), "--no-progress", *extra]


def _manifest_runs(output: Path) -> list[dict]:
    return json.loads(output.with_name("results.manifest.json").read_text())["runs"]


def _assert_once_each(output: Path, n: int) -> None:
    """Every line a valid record (a damaged line raises), none torn, every case once."""
    scan = scan_results(output)
    assert scan.torn_bytes == 0
    counts = Counter(line.record.case_id for line in scan.lines)
    assert len(counts) == n and set(counts.values()) == {1}, counts.most_common(3)


def _start_slow(args: list[str], delay: float) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, str(ROOT / "tests" / "slow_cli.py"), str(delay),
                             *args], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def test_sigterm_mid_run_keeps_records_and_resume_completes(tmp_path):
    n = 60
    source, models, output = _setup(tmp_path, n)
    args = _args(source, models, output, "--batch-size", "2")
    process = _start_slow(args, delay=0.15)
    deadline = time.monotonic() + 120
    while _lines(output) < 6:  # judging is under way
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the run never started judging"
        time.sleep(0.02)
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=60)

    assert process.returncode == EXIT_TERMINATED == 143, stderr
    assert "terminated (SIGTERM)" in stderr and "Re-run the same command" in stderr
    assert "Traceback" not in stderr and MARKER not in stderr
    assert stdout == ""  # no summary: the run did not finish
    written = read_results(output)
    assert 6 <= len(written) < n
    assert len({r.case_id for r in written}) == len(written)
    runs = _manifest_runs(output)
    assert runs[-1]["status"] == "interrupted" and runs[-1]["ended"]
    assert not output.with_name("results.summary.json").exists()

    resumed = _start_slow(args, delay=0)
    _, stderr = resumed.communicate(timeout=120)
    assert resumed.returncode == EXIT_OK, stderr
    assert f"{len(written)} case(s) already done" in stderr
    _assert_once_each(output, n)
    assert [run["status"] for run in _manifest_runs(output)] == ["interrupted", "finished"]


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, EXIT_TERMINATED),
                                               (signal.SIGHUP, 129)])
def test_sigterm_in_process_is_an_interrupt_and_the_handler_is_restored(tmp_path, monkeypatch,
                                                                       signum, code):
    # SIGHUP (the ssh session ended) is handled as SIGTERM is, with exit code 129.
    from evaluator.judges.backends.fake import FakeBackend

    source, models, output = _setup(tmp_path, 10)
    calls = []
    fast_generate = FakeBackend.generate

    def generate(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            os.kill(os.getpid(), signum)  # what `docker stop` (or a lost ssh) does
            time.sleep(5)  # the handler interrupts this sleep
        return fast_generate(self, *args, **kwargs)

    monkeypatch.setattr(FakeBackend, "generate", generate)
    before = signal.getsignal(signum)
    result = CliRunner().invoke(cli, _args(source, models, output, "--batch-size", "2"),
                                catch_exceptions=False)
    assert result.exit_code == code
    assert f"terminated ({signal.Signals(signum).name})" in result.stderr
    assert f"finished results are in {output}" in result.stderr
    assert len(read_results(output)) == 4  # two batches of two were written
    assert _manifest_runs(output)[-1]["status"] == "interrupted"
    assert signal.getsignal(signum) == before
    import fcntl

    fd = os.open(output.with_name("results.evaluator-lock"), os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released: raises if still held
    finally:
        os.close(fd)


def test_an_interrupt_before_any_result_says_nothing_was_written(tmp_path, monkeypatch):
    from evaluator.judges.backends.fake import FakeBackend

    source, models, output = _setup(tmp_path, 4)

    def generate(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(FakeBackend, "generate", generate)
    result = CliRunner().invoke(cli, _args(source, models, output), catch_exceptions=False)
    assert result.exit_code == 130
    assert "no results were written yet" in result.stderr
    assert "finished results are in" not in result.stderr


def test_ray_init_does_not_take_sigterm_from_the_cli(monkeypatch):
    """ray.init installs its own SIGTERM handler (exit at once, status "failed"); with
    --engine ray the CLI's must stay, so SIGTERM still stops the run like Ctrl-C."""
    pytest.importorskip("ray.data", reason="needs the ray extra: pip install 'evaluator[ray]'")
    from evaluator.cli.signals import sigterm_as_interrupt
    from evaluator.run import ray_engine
    from evaluator.run.engines import RayOptions

    def init(**kwargs):  # what ray.init does to the handler (ray/_private/worker.py)
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(signum))

    monkeypatch.setattr(ray_engine.ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray_engine.ray, "init", init)
    monkeypatch.setattr(ray_engine.ray, "shutdown", lambda: None)
    with sigterm_as_interrupt():
        ours = signal.getsignal(signal.SIGTERM)
        with ray_engine._connected(RayOptions()):
            assert signal.getsignal(signal.SIGTERM) is ours


# --- a full disk --------------------------------------------------------------------------

def test_disk_full_mid_run_fails_cleanly_and_resume_completes(tmp_path, monkeypatch):
    """The writer fails with ENOSPC after four records (in-process; the real thing below)."""
    n = 10
    source, models, output = _setup(tmp_path, n)
    written = []
    real_write = ResultWriter.write

    def write(self, record):
        if len(written) == 4:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        written.append(record.case_id)
        return real_write(self, record)

    monkeypatch.setattr(ResultWriter, "write", write)
    runner = CliRunner()
    full = runner.invoke(cli, _args(source, models, output, "--batch-size", "2"),
                         catch_exceptions=False)
    assert full.exit_code == EXIT_SOME_FAILED
    last = full.stderr.strip().splitlines()[-1]
    assert last.startswith("error: cannot write") and "No space left on device" in last
    assert "re-run the same command to resume" in last
    assert "Traceback" not in full.stderr and MARKER not in full.stderr
    assert len(read_results(output)) == 4
    assert _manifest_runs(output)[-1]["status"] == "failed"

    monkeypatch.setattr(ResultWriter, "write", real_write)  # space was freed
    resumed = runner.invoke(cli, _args(source, models, output), catch_exceptions=False)
    assert resumed.exit_code == EXIT_OK, resumed.output
    _assert_once_each(output, n)
    assert [run["status"] for run in _manifest_runs(output)] == ["failed", "finished"]


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 64 KiB tmpfs (root only), and a function that grows it ("free some space")."""
    folder = tmp_path / "small"
    folder.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs to fill needs root")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")

    def grow():
        subprocess.run(["mount", "-o", "remount,size=4m", str(folder)], check=True)

    yield folder, grow
    subprocess.run(["umount", str(folder)], check=True)


def test_a_really_full_disk(tmp_path, small_tmpfs):
    folder, grow = small_tmpfs
    n = 400  # some 250 KiB of records: far more than the 64 KiB the disk has
    source, models, _ = _setup(tmp_path, n)
    output = folder / "results.jsonl"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    command = [sys.executable, "-m", "evaluator", *_args(source, models, output)]
    full = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert full.returncode == EXIT_SOME_FAILED, full.stderr
    last = full.stderr.strip().splitlines()[-1]
    assert last.startswith("error: cannot write") and "No space left on device" in last
    assert "Traceback" not in full.stderr and MARKER not in full.stderr
    # The atomic rewrite had no room: the manifest was updated in its spare space.
    assert _manifest_runs(output)[-1]["status"] == "failed"
    kept = len(read_results(output))  # a torn last line, if any, is skipped
    assert 0 < kept < n

    grow()
    resumed = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                             timeout=300)
    assert resumed.returncode == EXIT_OK, resumed.stderr
    _assert_once_each(output, n)
    assert [run["status"] for run in _manifest_runs(output)] == ["failed", "finished"]
