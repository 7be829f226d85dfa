"""A run with a slow scripted judge, for the fault-injection tests to SIGKILL at random.

Usage: python tests/fault_driver.py INPUT OUTPUT DELAY_SECONDS [JUDGE]
JUDGE: a judge of models.yaml whose settings the run takes (e.g. ``fake``: then the run is
the same as ``evaluator run -r pathology_report -m fake``, only slower); default: a fake
judge of its own. With FAULT_DRIVER_STREAM=1 the judge streams (continuous batching, cases
finishing out of order) and sleeps per request instead of per batch.
Some verdicts are large invalid outputs (kept in full as ``raw_output``), so kills also land
while big records are being written.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from evaluator.judges.backends.fake import FakeBackend, StreamingFakeBackend
from evaluator.judges.models_file import JudgeSpec, resolve_judge
from evaluator.run.runner import evaluate
from evaluator.run.task import Judge, RunOptions, Task


class SlowJudge(FakeBackend):
    """Valid minimal verdicts, every fifth one a 64 KiB invalid output; sleeps per batch."""

    def __init__(self, delay: float):
        super().__init__()
        self.delay = delay
        self.count = 0

    def generate(self, chats, json_schema, sampling, chat_template_kwargs=None):
        time.sleep(self.delay)
        for _ in chats:
            self.count += 1
            if self.count % 5 == 0:
                self.enqueue(["{" + "x" * 65536])
        return super().generate(chats, json_schema, sampling, chat_template_kwargs)


class SlowStreamingJudge(SlowJudge, StreamingFakeBackend):
    """The same verdicts, streamed: each request sleeps; the 64 KiB ones finish last."""


if __name__ == "__main__":
    source, target, delay = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3])
    judge, spec = (resolve_judge(sys.argv[4], None) if len(sys.argv) > 4
                   else ("slow-fake", JudgeSpec(backend="fake")))
    evaluate(Task("pathology_report", source),
             Judge(judge, spec=spec,
                   backend=(SlowStreamingJudge if os.environ.get("FAULT_DRIVER_STREAM")
                            else SlowJudge)(delay)),
             RunOptions(target, batch_size=3))
