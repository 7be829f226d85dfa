"""Resuming a run into an existing results file, exactly once per case.

A case is finished when the file holds its record with the same settings hash (judge,
model, rubric, template, schema, sampling: see :mod:`evaluator.run.manifest`) and the same
prompt hash (its own rendered text). Finished cases are skipped; ``backend_error`` records
(a transient failure) and ``input_error`` records of rows that are valid now are removed
and judged again. A file written with other settings, or cases whose text changed, is
refused with a message naming what differs: results of two setups are never mixed.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from evaluator.analysis.summary.summary import summary_path_for
from evaluator.common.errors import UserError
from evaluator.data.case_ids import CaseIds
from evaluator.data.cases import Case, InputProblem, UniqueIds
from evaluator.data.files import (
    LOCK_SUFFIX,
    OutputRefused,
    check_path_name,
    refuse_foreign_lock,
    refuse_unsafe_target,
    same_file,
    show_path,
)
from evaluator.data.results import (
    ResultsFileDamaged,
    ResultsReader,
    rewrite_results,
    truncate_torn_tail,
)
from evaluator.rubrics.rubric import Rubric
from evaluator.run.manifest import (
    diff_settings,
    lock_path_for,
    manifest_path_for,
    read_manifest,
)

log = logging.getLogger(__name__)

RETRIED_STATUSES = ("backend_error",)


class ResumeConflict(UserError, ValueError):
    """The results file cannot be continued with this run's settings or input."""


@dataclass
class ResumePlan:
    """What is left to do, from one pass over the input: the input problems to record, the
    ids of the cases to judge, and counts. Cases themselves are not kept (the input is read
    again, streamed, while judging)."""

    problems: list[InputProblem] = field(default_factory=list)
    todo: CaseIds = field(default_factory=CaseIds)  # held as digests: flat at 1M cases
    valid: int = 0
    input_errors: int = 0
    already_done: int = 0
    retried: int = 0
    drop: set[str] = field(default_factory=set)  # stored records to remove before judging
    first_problem: InputProblem | None = None    # for --strict
    valid_bytes: int = 0  # the results file's valid prefix, and a torn last line after it
    torn_bytes: int = 0
    unterminated: bool = False  # a complete last record lacks its newline (added)
    null_ids: int = 0  # valid rows whose id was null: named line-N


@dataclass(frozen=True)
class _Stored:
    line: int
    status: str
    prompt_hash: str | None


def move_aside(paths: Sequence[Path]) -> list[Path]:
    """Rename existing files to ``<stem>.superseded-<UTC time><suffix>`` (``-2``, ``-3`` ...
    added when that name is taken: two moves in one second); nothing is deleted or
    replaced."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    moved = []
    for path in paths:
        if path.exists() or path.is_symlink():
            target = path.with_name(f"{path.stem}.superseded-{stamp}{path.suffix}")
            count = 1
            while target.exists() or target.is_symlink():
                count += 1
                target = path.with_name(f"{path.stem}.superseded-{stamp}-{count}{path.suffix}")
            os.rename(path, target)
            moved.append(target)
    return moved


# The endings of the files a run names after its output's stem (the jury's member folder
# included): an output named so could be one of another output's, or its own.
COMPANION_SUFFIXES = (LOCK_SUFFIX, ".manifest.json", ".summary.json", ".jury")
# Names that promise a table or a page: a spreadsheet would open JSON lines as one blob a row.
OTHER_FORMATS = (".csv", ".tsv", ".parquet", ".xlsx", ".xlsm", ".xls", ".ods", ".html", ".htm")


def output_files(output_path: Path) -> list[Path]:
    """A results file and its companions: manifest, summary, lock."""
    return [output_path, manifest_path_for(output_path), summary_path_for(output_path),
            lock_path_for(output_path)]


def _read_companion(path: Path) -> tuple[bool, dict[str, Any] | None]:
    """Whether ``path`` exists, and its JSON object (None: absent, or not a JSON object)."""
    try:
        value = json.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        return False, None
    except (OSError, ValueError):
        return True, None
    return True, value if isinstance(value, dict) else None


def _is_ours(kind: str, value: Mapping[str, Any]) -> bool:
    """Whether a manifest or summary holds the keys every version of this tool writes."""
    if kind == "manifest":
        return "settings_hash" in value and ("runs" in value or value.get("kind") == "jury")
    return "rubric" in value and ("status_counts" in value or "cases" in value)


def _check_companion(output_path: Path, companion: Path, kind: str) -> None:
    """Refuse a manifest or summary that this tool did not write (a user's own file of that
    name), or that belongs to another results file."""
    exists, value = _read_companion(companion)
    if not exists:
        return
    if value is None or not _is_ours(kind, value):
        raise OutputRefused(
            f"{show_path(companion)} exists and is not a {kind} written by this tool; "
            "refusing to overwrite it (even with --force-new): move it away, or choose an "
            "--output with another stem")
    owner = value.get("results_file")
    if isinstance(owner, str) and owner != output_path.name:
        raise OutputRefused(
            f"{show_path(companion)} was written for the results file {show_path(owner)}, not "
            f"{show_path(output_path.name)}: if you renamed a run's files, rename them back; if "
            f"{show_path(owner)} is another output with the same stem, their manifests and "
            "summaries would overwrite each other, so choose an --output with another stem.")


def check_output_paths(output_path: Path, inputs: Sequence[Path] = ()) -> None:
    """Refuse, before anything is written, an output that must not be written: one of its
    files (see :func:`output_files`) is a symbolic link, not a regular file, another
    user's, or one of ``inputs``; or its manifest or summary, named by the stem, belongs
    to another results file (``col.jsonl`` and ``col.json`` would share them); or its own
    name is one a companion could have (``x.evaluator-lock`` would be its own lock); or its
    lock file's name is taken by a file this tool did not write."""
    check_path_name(output_path)
    for source in inputs:
        check_path_name(source, "--input")
    if output_path.name.endswith(COMPANION_SUFFIXES):
        raise OutputRefused(f"{show_path(output_path.name)} is named like a file a run writes "
                            "beside its "
                            f"results ({', '.join(COMPANION_SUFFIXES)}); choose an --output "
                            "ending in .jsonl")
    # A new file only: a run an earlier release started under such a name still resumes.
    if (output_path.name.lower().endswith(OTHER_FORMATS)
            and not os.path.lexists(output_path)):
        raise OutputRefused(f"{show_path(output_path.name)}: a run writes JSON lines, one "
                            "record per case, not a table or a page; choose an --output "
                            "ending in .jsonl (for a table: evaluator export)")
    for path in output_files(output_path):
        refuse_unsafe_target(path)
    refuse_foreign_lock(lock_path_for(output_path))
    for path in output_files(output_path):
        for source in inputs:
            if same_file(path, source):
                raise OutputRefused(f"{show_path(path)} is the input file {show_path(source)}: "
                                    "a run never writes "
                                    "over its input; choose another --output")
    _check_companion(output_path, manifest_path_for(output_path), "manifest")
    _check_companion(output_path, summary_path_for(output_path), "summary")


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
    raise ResumeConflict(f"{show_path(path)} cannot be resumed: {what}. Results judged "
                         "with different "
                         "settings are never mixed in one file: pass --force-new to start a new "
                         "file (the old one is kept, renamed) or choose another --output.")


