"""The llguidance grammar both backends decode under: what it admits and refuses, that the
token budget is exactly the longest valid verdict, and the tokenizer cache."""

from __future__ import annotations

import json
import stat

import pytest

from evaluator.judges.backends.grammar import COMPILE_OPTIONS, build_grammar, constraint_schema
from evaluator.rubrics.load import load_rubric
from evaluator.rubrics.rubric import Rubric
from evaluator.rubrics.schema import (
    build_output_model,
    max_new_tokens,
    max_output_bytes,
    output_json_schema,
)
from tests.conftest import BUILTIN, PAIRWISE_BUILTIN

llguidance = pytest.importorskip("llguidance", reason="needs a judge extra: make install")
pytest.importorskip("transformers", reason="needs a judge extra: make install")


@pytest.fixture(scope="module")
def hf_tokenizer():
    from transformers import AutoTokenizer

    from evaluator.judges.tiny_random import build_tiny_random

    return AutoTokenizer.from_pretrained(build_tiny_random(), local_files_only=True)


@pytest.fixture(scope="module")
def ll_tokenizer(hf_tokenizer, tmp_path_factory):
    from evaluator.judges.backends.llg_tokenizer import from_hf

    return from_hf(hf_tokenizer, None, use_cache=False)


def _accepts(ll_tokenizer, hf_tokenizer, grammar: str, text: str | bytes) -> bool:
    """Whether the grammar admits ``text`` as a whole verdict, fed as the judge's tokens
    and then byte by byte (a tokenization the model could also produce)."""
    from llguidance import LLMatcher

    data = text.encode() if isinstance(text, str) else text
    ids = hf_tokenizer.encode(data.decode("utf-8", "replace"), add_special_tokens=False)
    results = []
    for tokens in (ids, ll_tokenizer.tokenize_bytes(data)):
        matcher = LLMatcher(ll_tokenizer, grammar, log_level=0)
        results.append(matcher.consume_tokens(tokens) and matcher.is_accepting())
    return all(results)


def _longest_instance(node: dict, root: dict, char: str) -> object:
    """The verdict of maximal length in bytes, strings filled with ``char``."""
    if "$ref" in node:
        node = root["$defs"][node["$ref"].split("/")[-1]]
    if "enum" in node:
        return max(node["enum"], key=lambda v: len(json.dumps(v)))
    if node.get("type") == "object":
        return {k: _longest_instance(v, root, char) for k, v in node["properties"].items()}
    if node.get("type") == "array":
        return [_longest_instance(node["items"], root, char) for _ in range(node["maxItems"])]
    if node.get("type") == "string":
        count = int(node["pattern"].rsplit(",", 1)[1].split("}")[0])
        body_is_ascii = "!#" in node["pattern"]
        return (char if not body_is_ascii else "x") * count
    raise AssertionError(node)


def test_the_compile_options_travel_inside_the_schema():
    schema = json.loads(constraint_schema('{"type":"object"}'))
    assert schema["x-guidance"] == COMPILE_OPTIONS
    assert COMPILE_OPTIONS["whitespace_flexible"] is False
    assert COMPILE_OPTIONS["json_allowed_escapes"] == '"\\'


@pytest.mark.parametrize("name", BUILTIN + PAIRWISE_BUILTIN)
def test_the_grammar_admits_exactly_the_rubrics_verdicts(name, ll_tokenizer, hf_tokenizer):
    from evaluator.judges.backends.fake import minimal_instance

    schema = output_json_schema(load_rubric(name))
    grammar = build_grammar(schema)
    instance = minimal_instance(schema)
    compact = json.dumps(instance, separators=(",", ":"))
    assert _accepts(ll_tokenizer, hf_tokenizer, grammar, compact)
    assert not _accepts(ll_tokenizer, hf_tokenizer, grammar, json.dumps(instance))  # spaces
    reordered = dict(reversed(list(instance.items())))
    assert not _accepts(ll_tokenizer, hf_tokenizer, grammar,
                        json.dumps(reordered, separators=(",", ":")))
    extra = dict(instance, Extra=1)
    assert not _accepts(ll_tokenizer, hf_tokenizer, grammar,
                        json.dumps(extra, separators=(",", ":")))
    first_key = next(iter(instance))
    if isinstance(instance[first_key], int):
        wrong = dict(instance, **{first_key: 1000})
        assert not _accepts(ll_tokenizer, hf_tokenizer, grammar,
                            json.dumps(wrong, separators=(",", ":")))


