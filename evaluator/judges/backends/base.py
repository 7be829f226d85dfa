"""The backend protocol: one batch method from rendered chats to constrained generations."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from evaluator.common.errors import UserError
from evaluator.judges.backends.torch_threads import ThreadChoice

Chat = Sequence[Mapping[str, str]]
FinishReason = Literal["stop", "length", "context_overflow", "error"]


class BackendUnavailable(UserError, RuntimeError):
    """A backend's libraries or weights are missing; the message says what to install/run."""


@dataclass(frozen=True)
class Sampling:
    """Decoding settings for one batch. ``max_new_tokens`` comes from the output schema."""

    max_new_tokens: int
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token as a server returned it (OpenAI ``logprobs.content``): its bytes,
    its log-probability and the ``top`` alternatives at its position, (bytes, log-prob)
    each, most likely first."""

    text: bytes
    logprob: float
    top: tuple[tuple[bytes, float], ...] = ()


@dataclass(frozen=True)
class Generation:
    """One generation: the text, why it stopped, and token counts.

    ``finish_reason``: ``stop`` (end of sequence: the constraint completed), ``length``
    (hit ``max_new_tokens``), ``context_overflow`` (the prompt plus the longest valid verdict
    does not fit the judge's context, nothing was generated) or ``error``.
    ``cached_tokens``: prompt tokens served from the engine's prefix cache (vLLM), else None.
    """

    text: str | None
    finish_reason: FinishReason
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    detail: str | None = None
    cached_tokens: int | None = None
    # The token ids behind ``text`` and its prompt (for score distributions; never written).
    prompt_ids: tuple[int, ...] | None = field(default=None, repr=False, compare=False)
    token_ids: tuple[int, ...] | None = field(default=None, repr=False, compare=False)
    # Generation step -> {allowed token: logit} where a score's value was being written,
    # kept while generating so score distributions need no second pass (transformers).
    step_logits: Mapping[int, Mapping[int, float]] | None = field(default=None, repr=False,
                                                                 compare=False)
    # Per generated token, the top log-probabilities a server returned with the verdict
    # (for score distributions read at the value's token; never written).
    token_logprobs: tuple[TokenLogprob, ...] | None = field(default=None, repr=False,
                                                            compare=False)


@dataclass(frozen=True)
class Request:
    """One prompt for a streaming backend: ``key`` names it in the results (the caller's
    own label), ``sampling`` is its decoding (samples of a case differ in seed)."""

    key: Hashable
    chat: Chat
    sampling: Sampling


@dataclass(frozen=True)
class ScoreAnchor:
    """One score in a verdict: its path, the byte offset of its value in the verdict's text
    and the values the grammar allows there."""

    path: str
    offset: int
    values: tuple[int, ...] | tuple[str, ...]


@dataclass(frozen=True)
class ValueDistribution:
    """P(value | prompt, verdict before the value) for one score, over the allowed values;
    ``coverage``: the share of the probability mass that was seen (1.0: exact)."""

    probabilities: dict[int, float] | dict[str, float]
    coverage: float = 1.0


def context_overflow(prompt_tokens: int, max_new_tokens: int,
                     max_model_len: int | None) -> Generation | None:
    """The ``context_overflow`` generation for a prompt that cannot fit with the longest
    valid verdict, or None when it fits (or the context is unknown). Names no case text."""
    needed = prompt_tokens + max_new_tokens
    if max_model_len is None or needed <= max_model_len:
        return None
    return Generation(
        text=None, finish_reason="context_overflow", prompt_tokens=prompt_tokens,
        detail=(f"prompt is {prompt_tokens} tokens and the longest valid verdict is "
                f"{max_new_tokens}: {needed} > the judge's context of {max_model_len} "
                "tokens. Use a judge with a longer context; case text is never truncated."))



def fitting_prompts(chats: Sequence[Chat], render: Callable[[Chat], list[int]],
                    max_new_tokens: int, max_model_len: int | None,
                    ) -> tuple[list[Generation | None], dict[int, list[int]]]:
    """Render each chat to token ids and set aside the ones that cannot run: a chat that
    cannot be rendered safely (``ValueError``) gets an ``error`` generation, one too long for
    the context a ``context_overflow`` one — that case only; the batch goes on.

    Returns the per-chat results so far (None where still to generate) and the ids to
    generate, by chat index."""
    results: list[Generation | None] = [None] * len(chats)
    prompts: dict[int, list[int]] = {}
    for index, chat in enumerate(chats):
        try:
            ids = render(chat)
        except ValueError as exc:
            results[index] = Generation(text=None, finish_reason="error",
                                        detail=f"cannot render the prompt: {exc}")
            continue
        overflow = context_overflow(len(ids), max_new_tokens, max_model_len)
        if overflow is not None:
            results[index] = overflow
        else:
            prompts[index] = ids
    return results, prompts

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


@runtime_checkable
class ScoringBackend(Backend, Protocol):
    """A backend that can also give each score's distribution over its allowed values."""

    def score_distributions(self, json_schema: str, generations: Sequence[Generation],
                            anchors: Sequence[Sequence[ScoreAnchor]],
                            ) -> list[list[ValueDistribution | None]]:
        """Per generation, per anchor: the value distribution (None where it cannot be
        computed, e.g. a generation without token ids)."""
        ...


@runtime_checkable
class StreamingBackend(Backend, Protocol):
    """A backend that keeps a fixed number of requests in its engine and hands back each
    generation as soon as it ends, starting the next request in its place (continuous
    batching: no request waits for the longest of a batch)."""

    def stream(self, requests: Iterable[Request], json_schema: str,
               chat_template_kwargs: Mapping[str, Any] | None, in_flight: int,
               ) -> Iterator[tuple[Hashable, Generation]]:
        """(key, generation) for every request, in the order they finish. At most
        ``in_flight`` requests are in the engine at once; ``requests`` is read only as
        slots free up, so a long input is never held in memory. Closing the iterator
        early aborts the requests still in the engine."""
        ...


@runtime_checkable
class CpuThreadsBackend(Backend, Protocol):
    """A backend whose model may compute on torch's CPU threads: ``threads`` is the count it
    chose when it loaded, and why (:mod:`evaluator.judges.backends.torch_threads`); None
    when the model is on an accelerator."""

    threads: ThreadChoice | None


@runtime_checkable
class DescribedBackend(Backend, Protocol):
    """A backend whose runtime reports an identity of its own (a server: its model id,
    context length, version), recorded in the run's manifest."""

    def provenance(self, *, judged: bool = True) -> dict[str, Any]:
        """What the backend found about what runs the judge, as JSON values: never a key,
        never case text. ``judged`` False: this instance only probed what runs the judge
        (the cases are judged in other processes, e.g. Ray's replicas), so what it would
        have counted while judging is left unknown (None), not zero."""
        ...
