"""Judges for the Ray engine tests, importable in Ray's worker processes (PYTHONPATH is the
checkout). Each leaves marker files in a folder so a test can see which replica process
loaded a judge (``init-<pid>``), which one is judging right now (``busy-<pid>``) and every
batch it started (``batch-<pid>-<n>-<cases>``). Markers hold pids and counts, no case text.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from evaluator.judges.backends import load_backend
from evaluator.judges.backends.fake import FakeBackend


class _Markers:
    def __init__(self, folder: str):
        self.folder = Path(folder)
        self.pid = os.getpid()
        self.batches = 0
        (self.folder / f"init-{self.pid}").touch()

    def start(self, cases: int) -> None:
        self.batches += 1
        (self.folder / f"batch-{self.pid}-{self.batches}-{cases}").touch()
        (self.folder / f"busy-{self.pid}").touch()

    def stop(self) -> None:
        (self.folder / f"busy-{self.pid}").unlink()


class SlowFakeJudge(FakeBackend):
    """Minimal valid verdicts after ``delay`` seconds per batch."""

    def __init__(self, folder: str, delay: float):
        super().__init__(record_calls=False)
        self.markers = _Markers(folder)
        self.delay = delay

    def generate(self, chats, json_schema, sampling, chat_template_kwargs=None):
        self.markers.start(len(chats))
        time.sleep(self.delay)
        self.markers.stop()
        return super().generate(chats, json_schema, sampling, chat_template_kwargs)


class MarkedJudge:
    """The judge that ``load_backend`` builds for the spec, with markers around it. Its
    first batch waits (up to a minute) until ``replicas`` judges are loaded, so that on a
    busy machine one replica cannot take every batch before the other is up (Ray Data
    gives a replica at most two batches at a time)."""

    def __init__(self, folder: str, replicas: int, judge_name, spec):
        self.replicas = replicas
        self.inner = load_backend(judge_name, spec)
        self.name = self.inner.name
        self.max_model_len = self.inner.max_model_len
        self.markers = _Markers(folder)  # once loaded

    def generate(self, chats, json_schema, sampling, chat_template_kwargs=None):
        deadline = time.monotonic() + 60
        while (self.markers.batches == 0 and time.monotonic() < deadline
               and len(list(self.markers.folder.glob("init-*"))) < self.replicas):
            time.sleep(0.05)
        self.markers.start(len(chats))
        try:
            return self.inner.generate(chats, json_schema, sampling, chat_template_kwargs)
        finally:
            self.markers.stop()

    def close(self) -> None:
        self.inner.close()


def slow_fake(folder: str, delay: float, judge_name, spec) -> SlowFakeJudge:
    """A ``RayOptions.backend_factory`` (bind ``folder`` and ``delay`` with partial)."""
    return SlowFakeJudge(folder, delay)


def marked(folder: str, replicas: int, judge_name, spec) -> MarkedJudge:
    """A ``RayOptions.backend_factory`` wrapping the real backend (bind ``folder`` and
    ``replicas``)."""
    return MarkedJudge(folder, replicas, judge_name, spec)