@pytest.mark.parametrize("name", BUILTIN + PAIRWISE_BUILTIN)
def test_the_budget_is_the_longest_verdict_the_grammar_admits(name, ll_tokenizer,
                                                             hf_tokenizer):
    """The longest valid verdict is admitted, is exactly max_output_bytes long, and fits
    max_new_tokens even spelt one byte per token; one character more is refused."""
    schema = output_json_schema(load_rubric(name))
    grammar = build_grammar(schema)
    longest = json.dumps(_longest_instance(schema, schema, "x"), separators=(",", ":"))
    assert len(longest.encode()) == max_output_bytes(schema)
    assert max_new_tokens(schema) == len(longest.encode()) + 1
    assert _accepts(ll_tokenizer, hf_tokenizer, grammar, longest)
    build_output_model(load_rubric(name)).model_validate_json(longest)
    # Any string one character longer is refused.
    too_long = longest.replace('"x', '"xx', 1)
    assert not _accepts(ll_tokenizer, hf_tokenizer, grammar, too_long)


def _rubric(charset: str, max_length: int = 60) -> Rubric:
    return Rubric.model_validate({
        "format_version": 1, "name": "t", "title": "t",
        "inputs": {"a": {"description": "x"}},
        "template": "{{ a | fence }}",
        "output": [{"key": "score", "type": "integer", "values": [1, 2]},
                   {"key": "why", "type": "string", "max_length": max_length,
                    "charset": charset},
                   {"key": "items", "type": "items", "values": [0, 10], "max_items": 1,
                    "explanation_max_length": max_length, "explanation_charset": charset}]})


def test_unicode_strings_take_any_printable_text_escaped_properly(ll_tokenizer, hf_tokenizer):
    rubric = _rubric("unicode")
    schema = output_json_schema(rubric)
    grammar = build_grammar(schema)
    model = build_output_model(rubric)
    text = 'Befund: "Adenokarzinom", pT2 – 5 µg \\ Ωμέγα 𝄞'

    def verdict(why: str) -> str:
        return json.dumps({"score": 2, "why": why, "items": [{"Score": 10, "Explanation": why}]},
                          separators=(",", ":"), ensure_ascii=False)

    good = verdict(text)
    assert _accepts(ll_tokenizer, hf_tokenizer, grammar, good)
    assert model.model_validate_json(good).why == text
    for bad in ("line\nbreak", "tab\there", "bell\x07", "c1\x85"):
        assert not _accepts(ll_tokenizer, hf_tokenizer, grammar, verdict(bad)), repr(bad)
    # Characters are written as themselves: no \uXXXX (6 bytes for one character).
    escaped = json.dumps({"score": 2, "why": "µ", "items": [{"Score": 10, "Explanation": "a"}]},
                         separators=(",", ":"), ensure_ascii=True)
    assert "\\u00b5" in escaped
    assert not _accepts(ll_tokenizer, hf_tokenizer, grammar, escaped)
    # The budget: 4 bytes per character, and four-byte characters reach it exactly.
    longest = verdict("𝄞" * 60)
    assert len(longest.encode()) == max_output_bytes(schema)
    assert _accepts(ll_tokenizer, hf_tokenizer, grammar, longest)
    assert not _accepts(ll_tokenizer, hf_tokenizer, grammar, verdict("𝄞" * 61))


def test_ascii_strings_refuse_quotes_backslashes_and_other_scripts(ll_tokenizer, hf_tokenizer):
    rubric = _rubric("ascii")
    grammar = build_grammar(output_json_schema(rubric))

    def verdict(why: str) -> str:
        return json.dumps({"score": 1, "why": why, "items": [{"Score": 0, "Explanation": "e"}]},
                          separators=(",", ":"), ensure_ascii=False)

    assert _accepts(ll_tokenizer, hf_tokenizer, grammar, verdict("plain text, 5 mg/dL; ok"))
    for bad in ('say "x"', "back\\slash", "µg", "new\nline"):
        assert not _accepts(ll_tokenizer, hf_tokenizer, grammar, verdict(bad)), repr(bad)


