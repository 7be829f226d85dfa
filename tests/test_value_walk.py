"""Exact score distributions (issue 16): the walk over every tokenisation of each allowed
value, checked by hand on a scripted judge and against a brute-force enumeration on the real
CPU model path."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

pytest.importorskip("torch", reason="needs the transformers extra: make install")

from evaluator.judges.backends import Generation, Sampling, ScoreAnchor
from evaluator.judges.backends.value_walk import (
    Context,
    classify,
    normalise,
    score_distributions,
)
from evaluator.rubrics.load import load_rubric
from evaluator.rubrics.render import render_messages
from evaluator.rubrics.schema import build_output_model, max_new_tokens, output_json_schema
from evaluator.rubrics.score_paths import score_slots, value_offsets
from tests.conftest import example_cases

TEN = tuple(range(11))
ECG = (0, 50, 80, 100)


@pytest.mark.parametrize(("written", "before", "values", "expected"), [
    (b"1", b"", TEN, "expand"),        # 1 or 10: still open
    (b"1,", b"", TEN, 1),              # closed by the comma
    (b"10", b"", TEN, 10),             # no allowed value goes on from 10
    (b"1}", b"", TEN, 1),
    (b"5", b"", ECG, 50),              # only 50 starts with 5: the grammar must write 50
    (b"1", b"", ECG, 100),
    (b"0", b"", ECG, 0),
    (b"2", b"", ECG, "invalid"),
    (b":", b":", TEN, "expand"),       # the verdict's text before the value, not yet the value
    (b":7,", b":", TEN, 7),
    (b"x", b":", TEN, "inconsistent"),
    (b"-", b"", (-1, -10, 3), "expand"),
    (b"-1,", b"", (-1, -10, 3), -1),
])
def test_classify_closes_a_value_only_when_the_grammar_has_no_other_way(written, before, values,
                                                                       expected):
    assert classify(written, before, values) == expected


def test_normalise_renormalises_over_the_allowed_tokens_and_bounds_what_topk_missed():
    full = np.log(np.array([0.1, 0.2, 0.3, 0.4]))
    dist = normalise(full, np.array([1, 3]))
    assert dist.missing == 0
    assert dist.probs == pytest.approx({1: 0.2 / 0.6, 3: 0.4 / 0.6})
    # top-k: token 2 allowed but not returned; its probability is at most the floor's.
    dist = normalise({0: math.log(0.5), 1: math.log(0.3)}, np.array([0, 1, 2]),
                     floor=math.log(0.3))
    assert dist.missing == pytest.approx(0.3 / 1.1)
    assert sum(dist.probs.values()) == pytest.approx(1 - dist.missing)
    assert dist.probs[0] / dist.probs[1] == pytest.approx(0.5 / 0.3)


@pytest.fixture(scope="module")
def tiny(tiny_backend):
    return tiny_backend


def _generation(tokenizer, prompt_ids, text, token_ids=None):
    ids = token_ids if token_ids is not None else tokenizer.encode(text, add_special_tokens=False)
    return Generation(text=text, finish_reason="stop", prompt_ids=tuple(prompt_ids),
                      token_ids=tuple(ids))


def _anchors(rubric, text):
    scores = build_output_model(rubric).model_validate_json(text).model_dump(mode="json")
    offsets = value_offsets(rubric, scores, text)
    assert offsets is not None
    return [ScoreAnchor(s.path, offsets[s.path], s.allowed) for s in score_slots(rubric, scores)]


@pytest.mark.parametrize("ten_as", ["one token", "two tokens"])
def test_ten_sums_both_of_its_tokenisations(tiny, ten_as):
    """A scripted judge: at the score it writes "1" with 0.5, "10" with 0.2, "2" with 0.3;
    after "1" it writes "0" with 0.4 and ends the number with 0.6. So P(1) = 0.3,
    P(10) = 0.2 + 0.5 * 0.4 = 0.4 and P(2) = 0.3 — not P("1") = 0.5. The same whether the
    verdict itself wrote 10 as one token or as "1","0"."""
    rubric = load_rubric("drug_monograph_similarity")
    schema_text = json.dumps(output_json_schema(rubric), separators=(",", ":"))
    hf = tiny.tokenizer
    vocab = hf.get_vocab()
    one, zero, ten, two = vocab["1"], vocab["0"], vocab["10"], vocab["2"]
    comma = vocab[',"']
    text = '{"Score":10,"Rationale":"x"}'
    ids = hf.encode(text, add_special_tokens=False)
    assert ten in ids
    if ten_as == "two tokens":
        at = ids.index(ten)
        ids = ids[:at] + [one, zero] + ids[at + 1:]
    prompt = [5, 6, 7]
    generation = _generation(hf, prompt, text, ids)
    anchor_len = len(prompt) + ids.index(ten if ten_as == "one token" else one)
    seen: list[tuple[Context, list[int]]] = []

    def oracle(contexts, bases, allowed):
        out = []
        for context, ok in zip(contexts, allowed):
            seq = list(bases[context.base][:context.length]) + list(context.extra)
            seen.append((context, seq))
            lp = np.full(len(vocab) + 8, -np.inf)
            if len(seq) == anchor_len:
                lp[[one, ten, two]] = np.log([0.5, 0.2, 0.3])
            else:
                assert seq[anchor_len:] == [one]
                lp[[zero, comma]] = np.log([0.4, 0.6])
            assert all(t in ok for t in np.flatnonzero(np.isfinite(lp)))  # grammar allows them
            out.append(normalise(lp, ok))
        return out

    processor = tiny._processor(schema_text)
    [[dist]] = score_distributions(processor.tokenizer, processor.grammar, [generation],
                                   [_anchors(rubric, text)], oracle)
    assert dist.coverage == 1.0
    assert dist.probabilities[1] == pytest.approx(0.3)
    assert dist.probabilities[10] == pytest.approx(0.4)
    assert dist.probabilities[2] == pytest.approx(0.3)
    assert sum(dist.probabilities.values()) == pytest.approx(1.0)
    # The node after "1" is read off the verdict when the verdict went that way.
    after_one = [c for c, seq in seen if len(seq) == anchor_len + 1]
    assert len(after_one) == 1
    assert (after_one[0].extra == ()) == (ten_as == "two tokens")


def _brute_force(model, llg_tokenizer, grammar, prompt_ids, verdict_ids, k, values):
    """P(value) by definition, with nothing of the walk: from the matcher at token k, expand
    every allowed token until the text has digits followed by something else; one unpadded
    forward pass of the whole sequence per node."""
    import torch
    from llguidance import LLMatcher

    matcher = LLMatcher(llg_tokenizer, grammar, log_level=0)
    assert matcher.consume_tokens(list(verdict_ids[:k]))
    out: dict[int, float] = {}

    def walk(ids, matcher, written, mass):
        with torch.inference_mode():
            logits = model(input_ids=torch.tensor([ids])).logits[0, -1].float()
        lp = torch.log_softmax(logits, -1).numpy().astype(np.float64)
        bits = np.unpackbits(np.frombuffer(matcher.compute_bitmask(), dtype=np.uint8),
                             bitorder="little")[:llg_tokenizer.vocab_size]
        allowed = np.flatnonzero(bits)
        p = np.exp(lp[allowed] - lp[allowed].max())
        p /= p.sum()
        for token, pt in zip(allowed.tolist(), p):
            text = written + llg_tokenizer.decode_bytes([token])
            digits = len(text) - len(text.lstrip(b"0123456789"))
            if digits < len(text):
                out[int(text[:digits])] = out.get(int(text[:digits]), 0.0) + mass * pt
            elif mass * pt > 1e-12:
                child = matcher.deep_copy()
                assert child.consume_token(token)
                walk(ids + [token], child, text, mass * pt)

    walk(list(prompt_ids) + list(verdict_ids[:k]), matcher, b"", 1.0)
    assert set(out) <= set(values)
    return out


@pytest.mark.parametrize("name", ["drug_monograph_similarity", "ecg_interpretation"])
def test_real_model_distributions_match_a_brute_force_enumeration(tiny, name):
    """The real transformers path (forward passes read at several positions, padded batches
    for paths off the verdict) against the definition, on 0-10 (10 is "10" or "1","0") and
    on 0/50/80/100 (one first digit decides the value)."""
    rubric = load_rubric(name)
    schema = output_json_schema(rubric)
    schema_text = json.dumps(schema, separators=(",", ":"))
    chats = [render_messages(rubric, example_cases(name)[0])] * 2
    gens = tiny.generate(chats, schema_text, Sampling(max_new_tokens=max_new_tokens(schema),
                                                      temperature=1.0, seed=3),
                         rubric.chat_template_kwargs)
    anchors = [_anchors(rubric, g.text)[:2] for g in gens]
    dists = tiny.score_distributions(schema_text, gens, anchors)
    processor = tiny._processor(schema_text)
    llg = processor.tokenizer
    checked = 0
    for gen, wanted, got in zip(gens, anchors, dists):
        starts = np.cumsum([0] + [len(llg.decode_bytes([t])) for t in gen.token_ids])
        for anchor, dist in zip(wanted, got):
            k = int(np.searchsorted(starts, anchor.offset, side="right")) - 1
            assert starts[k] == anchor.offset  # a value starts a token on this vocabulary
            expected = _brute_force(tiny.model, llg, processor.grammar, gen.prompt_ids,
                                    gen.token_ids, k, anchor.values)
            assert dist is not None and dist.coverage == pytest.approx(1.0)
            assert set(dist.probabilities) == set(expected)
            for value, p in expected.items():
                assert dist.probabilities[value] == pytest.approx(p, abs=2e-5), value
            checked += 1
    assert checked >= 2


def test_a_generation_without_tokens_gets_no_distribution(tiny):
    rubric = load_rubric("drug_monograph_similarity")
    schema_text = json.dumps(output_json_schema(rubric), separators=(",", ":"))
    text = '{"Score":3,"Rationale":"x"}'
    no_tokens = Generation(text=text, finish_reason="stop")
    wrong = _generation(tiny.tokenizer, [1, 2], text,
                        tiny.tokenizer.encode('{"Score":4,"Rationale":"x"}',
                                              add_special_tokens=False))
    assert tiny.score_distributions(schema_text, [no_tokens, wrong],
                                    [_anchors(rubric, text)] * 2) == [[None], [None]]


def test_scores_on_the_verdict_are_read_from_the_generation_not_recomputed(tiny):
    """The logits where a score was written are kept while generating: trial eligibility's
    three 1-5 scores need no forward pass at all, and the kept logits give the same
    distribution as a forward pass."""
    rubric = load_rubric("trial_eligibility")
    schema = output_json_schema(rubric)
    schema_text = json.dumps(schema, separators=(",", ":"))
    chats = [render_messages(rubric, example_cases("trial_eligibility")[0])] * 2
    gens = tiny.generate(chats, schema_text, Sampling(max_new_tokens=max_new_tokens(schema),
                                                      temperature=1.0, seed=9),
                         rubric.chat_template_kwargs)
    anchors = [_anchors(rubric, g.text) for g in gens]
    # kept at each score's first step (and after each digit, where a value could go on)
    assert all(len(g.step_logits) >= 3 for g in gens)
    asked = []
    original = tiny._next_token_dists

    def spy(contexts, bases, allowed):
        asked.extend(contexts)
        return original(contexts, bases, allowed)

    tiny._next_token_dists = spy
    try:
        kept = tiny.score_distributions(schema_text, gens, anchors)
    finally:
        del tiny._next_token_dists
    assert asked == []
    from dataclasses import replace
    recomputed = tiny.score_distributions(
        schema_text, [replace(g, step_logits=None) for g in gens], anchors)
    for row, again in zip(kept, recomputed):
        for dist, other in zip(row, again):
            assert dist.probabilities == pytest.approx(other.probabilities, abs=2e-5)
