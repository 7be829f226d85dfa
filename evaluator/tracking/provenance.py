"""The params and tags logged for a run, read from its manifest and summary.

Params say what produced the results, as the manifest records it (docs/running.md,
Provenance): the rubric and its file, template and schema hashes; the judge's name and
configuration; the model by its identity, ``model_hash`` (the config files' SHA-256 and the
weight files' names and sizes), ``tokenizer_hash`` and the SHA-256 of a bundle's weight list,
never its folder (a path names users and hosts; the hashes are what makes two runs the
same model); the settings hash; sampling; self-consistency; record versions; the evaluator
versions that wrote the file. Param keys are dotted (``sampling.temperature``); values are
text, at most :data:`MAX_VALUE` characters.

Tags make a run findable (``tags."evaluator.settings_hash" = '...'`` in MLflow's search):
the results file's name (not its folder), the logging evaluator's version, rubric, judge,
settings hash, the kind of run, and whether case text was uploaded.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from evaluator.analysis.summary.records import PairwiseSummary, RunSummary
from evaluator.common.version import __version__
from evaluator.tracking.names import key_part

MAX_VALUE = 6000  # MLflow's limit for a param value
SETTINGS_HASHES = ("rubric_file_hash", "template_hash", "schema_hash", "model_hash",
                   "tokenizer_hash")
JUDGE_CONFIG = ("backend", "dtype", "max_model_len", "system_role")


def text(value: Any) -> str | None:
    """A param or tag value: None stays None (not logged), a bool is ``true``/``false``, a
    number or string as written, anything else compact JSON with sorted keys."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        out = str(value)
    else:
        out = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return out if len(out) <= MAX_VALUE else out[:MAX_VALUE - 14] + "...(truncated)"


def _put(out: dict[str, str], key: str, value: Any) -> None:
    value = text(value)
    if value is not None:
        out[key] = value


def _settings_params(out: dict[str, str], manifest: Mapping[str, Any]) -> None:
    settings = manifest.get("settings") or {}
    for key in SETTINGS_HASHES:
        _put(out, key, settings.get(key))
    config = settings.get("judge_config") or {}
    for key in JUDGE_CONFIG:
        _put(out, f"judge.{key}", config.get(key))
    for key in ("engine", "embedded"):
        if config.get(key):
            _put(out, f"judge.{key}", config[key])
    for block in ("sampling", "panel"):
        for key, value in (settings.get(block) or {}).items():
            _put(out, f"{block}.{key_part(key)}", value)
    if settings.get("chat_template_kwargs"):
        _put(out, "chat_template_kwargs", settings["chat_template_kwargs"])
    weight_list = (manifest.get("model") or {}).get("weight_list") or {}
    _put(out, "weight_list_sha256", weight_list.get("sha256"))
    _put(out, "weight_list.names_and_sizes_match", weight_list.get("names_and_sizes_match"))
    runs = [run for run in manifest.get("runs") or [] if isinstance(run, Mapping)]
    _put(out, "runs", len(runs))
    versions = dict.fromkeys(str((run.get("packages") or {}).get("evaluator"))
                             for run in runs if (run.get("packages") or {}).get("evaluator"))
    _put(out, "evaluator_version", ",".join(versions) or None)


def _jury_params(out: dict[str, str], manifest: Mapping[str, Any],
                 members: Mapping[str, Mapping[str, Any] | None]) -> None:
    jury = manifest.get("jury") or {}
    for key, value in jury.items():
        _put(out, f"jury.{key_part(key)}", value)
    for member in manifest.get("members") or []:
        name = key_part(str(member.get("judge")))
        _put(out, f"jury.{name}.settings_hash", member.get("settings_hash"))
        settings = (members.get(str(member.get("judge"))) or {}).get("settings") or {}
        for key in ("model_hash", "tokenizer_hash"):
            _put(out, f"jury.{name}.{key}", settings.get(key))


def run_params(manifest: Mapping[str, Any], summary: RunSummary,
               record_versions: Iterable[int], *,
               members: Mapping[str, Mapping[str, Any] | None] | None = None,
               extra: Mapping[str, Any] | None = None) -> dict[str, str]:
    """The params of a run: from ``manifest`` (a single judge's, or a jury's with its
    ``members``' manifests by judge name), the summary (rubric, judge, score mode, a
    pairwise run's systems), the records' versions, and ``extra`` (the labels' params)."""
    out: dict[str, str] = {}
    _put(out, "rubric", summary.rubric)
    _put(out, "judge", summary.judge)
    if manifest.get("kind") == "jury":
        _jury_params(out, manifest, members or {})
    else:
        _settings_params(out, manifest)
    _put(out, "settings_hash", manifest.get("settings_hash"))
    _put(out, "record_version", ",".join(str(v) for v in sorted(set(record_versions))))
    systems: Mapping[str, str] = {}
    if isinstance(summary, PairwiseSummary):
        systems = summary.pairwise.systems
    else:
        _put(out, "score_mode", summary.score_mode.mode)
    for role in ("A", "B"):
        _put(out, f"pairwise.system_{role.lower()}", systems.get(role))
    for key, value in (extra or {}).items():
        _put(out, key, value)
    return out


def run_kind(manifest: Mapping[str, Any], summary: RunSummary) -> str:
    """``jury``, ``pairwise`` or ``scored``."""
    if manifest.get("kind") == "jury":
        return "jury"
    return "pairwise" if isinstance(summary, PairwiseSummary) else "scored"


def run_tags(results_path: Path, manifest: Mapping[str, Any], summary: RunSummary,
             *, with_results: bool) -> dict[str, str]:
    """The tags of a run (see the module docstring)."""
    out: dict[str, str] = {}
    _put(out, "evaluator.results_file", Path(results_path).name)
    _put(out, "evaluator.version", __version__)
    _put(out, "evaluator.rubric", summary.rubric)
    _put(out, "evaluator.judge", summary.judge)
    _put(out, "evaluator.settings_hash", manifest.get("settings_hash"))
    _put(out, "evaluator.kind", run_kind(manifest, summary))
    _put(out, "evaluator.contains_case_text", with_results)
    return out
