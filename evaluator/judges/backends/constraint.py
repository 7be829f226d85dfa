"""A transformers logits processor that constrains a whole batch to an llguidance grammar.

One ``llguidance.LLMatcher`` per row. At each step every row's matcher takes the token its
row just produced, then all rows' allowed-token bitmasks are computed in one call
(``fill_next_token_bitmask_par``: in parallel, without the GIL) and applied to the logits in
one more. outlines' own llguidance processor computes and applies the masks row by row.

The next step's masks need only the tokens just chosen, not the model, so
:class:`PrefetchMasks` (a stopping criterion: transformers calls those right after it
appends the tokens) starts filling them on a worker thread while the model runs its next
forward pass; the processor then only waits for them. Two mask buffers take turns, so the
one being copied to the GPU is never the one being filled; besides, ``prefetch`` reads the
new tokens back from the device (``tolist``), which waits for all earlier GPU work on the
stream, that copy included, before any fill starts.

With the logits on the CPU, the worker also expands the masks into a bound per logit
(:func:`expand_bound`: +inf where allowed, -inf elsewhere), so that applying them after
the forward pass is one vectorised ``torch.minimum`` (:func:`apply_bound`) instead of the
bit unpacking and the branchy ``torch.where`` of :func:`apply_on_cpu`: about 4 ms instead
of 7 at batch 64 with Qwen3's vocabulary (``benchmarks/README.md``, section 12), for the
same logits. The bound is one buffer of the logits' size: the worker writes the next one
only after the processor has used it (``prefetch`` runs after the step's token is chosen).
"""

from __future__ import annotations

import logging
import re
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for
from typing import Any

import numpy as np
import torch
from llguidance import LLExecutor, LLMatcher
from llguidance.torch import (
    allocate_token_bitmask,
    apply_token_bitmask_inplace,
    fill_next_token_bitmask_par,
)

log = logging.getLogger(__name__)

TAIL = 256  # bytes of each row's text kept for ``watch`` (longer than any score key)


