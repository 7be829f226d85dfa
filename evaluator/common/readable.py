"""Reading only regular files: a FIFO, a device, a socket or a folder named where a file is
read (a rubric, models.yaml, a results file, labels) is refused before it is opened, since
reading it would hang or never end. Standard library only."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from evaluator.common.errors import UserError


class NotARegularFile(UserError, ValueError):
    """A file the evaluator was asked to read is a FIFO, a device, a socket or a folder:
    reading it would hang or never end."""


def file_kind(mode: int) -> str:
    """What a file that is not a regular one is, for a message: ``a FIFO``, ``a device``..."""
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def check_regular_file(path: Path, what: str) -> None:
    """Raise :class:`NotARegularFile` (one line: ``<what> <path> is a FIFO ..., not a
    regular file``) unless ``path`` is a regular file, following links. A missing file is
    left to the caller's own message (:class:`FileNotFoundError`)."""
    info = os.stat(path)
    if not stat.S_ISREG(info.st_mode):
        raise NotARegularFile(f"{what} {path} is {file_kind(info.st_mode)}, not a regular file")
