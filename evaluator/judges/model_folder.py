"""A model folder built under a temporary sibling name, its completion marker written last,
then renamed into place (the embedded judge, the tiny random model): a folder without the
marker is never used, and of two processes building it at once the later keeps the other's.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import uuid
from pathlib import Path

log = logging.getLogger(__name__)

#: Written last into a finished folder; its absence means "not ready" (e.g. a crash mid-way).
COMPLETE_MARKER = ".complete"


def is_complete(folder: Path) -> bool:
    """True when ``folder`` holds a finished build (its completion marker exists)."""
    return (Path(folder) / COMPLETE_MARKER).is_file()


def write_marker(folder: Path, info: dict) -> None:
    """Write the completion marker (``info`` as JSON), durably, as the very last file in
    ``folder``: every file and the folder are flushed to disk first."""
    for path in folder.rglob("*"):
        if path.is_file():
            _fsync(path)
    _fsync(folder)
    with open(folder / COMPLETE_MARKER, "w", encoding="utf-8") as fh:
        json.dump(info, fh, indent=2, sort_keys=True)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())


def move_into_place(staging: Path, target: Path, *, force: bool) -> None:
    """Rename the finished ``staging`` folder to ``target``, replacing an incomplete folder
    there (any, with ``force``); when another process finished ``target`` meanwhile, its
    folder is kept and ``staging`` removed."""
    if target.exists() and (force or not is_complete(target)):
        # Moved aside first, so that the rename below is still a single atomic step.
        old = target.with_name(f".{target.name}.old-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        try:
            os.rename(target, old)
        except FileNotFoundError:
            pass  # someone else moved it already
        else:
            shutil.rmtree(old, ignore_errors=True)
    try:
        os.rename(staging, target)
    except OSError:
        # The target appeared meanwhile (ENOTEMPTY/EEXIST): another process won the race.
        if not is_complete(target):
            raise
        log.info("another process prepared %s first; keeping theirs", target)
        shutil.rmtree(staging, ignore_errors=True)
    _fsync(target.parent)


def _fsync(path: Path) -> None:
    """Flush one file or directory entry (best effort; not supported on every platform)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