class BatchConstraint:
    """Constrain every row of a ``generate`` call to ``grammar``; call :meth:`reset` before
    each call. Rows that finish early keep getting the end-of-sequence token only."""

    def __init__(self, grammar: str, tokenizer: Any, executor: LLExecutor | None = None,
                 watch: re.Pattern[bytes] | None = None):
        """``watch``: a pattern matched against the end of each row's text (its last
        :data:`TAIL` bytes) before each step; where it matches, the logits of the tokens the
        grammar allows are kept (:attr:`captured`), so the walk for score distributions
        reads them instead of running the model again."""
        self.grammar = grammar
        self.tokenizer = tokenizer
        self.executor = executor or LLExecutor()
        self.watch = watch
        self._pending: Future[Any] | None = None
        self.reset()

    def reset(self) -> None:
        """Forget the matchers; the next call starts a new batch."""
        self._wait()
        self.matchers: list[LLMatcher] | None = None
        self._mask: Any = None
        self._masks: list[Any] = []
        self._bound: Any = None
        self._step = 0
        self._tails: list[bytes] = []
        # per row: step -> {allowed token: raw logit}, at the steps ``watch`` matched
        self.captured: list[dict[int, dict[int, float]]] = []

    def start(self, batch: int, scores: Any = None) -> None:
        """New matchers for ``batch`` rows, at the start of the grammar; ``scores``, the
        first step's logits, say where the logits are (on the CPU: a bound buffer for
        prefetched masks, :func:`apply_bound`)."""
        self.matchers = [LLMatcher(self.tokenizer, self.grammar, log_level=0)
                         for _ in range(batch)]
        cpu = scores is not None and scores.device.type == "cpu"
        # Plain tensors even inside ``generate``'s inference mode: the worker thread, which
        # is outside it, writes into them (an inference tensor refuses that).
        with torch.inference_mode(False):
            self._masks = [allocate_token_bitmask(batch, self.tokenizer.vocab_size)
                           for _ in range(2)]
            self._bound = (torch.empty(scores.shape, dtype=torch.float32)
                           if cpu and scores.dtype == torch.float32 else None)
        self._mask = self._masks[0]
        self._step = 0
        self._tails = [b""] * batch
        self.captured = [{} for _ in range(batch)]

    def advance(self, tokens: list[int]) -> None:
        """Each row's matcher takes the token its row produced (stopped rows ignore it: that
        is the padding after their end of sequence)."""
        assert self.matchers is not None
        self._step += 1
        for row, (matcher, token) in enumerate(zip(self.matchers, tokens)):
            if matcher.is_stopped():
                continue
            if self.watch is not None:
                self._tails[row] = (self._tails[row]
                                    + self.tokenizer.decode_bytes([token]))[-TAIL:]
            if not matcher.consume_token(token):
                # The sampled token came from this matcher's own mask, so this is a bug; the
                # error text quotes the verdict (possibly case text), so it is not logged.
                log.error("constraint error in batch row %d; the row is ended", row)

    def capture(self, scores: Any) -> None:
        """Keep the allowed tokens' logits of every row whose text ``watch`` matches."""
        assert self.watch is not None and self.matchers is not None
        for row, tail in enumerate(self._tails):
            if self.watch.search(tail) and not self.matchers[row].is_stopped():
                allowed = allowed_tokens(self._mask[row])
                allowed = allowed[allowed < scores.shape[1]]
                values = scores[row, torch.from_numpy(allowed).to(scores.device)]
                self.captured[row][self._step] = dict(zip(allowed.tolist(),
                                                          values.float().tolist()))

    def fill(self) -> Any:
        """The batch's bitmask for the next token (int32, one bit per token, on CPU), in the
        buffer the previous step did not use."""
        assert self.matchers is not None
        self._mask = _fill(self.executor, self.matchers, self._masks[self._step % 2],
                           self.tokenizer.eos_token)
        return self._mask

    def prefetch(self, input_ids: Any) -> None:
        """Advance every row by the token just appended to ``input_ids`` and start filling
        the next step's masks on the worker thread (:class:`PrefetchMasks` calls this)."""
        if self.matchers is None:
            return
        if self._pending is not None:  # two appends without a processor call between
            raise RuntimeError("constraint: tokens appended twice without a logits-processor "
                               "call; masks cannot be prefetched in this decoding loop")
        self.advance(input_ids[:, -1].tolist())
        # The worker gets this step's matchers and buffers, never reads them off ``self``.
        self._pending = _worker().submit(_fill_and_expand, self.executor, list(self.matchers),
                                         self._masks[self._step % 2], self.tokenizer.eos_token,
                                         self._bound)

    def _wait(self) -> Any:
        """The prefetched masks and their bound (``(mask, bound or None)``; None if none
        were started); a failure is raised here. The future is dropped only once its fill
        has ended, even when the wait itself is interrupted (Ctrl-C), so no fill outlives
        its batch."""
        pending = self._pending
        if pending is None:
            return None
        try:
            self._mask, bound = pending.result()
            return self._mask, bound
        finally:
            wait_for([pending])
            self._pending = None

    def settle(self) -> None:
        """Wait for a prefetch still running (the one after a batch's last token), so the
        matchers can be read: call it when ``generate`` returns."""
        self._wait()

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        prefetched = self._wait()
        if prefetched is None:
            if self.matchers is None:
                self.start(scores.shape[0], scores)
            else:
                self.advance(input_ids[:, -1].tolist())
            mask, bound = self.fill(), None
        else:
            mask, bound = prefetched
        if self.watch is not None:
            self.capture(scores)
        if scores.device.type != "cpu":
            apply_token_bitmask_inplace(scores, mask.to(scores.device, non_blocking=True))
        elif bound is not None and bound.shape == scores.shape and bound.dtype == scores.dtype:
            apply_bound(scores, bound, mask)
        else:
            apply_on_cpu(scores, mask)
        return scores


def _fill(executor: LLExecutor, matchers: list[LLMatcher], mask: Any, eos: int) -> Any:
    """Fill ``mask`` (one row per matcher) with each matcher's allowed next tokens; a row
    whose matcher is in error allows only ``eos``, so it ends instead of having nothing."""
    fill_next_token_bitmask_par(executor, list(zip(matchers, range(len(matchers)))), mask)
    for row, matcher in enumerate(matchers):
        if matcher.is_error():
            mask[row] = 0
            mask[row, eos // 32] = 1 << (eos % 32) if eos % 32 < 31 else -(1 << 31)
    return mask


def _fill_and_expand(executor: LLExecutor, matchers: list[LLMatcher], mask: Any, eos: int,
                     bound: Any) -> tuple[Any, Any]:
    """:func:`_fill`, then, where there is a ``bound`` buffer, the mask expanded into it
    (:func:`expand_bound`): the worker's job for a prefetched step."""
    _fill(executor, matchers, mask, eos)
    if bound is not None:
        expand_bound(mask, bound)
    return mask, bound


class PrefetchMasks:
    """A transformers stopping criterion that never stops anything: it is called right
    after the step's tokens are appended, which is when the next masks can start
    (:meth:`BatchConstraint.prefetch`)."""

    def __init__(self, constraint: BatchConstraint):
        self.constraint = constraint

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        self.constraint.prefetch(input_ids)
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)


