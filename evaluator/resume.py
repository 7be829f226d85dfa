"""Resuming a run into an existing results file, exactly once per case.

A case is finished when the file holds its record with the same settings hash (judge,
model, rubric, template, schema, sampling: see :mod:`evaluator.manifest`) and the same
prompt hash (its own rendered text). Finished cases are skipped; ``backend_error`` records
(a transient failure) and ``input_error`` records of rows that are valid now are removed
and judged again. A file written with other settings, or cases whose text changed, is
refused with a message naming what differs: results of two setups are never mixed.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from evaluator.cases import Case, InputProblem
from evaluator.manifest import diff_settings, read_manifest
from evaluator.results import (
    ResultsFileDamaged,
    StoredLine,
    rewrite_results,
    scan_results,
    truncate_torn_tail,
)

log = logging.getLogger(__name__)

RETRIED_STATUSES = ("backend_error",)


class ResumeConflict(ValueError):
    """The results file cannot be continued with this run's settings or input."""


@dataclass
class ResumePlan:
    """What is left to do: the input problems and cases without a finished record."""

    problems: list[InputProblem]
    cases: list[Case]
    already_done: int = 0
    retried: int = 0
    moved_aside: list[Path] = field(default_factory=list)


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


def _check_settings(path: Path, lines: list[StoredLine], settings: Mapping[str, Any],
                    settings_hash: str, manifest_path: Path) -> None:
    stored = {line.record.settings_hash for line in lines}
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


def plan_resume(output_path: Path, manifest_path: Path, settings: Mapping[str, Any],
                settings_hash: str, problems: list[InputProblem], cases: list[Case],
                prompt_hashes: Mapping[str, str]) -> ResumePlan:
    """Check an existing results file against this run and return what is left to judge.

    Repairs a torn last line, then removes records that will be judged again (atomically).
    Raises :class:`ResumeConflict` (settings or case text changed) or
    :class:`evaluator.results.ResultsFileDamaged` before anything is judged.
    """
    if not output_path.exists():
        return ResumePlan(problems, cases)
    scan = scan_results(output_path)
    truncate_torn_tail(output_path, scan)
    _check_settings(output_path, scan.lines, settings, settings_hash, manifest_path)
    stored: dict[str, StoredLine] = {}
    for line in scan.lines:
        previous = stored.get(line.record.case_id)
        if previous is not None:
            raise ResultsFileDamaged(
                f"{output_path} holds case {line.record.case_id!r} twice (lines "
                f"{previous.number} and {line.number}); it was edited or written by another "
                "tool. Fix it, or pass --force-new to start a new file.")
        stored[line.record.case_id] = line

    drop: set[str] = {cid for cid, line in stored.items()
                      if line.record.status in RETRIED_STATUSES}
    changed: list[str] = []
    todo_problems = []
    for problem in problems:
        line = stored.get(problem.case_id)
        if line is None or problem.case_id in drop:
            todo_problems.append(problem)
        elif line.record.status != "input_error":
            changed.append(f"case {problem.case_id!r} (input line {problem.line})")
    todo_cases = []
    for case in cases:
        line = stored.get(case.case_id)
        if line is None or case.case_id in drop:
            todo_cases.append(case)
        elif line.record.status == "input_error":
            drop.add(case.case_id)  # the row was fixed since: judge it now
            todo_cases.append(case)
        elif line.record.prompt_hash != prompt_hashes[case.case_id]:
            changed.append(f"case {case.case_id!r} (input line {case.line})")
    if changed:
        shown = "; ".join(changed[:5]) + (" ..." if len(changed) > 5 else "")
        raise ResumeConflict(
            f"{output_path} cannot be resumed: {len(changed)} finished case(s) now have a "
            f"different text in the input than when they were judged: {shown}. Pass "
            "--force-new to start a new file (the old one is kept, renamed) or choose another "
            "--output.")
    if drop:
        rewrite_results(output_path, [line.raw for cid, line in stored.items()
                                      if cid not in drop])
        log.info("%s: %d record(s) will be judged again", output_path, len(drop))
    input_ids = {p.case_id for p in problems} | {c.case_id for c in cases}
    others = sum(1 for cid in stored if cid not in input_ids)
    if others:
        log.warning("%s holds %d record(s) for case ids that are not in this input; they are "
                    "kept and counted in the summary", output_path, others)
    done = len(problems) + len(cases) - len(todo_problems) - len(todo_cases)
    return ResumePlan(todo_problems, todo_cases, already_done=done, retried=len(drop))
