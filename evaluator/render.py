"""Rendering a rubric's Jinja2 templates into chat messages, with case text fenced.

Case text is passed to Jinja2 as data, so template syntax inside it is never evaluated; and
every case field must go through ``| fence`` (a Markdown code block) or ``| inline`` (inline
code) whose backtick run is longer than any run inside the text, so the text cannot close
its own delimiter and pose as instructions. The text itself is never altered. The rule is
checked in the template when a rubric loads, and enforced again while rendering (see
:mod:`evaluator.sandbox`, which also bounds what a template may compute).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

import jinja2
from jinja2 import meta, nodes

from evaluator.sandbox import (
    FENCE_FILTERS,
    RubricSandbox,
    TemplateRefused,
    case_values,
    compile_template,
    render_template,
)

if TYPE_CHECKING:
    from evaluator.rubric import Rubric

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
def _environment() -> RubricSandbox:
    return RubricSandbox()


@lru_cache(maxsize=64)
def _compile(source: str) -> jinja2.Template:
    return compile_template(_environment(), source)


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
    always fenced. Raises :class:`evaluator.rubric.RubricError` naming the file."""
    from evaluator.rubric import RubricError

    inputs = set(rubric.inputs)
    used: set[str] = set()
    for part, source in (("system", rubric.system), ("template", rubric.template)):
        if source is None:
            continue
        try:
            tree = _environment().parse(source)
            _compile(source)  # unknown filters and tests are found when compiling
        except jinja2.TemplateSyntaxError as exc:
            raise RubricError(f"{path}: {part}: Jinja2 syntax error line {exc.lineno}: "
                              f"{exc.message}") from None
        except (ValueError, RecursionError, MemoryError) as exc:  # e.g. a 5000-digit number
            raise RubricError(f"{path}: {part}: cannot parse the template "
                              f"({type(exc).__name__})") from None
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


def _template_line(traceback: TracebackType | None) -> int | None:
    """The template line being run when an error was raised (Jinja2 rewrites tracebacks
    so that template frames carry template line numbers)."""
    line = None
    while traceback is not None:
        if traceback.tb_frame.f_code.co_filename == "<template>":
            line = traceback.tb_lineno
        traceback = traceback.tb_next
    return line


def _render(rubric: Rubric, part: str, source: str, fields: Mapping[str, str]) -> str:
    """One template rendered, or a :class:`~evaluator.rubric.RubricError` of one line that
    names the rubric file and template line and quotes no case text."""
    from evaluator.rubric import RubricError

    try:
        return render_template(_compile(source), case_values(fields, rubric.inputs))
    except Exception as exc:  # noqa: BLE001 - a template is user code: its errors are the rubric's
        line = _template_line(exc.__traceback__)
        if isinstance(exc, (TemplateRefused, jinja2.TemplateError)):
            # Messages built by this package and by Jinja2 name types and fields, not values.
            reason = " ".join(str(exc).split())
        else:
            # Python's own messages may quote a value: name the error only.
            reason = f"the template raised {type(exc).__name__}"
        where = rubric.source_path or f"rubric {rubric.name!r}"
        at = f" line {line}" if line is not None else ""
        raise RubricError(f"{where}: {part}{at}: {reason}") from None


def render_messages(rubric: Rubric, fields: Mapping[str, str], *,
                    system_role: bool = True) -> list[dict[str, str]]:
    """Render a case into chat messages: ``[system?, user]``.

    With ``system_role=False`` (judges whose chat template has no system turn) the system
    text is placed before the user text in a single user message. A template that breaks
    a rule or a limit raises :class:`~evaluator.rubric.RubricError`.
    """
    user = _render(rubric, "template", rubric.template, fields).strip("\n")
    if rubric.system is None:
        return [{"role": "user", "content": user}]
    system = _render(rubric, "system", rubric.system, fields).strip("\n")
    if system_role:
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]
    return [{"role": "user", "content": f"{system}\n\n{user}"}]