_WORKER: ThreadPoolExecutor | None = None


def _worker() -> ThreadPoolExecutor:
    """One thread for all constraints: a backend runs one ``generate`` at a time."""
    global _WORKER
    if _WORKER is None:
        _WORKER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="evaluator-masks")
    return _WORKER


def apply_on_cpu(scores: Any, mask: Any) -> None:
    """Set the logits of disallowed tokens to -inf, as ``llguidance.torch``'s kernel does:
    the bits unpacked by numpy in one pass and the logits kept by one ``torch.where``
    (``benchmarks/mask_cost.py`` times it against llguidance's kernel, about 3x faster on
    CPU; the test checks they agree). Logits past the mask's vocabulary (a model's padded
    vocabulary) are disallowed too."""
    vocab = scores.shape[1]
    width = min(vocab, mask.shape[1] * 32)
    bits = np.unpackbits(mask.numpy().view(np.uint8), axis=1, count=width, bitorder="little")
    head = scores[:, :width]
    torch.where(torch.from_numpy(bits.view(np.bool_)), head,
                torch.tensor(float("-inf"), dtype=scores.dtype), out=head)
    if vocab > width:
        scores[:, width:] = float("-inf")


def expand_bound(mask: Any, bound: Any) -> None:
    """Write into ``bound`` (float32, the logits' shape) +inf where ``mask`` allows a token
    and -inf elsewhere, past the mask's vocabulary included, so that
    ``torch.minimum(logits, bound)`` masks the logits. numpy's single-threaded ufuncs, not
    torch: this runs on the worker thread during the forward pass, and torch's ops there
    would start a second set of torch's threads beside the model's."""
    vocab = bound.shape[1]
    width = min(vocab, mask.shape[1] * 32)
    bits = np.unpackbits(mask.numpy().view(np.uint8), axis=1, count=width, bitorder="little")
    out = bound.numpy()
    head = out[:, :width]
    np.copyto(head, bits)  # 0.0 or 1.0
    np.subtract(head, np.float32(0.5), out=head)
    np.multiply(head, np.float32(np.inf), out=head)  # -0.5 * inf, 0.5 * inf
    out[:, width:] = -np.inf


BOUND_ROWS = 8  # rows per torch.minimum in apply_bound: a block (4.9 MB at 151k) stays cached


def apply_bound(scores: Any, bound: Any, mask: Any) -> None:
    """Mask ``scores`` in place with ``bound`` (:func:`expand_bound` of ``mask``): the
    logits become exactly what :func:`apply_on_cpu` makes of them. ``torch.minimum`` keeps
    a logit where the bound is +inf and gives -inf where it is -inf, but for a NaN logit,
    which it keeps everywhere; so each block of rows is summed right after (cheap while it
    is in the cache), and a block whose sum is NaN (a NaN logit, or +inf beside -inf) is
    masked again by :func:`apply_on_cpu`, which sets every disallowed logit to -inf and
    leaves the allowed ones as they are."""
    for start in range(0, scores.shape[0], BOUND_ROWS):
        block = scores[start:start + BOUND_ROWS]
        torch.minimum(block, bound[start:start + BOUND_ROWS], out=block)
        if torch.isnan(block.sum()):
            apply_on_cpu(block, mask[start:start + BOUND_ROWS])


def allowed_tokens(mask_row: Any) -> np.ndarray:
    """The token ids a bitmask row allows, ascending. Only the row's nonzero words are
    unpacked: where a score is written a few digits are allowed, and unpacking all of a
    151k vocabulary's bits for them cost more than the rest of the step's watch."""
    words = mask_row.numpy()
    nonzero = np.flatnonzero(words)
    if len(nonzero) * 8 > len(words):  # a dense row: unpacking all of it is cheaper
        return np.flatnonzero(np.unpackbits(words.view(np.uint8), bitorder="little"))
    bits = np.flatnonzero(np.unpackbits(words[nonzero].view(np.uint8), bitorder="little"))
    return nonzero[bits >> 5] * 32 + (bits & 31)


def mask_allows(mask_row: Any, token: int) -> bool:
    """Whether a bitmask row allows ``token``."""
    return bool((int(mask_row[token // 32]) >> (token % 32)) & 1)
