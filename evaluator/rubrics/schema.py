"""From a rubric to its output pydantic model, JSON schema and token budget (pure functions).

Decoding facts this module is built on (llguidance 1.7 compiling the schema with the
options of :mod:`evaluator.judges.backends.grammar`: compact JSON, escapes only ``\\"`` and
``\\\\``):

- every score is an ``enum`` (``Literal``): the exact values the rubric allows, whatever
  the scale's gaps;
- every string is bounded and every list has ``maxItems``, and the object forbids extra
  keys, so the longest valid output is finite and computable;
- a string's bound is a ``pattern`` with the length inside it, one per charset:
  ``ascii`` (printable ASCII minus ``"`` and ``\\``: one byte per character, never an
  escape) and ``unicode`` (any printable character, C0/C1 controls excluded; at most 4
  UTF-8 bytes per character, and ``"``/``\\`` are escaped in 2). A pattern rather than
  ``maxLength`` because llguidance intersects ``maxLength`` with the pattern, which makes
  every step inside the string slower;
- every token decodes to at least one byte, so the longest valid output in bytes, plus one
  end-of-sequence token, is a ``max_new_tokens`` that can never cut a verdict mid-JSON.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from evaluator.common.charsets import ASCII_BODY, PRINTABLE_BODY
from evaluator.common.errors import UserError
from evaluator.rubrics.rubric import (
    ChoiceCriterion,
    IntegerCriterion,
    ItemsCriterion,
    Rubric,
    StringField,
)

# Longest encoding of one character in the JSON text, per body: UTF-8 is at most 4 bytes,
# and the only escapes the grammar allows (\" and \\) are 2.
_BYTES_PER_CHAR = {ASCII_BODY: 1, PRINTABLE_BODY: 4}
_PATTERN = re.compile(r"^\^(" + "|".join(re.escape(b) for b in _BYTES_PER_CHAR)
                      + r")\{(\d+),(\d+)\}\$$")


class UnboundedSchemaError(UserError, ValueError):
    """The schema admits outputs of unbounded length, so no token budget is safe."""


class _Verdict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def string_pattern(charset: str, min_length: int, max_length: int) -> str:
    """The ``pattern`` of a bounded string in ``charset`` (``ascii`` or ``unicode``)."""
    body = ASCII_BODY if charset == "ascii" else PRINTABLE_BODY
    return f"^{body}{{{min_length},{max_length}}}$"


def _string_type(field: StringField) -> Any:
    return Annotated[str, Field(
        pattern=string_pattern(field.charset, field.min_length, field.max_length),
        description=field.description or None)]


def _score_type(values: list[int] | list[str], description: str) -> Any:
    return Annotated[Literal[tuple(values)], Field(description=description or None)]


def _items_type(field: ItemsCriterion, model_name: str) -> Any:
    item = create_model(
        f"{model_name}_{field.key}_Item",
        __base__=_Verdict,
        **{
            field.score_key: (_score_type(field.allowed, ""), ...),
            field.explanation_key: (Annotated[str, Field(pattern=string_pattern(
                field.explanation_charset, 1, field.explanation_max_length))], ...),
        },
    )
    return Annotated[list[item], Field(min_length=field.min_items, max_length=field.max_items,
                                       description=field.description or None)]


def build_output_model(rubric: Rubric) -> type[BaseModel]:
    """The pydantic model of one verdict, keys in the rubric's order, extra keys forbidden."""
    model_name = "".join(part.capitalize() for part in re.split(r"[_\-]", rubric.name))
    fields: dict[str, Any] = {}
    for field in rubric.output:
        if isinstance(field, IntegerCriterion):
            fields[field.key] = (_score_type(field.allowed, field.description), ...)
        elif isinstance(field, ItemsCriterion):
            fields[field.key] = (_items_type(field, model_name), ...)
        elif isinstance(field, ChoiceCriterion):
            fields[field.key] = (_score_type(field.allowed, field.description), ...)
        else:
            fields[field.key] = (_string_type(field), ...)
    return create_model(f"{model_name}Verdict", __base__=_Verdict, **fields)


def output_json_schema(rubric: Rubric) -> dict[str, Any]:
    """The JSON schema handed to the constrained decoder."""
    return build_output_model(rubric).model_json_schema()


def _resolve(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if ref is None:
        return node
    prefix = "#/$defs/"
    if not ref.startswith(prefix):
        raise UnboundedSchemaError(f"unsupported $ref {ref!r}")
    return _resolve(root["$defs"][ref[len(prefix):]], root)


def _max_bytes(node: dict[str, Any], root: dict[str, Any], where: str) -> int:
    node = _resolve(node, root)
    if "enum" in node:
        return max(len(json.dumps(v, ensure_ascii=False).encode()) for v in node["enum"])
    if "const" in node:
        return len(json.dumps(node["const"], ensure_ascii=False).encode())
    kind = node.get("type")
    if kind == "object":
        props = node.get("properties", {})
        if node.get("additionalProperties", True) is not False:
            raise UnboundedSchemaError(f"{where}: object allows extra keys")
        body = sum(len(json.dumps(key).encode()) + 1 + _max_bytes(sub, root, f"{where}.{key}")
                   for key, sub in props.items())
        return 2 + body + max(len(props) - 1, 0)
    if kind == "array":
        if "maxItems" not in node:
            raise UnboundedSchemaError(f"{where}: array without maxItems")
        count = node["maxItems"]
        return 2 + count * _max_bytes(node["items"], root, f"{where}[]") + max(count - 1, 0)
    if kind == "string":
        pattern = node.get("pattern")
        if pattern is not None:
            match = _PATTERN.match(pattern)
            if not match:
                raise UnboundedSchemaError(f"{where}: cannot bound pattern {pattern!r}")
            return 2 + _BYTES_PER_CHAR[match.group(1)] * int(match.group(3))
        raise UnboundedSchemaError(f"{where}: string without a bounding pattern")
    if kind == "boolean":
        return 5
    if kind == "null":
        return 4
    raise UnboundedSchemaError(f"{where}: unbounded or unsupported schema node {node!r}")


def max_output_bytes(schema: dict[str, Any]) -> int:
    """Length in bytes of the longest compact JSON text the schema admits."""
    return _max_bytes(schema, schema, "$")


def max_new_tokens(schema: dict[str, Any]) -> int:
    """A generation budget that no valid verdict can exceed: one token per byte, plus the
    end-of-sequence token."""
    return max_output_bytes(schema) + 1