@pytest.mark.parametrize("charset", ["ascii", "unicode"])
def test_every_slice_for_a_charset_is_allowed_inside_its_strings(ll_tokenizer, hf_tokenizer,
                                                                 charset):
    """llguidance uses a slice only where all its tokens are allowed, so a slice must be a
    subset of what a string of its charset allows mid-way; the Unicode slice used to contain
    tokens such as '":' (a quote can only be written escaped), so it never applied."""
    import re

    import torch
    from llguidance import LLMatcher

    from evaluator.common.charsets import ASCII_BODY, WRITTEN_PRINTABLE_BODY
    from evaluator.judges.backends.constraint import mask_allows
    from evaluator.judges.backends.grammar import EXTRA_SLICES

    bodies = [ASCII_BODY] + ([WRITTEN_PRINTABLE_BODY] if charset == "unicode" else [])
    slices = [s for s in EXTRA_SLICES if any(s.startswith(b) for b in bodies)]
    assert len(slices) == 2 * len(bodies)
    matcher = LLMatcher(ll_tokenizer, build_grammar(output_json_schema(_rubric(charset, 200))),
                        log_level=0)
    assert matcher.consume_tokens(ll_tokenizer.tokenize_str('{"score":1,"why":"ab'))

    mask = torch.frombuffer(bytearray(matcher.compute_bitmask()), dtype=torch.int32)
    texts = {}
    for token in range(ll_tokenizer.vocab_size):
        if ll_tokenizer.is_special_token(token):  # never in a slice
            continue
        try:
            texts[token] = ll_tokenizer.decode_bytes([token]).decode("utf-8")
        except UnicodeDecodeError:
            continue
    for pattern in slices:
        members = [t for t, text in texts.items() if re.fullmatch(pattern, text)]
        assert len(members) > 100, pattern
        refused = [texts[t] for t in members if not mask_allows(mask, t)]
        assert not refused, (pattern, refused[:5])
    if charset == "unicode":  # the slice's body as it was: quote and backslash in it
        from evaluator.common.charsets import PRINTABLE_BODY

        old = [t for t, text in texts.items() if re.fullmatch(PRINTABLE_BODY + "{1,30}", text)]
        assert any(not mask_allows(mask, t) for t in old)


def test_a_row_in_error_ends_the_same_whether_its_masks_are_prefetched_or_not(ll_tokenizer):
    """A row whose matcher is in error may only end; the prefetched masks (filled on the
    worker thread, outside ``generate``'s inference mode) say so exactly as the inline ones,
    and a second append without a processor call is refused, not silently skipped."""
    import torch

    from evaluator.judges.backends.constraint import BatchConstraint, mask_allows

    constraint = BatchConstraint(build_grammar(output_json_schema(_rubric("ascii"))),
                                 ll_tokenizer)
    eos = ll_tokenizer.eos_token
    good = ll_tokenizer.tokenize_str("{")[0]
    bad = ll_tokenizer.tokenize_str("zzz")[0]
    ids = torch.tensor([[good], [bad]])
    masks = []
    for prefetch in (False, True):
        constraint.reset()
        with torch.inference_mode():
            constraint(torch.zeros(2, 1, dtype=torch.long), torch.zeros(2, 10))
            if prefetch:
                constraint.prefetch(ids)
                with pytest.raises(RuntimeError, match="appended twice"):
                    constraint.prefetch(ids)
            scores = torch.zeros(2, ll_tokenizer.vocab_size)
            constraint(ids, scores)
        assert constraint.matchers[1].is_error() and not constraint.matchers[0].is_error()
        assert torch.isfinite(scores[1]).nonzero().flatten().tolist() == [eos]
        assert mask_allows(constraint._mask[0], ll_tokenizer.tokenize_str('"')[0])
        masks.append(constraint._mask.clone())
        constraint.settle()
    assert torch.equal(masks[0], masks[1])


