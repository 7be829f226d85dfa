"""Rendering a rubric's Jinja2 templates into chat messages, with case text fenced.

Case text is passed to Jinja2 as data, so template syntax inside it is never evaluated; and
every case field must go through ``| fence`` (a Markdown code block) or ``| inline`` (inline
code) whose backtick run is longer than any run inside the text, so the text cannot close
its own delimiter and pose as instructions. The text itself is never altered.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path

import jinja2
from jinja2 import meta, nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

from evaluator.rubrics.rubric import Rubric, RubricError

FENCE_FILTERS = ("fence", "inline")
_BACKTICK_RUNS = re.compile(r"`+")


def _longest_backtick_run(text: str) -> int:
    return max((len(m.group(0)) for m in _BACKTICK_RUNS.finditer(text)), default=0)


def fence(text: object) -> str:
    """Wrap text in a Markdown code block whose fence no backtick run in the text can close."""
    value = str(text)
    marker = "`" * max(3, _longest_backtick_run(value) + 1)
    newline = "" if value.endswith("\n") else "\n"
    return f"{marker}\n{value}{newline}{marker}"


def inline(text: object) -> str:
    """Wrap short text in inline code (Markdown rules: padded when it touches a backtick)."""
    value = str(text)
    marker = "`" * (_longest_backtick_run(value) + 1)
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    return f"{marker}{pad}{value}{pad}{marker}"


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    env = ImmutableSandboxedEnvironment(
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=False,
    )
    env.filters["fence"] = fence
    env.filters["inline"] = inline
    return env


@lru_cache(maxsize=64)
def _compile(source: str) -> jinja2.Template:
    return _environment().from_string(source)


def _unfenced_inputs(tree: nodes.Template, inputs: set[str]) -> set[str]:
    """Inputs that some output expression uses other than as ``name | fence/inline``."""
    bad: set[str] = set()
    for output in tree.find_all(nodes.Output):
        for expr in output.nodes:
            if isinstance(expr, nodes.TemplateData):
                continue
            if (isinstance(expr, nodes.Filter) and expr.name in FENCE_FILTERS
                    and isinstance(expr.node, nodes.Name) and not expr.args):
                continue
            names = [expr, *expr.find_all(nodes.Name)]
            bad.update(n.name for n in names if isinstance(n, nodes.Name) and n.name in inputs)
    return bad


def check_templates(rubric: Rubric, path: Path | str = "<rubric>") -> None:
    """Check a rubric's templates: valid Jinja2, only declared inputs, every input used and
    always fenced. Raises :class:`evaluator.rubrics.rubric.RubricError` naming the file."""
    inputs = set(rubric.inputs)
    used: set[str] = set()
    for part, source in (("system", rubric.system), ("template", rubric.template)):
        if source is None:
            continue
        try:
            tree = _environment().parse(source)
        except jinja2.TemplateSyntaxError as exc:
            raise RubricError(f"{path}: {part}: Jinja2 syntax error line {exc.lineno}: "
                              f"{exc.message}") from None
        variables = meta.find_undeclared_variables(tree)
        unknown = sorted(variables - inputs)
        if unknown:
            raise RubricError(f"{path}: {part} uses {unknown}, which are not declared "
                              "under 'inputs'")
        unfenced = sorted(_unfenced_inputs(tree, inputs))
        if unfenced:
            raise RubricError(f"{path}: {part} renders {unfenced} without '| fence' or "
                              "'| inline'; case text must always be delimited")
        used |= variables
    unused = sorted(inputs - used)
    if unused:
        raise RubricError(f"{path}: inputs {unused} are declared but never used in the template")


def render_messages(rubric: Rubric, fields: Mapping[str, str], *,
                    system_role: bool = True) -> list[dict[str, str]]:
    """Render a case into chat messages: ``[system?, user]``.

    With ``system_role=False`` (judges whose chat template has no system turn) the system
    text is placed before the user text in a single user message.
    """
    values = {name: fields.get(name, "") for name in rubric.inputs}
    user = _compile(rubric.template).render(values).strip("\n")
    if rubric.system is None:
        return [{"role": "user", "content": user}]
    system = _compile(rubric.system).render(values).strip("\n")
    if system_role:
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]
    return [{"role": "user", "content": f"{system}\n\n{user}"}]
