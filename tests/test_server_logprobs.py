"""Score distributions read from a server's top log-probabilities (pure: no server): the
token at the value's offset, values of one token, coverage exact / partial / absent."""

from __future__ import annotations

import math

import pytest

from evaluator.judges.backends.base import ScoreAnchor, TokenLogprob
from evaluator.judges.backends.server_logprobs import (
    EXACT_COVERAGE,
    anchor_distribution,
    distributions,
    parse_logprobs,
    value_of,
)


def token(text: str, top: dict[str, float]) -> TokenLogprob:
    """A token written with probability ``top[text]`` (1 if absent) and its alternatives."""
    entries = tuple((t.encode(), math.log(p)) for t, p in top.items())
    return TokenLogprob(text.encode(), math.log(top.get(text, 1.0)), entries)


def verdict(top: dict[str, float], written: str = "2") -> list[TokenLogprob]:
    """``{"s":<written>}`` in tokens, ``top`` at the value."""
    return [token('{"s":', {}), token(written, top), token("}", {})]


ANCHOR = ScoreAnchor("s", 5, (1, 2, 3))


def test_a_masked_top_k_gives_an_exact_distribution():
    dist = anchor_distribution(verdict({"1": 0.2, "2": 0.5, "3": 0.3}), ANCHOR, 0.99)
    assert dist is not None
    assert dist.probabilities == pytest.approx({1: 0.2, 2: 0.5, 3: 0.3})
    assert dist.coverage >= EXACT_COVERAGE


def test_mass_outside_the_values_is_partial_coverage_and_renormalised():
    top = {"2": 0.5, "1": 0.2, "3": 0.295, " ": 0.005}
    dist = anchor_distribution(verdict(top), ANCHOR, 0.99)
    assert dist is not None and dist.coverage == pytest.approx(0.995)
    assert sum(dist.probabilities.values()) == pytest.approx(1.0)
    assert dist.probabilities[2] == pytest.approx(0.5 / 0.995)
    # below min_coverage: absent, never a distribution read from too little mass
    assert anchor_distribution(verdict(top), ANCHOR, 0.999) is None
    assert anchor_distribution(verdict({"2": 0.6, " ": 0.4}), ANCHOR, 0.99) is None


def test_a_value_of_several_tokens_or_a_value_inside_a_token_is_absent():
    # "1" on values 1 and 10: the judge may still write "0"; one position cannot say which
    split = [token('{"s":', {}), token("1", {"1": 0.7, "2": 0.3}), token("0", {}),
             token("}", {})]
    assert anchor_distribution(split, ScoreAnchor("s", 5, (1, 2, 10)), 0.0) is None
    # the value starts inside a token (':2' written as one token)
    merged = [token('{"s"', {}), token(":2", {":2": 1.0}), token("}", {})]
    assert anchor_distribution(merged, ANCHOR, 0.0) is None


def test_tokens_that_close_or_decide_a_value_are_read_as_it():
    assert value_of(b"4,", (3, 4)) == 4
    assert value_of(b"5", (0, 50, 80, 100)) == 50
    assert value_of(b"4}", (1, 2)) is None
    assert value_of(b'"A', ("A", "B", "tie")) == "A"
    assert value_of(b"x", (1, 2)) is None


def test_no_log_probabilities_or_tokens_that_do_not_spell_the_text_give_none():
    anchors = [ANCHOR]
    assert distributions('{"s":2}', None, anchors, 0.99) == [None]
    tokens = verdict({"2": 1.0})
    assert distributions('{"s":3}', tokens, anchors, 0.99) == [None]
    assert distributions('{"s":2}', tokens, anchors, 0.99)[0] is not None


def test_the_openai_logprobs_block_is_parsed_and_a_malformed_one_ignored():
    choice = {"logprobs": {"content": [
        {"token": "é", "logprob": -0.1, "bytes": [195, 169],
         "top_logprobs": [{"token": "é", "logprob": -0.1, "bytes": [195, 169]},
                          {"token": "e", "logprob": -2.5}]}]}}
    [parsed] = parse_logprobs(choice)
    assert parsed.text == "é".encode() and parsed.top[1] == (b"e", -2.5)
    assert parse_logprobs({"logprobs": None}) is None
    assert parse_logprobs({"logprobs": {"content": [{"token": 3}]}}) is None
    assert parse_logprobs({"logprobs": {"content": [{"token": "a", "logprob": "x"}]}}) is None
