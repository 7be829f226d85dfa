"""The ``evaluator`` command's exit codes (documented in docs/running.md). A user error's
code is its class's ``exit_code`` (:class:`~evaluator.common.errors.UserError`), read here."""

from __future__ import annotations

from evaluator.cli.signals import Terminated
from evaluator.common.errors import UserError
from evaluator.run.judging import InputRejected

EXIT_OK = 0
EXIT_SOME_FAILED = 1      # some cases have no verdict, a Ray run stopped, or the disk filled
                          # up mid-run; re-run to resume
EXIT_USAGE = UserError.exit_code  # a user error: one line on stderr, nothing judged
EXIT_INPUT_REJECTED = InputRejected.exit_code  # --strict and a case could not be judged
EXIT_INTERNAL = 70        # a bug (sysexits' EX_SOFTWARE): -vv shows the traceback
EXIT_INTERRUPTED = 130    # Ctrl-C; re-run the same command to resume
EXIT_TERMINATED = 143     # SIGTERM (128 + 15), handled like Ctrl-C
EXIT_HANGUP = 129         # SIGHUP (128 + 1: the ssh session ended), handled like SIGTERM
EXIT_BROKEN_PIPE = 141    # stdout closed early (`| head`): 128 + SIGPIPE, as a shell tool


def interrupted_exit_code(exc: KeyboardInterrupt) -> int:
    """130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP (see :mod:`evaluator.cli.signals`)."""
    return 128 + exc.signum if isinstance(exc, Terminated) else EXIT_INTERRUPTED
