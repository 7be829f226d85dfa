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
import hashlib
import json
import logging
import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from evaluator.common.errors import UserError

log = logging.getLogger(__name__)

PRIVATE = 0o600  # outputs can hold case text (PHI): owner read/write only
PRIVATE_DIR = 0o700


class OutputRefused(UserError, ValueError):
    """A file the evaluator was asked to write must not be written: a symbolic link, not a
    regular file, another user's, the input itself, or a file this tool did not write."""


class OutputBusy(OutputRefused):
    """Another run holds the lock of this output."""


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def show_path(path: Path | str) -> str:
    """A path for a one-line message: as it is, or quoted with escapes (``repr``) when it
    holds control characters (a newline, a terminal escape) or bytes that are not UTF-8."""
    text = os.fspath(path)
    if any(ord(ch) < 32 or ord(ch) == 127 or 0xDC80 <= ord(ch) <= 0xDCFF for ch in text):
        return ascii(text)
    return text


def check_path_name(path: Path | str, what: str = "--output") -> None:
    """Refuse (:class:`OutputRefused`) a file name that cannot be a results file or be
    recorded: empty, naming a folder (``dir/``, ``.``, an existing folder), or not valid
    UTF-8 (a manifest records every file name as JSON text)."""
    text = os.fspath(path)
    if not text:
        raise OutputRefused(f"{what} is empty; name a .jsonl file")
    try:
        folder = os.path.isdir(text)
    except (OSError, ValueError):  # a name too long, a NUL byte: said by later checks
        folder = False
    if folder or text.endswith("/") or Path(text).name in ("", ".", ".."):
        raise OutputRefused(f"{what} {show_path(text)} names a folder; name a .jsonl file "
                            "(for example in that folder)")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise OutputRefused(f"{what} {show_path(text)} is not a valid UTF-8 file name; rename "
                            "the file (file names are recorded in the manifest)") from None


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
        return (f"{show_path(path)} is a symbolic link; refusing to write through it (give "
                "the real "
                "path, or another name)")
    if not stat.S_ISREG(info.st_mode):
        return f"{show_path(path)} exists and is not a regular file; choose another name"
    if info.st_uid != os.geteuid():
        return f"{show_path(path)} belongs to another user; refusing to write case text into it"
    if info.st_nlink > 1:
        return (f"{show_path(path)} has other hard links (names of the same file elsewhere); "
                "refusing "
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


def same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file: the same resolved path or the same inode."""
    try:  # a relative path under a deleted working folder cannot be resolved: not the same
        return Path(a).resolve() == Path(b).resolve() or os.path.samefile(a, b)
    except OSError:
        return False


def _open_nofollow(path: Path, flags: int, what: str = "write") -> int:
    """``os.open`` that never follows a final symbolic link and checks what it opened."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OutputRefused(f"{show_path(path)} is a symbolic link; refusing to {what} "
                                "through it "
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


def open_private_append(path: Path, *, readable: bool = False) -> BinaryIO:
    """A binary append handle on ``path`` (created 0600; an existing file is set to 0600);
    ``readable``: its descriptor also reads (``os.pread``)."""
    fd = _open_nofollow(path, (os.O_RDWR if readable else os.O_WRONLY) | os.O_CREAT
                        | os.O_APPEND)
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


LOCK_SUFFIX = ".evaluator-lock"


def lock_path_for(output_path: Path) -> Path:
    """``results.jsonl`` -> ``results.evaluator-lock`` beside it: held by the run writing
    the results file and its companions (named by the same stem), or by ``review`` writing
    its worksheet (``review.csv`` -> ``review.evaluator-lock``). The ending is one no other
    tool uses (``poetry.lock`` is someone's own file)."""
    output_path = Path(output_path)
    return output_path.with_name(output_path.stem + LOCK_SUFFIX)


LOCK_HEADER = ("evaluator run lock for {name}: held while a run writes; safe to leave; do not "
               "delete while a run is active\n")
_LOCK_PREFIX = b"evaluator run lock for "


def lock_header(results_name: str) -> bytes:
    """The fixed text of the lock file of the results file named ``results_name``."""
    return os.fsencode(LOCK_HEADER.format(name=results_name))


def refuse_foreign_lock(path: Path) -> None:
    """Raise :class:`OutputRefused` when ``path`` exists and is not a lock file this tool
    wrote (empty, or starting with its header): a user's own file of that name is never
    used or changed."""
    try:
        # Never follows a link, never blocks on a FIFO: those are refused when opened to lock.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return
        head = os.read(fd, len(_LOCK_PREFIX))
    finally:
        os.close(fd)
    if head and head != _LOCK_PREFIX:
        raise OutputRefused(f"{show_path(path)} exists and is not a lock file of this tool; "
                            "refusing to use or change it (move it away, or choose another "
                            "--output stem)")


def _claim_lock_file(fd: int, path: Path, what: Path) -> None:
    """With the lock held: make sure the file holds this tool's header for ``what`` (a file
    with other content is refused, untouched)."""
    os.lseek(fd, 0, os.SEEK_SET)
    content = os.read(fd, 4096)
    if content and not content.startswith(_LOCK_PREFIX):
        raise OutputRefused(f"{show_path(path)} exists and is not a lock file of this tool; "
                            "refusing to use or change it (move it away, or choose another "
                            "--output stem)")
    header = lock_header(Path(what).name)
    if content != header:  # new, or written for a results file since renamed
        os.ftruncate(fd, 0)
        os.pwrite(fd, header, 0)
        os.fsync(fd)


def lock_held(path: Path) -> bool:
    """Whether a process holds the lock file ``path`` (:func:`exclusive_lock`) now: False
    when there is none, or it is not a regular file. Never creates it; the lock is taken
    (shared, not waiting) for the moment it takes to see, and given back."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        return False  # closing the file gives the lock back
    finally:
        os.close(fd)


@contextmanager
def exclusive_lock(path: Path, what: Path, *, wait: bool = False, writer: str = "run",
                   wait_option: str | None = "--wait") -> Iterator[None]:
    """Hold an exclusive ``flock`` on the lock file ``path`` (created 0600 with a fixed
    header naming ``what``) for the block. The file is never removed: one that persists is
    never stale, so no one has a reason to delete it (deleting it while a run holds it
    would let a second run in beside the first). A file of that name with other content is
    refused (:class:`OutputRefused`), untouched. Held already by another process:
    :class:`OutputBusy` at once, or with ``wait`` block until it is free. ``what`` is the
    output named in the message, ``writer`` what holds such a lock (``run``) and
    ``wait_option`` the option that waits for it (None: there is none)."""
    path = Path(path)
    refuse_foreign_lock(path)
    make_private_dirs(path.parent)
    while True:
        fd = _open_nofollow(path, os.O_RDWR | os.O_CREAT, "lock")
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if not wait:
                    hint = (f", or pass {wait_option} to start when it does" if wait_option
                            else "")
                    raise OutputBusy(f"{show_path(what)} is being written by another "
                                     f"{writer} (it holds {show_path(path.name)}); wait for "
                                     f"that {writer} to end{hint}") from None
                log.warning("%s is being written by another %s; waiting for it to end",
                            show_path(what), writer)
                fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            raise
        # Removed (by hand) while we waited for it: a lock on a removed file keeps no one
        # out, so lock the file now at that name instead.
        if _same_inode(fd, path):
            break
        os.close(fd)
    try:
        _claim_lock_file(fd, path, what)
        yield
    finally:
        if not _same_inode(fd, path):
            log.warning("%s was removed or replaced while this run held it: another run may "
                        "have written to %s meanwhile; leave lock files in place",
                        show_path(path), show_path(what))
        os.close(fd)
