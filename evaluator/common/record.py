"""The base of the typed records one module builds and others read (a run's summary, ...):
frozen pydantic models that refuse unknown fields, written as JSON in field order."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Record(BaseModel):
    """A record passed between modules: frozen, no field it does not declare."""

    # ser_json_inf_nan: a NaN or infinity is written as json.dumps writes it, wherever it is.
    model_config = ConfigDict(extra="forbid", frozen=True, ser_json_inf_nan="constants")

    def to_json(self) -> dict[str, Any]:
        """The record as JSON values, its fields in order (as written to disk)."""
        return self.model_dump(mode="json")


def omitted_if_none() -> Any:
    """A field that defaults to None and is left out of :meth:`Record.to_json` while None
    (a key the JSON has only when it has a value)."""
    return Field(None, exclude_if=lambda value: value is None)
