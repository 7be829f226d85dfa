"""The result record (one JSON line per case), the writer that appends them, and the
reader that checks a results file line by line (and finds a line torn by a crash)."""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from evaluator.files import PRIVATE, fsync_dir, write_bytes_atomic

log = logging.getLogger(__name__)

RECORD_VERSION = 1

Status = Literal[
    "ok",              # a verdict that parsed and passed the output model
    "invalid_output",  # the judge's text did not validate (should not happen when constrained)
    "truncated",       # the judge stopped on the token limit before closing the verdict
    "too_long",        # prompt + longest valid verdict exceed the judge's context
    "input_error",     # the case itself is unusable (missing/empty field, bad row)
    "backend_error",   # the backend raised while judging this case's batch
]


class PanelVerdict(BaseModel):
    """One of several verdicts for a case: a self-consistency sample (``sample``) or a jury
    member's (``judge``, with its own results file's ``settings_hash``)."""

    model_config = ConfigDict(extra="forbid")

    sample: int | None = None
    judge: str | None = None
    status: Status
    scores: dict[str, Any] | None = None
    aggregates: dict[str, float | None] | None = None
    reason: str | None = None
    finish_reason: str | None = None
    completion_tokens: int | None = None
    settings_hash: str | None = None
    raw_output: str | None = None  # as on ResultRecord: results file only, never logs


class ResultRecord(BaseModel):
    """One case's outcome. A case that could not be judged has a status and a reason,
    never scores."""

    model_config = ConfigDict(extra="forbid")

    record_version: Literal[1] = RECORD_VERSION
    case_id: str
    rubric: str
    judge: str
    status: Status
    scores: dict[str, Any] | None = None
    aggregates: dict[str, float | None] | None = None
    reason: str | None = None
    input_file: str | None = None
    input_line: int | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None  # prompt tokens served from the prefix cache (vLLM)
    max_new_tokens: int | None = None
    batch_size: int | None = None
    batch_seconds: float | None = None
    # Resume key: the run's settings (see evaluator.manifest) and this case's rendered prompt.
    settings_hash: str | None = None
    prompt_hash: str | None = None
    # The judge's own text when it could not be validated, for debugging. It may quote the
    # case, so it lives only in the (0600) results file, never in logs.
    raw_output: str | None = None
    # Several verdicts per case (``--samples N`` or a jury): each one, and how ``scores``
    # and ``aggregates`` above were reduced from them (see evaluator.panel).
    samples: list[PanelVerdict] | None = None
    jury: list[PanelVerdict] | None = None
    reduction: dict[str, str] | None = None


class ResultsFileDamaged(ValueError):
    """A complete line of a results file is not a result record: edited or damaged."""


@dataclass(frozen=True)
class StoredLine:
    """One complete, valid line of a results file."""

    number: int
    raw: bytes
    record: ResultRecord


@dataclass(frozen=True)
class ResultsScan:
    """A results file checked line by line."""

    lines: list[StoredLine]
    valid_bytes: int   # length of the valid prefix (every complete, valid line)
    torn_bytes: int    # bytes after it: a last line cut short by a crash


def scan_results(path: Path) -> ResultsScan:
    """Read and validate every line. An unterminated last line (a write cut by a crash or
    power loss, possibly NUL-filled) is reported as torn, never parsed as a result; any
    other bad line raises :class:`ResultsFileDamaged` naming it."""
    data = Path(path).read_bytes()
    lines: list[StoredLine] = []
    offset = 0
    number = 0
    content_end = len(data.rstrip(b"\0\n"))
    while offset < len(data):
        end = data.find(b"\n", offset)
        # No newline: the write of the last line never finished. Only NUL bytes left: what
        # a power cut leaves when the file size reached the disk but the data did not.
        if end < 0 or offset >= content_end:
            break
        number += 1
        raw = data[offset:end]
        if raw.strip():
            try:
                record = ResultRecord.model_validate_json(raw)
            except ValidationError as exc:
                first = exc.errors(include_input=False, include_url=False)[0]
                where = ".".join(map(str, first["loc"])) or "$"
                raise ResultsFileDamaged(
                    f"{path} line {number} is not a result record ({where}: {first['msg']}); "
                    "the file was edited or damaged. Move it aside or fix that line, or pass "
                    "--force-new to start a new file (the old one is kept).") from None
            lines.append(StoredLine(number, raw, record))
        offset = end + 1
    return ResultsScan(lines, offset, len(data) - offset)


def truncate_torn_tail(path: Path, scan: ResultsScan) -> None:
    """Cut a torn last line off (its case is judged again)."""
    if scan.torn_bytes:
        log.warning("%s: removed a torn last line (%d bytes) left by an interrupted run",
                    path, scan.torn_bytes)
        with Path(path).open("r+b") as handle:
            handle.truncate(scan.valid_bytes)
            handle.flush()
            os.fsync(handle.fileno())


def rewrite_results(path: Path, raw_lines: list[bytes]) -> None:
    """Replace a results file with the given lines, atomically."""
    write_bytes_atomic(path, b"".join(raw + b"\n" for raw in raw_lines))


class ResultWriter:
    """Appends records as JSON lines: each is flushed to the OS as it is written (a killed
    process loses nothing written), and fsynced to disk at most every ``fsync_seconds``
    and on close (a power cut loses at most that window; resume judges those cases again)."""

    def __init__(self, path: Path, *, fsync_seconds: float = 1.0):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        created = not self.path.exists()
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, PRIVATE)
        self._handle = os.fdopen(fd, "wb")
        if created:
            fsync_dir(self.path.parent)
        self.fsync_seconds = fsync_seconds
        self._last_sync = time.monotonic()

    def write(self, record: ResultRecord) -> None:
        """Append one record as a single write and flush it to the OS."""
        self._handle.write(record.model_dump_json().encode("utf-8") + b"\n")
        self._handle.flush()
        if time.monotonic() - self._last_sync >= self.fsync_seconds:
            self.sync()

    def sync(self) -> None:
        """Force written records to disk."""
        os.fsync(self._handle.fileno())
        self._last_sync = time.monotonic()

    def close(self) -> None:
        """Flush to disk and close."""
        if not self._handle.closed:
            self._handle.flush()
            self.sync()
            self._handle.close()

    def __enter__(self) -> ResultWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_results(path: Path) -> list[ResultRecord]:
    """Load every record of a results file (each line validated; a torn last line is
    skipped with a warning)."""
    scan = scan_results(path)
    if scan.torn_bytes:
        log.warning("%s: ignoring a torn last line (%d bytes)", path, scan.torn_bytes)
    return [line.record for line in scan.lines]
