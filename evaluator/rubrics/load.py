"""Finding and reading rubric files: by name (a user's folders first, then the built-ins in
``prompts/``) or by path. A file is read with the strict YAML loader, parsed strictly
(:mod:`evaluator.rubrics.rubric`), and its templates (:func:`evaluator.rubrics.render.check_templates`)
and token budget are checked before any case is read; every problem is a
:class:`RubricError` naming the file.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from pydantic import ValidationError

from evaluator.common.limits import MAX_VERDICT_TOKENS
from evaluator.common.strict import format_validation_error
from evaluator.common.strict_yaml import YamlRefused, load_yaml_file
from evaluator.rubrics.render import check_templates
from evaluator.rubrics.rubric import Rubric, RubricError
from evaluator.rubrics.schema import max_new_tokens, output_json_schema

BUILTIN_RUBRICS_DIR = Path(__file__).resolve().parents[2] / "prompts"


def load_rubric_file(path: Path) -> Rubric:
    """Parse and validate one rubric file; raise :class:`RubricError` naming the file."""
    path = Path(path)
    try:
        data, raw_bytes = load_yaml_file(path, "rubric file")
    except YamlRefused as exc:
        raise RubricError(str(exc)) from None
    if not isinstance(data, dict):
        raise RubricError(f"{path}: a rubric file must be a YAML mapping")
    try:
        rubric = Rubric.model_validate(data)
    except ValidationError as exc:
        raise RubricError(format_validation_error(path, "rubric", exc)) from None
    if rubric.name != path.stem:
        raise RubricError(f"{path}: 'name: {rubric.name}' must match the file name "
                          f"({path.stem}.yaml)")
    # Template problems (syntax, undeclared variables, unfenced case text) and an absurd
    # token budget are checked here so that a bad rubric fails before any case is read.
    check_templates(rubric, path)
    budget = max_new_tokens(output_json_schema(rubric))
    if budget > MAX_VERDICT_TOKENS:
        raise RubricError(f"{path}: the longest valid verdict is {budget} tokens (at most "
                          f"{MAX_VERDICT_TOKENS}): lower max_items, max_length or "
                          "explanation_max_length")
    return rubric.model_copy(update={
        "source_path": path.resolve(),
        "source_sha256": hashlib.sha256(raw_bytes).hexdigest(),
    })


def rubric_dirs(extra_dirs: list[Path] | tuple[Path, ...] = ()) -> list[Path]:
    """Directories searched for rubrics: user-given ones first, then the built-ins (absent
    when installed from a wheel, as from an air-gapped bundle: its prompts/ is given)."""
    builtin = [BUILTIN_RUBRICS_DIR] if BUILTIN_RUBRICS_DIR.is_dir() or not extra_dirs else []
    return [Path(d) for d in extra_dirs] + builtin


def available_rubrics(extra_dirs: list[Path] | tuple[Path, ...] = ()) -> dict[str, Path]:
    """Map rubric name -> file. A user directory may override a built-in of the same name."""
    found: dict[str, Path] = {}
    for directory in rubric_dirs(extra_dirs):
        if not directory.is_dir():
            raise RubricError(f"{directory}: rubrics directory does not exist")
        for path in sorted(directory.glob("*.yaml")):
            found.setdefault(path.stem, path)
    return found


def load_rubric(name_or_path: str | Path, extra_dirs: list[Path] | tuple[Path, ...] = ()) -> Rubric:
    """Load a rubric by name (searching ``extra_dirs`` then the built-ins) or by file path."""
    candidate = Path(name_or_path)
    if candidate.suffix in {".yaml", ".yml"} and candidate.exists():
        return load_rubric_file(candidate)
    known = available_rubrics(extra_dirs)
    path = known.get(str(name_or_path))
    if path is None:
        raise RubricError(f"unknown rubric {str(name_or_path)!r}; available: "
                          f"{', '.join(sorted(known)) or '(none)'} (add a directory with "
                          "--rubrics-dir, or pass a .yaml path)")
    return load_rubric_file(path)
