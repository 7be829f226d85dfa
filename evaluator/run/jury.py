"""A jury: several judges score every case, one model loaded at a time, and their verdicts
are combined into one results file.

Each member judges into its own results file, ``<name>.jury/<judge>.jsonl`` beside the
output, through the ordinary :func:`evaluator.run.runner.evaluate` (so each member resumes,
keeps its manifest and summary, and is unloaded before the next one loads). The combined
file ``<name>.jsonl`` is then rebuilt from the member files (replaced atomically): one record
per case with every member's verdict under ``jury`` and a reduced verdict
(:mod:`evaluator.analysis.panel`); its summary adds ``inter_judge`` agreement. A crash loses at most
a member's in-flight batch; re-running the same command resumes the member it stopped in.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from evaluator.analysis.kinds import analysis_kind
from evaluator.analysis.panel import combine_verdicts, reduction_of
from evaluator.analysis.summary.summary import summary_path_for, write_summary
from evaluator.data.files import (
    PRIVATE_DIR,
    OutputRefused,
    check_path_name,
    exclusive_lock,
    make_private_dirs,
    show_path,
    write_bytes_atomic,
    write_json_atomic,
)
from evaluator.data.results import ResultRecord, one_rubric, read_results, rewrite_results
from evaluator.judges.models_file import JudgeConfigError, JurySpec, resolve_judge, with_threads
from evaluator.rubrics.load import load_rubric
from evaluator.rubrics.rubric import Rubric
from evaluator.run.kinds import run_kind
from evaluator.run.manifest import (
    canonical_hash,
    lock_path_for,
    manifest_path_for,
    now,
    read_manifest,
)
from evaluator.run.resume import ResumeConflict, check_output_paths, move_aside
from evaluator.run.runner import RunResult, evaluate
from evaluator.run.task import Judge, RunOptions, Task

SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class JuryResult(RunResult):
    """What a jury run produced: the combined file (its ``failed``: the cases without a
    combined verdict) and each member's run."""

    members: list[RunResult]


def members_dir(output_path: Path) -> Path:
    """``out.jsonl`` -> ``out.jury/``, where each member's results file lives."""
    output_path = Path(output_path)
    return output_path.with_name(output_path.stem + ".jury")


# In the member folder: which combined results file the folder belongs to (a name no member
# can have: member names start with a letter or digit).
OWNER_FILE = ".results-file"
_OWNER_PREFIX = "evaluator jury members of "


def _owner_text(output_path: Path) -> bytes:
    return os.fsencode(f"{_OWNER_PREFIX}{output_path.name}\n")


def check_members_dir(output_path: Path) -> None:
    """Refuse a member folder that is a symbolic link, not a folder, another user's, or one
    that belongs to another combined results file (``t.jsonl`` and ``t.json`` would share
    ``t.jury/``). A folder of an earlier version (no owner file) is accepted."""
    folder = members_dir(output_path)
    try:
        info = os.lstat(folder)
    except FileNotFoundError:
        return
    shown = show_path(folder)
    if stat.S_ISLNK(info.st_mode):
        raise OutputRefused(f"{shown} is a symbolic link; refusing to write jury members "
                            "through it (remove the link, or choose another --output)")
    if not stat.S_ISDIR(info.st_mode):
        raise OutputRefused(f"{shown} exists and is not a folder; choose another --output")
    if info.st_uid != os.geteuid():
        raise OutputRefused(f"{shown} belongs to another user; refusing to write case text "
                            "into it")
    try:
        owner = (folder / OWNER_FILE).read_bytes()
    except FileNotFoundError:
        return
    except OSError:
        owner = b""
    if owner != _owner_text(output_path):
        text = os.fsdecode(owner)
        named = (text[len(_OWNER_PREFIX):].rstrip("\n") if text.startswith(_OWNER_PREFIX)
                 else None)
        whose = (f"the jury results file {show_path(named)}" if named
                 else "something else (its owner file is not this tool's)")
        raise OutputRefused(f"{shown} belongs to {whose}, not {show_path(output_path.name)}: "
                            "outputs with the same stem would share it; choose an --output "
                            "with another stem")


def _claim_members_dir(output_path: Path) -> None:
    """Create the member folder (0700) if needed and record whose it is."""
    check_members_dir(output_path)
    folder = members_dir(output_path)
    make_private_dirs(folder.parent)
    try:
        os.mkdir(folder, PRIVATE_DIR)
    except FileExistsError:
        pass
    check_members_dir(output_path)  # made meanwhile: still a folder of ours
    owner = folder / OWNER_FILE
    if not owner.exists():
        write_bytes_atomic(owner, _owner_text(output_path))


def member_path(output_path: Path, judge: str) -> Path:
    """The results file of one jury member."""
    if not SAFE_NAME.match(judge):
        raise JudgeConfigError(f"judge name {judge!r} cannot name a file; jury members need "
                               "names of letters, digits, '.', '_' and '-'")
    return members_dir(output_path) / f"{judge}.jsonl"


