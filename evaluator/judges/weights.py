"""Judge weight lists: the size and SHA-256 of every file in a judge's folder.

An air-gapped bundle (``scripts/build-bundle``, docs/airgapped.md) writes
``evaluator-weights.json`` into each judge folder it carries; the bundle's signed
``SHA256SUMS`` covers it. Here:

- :func:`make_weight_list` hashes a folder (streamed, 1 MiB at a time, with a progress
  callback for the CLI) into that list;
- :func:`verify_weights` re-hashes an installed folder against its list
  (``evaluator models --verify NAME``): every byte is read;
- :func:`weight_list_summary` is the cheap check a run records in its manifest: the list's
  own SHA-256 (which verified set) and whether file names and sizes still match it.

Standard library only; nothing here knows about models, rubrics or runs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evaluator.common.errors import UserError

WEIGHTS_FILE = "evaluator-weights.json"
WEIGHTS_FORMAT = "evaluator-weights/1"
_CHUNK = 1 << 20

#: Called with the number of bytes just read (a progress bar's ``update``).
Progress = Callable[[int], None]


class WeightListError(UserError, ValueError):
    """A weight list is missing or unreadable, or a folder cannot be listed."""


def _files(folder: Path) -> list[Path]:
    """Every regular file under ``folder`` except the list itself, sorted; links refused."""
    found = []
    for path in sorted(folder.rglob("*")):
        if path.is_symlink():
            raise WeightListError(f"{path}: a symbolic link in a judge folder")
        if path.is_file() and path.relative_to(folder).as_posix() != WEIGHTS_FILE:
            found.append(path)
    return found


def sha256_stream(path: Path, progress: Progress | None = None) -> str:
    """Hex SHA-256 of a file, read in 1 MiB chunks; ``progress`` gets each chunk's size."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
            if progress is not None:
                progress(len(chunk))
    return digest.hexdigest()


def folder_bytes(folder: Path) -> int:
    """Total size of the files a weight list covers (the progress bar's total)."""
    try:
        return sum(p.stat().st_size for p in _files(Path(folder)))
    except OSError as exc:  # an unreadable folder is the user's to fix, as a bad list is
        raise WeightListError(str(exc)) from None


def make_weight_list(folder: Path, name: str, progress: Progress | None = None) -> dict[str, Any]:
    """The weight list of ``folder``: path, size and SHA-256 of every file in it."""
    folder = Path(folder)
    files = [{"path": p.relative_to(folder).as_posix(), "size": p.stat().st_size,
              "sha256": sha256_stream(p, progress)} for p in _files(folder)]
    return {"format": WEIGHTS_FORMAT, "judge": name, "files": files,
            "total_bytes": sum(f["size"] for f in files)}


def write_weight_list(folder: Path, listed: dict[str, Any]) -> Path:
    """Write ``listed`` as ``folder/evaluator-weights.json``; returns its path."""
    path = Path(folder) / WEIGHTS_FILE
    path.write_text(json.dumps(listed, indent=1) + "\n", encoding="utf-8")
    return path


def read_weight_list(folder: Path) -> dict[str, Any]:
    """The weight list in ``folder``; :class:`WeightListError` when absent or malformed."""
    path = Path(folder) / WEIGHTS_FILE
    try:
        listed = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise WeightListError(f"{path}: no weight list (judges installed from a bundle have "
                              "one; see docs/airgapped.md)") from None
    except (OSError, ValueError) as exc:
        raise WeightListError(f"{path}: unreadable weight list ({exc})") from None
    if not isinstance(listed, dict) or listed.get("format") != WEIGHTS_FORMAT or not all(
            isinstance(f, dict) and {"path", "size", "sha256"} <= set(f)
            for f in listed.get("files", [None])):
        raise WeightListError(f"{path}: not an {WEIGHTS_FORMAT} list")
    return listed


def _by_name(folder: Path, listed: dict[str, Any]) -> tuple[dict[str, dict], dict[str, Path]]:
    wanted = {f["path"]: f for f in listed["files"]}
    present = {p.relative_to(folder).as_posix(): p for p in _files(folder)}
    return wanted, present


def verify_weights(folder: Path, progress: Progress | None = None) -> list[str]:
    """Re-hash every file of ``folder`` against its weight list; returns the problems
    (a changed, missing or unlisted file, each named), empty when the folder matches."""
    try:
        folder = Path(folder)
        wanted, present = _by_name(folder, read_weight_list(folder))
        problems = [f"{name}: missing" for name in wanted if name not in present]
        problems += [f"{name}: not in {WEIGHTS_FILE}" for name in present if name not in wanted]
        for name, entry in wanted.items():
            path = present.get(name)
            if path is None:
                continue
            if path.stat().st_size != entry["size"]:
                problems.append(f"{name}: size {path.stat().st_size}, listed {entry['size']}")
                if progress is not None:
                    progress(path.stat().st_size)
            elif sha256_stream(path, progress) != entry["sha256"]:
                problems.append(f"{name}: SHA-256 differs from {WEIGHTS_FILE}")
        return problems
    except OSError as exc:  # as in folder_bytes
        raise WeightListError(str(exc)) from None


def weight_list_summary(folder: Path | None) -> dict[str, Any] | None:
    """What a run records: the list's SHA-256 (which verified set of weights), and whether
    the folder's file names and sizes match it now. Cheap: no weight is read. None when the
    folder has no list."""
    if folder is None or not (Path(folder) / WEIGHTS_FILE).is_file():
        return None
    folder = Path(folder)
    try:
        listed = read_weight_list(folder)
        wanted, present = _by_name(folder, listed)
    except WeightListError as exc:
        return {"file": WEIGHTS_FILE, "sha256": None, "problem": str(exc)}
    sizes_match = set(wanted) == set(present) and all(
        present[name].stat().st_size == entry["size"] for name, entry in wanted.items())
    return {"file": WEIGHTS_FILE, "sha256": sha256_stream(folder / WEIGHTS_FILE),
            "files": len(wanted), "names_and_sizes_match": sizes_match}
