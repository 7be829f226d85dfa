"""Exact score distributions: walk every way the grammar lets a judge write each allowed
value at a score, and sum the judge's probabilities over them.

At a score in a verdict, the grammar allows only the values the rubric allows. The judge's
probability of a value is the total probability of every token path that writes it: "10" is
one token in some vocabularies and "1","0" in others (Qwen, Gemma split digits), and after
"1" the judge may still write "0" (10) or end the number (1). So P(1) is not P("1").

The walk starts where the value starts, with an llguidance matcher at that point of the
verdict (a ``deep_copy`` of one that consumed the verdict's tokens), and expands, level by
level for every score of a batch at once, only the token paths whose value is still open:

- a token that ends the number (digits then ``,`` or ``}``) or whose digits can complete to
  one allowed value only (``"5"`` when the values are 0, 50, 80, 100) is a leaf;
- a token whose digits are a prefix of several allowed values (``"1"`` of 1 and 10) is
  expanded: one more next-token distribution from the judge, after that token.

Each level's next-token distributions come from an *oracle* the backend supplies (a
transformers forward pass; vLLM log-probabilities), renormalised over the tokens the
grammar allows at that node (the matcher's mask), so they are the judge's constrained
distribution at temperature 1. A value that begins inside a token (the verdict's text
before it is not a token boundary) is handled the same way, the walk starting at the last
boundary and keeping only paths that write the verdict's text up to the value first.

Nodes whose probability is below :data:`PRUNE` are not expanded; their mass, and any mass an
oracle could not see (top-k log-probabilities), lowers the distribution's ``coverage``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from llguidance import LLMatcher, LLTokenizer

from evaluator.judges.backends.base import Generation, ScoreAnchor, ValueDistribution

log = logging.getLogger(__name__)

PRUNE = 1e-9       # a node less likely than this is not expanded (its mass counts as unseen)
MAX_DEPTH = 12     # tokens after the anchor; values are short numbers


@dataclass(frozen=True)
class Context:
    """The tokens a next-token distribution is conditioned on: the first ``length`` ids of
    ``bases[base]`` (a prompt followed by its verdict) and then ``extra``."""

    base: int
    length: int
    extra: tuple[int, ...] = ()


@dataclass(frozen=True)
class NodeDist:
    """The judge's next-token probabilities over a node's allowed tokens. ``probs`` sum to
    ``1 - missing``; ``missing`` bounds the mass of allowed tokens the oracle did not see."""

    probs: dict[int, float]
    missing: float = 0.0


# contexts, the ids of the full sequences they index, and each context's allowed token ids
Oracle = Callable[[Sequence[Context], Sequence[Sequence[int]], Sequence[np.ndarray]],
                  list[NodeDist]]

_NUMBER = frozenset(b"0123456789-")
_EXPAND, _INCONSISTENT, _INVALID = "expand", "inconsistent", "invalid"


def classify(written: bytes, before: bytes, values: Sequence[int] | Sequence[str]) -> int | str:
    """What ``written`` (bytes since the walk's start) says about the value: the value, or
    ``expand`` (still open), ``inconsistent`` (not the verdict's text before the value) or
    ``invalid`` (not an allowed value: the grammar and rubric disagree). Values are
    integers (a score) or strings (a pairwise choice, written as a JSON string)."""
    if len(written) <= len(before):
        return _EXPAND if before.startswith(written) else _INCONSISTENT
    if not written.startswith(before):
        return _INCONSISTENT
    tail = written[len(before):]
    if values and isinstance(values[0], str):
        return _classify_string(tail, values)  # type: ignore[arg-type]
    end = 0
    while end < len(tail) and tail[end] in _NUMBER:
        end += 1
    number = tail[:end].decode()
    if end < len(tail):  # the number is closed
        try:
            value = int(number)
        except ValueError:
            return _INVALID
        return value if value in values else _INVALID
    candidates = [v for v in values if str(v).startswith(number)]
    if len(candidates) == 1:
        return candidates[0]  # the grammar can only complete it to this value
    return _EXPAND if candidates else _INVALID


def _classify_string(tail: bytes, values: Sequence[str]) -> str:
    """A choice's value: a JSON string closes itself, so the value is known once its
    closing quote is written, or once only one allowed value starts with ``tail``."""
    spelled = {json.dumps(v, ensure_ascii=False).encode(): v for v in values}
    for text, value in spelled.items():
        if tail.startswith(text):
            return value
    candidates = [value for text, value in spelled.items() if text.startswith(tail)]
    if len(candidates) == 1:
        return candidates[0]
    return _EXPAND if candidates else _INVALID


def allowed_tokens(matcher: LLMatcher, vocab_size: int) -> np.ndarray:
    """The token ids ``matcher`` allows next."""
    bits = np.unpackbits(np.frombuffer(matcher.compute_bitmask(), dtype=np.uint8),
                         bitorder="little")
    return np.flatnonzero(bits[:vocab_size])


def normalise(logprobs: dict[int, float] | np.ndarray, allowed: np.ndarray,
              floor: float | None = None) -> NodeDist:
    """A :class:`NodeDist` from log-probabilities (a full vector, or a top-k dict whose
    smallest entry is ``floor``) renormalised over ``allowed``."""
    if isinstance(logprobs, np.ndarray):
        lp = logprobs[allowed].astype(np.float64)
        p = np.exp(lp - lp.max())
        p /= p.sum()
        return NodeDist({int(t): float(x) for t, x in zip(allowed, p) if x > 0})
    seen = [int(t) for t in allowed if int(t) in logprobs]
    unseen = len(allowed) - len(seen)
    if not seen:
        return NodeDist({}, 1.0)
    top = max(logprobs[t] for t in seen)
    weights = {t: float(np.exp(logprobs[t] - top)) for t in seen}
    known = sum(weights.values())
    bound = unseen * float(np.exp(floor - top)) if unseen and floor is not None else 0.0
    if unseen and floor is None:
        bound = float("inf")
    missing = 1.0 if bound == float("inf") else bound / (known + bound)
    return NodeDist({t: w / known * (1 - missing) for t, w in weights.items()}, missing)


@dataclass
class _Tally:
    values: tuple[int, ...] | tuple[str, ...]
    before: bytes
    mass: dict[int | str, float] = field(default_factory=dict)
    unseen: float = 0.0

    def result(self) -> ValueDistribution | None:
        seen = sum(self.mass.values())
        if not seen > 0:
            return None
        # scores in numeric order, choices in the rubric's (A, B, tie)
        ordered = [v for v in self.values if v in self.mass]
        if ordered and isinstance(ordered[0], int):
            ordered.sort()
        return ValueDistribution({v: self.mass[v] / seen for v in ordered},
                                 coverage=seen / (seen + self.unseen))


@dataclass
class _Node:
    tally: int
    context: Context
    matcher: LLMatcher
    written: bytes
    mass: float


def _roots(tokenizer: LLTokenizer, grammar: str, base: int, generation: Generation,
           anchors: Sequence[ScoreAnchor], tallies: list[_Tally]) -> list[_Node] | None:
    """The walk's start for every anchor of one generation, or None when its tokens do not
    spell its text (then it gets no distributions)."""
    tokens = list(generation.token_ids or ())
    while tokens and tokenizer.is_special_token(tokens[-1]):
        tokens.pop()  # the end-of-sequence token some engines keep in the output
    pieces = [tokenizer.decode_bytes([t]) for t in tokens]
    text = (generation.text or "").encode()
    if b"".join(pieces) != text:
        return None
    starts = np.cumsum([0] + [len(p) for p in pieces])  # byte offset of each token
    matcher = LLMatcher(tokenizer, grammar, log_level=0)
    consumed = 0
    nodes = []
    for anchor in sorted(anchors, key=lambda a: a.offset):
        k = int(np.searchsorted(starts, anchor.offset, side="right")) - 1
        if not matcher.consume_tokens(list(tokens[consumed:k])):
            return None
        consumed = k
        tallies.append(_Tally(anchor.values, text[int(starts[k]):anchor.offset]))
        prompt = len(generation.prompt_ids or ())
        nodes.append(_Node(len(tallies) - 1, Context(base, prompt + k), matcher.deep_copy(),
                           b"", 1.0))
    return nodes


def _kept(context: Context, allowed: np.ndarray,
          kept: Sequence[Mapping[int, Mapping[int, float]]], prompts: Sequence[int],
          ) -> NodeDist | None:
    """The node's distribution from the logits kept while generating (a context on the
    verdict, at a step that was kept, with every allowed token there), else None."""
    if context.extra:
        return None
    logits = kept[context.base].get(context.length - prompts[context.base])
    if logits is None or any(int(t) not in logits for t in allowed):
        return None
    return normalise({int(t): logits[int(t)] for t in allowed}, allowed)


def _follow(context: Context, token: int, bases: Sequence[Sequence[int]]) -> Context:
    """``context`` then ``token``, as a plain prefix of its base when the base goes on with
    exactly that token (so the oracle can read it from one forward pass of the base)."""
    base = bases[context.base]
    if not context.extra and context.length < len(base) and base[context.length] == token:
        return Context(context.base, context.length + 1)
    return Context(context.base, context.length, context.extra + (token,))


def score_distributions(tokenizer: LLTokenizer, grammar: str,
                        generations: Sequence[Generation],
                        anchors: Sequence[Sequence[ScoreAnchor]], oracle: Oracle,
                        ) -> list[list[ValueDistribution | None]]:
    """Per generation, per anchor (in the order given): the exact distribution over the
    anchor's allowed values, or None (no token ids, or tokens that do not spell the text)."""
    tallies: list[_Tally] = []
    bases: list[list[int]] = []
    kept: list[Mapping[int, Mapping[int, float]]] = []  # per base: step -> allowed logits
    prompts: list[int] = []
    frontier: list[_Node] = []
    where: list[list[int | None]] = []
    for generation, wanted in zip(generations, anchors, strict=True):
        if not wanted or generation.token_ids is None or generation.prompt_ids is None:
            where.append([None] * len(wanted))
            continue
        bases.append(list(generation.prompt_ids) + list(generation.token_ids))
        kept.append(generation.step_logits or {})
        prompts.append(len(generation.prompt_ids))
        first = len(tallies)
        nodes = _roots(tokenizer, grammar, len(bases) - 1, generation, wanted, tallies)
        if nodes is None:
            del tallies[first:]
            log.warning("a verdict's tokens do not spell its text; no distributions for it")
            where.append([None] * len(wanted))
            continue
        order = sorted(range(len(wanted)), key=lambda i: wanted[i].offset)
        slots: list[int | None] = [None] * len(wanted)
        for position, i in enumerate(order):
            slots[i] = first + position
        where.append(slots)
        frontier.extend(nodes)
    vocab = tokenizer.vocab_size
    for _depth in range(MAX_DEPTH):
        if not frontier:
            break
        allowed = [allowed_tokens(node.matcher, vocab) for node in frontier]
        dists: list[NodeDist | None] = [_kept(node.context, ok, kept, prompts)
                                        for node, ok in zip(frontier, allowed)]
        ask = [i for i, dist in enumerate(dists) if dist is None]
        if ask:
            for i, dist in zip(ask, oracle([frontier[i].context for i in ask], bases,
                                           [allowed[i] for i in ask])):
                dists[i] = dist
        frontier = _expand(frontier, [d for d in dists if d is not None], tallies,
                           tokenizer, bases)
    for node in frontier:  # deeper than any value: not expanded
        tallies[node.tally].unseen += node.mass
    return [[None if slot is None else tallies[slot].result() for slot in slots]
            for slots in where]


def _expand(frontier: list[_Node], dists: list[NodeDist], tallies: list[_Tally],
            tokenizer: LLTokenizer, bases: Sequence[Sequence[int]]) -> list[_Node]:
    following: list[_Node] = []
    for node, dist in zip(frontier, dists, strict=True):
        tally = tallies[node.tally]
        tally.unseen += node.mass * dist.missing
        for token, p in dist.probs.items():
            mass = node.mass * p
            if mass <= 0:
                continue
            written = node.written + tokenizer.decode_bytes([token])
            state = classify(written, tally.before, tally.values)
            if state == _INCONSISTENT:
                continue  # not the verdict's text before the value: conditioned away
            if state == _INVALID:
                tally.unseen += mass
            elif state == _EXPAND:
                if mass < PRUNE:
                    tally.unseen += mass
                    continue
                matcher = node.matcher.deep_copy()
                if not matcher.consume_token(token):
                    tally.unseen += mass
                    continue
                following.append(_Node(node.tally, _follow(node.context, token, bases),
                                       matcher, written, mass))
            else:
                tally.mass[state] = tally.mass.get(state, 0.0) + mass
    return following
