"""Resuming a run into an existing results file, exactly once per case.

A case is finished when the file holds its record with the same settings hash (judge,
model, rubric, template, schema, sampling: see :mod:`evaluator.run.manifest`) and the same
prompt hash (its own rendered text). Finished cases are skipped; ``backend_error`` records
(a transient failure) and ``input_error`` records of rows that are valid now are removed
and judged again. A file written with other settings, or cases whose text changed, is
refused with a message naming what differs: results of two setups are never mixed.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from evaluator.data.cases import Case, InputProblem, UniqueIds
from evaluator.data.results import (
    ResultsFileDamaged,
    ResultsReader,
    rewrite_results,
    truncate_torn_tail,
)
from evaluator.run.manifest import diff_settings, read_manifest

log = logging.getLogger(__name__)

RETRIED_STATUSES = ("backend_error",)


class ResumeConflict(ValueError):
    """The results file cannot be continued with this run's settings or input."""


@dataclass
class ResumePlan:
    """What is left to do, from one pass over the input: the input problems to record, the
    ids of the cases to judge, and counts. Cases themselves are not kept (the input is read
    again, streamed, while judging)."""

    problems: list[InputProblem] = field(default_factory=list)
    todo: set[str] = field(default_factory=set)
    valid: int = 0
    input_errors: int = 0
    already_done: int = 0
    retried: int = 0
    drop: set[str] = field(default_factory=set)  # stored records to remove before judging
    first_problem: InputProblem | None = None    # for --strict


@dataclass(frozen=True)
class _Stored:
    line: int
    status: str
    prompt_hash: str | None


def move_aside(paths: Sequence[Path]) -> list[Path]:
    """Rename existing files to ``<stem>.superseded-<UTC time><suffix>``; nothing is deleted."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    moved = []
    for path in paths:
        if path.exists():
            target = path.with_name(f"{path.stem}.superseded-{stamp}{path.suffix}")
            os.replace(path, target)
            moved.append(target)
    return moved


def _check_settings(path: Path, stored: set[str | None], settings: Mapping[str, Any],
                    settings_hash: str, manifest_path: Path) -> None:
    if not stored or stored == {settings_hash}:
        return
    manifest = read_manifest(manifest_path)
    if manifest and manifest.get("kind") == "jury":
        what = (f"it holds the combined results of the jury {manifest['jury'].get('jury')!r}, "
                "not of one judge")
    elif manifest and manifest.get("settings_hash") in stored and "settings" in manifest:
        changed = ", ".join(diff_settings(manifest["settings"], settings)) or "unknown"
        what = f"these settings differ from the ones it was written with: {changed}"
    else:
        what = f"its records were written with other settings (no manifest {manifest_path.name} "\
               "says which)"
    raise ResumeConflict(f"{path} cannot be resumed: {what}. Results judged with different "
                         "settings are never mixed in one file: pass --force-new to start a new "
                         "file (the old one is kept, renamed) or choose another --output.")


def _index_results(output_path: Path, settings: Mapping[str, Any], settings_hash: str,
                   manifest_path: Path) -> dict[str, _Stored]:
    """The finished records of an existing results file, by case id (status and prompt
    hash only), after cutting a torn last line and checking the settings."""
    reader = ResultsReader(output_path)
    stored: dict[str, _Stored] = {}
    hashes: set[str | None] = set()
    for line in reader:
        record = line.record
        previous = stored.get(record.case_id)
        if previous is not None:
            raise ResultsFileDamaged(
                f"{output_path} holds case {record.case_id!r} twice (lines "
                f"{previous.line} and {line.number}); it was edited or written by another "
                "tool. Fix it, or pass --force-new to start a new file.")
        stored[record.case_id] = _Stored(line.number, record.status, record.prompt_hash)
        hashes.add(record.settings_hash)
    truncate_torn_tail(output_path, reader)
    _check_settings(output_path, hashes, settings, settings_hash, manifest_path)
    return stored


def plan_resume(output_path: Path | None, manifest_path: Path, settings: Mapping[str, Any],
                settings_hash: str, items: Iterable[Case | InputProblem], ids: UniqueIds,
                hash_of: Callable[[Case], str]) -> ResumePlan:
    """One pass over the input (``items``, streamed) against an existing results file
    (``output_path``; None or missing: a fresh run): what is left to judge.

    Repairs a torn last line. Raises :class:`ResumeConflict` (settings or case text
    changed), :class:`evaluator.data.results.ResultsFileDamaged` or, through ``ids``, a
    duplicate-id :class:`evaluator.data.cases.InputFileError` — all before anything is judged
    or changed. Records to be judged again are listed in ``drop``; :func:`apply_plan`
    removes them.
    """
    stored = ({} if output_path is None or not output_path.exists()
              else _index_results(output_path, settings, settings_hash, manifest_path))
    plan = ResumePlan()
    changed: list[str] = []
    seen: set[str] = set()
    for item in items:
        ids.add(item)
        if stored:
            seen.add(item.case_id)
        line = stored.get(item.case_id)
        retried = line is not None and line.status in RETRIED_STATUSES
        if retried:
            plan.drop.add(item.case_id)
        if isinstance(item, InputProblem):
            plan.input_errors += 1
            plan.first_problem = plan.first_problem or item
            if line is None or retried:
                plan.problems.append(item)
            elif line.status != "input_error":
                changed.append(f"case {item.case_id!r} (input line {item.line})")
            continue
        plan.valid += 1
        if line is None or retried:
            plan.todo.add(item.case_id)
        elif line.status == "input_error":
            plan.drop.add(item.case_id)  # the row was fixed since: judge it now
            plan.todo.add(item.case_id)
        elif line.prompt_hash != hash_of(item):
            changed.append(f"case {item.case_id!r} (input line {item.line})")
    ids.check()
    if changed:
        shown = "; ".join(changed[:5]) + (" ..." if len(changed) > 5 else "")
        raise ResumeConflict(
            f"{output_path} cannot be resumed: {len(changed)} finished case(s) now have a "
            f"different text in the input than when they were judged: {shown}. Pass "
            "--force-new to start a new file (the old one is kept, renamed) or choose another "
            "--output.")
    others = sum(1 for cid in stored if cid not in seen)
    if others:
        log.warning("%s holds %d record(s) for case ids that are not in this input; they are "
                    "kept and counted in the summary", output_path, others)
    plan.retried = len(plan.drop)
    plan.already_done = (plan.valid + plan.input_errors - len(plan.problems) - len(plan.todo))
    return plan


def apply_plan(output_path: Path, plan: ResumePlan) -> None:
    """Remove the records that will be judged again (the file is rewritten atomically,
    streamed)."""
    if plan.drop:
        rewrite_results(output_path, (line.raw for line in ResultsReader(output_path)
                                      if line.record.case_id not in plan.drop))
        log.info("%s: %d record(s) will be judged again", output_path, len(plan.drop))
