"""Private, crash-safe file writes shared by results, summaries and manifests."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

PRIVATE = 0o600  # outputs can hold case text (PHI): owner read/write only


def fsync_dir(folder: Path) -> None:
    """Make a created or renamed entry in ``folder`` durable."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` (mode 0600) via a temporary file, fsync and rename: readers and
    crashes see the old content or the new, never a mix."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def write_json_atomic(path: Path, value: Any) -> None:
    """Write indented JSON with :func:`write_bytes_atomic`."""
    text = json.dumps(value, indent=2, ensure_ascii=False) + "\n"
    write_bytes_atomic(path, text.encode("utf-8"))