def test_the_tokenizer_cache_is_written_safely_and_trusted_only_when_intact(
        hf_tokenizer, tmp_path, monkeypatch):
    import llguidance.hf

    from evaluator.judges.backends import llg_tokenizer
    from evaluator.judges.tiny_random import build_tiny_random

    monkeypatch.setenv("EVALUATOR_CACHE", str(tmp_path))
    folder = build_tiny_random()
    fresh = llg_tokenizer.from_hf(hf_tokenizer, folder)
    files = list((tmp_path / "llguidance").iterdir())
    assert len(files) == 1
    info = files[0].stat()
    assert stat.S_IMODE(info.st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "llguidance").stat().st_mode) == 0o700

    calls = []
    real = llguidance.hf.from_tokenizer
    monkeypatch.setattr(llguidance.hf, "from_tokenizer",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    cached = llg_tokenizer.from_hf(hf_tokenizer, folder)
    assert calls == []  # served from the file
    n = fresh.vocab_size
    assert cached.vocab_size == n and cached.eos_token == fresh.eos_token
    assert all(cached.decode_bytes([i]) == fresh.decode_bytes([i]) for i in range(n))
    assert all(cached.is_special_token(i) == fresh.is_special_token(i) for i in range(n))

    # A tampered token list fails its digest: rebuilt, and the file rewritten.
    data = json.loads(files[0].read_text())
    data["tokens"][100] = b"evil".hex()
    files[0].write_text(json.dumps(data))
    rebuilt = llg_tokenizer.from_hf(hf_tokenizer, folder)
    assert calls == [1]
    assert rebuilt.decode_bytes([100]) == fresh.decode_bytes([100])
    assert json.loads(files[0].read_text())["tokens"][100] != b"evil".hex()

    # A symlink planted at the cache's name is never read through.
    target = tmp_path / "elsewhere.json"
    target.write_text(files[0].read_text())
    files[0].unlink()
    files[0].symlink_to(target)
    llg_tokenizer.from_hf(hf_tokenizer, folder)
    assert calls == [1, 1]
    assert not files[0].is_symlink()  # replaced by a regular file of ours


@pytest.mark.parametrize("vocab, logits_width", [(1536, 1536), (151669, 151936), (100, 90)])
def test_the_cpu_mask_apply_equals_llguidances_kernel(vocab, logits_width):
    torch = pytest.importorskip("torch", reason="needs a judge extra: make install")
    from llguidance.torch import allocate_token_bitmask, apply_token_bitmask_inplace

    from evaluator.judges.backends.constraint import apply_on_cpu

    generator = torch.Generator().manual_seed(vocab)
    mask = allocate_token_bitmask(3, vocab)
    mask.copy_(torch.randint(-2**31, 2**31 - 1, mask.shape, dtype=torch.int32,
                             generator=generator))
    mask[1] = 0
    mask[1, 0] = 1  # row 1 allows only token 0
    logits = torch.randn(3, logits_width, generator=generator)
    theirs, ours = logits.clone(), logits.clone()
    apply_token_bitmask_inplace(theirs, mask)
    apply_on_cpu(ours, mask)
    assert torch.equal(torch.isinf(theirs), torch.isinf(ours))
    assert torch.equal(theirs, ours)
    assert torch.isfinite(ours[1]).sum() == 1 and torch.isfinite(ours[1, 0])


@pytest.mark.parametrize("vocab, logits_width", [(1536, 1536), (151669, 151936), (100, 90)])
def test_the_bound_apply_of_prefetched_masks_equals_the_cpu_apply(vocab, logits_width):
    """Prefetched masks on the CPU are applied as ``torch.minimum`` with a bound the worker
    expanded: the logits come out exactly as ``apply_on_cpu`` leaves them, NaN, infinite
    and negative-zero logits at allowed and disallowed tokens included, a padded
    vocabulary included, in every block of rows."""
    torch = pytest.importorskip("torch", reason="needs a judge extra: make install")
    from llguidance.torch import allocate_token_bitmask

    from evaluator.judges.backends.constraint import (
        BOUND_ROWS,
        allowed_tokens,
        apply_bound,
        apply_on_cpu,
        expand_bound,
    )

    rows = 2 * BOUND_ROWS + 3
    generator = torch.Generator().manual_seed(vocab)
    mask = allocate_token_bitmask(rows, vocab)
    mask.copy_(torch.randint(-2**31, 2**31 - 1, mask.shape, dtype=torch.int32,
                             generator=generator))
    mask[1] = 0
    mask[1, 0] = 1  # row 1 allows only token 0
    mask[2] = 0  # row 2 allows nothing
    logits = torch.randn(rows, logits_width, generator=generator)
    width = min(vocab, logits_width)
    for row in (0, BOUND_ROWS + 1, rows - 1):  # special values in three blocks
        allowed = allowed_tokens(mask[row])
        allowed = allowed[allowed < width]
        disallowed = sorted(set(range(width)) - set(allowed.tolist()))
        for tokens, value in (((allowed[0], disallowed[0]), float("nan")),
                              ((allowed[1], disallowed[1]), float("inf")),
                              ((allowed[2], disallowed[2]), float("-inf")),
                              ((allowed[3], disallowed[3]), -0.0)):
            logits[row, list(tokens)] = value
    logits[BOUND_ROWS + 2, -1] = float("nan")  # past the mask's vocabulary where padded
    with torch.inference_mode(False):
        bound = torch.empty(rows, logits_width)
    expand_bound(mask, bound)
    theirs, ours = logits.clone(), logits.clone()
    apply_on_cpu(theirs, mask)
    apply_bound(ours, bound, mask)
    assert torch.equal(theirs.isnan(), ours.isnan())
    assert torch.equal(theirs.nan_to_num(0.0), ours.nan_to_num(0.0))
    assert torch.equal(theirs.nan_to_num(0.0).signbit(),  # -0.0 stays -0.0
                       ours.nan_to_num(0.0).signbit())
    assert torch.isfinite(ours[1]).sum() == 1 and torch.isfinite(ours[1, 0])
    assert torch.isneginf(ours[2]).all()


def test_the_allowed_tokens_read_from_a_mask_row_are_exactly_its_set_bits():
    """The score watch reads a row's allowed tokens from its nonzero words only; every
    kind of row (none, one, a few, the sign bit, dense, all) gives the tokens whose bit
    is set, ascending."""
    torch = pytest.importorskip("torch", reason="needs a judge extra: make install")
    from llguidance.torch import allocate_token_bitmask

    from evaluator.judges.backends.constraint import allowed_tokens, mask_allows

    vocab = 151669
    generator = torch.Generator().manual_seed(5)
    mask = allocate_token_bitmask(6, vocab)
    mask[:5] = 0
    mask[1, 0] = 1  # token 0 only
    for token in (31, 32, 4000, 99999, vocab - 1):  # bit 31 is the int32 sign bit
        mask[2, token // 32] |= torch.tensor(1 << (token % 32)).to(torch.int32)
    mask[3, 100:120] = torch.randint(-2**31, 2**31 - 1, (20,), dtype=torch.int32,
                                     generator=generator)  # a few words, any bits
    mask[4] = torch.randint(-2**31, 2**31 - 1, mask.shape[1:], dtype=torch.int32,
                            generator=generator)  # dense
    # row 5: every bit set (allocate_token_bitmask's -1)
    for row in range(6):
        got = allowed_tokens(mask[row])
        words = mask[row].numpy()
        expected = [t for t in range(32 * len(words)) if mask_allows(words, t)]
        assert got.tolist() == expected, row
    assert allowed_tokens(mask[0]).tolist() == []
    assert allowed_tokens(mask[2]).tolist() == [31, 32, 4000, 99999, vocab - 1]


def test_a_broken_or_unusable_tokenizer_cache_never_stops_the_run(hf_tokenizer, tmp_path,
                                                                  monkeypatch, caplog):
    from evaluator.judges.backends import llg_tokenizer
    from evaluator.judges.backends.llg_tokenizer import _tokens_digest
    from evaluator.judges.tiny_random import build_tiny_random

    folder = build_tiny_random()
    n = len(hf_tokenizer)
    # The cache root cannot be created (a file stands there): a warning, and it works.
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    monkeypatch.setenv("EVALUATOR_CACHE", str(blocker / "cache"))
    assert llg_tokenizer.from_hf(hf_tokenizer, folder).vocab_size >= n
    assert "cannot use the llguidance tokenizer cache" in caplog.text

    monkeypatch.setenv("EVALUATOR_CACHE", str(tmp_path / "cache"))
    llg_tokenizer.from_hf(hf_tokenizer, folder)
    (file,) = (tmp_path / "cache" / "llguidance").iterdir()
    # A consistent-looking file (digest recomputed) that does not fit the tokenizer.
    data = json.loads(file.read_text())
    for change in ({"tokens": data["tokens"][:100]}, {"eos": 10**9}, {"special": [10**30]}):
        bad = dict(data, **change)
        bad["digest"] = _tokens_digest(bad["tokens"], bad["special"], bad["eos"])
        file.write_text(json.dumps(bad))
        assert llg_tokenizer.from_hf(hf_tokenizer, folder).vocab_size >= n, change
        assert json.loads(file.read_text())["tokens"] == data["tokens"]  # rewritten
    # A folder at the file's name: rebuilt in memory, no crash.
    file.unlink()
    file.mkdir()
    assert llg_tokenizer.from_hf(hf_tokenizer, folder).vocab_size >= n
