"""Private, crash-safe file writes shared by results, summaries, manifests and reports.

Every file the evaluator writes goes through here: never through a symbolic link
(``O_NOFOLLOW``, and a link is refused before anything is judged), only into a regular file
of this user with one name, with mode 0600 (an existing file appended to is set to 0600);
temporary files get a random name made with ``O_EXCL`` (:func:`tempfile.mkstemp`) and
folders the evaluator creates are 0700. :func:`exclusive_lock` keeps two runs off the same
output.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

log = logging.getLogger(__name__)

PRIVATE = 0o600  # outputs can hold case text (PHI): owner read/write only
PRIVATE_DIR = 0o700


class OutputRefused(ValueError):
    """A file the evaluator was asked to write must not be written: a symbolic link, not a
    regular file, another user's, the input itself, or a file this tool did not write."""


class OutputBusy(OutputRefused):
    """Another run holds the lock of this output."""


def fsync_dir(folder: Path) -> None:
    """Make a created or renamed entry in ``folder`` durable."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_private_dirs(folder: Path) -> None:
    """Create ``folder`` and its missing parents with mode 0700 (existing folders are left
    as they are)."""
    folder = Path(folder)
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for path in reversed(missing):
        try:
            os.mkdir(path, PRIVATE_DIR)
        except FileExistsError:
            pass  # made meanwhile, or a dangling link: opening the file says which


def _refusal(path: Path, info: os.stat_result) -> str | None:
    if stat.S_ISLNK(info.st_mode):
        return (f"{path} is a symbolic link; refusing to write through it (give the real "
                "path, or another name)")
    if not stat.S_ISREG(info.st_mode):
        return f"{path} exists and is not a regular file; choose another name"
    if info.st_uid != os.geteuid():
        return f"{path} belongs to another user; refusing to write case text into it"
    if info.st_nlink > 1:
        return (f"{path} has other hard links (names of the same file elsewhere); refusing "
                "to write into it")
    return None


def refuse_unsafe_target(path: Path) -> None:
    """Raise :class:`OutputRefused` unless ``path`` is absent or a regular file of this user
    with one name (never a symbolic link)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    problem = _refusal(Path(path), info)
    if problem:
        raise OutputRefused(problem)


class NotARegularFile(ValueError):
    """A file the evaluator was asked to read is a FIFO, a device, a socket or a folder:
    reading it would hang or never end."""


def _kind(mode: int) -> str:
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
        raise NotARegularFile(f"{what} {path} is {_kind(info.st_mode)}, not a regular file")


def same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file: the same resolved path or the same inode."""
    if Path(a).resolve() == Path(b).resolve():
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _open_nofollow(path: Path, flags: int, what: str = "write") -> int:
    """``os.open`` that never follows a final symbolic link and checks what it opened."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OutputRefused(f"{path} is a symbolic link; refusing to {what} through it "
                                "(give the real path, or another name)") from None
        raise
    try:
        problem = _refusal(Path(path), os.fstat(fd))
        if problem:
            raise OutputRefused(problem)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_private_append(path: Path) -> BinaryIO:
    """A binary append handle on ``path`` (created 0600; an existing file is set to 0600)."""
    fd = _open_nofollow(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        os.fchmod(fd, PRIVATE)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "ab")


def truncate_private(path: Path, size: int) -> None:
    """Cut ``path`` to ``size`` bytes (and fsync); the same checks as for appending."""
    fd = _open_nofollow(path, os.O_WRONLY)
    try:
        os.fchmod(fd, PRIVATE)
        os.ftruncate(fd, size)
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def atomic_writer(path: Path) -> Iterator[BinaryIO]:
    """A binary handle on a temporary file that replaces ``path`` (mode 0600) when the
    block ends without an error (fsync, rename, fsync of the folder): readers and crashes
    see the old content or the new, never a mix. On an error the old file stays. The
    temporary file has a random name in the same folder, made with ``O_EXCL``; a
    ``path`` that is a symbolic link or not a regular file is refused."""
    path = Path(path)
    refuse_unsafe_target(path)
    make_private_dirs(path.parent)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    tmp = Path(name)
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        refuse_unsafe_target(path)  # planted while we wrote: still never replaced
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically (see :func:`atomic_writer`)."""
    with atomic_writer(path) as handle:
        handle.write(data)


def write_json_atomic(path: Path, value: Any) -> None:
    """Write indented JSON with :func:`write_bytes_atomic`."""
    text = json.dumps(value, indent=2, ensure_ascii=False) + "\n"
    write_bytes_atomic(path, text.encode("utf-8"))


def _same_inode(fd: int, path: Path) -> bool:
    try:
        named = os.lstat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (named.st_dev, named.st_ino)


@contextmanager
def exclusive_lock(path: Path, what: Path, *, wait: bool = False) -> Iterator[None]:
    """Hold an exclusive ``flock`` on the lock file ``path`` (created 0600, removed when the
    block ends) for the block. Held already by another process: :class:`OutputBusy` at
    once, or with ``wait`` block until it is free. ``what`` is the output named in the
    message."""
    path = Path(path)
    make_private_dirs(path.parent)
    while True:
        fd = _open_nofollow(path, os.O_RDONLY | os.O_CREAT, "lock")
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if not wait:
                    raise OutputBusy(f"{what} is being written by another run (it holds "
                                     f"{path.name}); wait for that run to end, or pass --wait "
                                     "to start when it does") from None
                log.warning("%s is being written by another run; waiting for it to end", what)
                fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            raise
        # The run before may have removed the file while we waited for it: a lock on a
        # removed file keeps no one out, so lock the file now at that name instead.
        if _same_inode(fd, path):
            break
        os.close(fd)
    try:
        yield
    finally:
        # Removed while still held, so whoever opened it meanwhile sees it gone (above).
        path.unlink(missing_ok=True)
        os.close(fd)
