"""The rubric template sandbox: case text only through fence/inline, bounded work."""

from __future__ import annotations

import pytest

from evaluator.limits import MAX_TEMPLATE_CHARS
from evaluator.render import fence, inline
from evaluator.sandbox import (
    CaseText,
    FencedText,
    RubricSandbox,
    TemplateRefused,
    UnfencedCaseText,
    case_values,
    compile_template,
    render_template,
)

SECRET = "PHI-SECRET-4417"


def _render(source: str, **fields: str) -> str:
    return render_template(compile_template(RubricSandbox(), source),
                           case_values(fields, fields))


def test_case_text_can_be_tested_compared_and_fenced():
    source = ("{% if note %}{{ note | fence }}{% endif %}{% if empty %}no{% endif %}"
              "{% if note == 'PHI-SECRET-4417' %} same{% endif %}{{ note | inline }}")
    assert _render(source, note=SECRET, empty="") == f"{fence(SECRET)} same{inline(SECRET)}"


def test_case_text_never_shows_in_its_repr_or_errors():
    value = CaseText("note", SECRET)
    assert SECRET not in repr(value)
    with pytest.raises(UnfencedCaseText) as info:
        str(value)
    assert SECRET not in str(info.value) and "'note'" in str(info.value)


@pytest.mark.parametrize("source", [
    "{{ note }}", "{{ note | upper }}", "{{ note ~ '' }}", "{% for c in note %}{{ c }}{% endfor %}",
    "{{ note[0] }}", "{{ note | length }}", "{{ note | e }}", "{{ note | default('') }}",
    "{{ 'x' in note }}", "{{ note < 'm' }}", "{{ note.strip() }}", "{{ (note, 1) }}",
])
def test_case_text_is_refused_everywhere_else(source):
    with pytest.raises(UnfencedCaseText, match="case field 'note'"):
        _render(source, note=SECRET)


def test_fenced_text_stays_marked_through_joins_blocks_and_macros():
    source = ("{% set a = 'x: ' ~ (note | fence) %}{% set b %}[{{ a }}]{% endset %}"
              "{% macro m() %}{{ b }}{% endmacro %}{{ m() | trim }}")
    with pytest.raises(TemplateRefused, match="fenced case text is given to filter 'trim'"):
        _render(source, note=SECRET)
    assert _render(source.replace(" | trim", ""), note=SECRET) == f"[x: {fence(SECRET)}]"


@pytest.mark.parametrize("source, message", [
    ("{% set x = note | fence %}{{ [[x]] }}", "fenced case text is printed inside a list"),
    ("{% set x = note | fence %}{{ [x] ~ '' }}", "fenced case text is joined with '~' inside"),
    ("{% set ns = namespace(a=note | fence) %}{{ ns }}", "a Namespace object is printed"),
    ("{% macro m() %}{{ note | fence }}{% endmacro %}{{ m ~ '' }}", "a Macro object is joined"),
])
def test_containers_and_objects_cannot_print_case_text_in_their_repr(source, message):
    with pytest.raises(TemplateRefused, match=message):
        _render(source, note=SECRET)
    assert _render("{{ [1, 'a'] }} {{ dict(k=2) }} {{ none }}") == "[1, 'a'] {'k': 2} None"


def test_the_filters_return_fenced_text():
    env = RubricSandbox()
    assert isinstance(env.filters["fence"](CaseText("n", "t")), FencedText)
    assert isinstance(env.filters["inline"]("t"), FencedText)
    assert "format" not in env.filters and "lipsum" not in env.globals


def test_the_budget_grows_with_the_case_text():
    big = "A" * (2 * MAX_TEMPLATE_CHARS)  # longer than the budget a template alone has
    assert _render("{{ note | fence }}\n{{ note | fence }}", note=big).count(big) == 2
    with pytest.raises(TemplateRefused, match="goes over the limit"):
        _render("{{ note | fence }}{{ 'A' * 100000000 }}", note="short")


def test_nothing_is_evaluated_at_compile_time():
    # Jinja folds constant expressions (a filter on a literal) while compiling, outside any
    # budget: the sandbox turns that off.
    env, calls = RubricSandbox(), []
    env.filters["upper"] = lambda value: calls.append(value) or value.upper()
    template = compile_template(env, "{{ 'a' | upper }}")
    assert calls == []
    assert render_template(template, {}) == "A" and calls == ["a"]
