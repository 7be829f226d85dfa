"""The real ``evaluator`` command with the fake judge slowed down, for tests that stop a
run from outside (SIGTERM) while it is judging.

Usage: python tests/slow_cli.py DELAY_SECONDS [evaluator arguments...]
Each generate call (one batch) sleeps DELAY_SECONDS first.
"""

from __future__ import annotations

import sys
import time

from evaluator.cli.main import cli
from evaluator.judges.backends.fake import FakeBackend

if __name__ == "__main__":
    delay = float(sys.argv[1])
    fast_generate = FakeBackend.generate

    def slow_generate(self, *args, **kwargs):
        time.sleep(delay)
        return fast_generate(self, *args, **kwargs)

    FakeBackend.generate = slow_generate  # type: ignore[method-assign]
    cli(sys.argv[2:], prog_name="evaluator")
