"""Private, crash-safe file writes shared by results, summaries and manifests."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

PRIVATE = 0o600  # outputs can hold case text (PHI): owner read/write only


def fsync_dir(folder: Path) -> None:
    """Make a created or renamed entry in ``folder`` durable."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def atomic_writer(path: Path) -> Iterator[BinaryIO]:
    """A binary handle on a temporary file that replaces ``path`` (mode 0600) when the
    block ends without an error (fsync, rename, fsync of the folder): readers and crashes
    see the old content or the new, never a mix. On an error the old file stays."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE)
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)
    fsync_dir(path.parent)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically (see :func:`atomic_writer`)."""
    with atomic_writer(path) as handle:
        handle.write(data)


def write_json_atomic(path: Path, value: Any) -> None:
    """Write indented JSON with :func:`write_bytes_atomic`."""
    text = json.dumps(value, indent=2, ensure_ascii=False) + "\n"
    write_bytes_atomic(path, text.encode("utf-8"))