def _check_existing(output_path: Path, settings: dict[str, Any]) -> None:
    if not output_path.exists():
        return
    manifest = read_manifest(manifest_path_for(output_path))
    if manifest is None or manifest.get("jury") != settings:
        raise ResumeConflict(f"{output_path} holds results that are not from this jury "
                             f"({', '.join(settings['judges'])}, reduce "
                             f"{settings['reduction']['integer']}): pass --force-new to start "
                             "a new file (the old one is kept), or choose another --output")


def evaluate_jury(task: Task, jury_name: str, jury: JurySpec, judge: Judge, run: RunOptions,
                  *, on_member: Callable[[int, str], None] | None = None) -> JuryResult:
    """Judge every case of ``task`` with each member of ``jury`` in turn, through
    :func:`evaluate` (``judge`` gives every member its models file, samples and temperature;
    its ``reduce``, else the jury's own, combines the verdicts; ``run`` is the combined
    file's), then write the combined results and summary. ``on_member(index, name)`` is
    called before each member starts. The combined output's lock is held throughout
    (``run.wait``: see :func:`evaluate`)."""
    output_path = Path(run.output_path)
    check_path_name(output_path)
    check_path_name(task.input_path, "--input")
    rubric_obj = (task.rubric if isinstance(task.rubric, Rubric)
                  else load_rubric(task.rubric, task.rubrics_dirs))
    run_kind(rubric_obj).check_jury(jury_name)
    if judge.threads is not None:  # refused for a member that cannot take it, before any runs
        for name in jury.judges:
            with_threads(name, resolve_judge(name, judge.models_path)[1], judge.threads)
    reduce = judge.reduce or jury.reduce
    settings = {"jury": jury_name, "judges": list(jury.judges),
                "reduction": reduction_of(reduce)}
    paths = [member_path(output_path, judge) for judge in jury.judges]
    inputs = [Path(task.input_path)]
    check_output_paths(output_path, inputs)
    check_members_dir(output_path)
    # Held for the whole jury (each member's run holds its own file's lock as well).
    with exclusive_lock(lock_path_for(output_path), output_path, wait=run.wait):
        check_output_paths(output_path, inputs)
        check_members_dir(output_path)  # never moved aside when not ours
        manifest_path = manifest_path_for(output_path)
        summary_path = summary_path_for(output_path)
        if run.force_new:
            move_aside([output_path, manifest_path, summary_path, members_dir(output_path)])
        _check_existing(output_path, settings)
        _claim_members_dir(output_path)

        members = []
        member_task = replace(task, rubric=rubric_obj)
        for index, (name, path) in enumerate(zip(jury.judges, paths)):
            if on_member is not None:
                on_member(index, name)
            # force_new moved the old members aside above: each member starts afresh.
            members.append(evaluate(member_task, replace(judge, name=name, reduce=reduce),
                                    replace(run, output_path=path, force_new=False)))

        member_records = [read_results(path, rubric_for=one_rubric(rubric_obj))
                          for path in paths]
        member_hashes = [
            str(read_manifest(manifest_path_for(p)).get("settings_hash"))  # type: ignore[union-attr]
            for p in paths]
        combined_hash = canonical_hash({"jury": settings, "members": member_hashes})[:16]
        records = combine_members(rubric_obj, jury_name, list(jury.judges), member_records,
                                  reduce, combined_hash)
        rewrite_results(output_path, [r.model_dump_json().encode("utf-8") for r in records])
        write_json_atomic(manifest_path, {
            "manifest_version": 1, "kind": "jury", "results_file": output_path.name,
            "jury": settings, "settings_hash": combined_hash, "written": now(),
            "members": [{"judge": judge,
                         "results_file": str(path.relative_to(output_path.parent)),
                         "settings_hash": digest}
                        for judge, path, digest in zip(jury.judges, paths, member_hashes)]})
        kind = analysis_kind(rubric_obj)
        summary = kind.summarize(rubric_obj, jury_name, records).model_copy(
            update={"results_file": output_path.name})
        write_summary(summary_path, summary)
    return JuryResult(output_path, summary_path, summary, members)


def combine_members(rubric: Rubric, jury_name: str, judges: list[str],
                    member_records: list[list[ResultRecord]], reduce: str,
                    settings_hash: str) -> list[ResultRecord]:
    """One combined record per case, in the first member's order. Every member must hold
    every case (each member run finished)."""
    by_judge = [{r.case_id: r for r in records} for records in member_records]
    combined = []
    for record in member_records[0]:
        panel = []
        for judge, records in zip(judges, by_judge):
            if record.case_id not in records:
                raise ResumeConflict(f"jury member {judge!r} has no result for case "
                                     f"{record.case_id!r}; re-run the same command")
            panel.append(records[record.case_id])
        combined.append(combine_verdicts(
            rubric, panel, reduce, "jury", judges, judge=jury_name,
            settings_hash=settings_hash, prompt_hash=None, max_new_tokens=None,
            batch_size=None, batch_seconds=None, prompt_tokens=None))
    return combined
