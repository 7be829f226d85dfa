"""The doctor's result: checks, each ok, warning or failed with what to do, as a
versioned record (``evaluator doctor --json`` prints it)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

Status = Literal["ok", "warning", "failed"]
DOCTOR_FORMAT = "evaluator-doctor/1"
_RANK = {"ok": 0, "warning": 1, "failed": 2}


class Check(BaseModel):
    """One check: its name, status, one message (what was found and, unless ok, what to
    do) and the figures behind it (sizes in bytes)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    status: Status
    message: str
    data: dict[str, Any] = {}


def ok(name: str, message: str, **data: Any) -> Check:
    """A passing check."""
    return Check(name=name, status="ok", message=message, data=data)


def warning(name: str, message: str, **data: Any) -> Check:
    """A check that passes with something to look at."""
    return Check(name=name, status="warning", message=message, data=data)


def failed(name: str, message: str, **data: Any) -> Check:
    """A check that fails: the judge would not start, or not as configured."""
    return Check(name=name, status="failed", message=message, data=data)


def worst(statuses: list[Status]) -> Status:
    """The most severe of ``statuses`` (ok when there are none)."""
    return max(statuses, key=_RANK.__getitem__, default="ok")


class DoctorReport(BaseModel):
    """Every check for one judge on this host; ``status`` is the worst of them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: str = DOCTOR_FORMAT
    judge: str
    backend: str
    status: Status
    checks: list[Check]

    @classmethod
    def of(cls, judge: str, backend: str, checks: list[Check]) -> DoctorReport:
        """The report of ``checks``, its status the worst of theirs."""
        return cls(judge=judge, backend=backend, checks=checks,
                   status=worst([c.status for c in checks]))


def gib(n_bytes: float) -> str:
    """Bytes in GiB with one decimal (vLLM's unit in its memory messages), or in MiB below
    1 GiB."""
    if abs(n_bytes) < 2**30:
        return f"{n_bytes / 2**20:.0f} MiB"
    return f"{n_bytes / 2**30:.1f} GiB"
