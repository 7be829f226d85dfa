"""SIGTERM (what ``docker stop``, Kubernetes, systemd and batch schedulers send) stops a run
the way Ctrl-C does: raised as a :class:`KeyboardInterrupt` wherever the run is, so the
records written so far are kept, the manifest says ``interrupted`` and re-running resumes."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Terminated(KeyboardInterrupt):
    """The process got SIGTERM (exit code 143 rather than Ctrl-C's 130)."""


def _raise_terminated(signum: int, frame: object) -> None:
    # A second SIGTERM during the clean-up ends the process at once, as it would have.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    raise Terminated()


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While the block runs, SIGTERM raises :class:`Terminated`; the previous handler is
    restored after. (Only the main thread can take signals: elsewhere this does nothing.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
