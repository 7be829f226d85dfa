"""Which replica of a server judge a request goes to, and what each replica did: pure (no
socket; the clock is a parameter), tested without a server.

A request goes to the least busy replica it has not tried yet. When it fails there for a
reason another replica may not share (the connection, a timeout, or 429/5xx with the
retries spent: :meth:`evaluator.judges.backends.server_backend.ServerBackend.request_one`
decides), it is passed to the next one, each replica at most once per request. A replica
that failed a request is in cool-down for :data:`COOL_DOWN_S`: it is taken last, after every
replica that is not, so requests stop paying its retries while it is down; an answer from
it (taken last, or after the cool-down) ends the cool-down. Nothing here opens a
connection: every replica is an address the PHI guard already took.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from evaluator.common.record import Record

#: How long a replica that failed a request is taken last, in seconds.
COOL_DOWN_S = 30.0


class ReplicaRequests(Record):
    """What one replica did with this process's requests: ``answered`` (requests it ended
    with an answer of its own: a verdict, or an error another replica would share, such as
    a 400), ``took_over`` (of those, requests another replica had failed first) and
    ``failed`` (requests that failed on it and were passed to the next replica or, with none
    left, recorded as ``backend_error``)."""

    address: str
    answered: int = 0
    took_over: int = 0
    failed: int = 0


@dataclass
class _State:
    open: int = 0
    sent: int = 0
    cool_until: float = float("-inf")
    answered: int = 0
    took_over: int = 0
    failed: int = 0


class ReplicaPool:
    """The replicas, by index (``addresses``: their base URLs, in the order of models.yaml),
    shared by the request threads."""

    def __init__(self, addresses: Sequence[str], *, cool_down_s: float = COOL_DOWN_S,
                 clock: Callable[[], float] = time.monotonic):
        self.addresses = list(addresses)
        self.cool_down_s = cool_down_s
        self._clock = clock
        self._states = [_State() for _ in self.addresses]
        self._lock = threading.Lock()

    def take(self, tried: Collection[int] = ()) -> int | None:
        """The index of the replica a request goes to next (counted open until
        :meth:`release`): of those not in ``tried``, one not in cool-down before one in it,
        then the fewest open, then the fewest sent. None when every replica was tried."""
        with self._lock:
            now = self._clock()
            left = [i for i in range(len(self.addresses)) if i not in tried]
            if not left:
                return None
            index = min(left, key=lambda i: (self._states[i].cool_until > now,
                                             self._states[i].open, self._states[i].sent))
            state = self._states[index]
            state.open += 1
            state.sent += 1
            return index

    def release(self, index: int) -> None:
        """The request sent to replica ``index`` ended there."""
        with self._lock:
            self._states[index].open -= 1

    def answered(self, index: int, *, took_over: bool) -> None:
        """Replica ``index`` answered a request (``took_over``: one another replica had
        failed): its cool-down, if any, ends."""
        with self._lock:
            state = self._states[index]
            state.answered += 1
            state.took_over += took_over
            state.cool_until = float("-inf")

    def failed(self, index: int) -> bool:
        """A request failed on replica ``index``: it is taken last for the next
        ``cool_down_s``. True when this starts its cool-down (it was not in one)."""
        with self._lock:
            state = self._states[index]
            now = self._clock()
            starts = state.cool_until <= now
            state.failed += 1
            state.cool_until = now + self.cool_down_s
            return starts

    def requests(self) -> list[ReplicaRequests]:
        """What each replica did so far, in the order of the addresses."""
        with self._lock:
            return [ReplicaRequests(address=address, answered=s.answered,
                                    took_over=s.took_over, failed=s.failed)
                    for address, s in zip(self.addresses, self._states, strict=True)]