def _check_torn_tail(path: Path, reader: ResultsReader, manifest_path: Path) -> None:
    """A torn last line is repaired only in a results file this tool wrote: its manifest
    names it. Anything else ending without a newline (an input file, notes) is refused
    untouched."""
    if not reader.torn_bytes:
        return
    manifest = read_manifest(manifest_path)
    if manifest is None or manifest.get("results_file") != path.name:
        raise ResultsFileDamaged(
            f"{show_path(path)} ends with an incomplete line ({reader.torn_bytes} bytes) and "
            "no manifest "
            f"({manifest_path.name}) names it as a results file of this tool, so it is not "
            "repaired: choose another --output (or pass --force-new: the file is kept, "
            "renamed).")


def _index_results(output_path: Path, settings: Mapping[str, Any], settings_hash: str,
                   manifest_path: Path, rubric: Rubric | None,
                   ) -> tuple[dict[str, _Stored], ResultsReader]:
    """The finished records of an existing results file, by case id (status and prompt
    hash only), once the settings are checked and a torn last line found repairable (the
    reader says where it is; :func:`apply_plan` cuts it). The records judged with these
    settings are checked against ``rubric`` (an edited score is a damaged line); others
    are refused by the settings check, which says what changed."""
    reader = ResultsReader(output_path, None if rubric is None else (
        lambda record: rubric if record.settings_hash == settings_hash else None))
    stored: dict[str, _Stored] = {}
    hashes: set[str | None] = set()
    for line in reader:
        record = line.record
        previous = stored.get(record.case_id)
        if previous is not None:
            raise ResultsFileDamaged(
                f"{show_path(output_path)} holds case {record.case_id!r} twice (lines "
                f"{previous.line} and {line.number}); it was edited or written by another "
                "tool. Fix it, or pass --force-new to start a new file.")
        stored[record.case_id] = _Stored(line.number, record.status, record.prompt_hash)
        hashes.add(record.settings_hash)
    _check_settings(output_path, hashes, settings, settings_hash, manifest_path)
    _check_torn_tail(output_path, reader, manifest_path)
    return stored, reader


def plan_resume(output_path: Path | None, manifest_path: Path, settings: Mapping[str, Any],
                settings_hash: str, items: Iterable[Case | InputProblem], ids: UniqueIds,
                hash_of: Callable[[Case], str], rubric: Rubric | None = None) -> ResumePlan:
    """One pass over the input (``items``, streamed) against an existing results file
    (``output_path``; None or missing: a fresh run): what is left to judge.

    Raises :class:`ResumeConflict` (settings or case text changed),
    :class:`evaluator.data.results.ResultsFileDamaged` (also for a torn last line in a file
    no manifest names as this tool's) or, through ``ids``, a duplicate-id
    :class:`evaluator.data.cases.InputFileError` — all before anything is judged or changed.
    A repairable torn last line and the records to be judged again (``drop``) are
    recorded in the plan; :func:`apply_plan` removes them. ``rubric``: the run's, which
    the stored verdicts are checked against.
    """
    plan = ResumePlan()
    stored: dict[str, _Stored] = {}
    if output_path is not None and output_path.exists():
        stored, reader = _index_results(output_path, settings, settings_hash, manifest_path,
                                        rubric)
        plan.valid_bytes, plan.torn_bytes = reader.valid_bytes, reader.torn_bytes
        plan.unterminated = reader.unterminated
    changed: list[str] = []
    seen = CaseIds()
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
        plan.null_ids += item.null_id
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
            f"{show_path(output_path)} cannot be resumed: {len(changed)} finished case(s) now "
            "have a "
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
    """Cut a torn last line off, and remove the records that will be judged again (the file
    is rewritten atomically, streamed)."""
    truncate_torn_tail(output_path, plan.valid_bytes, plan.torn_bytes, plan.unterminated)
    if plan.drop:
        rewrite_results(output_path, (line.raw for line in ResultsReader(output_path)
                                      if line.record.case_id not in plan.drop))
        log.info("%s: %d record(s) will be judged again", output_path, len(plan.drop))
