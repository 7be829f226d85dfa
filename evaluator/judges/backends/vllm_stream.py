"""vLLM's engine driven step by step, so that requests join as others finish.

``LLM.generate`` adds a batch of requests and steps the engine until the last one ends: a
barrier per batch, during which finished requests' slots stay empty. :class:`EngineLoop`
instead keeps ``LLMEngine.add_request`` / ``step`` in its own hands (the loop
``LLM.generate`` runs inside, vLLM 0.32): :meth:`EngineLoop.stream` keeps ``in_flight``
generation requests in the engine, adding the next one each time one finishes, and
:meth:`EngineLoop.run` finishes a few short requests of its own (the score distributions'
one-token requests) while the stream's requests go on decoding beside them. vLLM's own
scheduler decides what runs in each step; this module only keeps it fed.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from typing import Any

from vllm import SamplingParams
from vllm.inputs import TokensPrompt
from vllm.sampling_params import RequestOutputKind

# Where a request goes when it finishes: called with its RequestOutput.
OnFinish = Callable[[Any], None]
# A stream's next request: (key, prompt ids, params), or a finished result at once
# (key, generation-like object, None) for a prompt that needs no engine (too long).
Feed = Callable[[], tuple[Hashable, Any, SamplingParams | None] | None]


class EngineLoop:
    """One vLLM ``LLMEngine`` stepped by hand. ``steps``: engine steps taken (benchmarks
    read it to measure how full the decode slots were)."""

    def __init__(self, engine: Any):
        self.engine = engine
        self.steps = 0
        self._ids = itertools.count()
        self._running: dict[str, OnFinish] = {}
        self._refill: Callable[[], None] | None = None

    def add(self, prompt_ids: Sequence[int], params: SamplingParams, on_finish: OnFinish) -> str:
        """Put one request in the engine; ``on_finish`` gets its output when it ends."""
        request_id = f"evaluator-{next(self._ids)}"
        params.output_kind = RequestOutputKind.FINAL_ONLY
        self.engine.add_request(request_id, TokensPrompt(prompt_token_ids=list(prompt_ids)),
                                params)
        self._running[request_id] = on_finish
        return request_id

    def step(self) -> None:
        """One engine step (after topping up a running stream); hand finished outputs on."""
        if self._refill is not None:
            self._refill()
        if not self._running:
            raise RuntimeError("the engine has no request to run")
        failure: Exception | None = None
        for output in self.engine.step():
            if output.finished:
                on_finish = self._running.pop(output.request_id, None)
                try:
                    if on_finish is not None:
                        on_finish(output)
                except Exception as exc:  # every output is handed on first
                    failure = failure or exc
        self.steps += 1
        if failure is not None:
            raise failure

    def abort(self, request_ids: Iterable[str]) -> None:
        """Take requests out of the engine (a stream closed early, or a failure)."""
        ids = [rid for rid in request_ids if self._running.pop(rid, None) is not None]
        if ids:
            self.engine.abort_request(ids)

    def run(self, prompts: Sequence[Sequence[int]], params: Sequence[SamplingParams],
            ) -> list[Any]:
        """Each prompt's finished output, in order; a running stream goes on meanwhile."""
        outputs: list[Any] = [None] * len(prompts)
        left = set(range(len(prompts)))
        ids = []

        def keep(index: int) -> OnFinish:
            def finished(output: Any) -> None:
                outputs[index] = output
                left.discard(index)
            return finished

        try:
            for index, (ids_, p) in enumerate(zip(prompts, params, strict=True)):
                ids.append(self.add(ids_, p, keep(index)))
            while left:
                self.step()
        except BaseException:
            self.abort(ids)
            raise
        return outputs

    def stream(self, feed: Feed, in_flight: int, finish: Callable[[Any], Any],
               ) -> Iterator[tuple[Hashable, Any]]:
        """(key, ``finish(output)``) for every request ``feed`` gives, in the order they
        end, with at most ``in_flight`` of them in the engine. One stream at a time."""
        if self._refill is not None:
            raise RuntimeError("the engine is already streaming")
        ready: deque[tuple[Hashable, Any]] = deque()
        mine: set[str] = set()
        exhausted = False
        # An error taking the next request (reading or rendering a case) is raised by the
        # stream itself, never inside run() (whose caller would take it for its own).
        failure: list[Exception] = []

        def arrive(key: Hashable) -> OnFinish:
            def finished(output: Any) -> None:
                mine.discard(output.request_id)
                ready.append((key, finish(output)))
            return finished

        def refill() -> None:
            nonlocal exhausted
            # Results not yet handed on count as in flight: a run of prompts that need no
            # engine (too long) must not read the whole input before the first is taken.
            while not exhausted and len(mine) + len(ready) < in_flight:
                try:
                    item = feed()
                    if item is None:
                        exhausted = True
                    elif item[2] is None:
                        ready.append((item[0], item[1]))
                    else:
                        mine.add(self.add(item[1], item[2], arrive(item[0])))
                except Exception as exc:
                    failure.append(exc)
                    exhausted = True

        self._refill = refill
        try:
            while True:
                refill()
                while ready:
                    yield ready.popleft()
                    refill()
                if not mine and exhausted:
                    if failure:
                        raise failure[0]
                    return
                if mine:
                    self.step()
        finally:
            self._refill = None
            self.abort(list(mine))
