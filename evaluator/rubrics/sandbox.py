"""The Jinja2 sandbox rubric templates run in: bounded, and case text only ever fenced.

A rubric file is configuration that may be hostile or mistaken, so its template runs with
limits (:mod:`evaluator.common.limits`): every string, list and number it builds is charged to a
per-rendering budget *before* it is built where it could be large (``'A' * 3000000000``,
``2 ** 2 ** 40``), loop iterations are counted across all loops (nested ``range(100000)``),
and string formatting, attribute access on plain values and the filters that can grow text
without bound are not available. Nothing is evaluated at compile time.

Case values reach the template as :class:`CaseText`: it can be tested (``{% if note %}``,
``note == 'x'``) and given to ``| fence`` or ``| inline``, and everything else (printing it,
``{% set x = note %}{{ x }}``, ``note | upper``, ``note ~ ''``, ``{% for c in note %}``)
fails with :class:`UnfencedCaseText`. What ``fence``/``inline`` return is
:class:`FencedText`, which may be printed or joined to other text but not changed (no
filter, slicing or looping over it), so a fence cannot be taken off again.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import pass_context
from jinja2.visitor import NodeTransformer

from evaluator.common.errors import UserError
from evaluator.common.limits import (
    CASE_TEXT_FACTOR,
    MAX_INT_BITS,
    MAX_LOOP_ITERATIONS,
    MAX_TEMPLATE_CHARS,
)
from evaluator.rubrics.fence import fence, inline

FENCE_FILTERS = ("fence", "inline")
# Filters whose output is at most a small multiple of their input, with no size argument
# (widths, counts, padding) that could make it huge; join, replace, indent, center and
# truncate are bounded before they run (see _ESTIMATES). Left out: format (printf widths),
# batch/slice (padding), wordwrap, tojson/pprint/urlize/xmlattr, random (not reproducible).
ALLOWED_FILTERS = (
    "abs", "capitalize", "center", "count", "d", "default", "dictsort", "e", "escape",
    "first", "float", "indent", "int", "items", "join", "last", "length", "list", "lower",
    "map", "max", "min", "reject", "rejectattr", "replace", "reverse", "round", "select",
    "selectattr", "sort", "string", "striptags", "sum", "title", "trim", "truncate",
    "unique", "upper", "wordcount",
)
_LOOP_GUARD = "evaluator loop guard"    # not a name a template can write
_CONCAT_GUARD = "evaluator concat guard"
_SLICE_GUARD = "evaluator slice guard"
_PLAIN_TYPES = (str, bytes, int, float, complex, list, tuple, dict, set, frozenset, range)
_SIZED = (str, bytes, list, tuple, dict, set, frozenset, range)
# What may be printed or joined with '~': the text of other objects (namespace, cycler,
# macro...) is their repr, which would show what they hold.
_PRINTABLE = (str, int, float, bool, type(None), list, tuple, dict, set, frozenset, range,
              jinja2.Undefined)
_MAX_NESTING = 20


class TemplateRefused(UserError):
    """A template did something a rubric template may not do, or went over a limit. The
    message never contains case text."""


class UnfencedCaseText(TemplateRefused):
    """A case field was used other than through ``| fence`` or ``| inline``."""

    def __init__(self, field: str, how: str) -> None:
        super().__init__(f"case field {field!r} is {how}: case text may only be printed as "
                         f"'{{{{ {field} | fence }}}}' or '{{{{ {field} | inline }}}}'")


class FencedText(str):
    """Text that holds fenced case text: printable and joinable, not changeable."""

    __slots__ = ()

    def __str__(self) -> str:
        return self  # keeps the mark through the str() Jinja applies to output


class CaseText:
    """A case field's value inside a template: usable only through ``fence``/``inline``,
    in a test (``{% if field %}``) or an equality comparison."""

    __slots__ = ("_field", "_text")

    def __init__(self, field: str, text: str) -> None:
        self._field = field
        self._text = text

    def __bool__(self) -> bool:
        return bool(self._text)

    def __eq__(self, other: object) -> bool:
        return self._text == (other._text if isinstance(other, CaseText) else other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(self._text)

    def __repr__(self) -> str:
        return f"<case field {self._field!r}>"  # never the text

    def _refuse(self, how: str) -> UnfencedCaseText:
        return UnfencedCaseText(self._field, how)

    def __str__(self) -> str:
        raise self._refuse("printed or converted to text")

    def __format__(self, spec: str) -> str:
        raise self._refuse("formatted")

    def __html__(self) -> str:
        raise self._refuse("escaped")

    def __iter__(self) -> Iterator[str]:
        raise self._refuse("looped over")

    def __len__(self) -> int:
        raise self._refuse("measured")

    def __getitem__(self, key: object) -> str:
        raise self._refuse("indexed or sliced")

    def __contains__(self, item: object) -> bool:
        raise self._refuse("searched")

    def _operator(self, *_: object) -> Any:
        raise self._refuse("used in an operation")

    __add__ = __radd__ = __mul__ = __rmul__ = __mod__ = __rmod__ = _operator
    __lt__ = __le__ = __gt__ = __ge__ = _operator


def case_values(fields: Mapping[str, str], names: Iterable[str]) -> dict[str, CaseText]:
    """The template variables for a case: each declared input as :class:`CaseText`
    (missing fields are empty)."""
    return {name: CaseText(name, str(fields.get(name, ""))) for name in names}


def unwrap(value: object) -> str:
    """The text of a value given to ``fence``/``inline`` (case text included)."""
    return value._text if isinstance(value, CaseText) else str(value)


# --- The per-rendering budget -------------------------------------------------------------

class _Budget:
    def __init__(self, chars: int, iterations: int) -> None:
        self.limit = chars
        self.chars = chars
        self.iterations = iterations

    def charge(self, amount: int, what: str) -> None:
        self.chars -= max(amount, 0)
        if self.chars < 0:
            raise TemplateRefused(f"{what} goes over the limit of {self.limit} characters "
                                  "a template may build or print")

    def step(self) -> None:
        self.iterations -= 1
        if self.iterations < 0:
            raise TemplateRefused(f"loops run more than {MAX_LOOP_ITERATIONS} iterations "
                                  "in all")


_BUDGET: ContextVar[_Budget | None] = ContextVar("evaluator_template_budget", default=None)


def _budget() -> _Budget:
    # Outside render_template (never in this package): each operation alone is bounded.
    return _BUDGET.get() or _Budget(MAX_TEMPLATE_CHARS, MAX_LOOP_ITERATIONS)


def _size(value: object) -> int:
    return len(value) if isinstance(value, _SIZED) else 1


def _check_int(value: object, what: str) -> None:
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise TemplateRefused(f"{what} makes an integer of more than {MAX_INT_BITS} bits")


def _tainted(value: object, depth: int = 0) -> CaseText | FencedText | None:
    """Case text that ``value`` is or holds (in lists, tuples, sets and mappings)."""
    if isinstance(value, (CaseText, FencedText)):
        return value
    if isinstance(value, dict):
        value = [*value.keys(), *value.values()]
    if isinstance(value, (list, tuple, set, frozenset)):
        if depth > _MAX_NESTING:
            raise TemplateRefused(f"values nested more than {_MAX_NESTING} deep")
        for item in value:
            found = _tainted(item, depth + 1)
            if found is not None:
                return found
    return None


def _refuse_taint(value: object, how: str, *, deep: bool = True) -> None:
    """Refuse case text (raw, or fenced) used as ``how`` describes. ``deep``: also inside
    a list or mapping."""
    found = _tainted(value) if deep else value
    if isinstance(found, CaseText):
        raise found._refuse(how)
    if isinstance(found, FencedText):
        raise TemplateRefused(f"fenced case text is {how}; print it as it is "
                              "('{{ field | fence }}')")


# --- Filters ------------------------------------------------------------------------------

def _text_len(value: object) -> int:
    return len(value) if isinstance(value, str) else len(str(value))


def _estimate_join(value: list[Any], d: object = "", attribute: object = None) -> int:
    items = sum(_text_len(x) for x in value) if attribute is None else 0
    return items + max(len(value) - 1, 0) * _text_len(d)


def _estimate_replace(s: object, old: object, new: object, count: int | None = None) -> int:
    text, old_text = str(s), str(old)
    hits = text.count(old_text) if old_text else len(text) + 1
    if count is not None and count >= 0:
        hits = min(hits, count)
    return len(text) + hits * _text_len(new)


def _estimate_indent(s: object, width: object = 4, *_: object, **__: object) -> int:
    text = str(s)
    pad = width if isinstance(width, int) else _text_len(width)
    return len(text) + (text.count("\n") + 1) * max(pad, 0)


def _estimate_center(value: object, width: object = 80) -> int:
    return max(_text_len(value), width if isinstance(width, int) else 0)


def _estimate_truncate(s: object, length: int = 255, killwords: bool = False,
                       end: object = "...", leeway: object = None) -> int:
    return _text_len(s) + _text_len(end)


def _estimate_sum(iterable: object, attribute: object = None, start: object = 0) -> int:
    if not isinstance(start, (int, float)) or isinstance(start, bool):
        raise TemplateRefused("filter 'sum' adds numbers only")
    return 0


_ESTIMATES: dict[str, Callable[..., int]] = {
    "join": _estimate_join, "replace": _estimate_replace, "indent": _estimate_indent,
    "center": _estimate_center, "truncate": _estimate_truncate, "sum": _estimate_sum,
}


def _guard_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """``func`` refusing case text, with its output bounded before (``_ESTIMATES``) and
    charged after it runs."""
    passes_first = hasattr(func, "jinja_pass_arg")  # context/environment/eval context
    estimate = _ESTIMATES.get(name)

    @functools.wraps(func)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        head, values = (args[:1], list(args[1:])) if passes_first else ((), list(args))
        how = f"given to filter {name!r}"
        for value in (*values, *kwargs.values()):
            _refuse_taint(value, how)
        budget = _budget()
        if values and name in ("join", "sum") and not isinstance(values[0], (list, tuple)):
            values[0] = list(values[0])  # materialised to bound the result before joining
            budget.charge(len(values[0]), how)
            _refuse_taint(values[0], how)
        if estimate is not None:
            budget.charge(estimate(*values, **kwargs), f"filter {name!r}")
        result = func(*head, *values, **kwargs)
        budget.charge(_size(result), f"filter {name!r}")
        return result

    return guarded


def _fence_filter(delimit: Callable[[str], str]) -> Callable[[object], FencedText]:
    def fenced(value: object) -> FencedText:
        text = unwrap(value)
        _budget().charge(2 * len(text) + 16, f"filter {delimit.__name__!r}")
        return FencedText(delimit(text))

    fenced.__name__ = delimit.__name__
    return fenced


def _iterate(iterable: object) -> Iterator[Any]:
    """Every ``{% for %}`` goes through this: case text cannot be looped over, and each
    iteration is counted."""
    _refuse_taint(iterable, "looped over", deep=False)
    budget = _budget()
    for item in iterable:  # type: ignore[attr-defined]
        budget.step()
        yield item


def _concat(parts: list[Any]) -> str:
    """``a ~ b``: each part is text (case text refuses), the total is bounded first."""
    for part in parts:
        _check_printable(part, "joined with '~'")
    texts = [str(part) for part in parts]
    _budget().charge(sum(len(t) for t in texts), "'~'")
    joined = "".join(texts)
    return FencedText(joined) if any(isinstance(t, FencedText) for t in texts) else joined


def _block_concat(parts: Iterable[str]) -> str:
    """The text of a ``{% set %}`` block, macro or call block: fenced text stays marked."""
    texts = list(parts)
    joined = "".join(texts)
    _budget().charge(len(joined), "a block")
    return FencedText(joined) if any(isinstance(t, FencedText) for t in texts) else joined


def _sliceable(value: object) -> object:
    """``x[a:b]`` (which Jinja2 compiles to a plain Python slice): not of case text."""
    _refuse_taint(value, "sliced", deep=False)
    return value


def _check_printable(value: object, how: str) -> None:
    """Text, numbers and containers of them; fenced text only as it is."""
    if isinstance(value, CaseText):
        raise value._refuse(how)
    if isinstance(value, FencedText):
        return
    if not isinstance(value, _PRINTABLE):
        raise TemplateRefused(f"a {type(value).__name__} object is {how}; print text and "
                              "numbers only")
    _refuse_taint(value, f"{how.removesuffix(' directly')} inside a list or mapping")


@pass_context  # also keeps Jinja from evaluating outputs at compile time
def _finalize(_context: Any, value: Any) -> Any:
    _check_printable(value, "printed directly")
    return value


class _Guards(NodeTransformer):
    """Route every loop, ``~`` and slice through the guards above."""

    def visit_For(self, node: nodes.For) -> nodes.Node:
        self.generic_visit(node)
        node.iter = nodes.Filter(node.iter, _LOOP_GUARD, [], [], None, None,
                                 lineno=node.iter.lineno)
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        self.generic_visit(node)
        return nodes.Filter(nodes.List(node.nodes, lineno=node.lineno), _CONCAT_GUARD, [], [],
                            None, None, lineno=node.lineno)

    def visit_Getitem(self, node: nodes.Getitem) -> nodes.Node:
        self.generic_visit(node)
        if isinstance(node.arg, nodes.Slice):
            node.node = nodes.Filter(node.node, _SLICE_GUARD, [], [], None, None,
                                     lineno=node.lineno)
        return node


class RubricSandbox(ImmutableSandboxedEnvironment):
    """The environment rubric templates are parsed, compiled and rendered in."""

    intercepted_binops = frozenset({"+", "*", "**", "%"})

    def __init__(self) -> None:
        super().__init__(undefined=jinja2.StrictUndefined, autoescape=False,
                         keep_trailing_newline=False, optimized=False, finalize=_finalize)
        builtin = self.filters
        self.filters = {name: _guard_filter(name, builtin[name]) for name in ALLOWED_FILTERS}
        self.filters["fence"] = _fence_filter(fence)
        self.filters["inline"] = _fence_filter(inline)
        self.filters[_LOOP_GUARD] = _iterate
        self.filters[_CONCAT_GUARD] = _concat
        self.filters[_SLICE_GUARD] = _sliceable
        self.globals.pop("lipsum", None)  # lipsum(n) builds n paragraphs
        self.concat = _block_concat  # type: ignore[assignment]

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        # No methods of plain values: str.ljust(10**9), str.replace, str.format... (loop,
        # namespace and cycler attributes stay available).
        if isinstance(obj, (*_PLAIN_TYPES, CaseText)):
            return False
        return super().is_safe_attribute(obj, attr, value)

    def wrap_str_format(self, value: Any) -> None:
        return None  # str.format is refused like every other str method

    def getattr(self, obj: Any, attribute: str) -> Any:
        _refuse_taint(obj, f"accessed (.{attribute})", deep=False)
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        _refuse_taint(obj, "indexed or sliced", deep=False)
        return super().getitem(obj, argument)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        for operand in (left, right):
            if isinstance(operand, CaseText):
                raise operand._refuse(f"used with '{operator}'")
        if operator == "%" and isinstance(left, str):
            raise TemplateRefused("'%' string formatting is not available in rubric "
                                  "templates")
        budget = _budget()
        if (operator == "**" and isinstance(left, int) and isinstance(right, int)
                and right > 0 and abs(left) > 1 and left.bit_length() * right > MAX_INT_BITS):
            raise TemplateRefused(f"'**' makes an integer of more than {MAX_INT_BITS} bits")
        if operator == "*":
            count, seq = (left, right) if isinstance(left, int) else (right, left)
            if isinstance(count, int) and isinstance(seq, _SIZED):
                budget.charge(max(count, 0) * len(seq), "'*'")
            elif (isinstance(left, int) and isinstance(right, int)
                  and left.bit_length() + right.bit_length() > MAX_INT_BITS + 1):
                raise TemplateRefused(f"'*' makes an integer of more than {MAX_INT_BITS} bits")
        if operator == "+" and isinstance(left, _SIZED) and isinstance(right, _SIZED):
            budget.charge(len(left) + len(right), "'+'")
        result = super().call_binop(context, operator, left, right)
        _check_int(result, f"'{operator}'")
        if isinstance(result, str) and (isinstance(left, FencedText)
                                        or isinstance(right, FencedText)):
            result = FencedText(result)
        return result


def compile_template(env: RubricSandbox, source: str) -> jinja2.Template:
    """Parse ``source``, route its loops and ``~`` through the guards, and compile it."""
    tree = env.parse(source)
    _Guards().visit(tree)
    return env.from_string(tree)


def render_template(template: jinja2.Template, values: Mapping[str, CaseText]) -> str:
    """Render within a budget of :data:`~evaluator.common.limits.MAX_TEMPLATE_CHARS` plus
    :data:`~evaluator.common.limits.CASE_TEXT_FACTOR` times the case text's length."""
    case_chars = sum(len(v._text) for v in values.values())
    budget = _Budget(MAX_TEMPLATE_CHARS + CASE_TEXT_FACTOR * case_chars, MAX_LOOP_ITERATIONS)
    token = _BUDGET.set(budget)
    try:
        parts: list[str] = []
        for chunk in template.generate(values):
            budget.charge(len(chunk), "the rendered text")
            parts.append(chunk)
        return "".join(parts)
    finally:
        _BUDGET.reset(token)
