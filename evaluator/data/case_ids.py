"""A set of case ids that stays small at a million cases (standard library only).

A run keeps its input's case ids while it plans (to find a repeated id) and while it judges
(the ids still to judge). As Python strings in a dict and a set that is about 150 bytes per
id, 150 MB at a million cases; here each id is its 16-byte BLAKE2b digest (plus, where
asked, an 8-byte line number) in one of :data:`BUCKETS` byte arrays chosen by the digest's
first bytes: 16 to 24 bytes per id. Two different ids share a digest with a probability of
about n²/2¹²⁹ (10⁻²⁷ at a million ids), so the set is exact in practice. The ids themselves
are never kept, so the set can be neither listed nor shown (nor leak case text when a wrong
``--id-column`` made the ids case text).
"""

from __future__ import annotations

import hashlib
from array import array

BUCKETS = 4096        # a million ids: ~250 per bucket, so a lookup scans ~4 KB
_DIGEST = 16          # bytes per id


def _digest(case_id: str) -> bytes:
    return hashlib.blake2b(case_id.encode("utf-8", "surrogatepass"),
                           digest_size=_DIGEST).digest()


def _bucket(digest: bytes) -> int:
    return int.from_bytes(digest[:2], "little") % BUCKETS


class CaseIds:
    """A set of case ids (``add``, ``in``, ``discard``, ``len``), stored as digests (see
    the module's docstring); ``lines=True`` keeps the line each id was added with."""

    def __init__(self, *, lines: bool = False) -> None:
        self._digests = [bytearray() for _ in range(BUCKETS)]
        self._lines = [array("Q") for _ in range(BUCKETS)] if lines else None
        self._count = 0

    def _find(self, case_id: str) -> tuple[bytes, int, int]:
        """``case_id``'s digest, its bucket and its position among the bucket's digests (-1:
        not there)."""
        digest = _digest(case_id)
        slot = _bucket(digest)
        digests = self._digests[slot]
        start = digests.find(digest)
        while start >= 0 and start % _DIGEST:  # a match across two digests: keep looking
            start = digests.find(digest, start + 1)
        return digest, slot, -1 if start < 0 else start // _DIGEST

    def add(self, case_id: str, line: int = 0) -> int | None:
        """Add ``case_id`` (read on ``line``); when it is there already, change nothing and
        return the line it was added with (0 without ``lines``)."""
        digest, slot, index = self._find(case_id)
        if index >= 0:
            return 0 if self._lines is None else self._lines[slot][index]
        self._digests[slot] += digest
        if self._lines is not None:
            self._lines[slot].append(line)
        self._count += 1
        return None

    def discard(self, case_id: str) -> None:
        """Remove ``case_id`` if it is there."""
        _, slot, index = self._find(case_id)
        if index >= 0:
            del self._digests[slot][index * _DIGEST:(index + 1) * _DIGEST]
            if self._lines is not None:
                del self._lines[slot][index]
            self._count -= 1

    def __contains__(self, case_id: object) -> bool:
        if not isinstance(case_id, str):
            return False
        return self._find(case_id)[2] >= 0

    def __len__(self) -> int:
        return self._count

    def copy(self) -> CaseIds:
        """An independent copy."""
        other = CaseIds()
        other._digests = [bytearray(d) for d in self._digests]
        other._lines = (None if self._lines is None
                        else [array("Q", lines) for lines in self._lines])
        other._count = self._count
        return other
