"""SIGTERM (what ``docker stop``, Kubernetes, systemd and batch schedulers send) and SIGHUP
(the ssh session or terminal went away) stop a run the way Ctrl-C does: raised as a
:class:`KeyboardInterrupt` wherever the run is, so the records written so far are kept, the
manifest says ``interrupted`` and re-running resumes."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

# The signals that stop a run like Ctrl-C.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class Terminated(KeyboardInterrupt):
    """The process got SIGTERM or SIGHUP (exit code 128 + the signal's number: 143, 129,
    rather than Ctrl-C's 130)."""

    def __init__(self, signum: int = signal.SIGTERM):
        super().__init__()
        self.signum = int(signum)

    @property
    def signal_name(self) -> str:
        """``SIGTERM`` or ``SIGHUP``."""
        return signal.Signals(self.signum).name


def _raise_terminated(signum: int, frame: object) -> None:
    # A second signal during the clean-up ends the process at once, as it would have.
    for stop in STOP_SIGNALS:
        signal.signal(stop, signal.SIG_DFL)
    raise Terminated(signum)


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While the block runs, SIGTERM and SIGHUP raise :class:`Terminated`; the previous
    handlers are restored after. (Only the main thread can take signals: elsewhere this does
    nothing.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {stop: signal.signal(stop, _raise_terminated) for stop in STOP_SIGNALS}
    try:
        yield
    finally:
        for stop, handler in previous.items():
            signal.signal(stop, handler)
