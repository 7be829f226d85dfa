"""The backend protocol: one batch method from rendered chats to constrained generations."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

Chat = Sequence[Mapping[str, str]]
FinishReason = Literal["stop", "length", "context_overflow", "error"]


class BackendUnavailable(RuntimeError):
    """A backend's libraries or weights are missing; the message says what to install/run."""


@dataclass(frozen=True)
class Sampling:
    """Decoding settings for one batch. ``max_new_tokens`` comes from the output schema."""

    max_new_tokens: int
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0


@dataclass(frozen=True)
class Generation:
    """One generation: the text, why it stopped, and token counts.

    ``finish_reason``: ``stop`` (end of sequence: the constraint completed), ``length``
    (hit ``max_new_tokens``), ``context_overflow`` (the prompt plus the longest valid verdict
    does not fit the judge's context, nothing was generated) or ``error``.
    """

    text: str | None
    finish_reason: FinishReason
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    detail: str | None = None


@runtime_checkable
class Backend(Protocol):
    """A judge model behind one batched, schema-constrained generate call."""

    name: str
    max_model_len: int | None

    def generate(
        self,
        chats: Sequence[Chat],
        json_schema: str,
        sampling: Sampling,
        chat_template_kwargs: Mapping[str, Any] | None = None,
    ) -> list[Generation]:
        """Generate one constrained completion per chat, in order."""
        ...

    def close(self) -> None:
        """Release the model (memory, GPU)."""
        ...
