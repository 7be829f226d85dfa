"""A scripted backend for pipeline tests and overhead benchmarks: no model at all.

Queued outputs are returned in order (strings become ``stop`` generations; a
:class:`Generation` is returned as is, so tests can script truncations and overflows).
With the queue empty it answers the smallest valid verdict for the schema. Its score
distributions are made up (:data:`FAKE_CONFIDENCE` on the value written), so pipeline tests
see records of the real shape; the real computation is tested on the real model.
"""

from __future__ import annotations

import heapq
import json
from collections import deque
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from evaluator.judges.backends.base import (
    Chat,
    Generation,
    Request,
    Sampling,
    ScoreAnchor,
    ValueDistribution,
)

# The fake judge's probability of the value it wrote; the rest is spread evenly.
FAKE_CONFIDENCE = 0.7

if TYPE_CHECKING:
    from evaluator.judges.models_file import JudgeSpec


def minimal_instance(schema: Mapping[str, Any], root: Mapping[str, Any] | None = None) -> Any:
    """The smallest JSON value that a (bounded, object/array/enum/string) schema admits."""
    root = root or schema
    ref = schema.get("$ref")
    if ref is not None:
        return minimal_instance(root["$defs"][ref.rsplit("/", 1)[-1]], root)
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object":
        return {key: minimal_instance(sub, root) for key, sub in schema["properties"].items()}
    if kind == "array":
        return [minimal_instance(schema["items"], root)] * max(schema.get("minItems", 0), 1)
    if kind == "string":
        return "x"
    if kind == "boolean":
        return False
    raise ValueError(f"fake backend cannot build a value for {schema!r}")


class FakeBackend:
    """Returns scripted outputs; records every call for assertions."""

    name = "fake"

    def __init__(self, outputs: Iterable[str | Generation] = (), *,
                 max_model_len: int | None = None, fail_with: Exception | None = None,
                 record_calls: bool = True):
        self._queue: deque[str | Generation] = deque(outputs)
        self.max_model_len = max_model_len
        self.fail_with = fail_with
        self.record_calls = record_calls
        self.calls: list[tuple[list[Chat], str, Sampling, dict[str, Any]]] = []

    @classmethod
    def from_spec(cls, judge_name: str, spec: JudgeSpec) -> FakeBackend:
        """Build from a models.yaml entry (``backend: fake``): no script, valid verdicts,
        no record of the calls (a long run must not keep every prompt); ``stream: true``
        gives a :class:`StreamingFakeBackend`."""
        kind = StreamingFakeBackend if spec.stream else cls
        return kind(max_model_len=spec.max_model_len, record_calls=False)

    def enqueue(self, outputs: Iterable[str | Generation]) -> None:
        """Append scripted outputs."""
        self._queue.extend(outputs)

    def generate(self, chats: Sequence[Chat], json_schema: str, sampling: Sampling,
                 chat_template_kwargs: Mapping[str, Any] | None = None) -> list[Generation]:
        """Pop one scripted output per chat (or build a minimal valid verdict)."""
        if self.record_calls:
            self.calls.append((list(chats), json_schema, sampling,
                               dict(chat_template_kwargs or {})))
        if self.fail_with is not None:
            raise self.fail_with
        results = []
        for _ in chats:
            item = self._queue.popleft() if self._queue else json.dumps(
                minimal_instance(json.loads(json_schema)), separators=(",", ":"))
            if isinstance(item, str):
                item = Generation(text=item, finish_reason="stop", prompt_tokens=0,
                                  completion_tokens=len(item))
            results.append(item)
        return results

    def score_distributions(self, json_schema: str, generations: Sequence[Generation],
                            anchors: Sequence[Sequence[ScoreAnchor]],
                            ) -> list[list[ValueDistribution | None]]:
        """A made-up distribution per anchor: :data:`FAKE_CONFIDENCE` on the value in the
        text, the rest spread evenly over the other allowed values."""
        out = []
        for generation, wanted in zip(generations, anchors, strict=True):
            text = (generation.text or "").encode()
            row: list[ValueDistribution | None] = []
            for anchor in wanted:
                if anchor.values and isinstance(anchor.values[0], str):  # a choice: "A"
                    chosen: int | str = json.JSONDecoder().raw_decode(
                        text[anchor.offset:].decode())[0]
                else:
                    digits = text[anchor.offset:].split(b",", 1)[0].split(b"}", 1)[0]
                    chosen = int(digits)
                others = [v for v in anchor.values if v != chosen]
                share = (1 - FAKE_CONFIDENCE) / len(others) if others else 0.0
                probs = {v: (FAKE_CONFIDENCE if others else 1.0) if v == chosen else share
                         for v in anchor.values}
                row.append(ValueDistribution(probs))
            out.append(row)
        return out

    def close(self) -> None:
        """Nothing to release."""


class StreamingFakeBackend(FakeBackend):
    """A fake with :meth:`stream`, for pipeline tests of the streamed path: a request takes
    as many engine steps as its output has characters, so short verdicts overtake long
    ones, as in a continuously batching engine. ``max_in_flight`` records the most requests
    it held at once; ``taken`` how many it has read."""

    def __init__(self, outputs: Iterable[str | Generation] = (), **kwargs: Any):
        super().__init__(outputs, **kwargs)
        self.max_in_flight = 0
        self.taken = 0

    def stream(self, requests: Iterable[Request], json_schema: str,
               chat_template_kwargs: Mapping[str, Any] | None, in_flight: int,
               ) -> Iterator[tuple[Hashable, Generation]]:
        """Each request's scripted (or minimal) output, in the order they would finish."""
        source = iter(requests)
        running: list[tuple[int, int, Hashable, Generation]] = []  # (ends at step, n, key, g)
        step = 0
        while True:
            while len(running) < in_flight:
                request = next(source, None)
                if request is None:
                    break
                self.taken += 1
                [generation] = self.generate([request.chat], json_schema, request.sampling,
                                             chat_template_kwargs)
                length = max(len(generation.text or ""), 1)
                heapq.heappush(running, (step + length, self.taken, request.key, generation))
            self.max_in_flight = max(self.max_in_flight, len(running))
            if not running:
                return
            step, _, key, generation = heapq.heappop(running)
            yield key, generation
