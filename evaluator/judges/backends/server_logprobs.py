"""Score distributions from the top log-probabilities a server returns with a verdict: pure
(no HTTP, no tokenizer), tested on their own.

A server judge has no tokenizer here and cannot be asked for the probability of a given
token, so a distribution is read from one position only: the generated token that starts at
the score's value (its byte offset, from the tokens' byte lengths). Each of the top
log-probabilities returned there is read as the value it writes: ``"4"`` (or ``"4,"``) is
4; ``"5"`` is 50 when 50 is the only allowed value starting with 5; ``"1"`` on a 1–10
scale is still open (1, or the first token of 10), and then the value is written over
several tokens and cannot be read from one position: no distribution (None). A choice
(``"A"``) reads the same way from its opening quote.

``coverage`` is the summed probability of the entries read as allowed values, at most 1.
A server that masks the log-probabilities with the grammar (vLLM does) returns only
allowed tokens, so coverage is the share of the judge's constrained distribution seen, as
for the in-process backends (1 when every allowed value is in the top-k). A server that
does not mask returns the unconstrained distribution; coverage is then a lower bound of
that share (the mass on tokens the grammar forbids counts as unseen too). The
probabilities are renormalised over the values seen. A distribution with coverage below
the judge's ``min_coverage`` is not given (None): every distribution written is read
downstream as the judge's own.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from evaluator.judges.backends.base import ScoreAnchor, TokenLogprob, ValueDistribution

#: Coverage from which a distribution counts as exact (the rest of the mass is rounding).
EXACT_COVERAGE = 0.999
_NUMBER = frozenset(b"0123456789-")
_OPEN = object()  # a token that is the start of several allowed values


def _token_bytes(entry: Mapping[str, Any]) -> bytes | None:
    raw = entry.get("bytes")
    if isinstance(raw, list) and all(isinstance(b, int) and 0 <= b < 256 for b in raw):
        return bytes(raw)
    token = entry.get("token")
    return token.encode("utf-8", "surrogatepass") if isinstance(token, str) else None


def _logprob(entry: Mapping[str, Any]) -> float | None:
    value = entry.get("logprob")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return None
    return float(value)


def parse_logprobs(choice: Mapping[str, Any]) -> tuple[TokenLogprob, ...] | None:
    """The per-token log-probabilities of an OpenAI chat choice (``logprobs.content``), or
    None when there are none or they are malformed (then the verdict stands without
    distributions)."""
    block = choice.get("logprobs")
    content = block.get("content") if isinstance(block, Mapping) else None
    if not isinstance(content, list):
        return None
    tokens = []
    for entry in content:
        if not isinstance(entry, Mapping):
            return None
        text, logprob = _token_bytes(entry), _logprob(entry)
        if text is None or logprob is None:
            return None
        top = []
        for alternative in entry.get("top_logprobs") or ():
            if not isinstance(alternative, Mapping):
                return None
            alt_text, alt_logprob = _token_bytes(alternative), _logprob(alternative)
            if alt_text is None or alt_logprob is None:
                return None
            top.append((alt_text, alt_logprob))
        tokens.append(TokenLogprob(text, logprob, tuple(top)))
    return tuple(tokens)


def value_of(token: bytes, values: Sequence[int] | Sequence[str]) -> Any:
    """The allowed value a token at a value's start writes; :data:`_OPEN` when it is the
    start of several (the value goes on over more tokens); None when it writes no allowed
    value."""
    if values and isinstance(values[0], str):
        spelled = {json.dumps(v, ensure_ascii=False).encode(): v for v in values}
        for text, value in spelled.items():
            if token.startswith(text):
                return value
        candidates = [v for text, v in spelled.items() if text.startswith(token)]
    else:
        end = 0
        while end < len(token) and token[end] in _NUMBER:
            end += 1
        digits = token[:end].decode()
        if not digits:
            return None
        if end < len(token):  # the number ends inside this token
            try:
                number = int(digits)
            except ValueError:
                return None
            return number if number in values else None
        candidates = [v for v in values if str(v).startswith(digits)]
    if len(candidates) == 1:
        return candidates[0]
    return _OPEN if candidates else None


def token_at(tokens: Sequence[TokenLogprob], offset: int) -> TokenLogprob | None:
    """The token that starts at byte ``offset`` of the generated text, or None (the offset
    falls inside a token)."""
    start = 0
    for token in tokens:
        if start == offset:
            return token
        start += len(token.text)
        if start > offset:
            return None
    return None


def anchor_distribution(tokens: Sequence[TokenLogprob], anchor: ScoreAnchor,
                        min_coverage: float) -> ValueDistribution | None:
    """The distribution over ``anchor``'s values read at its token (see the module
    docstring), or None: no token starts at its offset, a value there is several tokens,
    nothing allowed was seen, or the coverage is below ``min_coverage``."""
    token = token_at(tokens, anchor.offset)
    if token is None:
        return None
    entries = list(token.top)
    if all(text != token.text for text, _ in entries):  # the token written, not in the top-k
        entries.append((token.text, token.logprob))
    mass: dict[Any, float] = {}
    for text, logprob in entries:
        value = value_of(text, anchor.values)
        if value is _OPEN:
            return None
        if value is not None:
            mass[value] = mass.get(value, 0.0) + math.exp(logprob)
    seen = math.fsum(mass.values())
    coverage = min(1.0, seen)
    if not seen > 0 or coverage < min_coverage:
        return None
    ordered = [v for v in anchor.values if v in mass]
    if ordered and isinstance(ordered[0], int):
        ordered.sort()
    return ValueDistribution({v: mass[v] / seen for v in ordered},  # type: ignore[misc]
                             coverage=coverage)


def distributions(text: str | None, tokens: Sequence[TokenLogprob] | None,
                  anchors: Sequence[ScoreAnchor], min_coverage: float,
                  ) -> list[ValueDistribution | None]:
    """Each anchor's distribution in one verdict; all None when the server returned no
    log-probabilities or its tokens do not spell the verdict's text."""
    if not tokens or text is None:
        return [None] * len(anchors)
    written = b"".join(token.text for token in tokens)
    if not written.startswith(text.encode("utf-8")):  # a special token may follow the text
        return [None] * len(anchors)
    return [anchor_distribution(tokens, anchor, min_coverage) for anchor in anchors]
