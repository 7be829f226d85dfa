"""The result record (one JSON line per case) and the writer that appends them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

RECORD_VERSION = 1

Status = Literal[
    "ok",              # a verdict that parsed and passed the output model
    "invalid_output",  # the judge's text did not validate (should not happen when constrained)
    "truncated",       # the judge stopped on the token limit before closing the verdict
    "too_long",        # prompt + longest valid verdict exceed the judge's context
    "input_error",     # the case itself is unusable (missing/empty field, bad row)
    "backend_error",   # the backend raised while judging this case's batch
]


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
    max_new_tokens: int | None = None
    batch_size: int | None = None
    batch_seconds: float | None = None
    # The judge's own text when it could not be validated, for debugging. It may quote the
    # case, so it lives only in the (0600) results file, never in logs.
    raw_output: str | None = None


class OutputExistsError(FileExistsError):
    """The results file exists; finished results are never overwritten silently."""


class ResultWriter:
    """Appends records as JSON lines, flushing each so a crash loses no finished case."""

    def __init__(self, path: Path, *, overwrite: bool = False):
        self.path = Path(path)
        if self.path.exists() and not overwrite:
            raise OutputExistsError(f"{self.path} already exists; choose a new --output or pass "
                                    "--overwrite to replace it")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        self._handle = os.fdopen(fd, "w", encoding="utf-8")

    def write(self, record: ResultRecord) -> None:
        """Write one record and flush it to the OS."""
        self._handle.write(record.model_dump_json() + "\n")
        self._handle.flush()

    def close(self) -> None:
        """Flush to disk and close."""
        if not self._handle.closed:
            self._handle.flush()
            os.fsync(self._handle.fileno())
            self._handle.close()

    def __enter__(self) -> ResultWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_results(path: Path) -> list[ResultRecord]:
    """Load every record of a results file (each line validated)."""
    with Path(path).open(encoding="utf-8") as handle:
        return [ResultRecord.model_validate_json(line) for line in handle if line.strip()]
