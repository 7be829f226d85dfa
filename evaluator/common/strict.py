"""Strict configuration files (rubrics, ``models.yaml``): how their problems are reported.

Both formats parse into pydantic models that forbid unknown keys; a file that does not fit
is reported as one line naming the file, then one line per problem, without the offending
values (a rubric or a judge entry can quote case text).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError


def format_validation_error(path: Path, what: str, error: ValidationError) -> str:
    """``path: invalid <what>`` and one line per problem (location: message), without the
    offending values."""
    lines = [f"{path}: invalid {what} ({error.error_count()} problem(s)):"]
    for item in error.errors(include_input=False, include_url=False):
        where = ".".join(str(part) for part in item["loc"]) or "(top level)"
        lines.append(f"  - {where}: {item['msg']}")
    return "\n".join(lines)
