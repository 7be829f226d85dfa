"""Strict configuration files (rubrics, ``models.yaml``): how their problems are reported.

Both formats parse into pydantic models that forbid unknown keys; a file that does not fit
is reported on one line naming the file and its problems, without the offending values (a
rubric or a judge entry can quote case text). The YAML itself is read by
:mod:`evaluator.common.strict_yaml`.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError


def format_validation_error(path: Path, what: str, error: ValidationError) -> str:
    """``path: invalid <what>: location: message; ...`` on one line, without the offending
    values (at most five problems are listed)."""
    problems = []
    for item in error.errors(include_input=False, include_url=False):
        where = ".".join(str(part) for part in item["loc"]) or "(top level)"
        # A validator's own words, without pydantic's "Value error, " before them.
        problems.append(f"{where}: {item['msg'].removeprefix('Value error, ')}")
    shown = "; ".join(problems[:5])
    more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
    return " ".join(f"{path}: invalid {what}: {shown}{more}".split())
