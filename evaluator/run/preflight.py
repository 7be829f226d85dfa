"""Checks a run makes before it reads a case: is the judge's model folder loadable without
running or unpickling anything from it, can the output be written where it is named, does
the rubric's template render?

Each refuses with one line naming the path and what to do (:class:`ModelFolderError`,
:class:`OutputPathError`, :class:`evaluator.rubrics.rubric.RubricError`; the CLI's usage
exit code). Nothing here imports torch or
transformers (a folder that asks for code shipped with the model is checked against
transformers' list of architectures, imported only then); no weight is read beyond the
header of each safetensors file.
"""

from __future__ import annotations

import json
import os
import stat
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import jinja2

from evaluator.common.errors import UserError
from evaluator.common.readable import file_kind
from evaluator.data.files import show_path
from evaluator.rubrics.rubric import Rubric, RubricError

# Weights that are Python pickles: loading one can run arbitrary code, so they are refused
# (a folder must hold safetensors). Matched on the suffix.
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")
# Small JSON files read whole; anything larger is not what it claims to be.
_MAX_CONFIG_BYTES = 16 << 20
# A safetensors header is JSON of a few KiB to a few MiB (100 MiB is the format's own cap).
_MAX_SAFETENSORS_HEADER = 100 << 20


class ModelFolderError(UserError, ValueError):
    """A judge's ``path`` is not a model folder the evaluator will load."""


class OutputPathError(UserError, ValueError):
    """The results file cannot be written where ``--output`` names it."""


def _kind_of(mode: int) -> str:
    return "a file" if stat.S_ISREG(mode) else file_kind(mode)


def _regular(path: Path) -> bool:
    """True for a regular file (following symlinks); never opens it, so a FIFO cannot hang."""
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return False


def _read_json(path: Path, what: str) -> dict[str, Any]:
    size = path.stat().st_size
    if size > _MAX_CONFIG_BYTES:
        raise ModelFolderError(f"{what}: {path} is {size} bytes, too large for a config file")
    try:
        value = json.loads(path.read_bytes())
    except OSError as exc:
        raise ModelFolderError(f"{what}: cannot read {path} ({exc.strerror})") from None
    except ValueError:
        raise ModelFolderError(f"{what}: {path} is not valid JSON") from None
    if not isinstance(value, dict):
        raise ModelFolderError(f"{what}: {path} is not a JSON object")
    return value


def _check_safetensors(path: Path, what: str) -> None:
    """The header parses and the tensors it lists end exactly at the end of the file (a
    truncated copy or a file of other bytes fails here, before a slow, cryptic load)."""
    damaged = (f"{what}: {path.name} in {path.parent} is not a valid safetensors file "
               "(damaged or incomplete copy?); copy the weights again")
    size = path.stat().st_size
    try:
        with path.open("rb") as handle:
            prefix = handle.read(8)
            if len(prefix) < 8:
                raise ModelFolderError(damaged)
            (length,) = struct.unpack("<Q", prefix)
            if length > min(_MAX_SAFETENSORS_HEADER, size - 8):
                raise ModelFolderError(damaged)
            header = json.loads(handle.read(length))
    except OSError as exc:
        raise ModelFolderError(f"{what}: cannot read {path} ({exc.strerror})") from None
    except ValueError:
        raise ModelFolderError(damaged) from None
    if not isinstance(header, dict):
        raise ModelFolderError(damaged)
    end = 0
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
        if (not isinstance(offsets, list) or len(offsets) != 2
                or not all(isinstance(x, int) for x in offsets) or offsets[0] > offsets[1]):
            raise ModelFolderError(damaged)
        end = max(end, offsets[1])
    if 8 + length + end != size:
        raise ModelFolderError(damaged)


def _known_architecture(model_type: object) -> bool:
    """Whether transformers itself implements ``model_type`` (then no code from the
    folder is needed, and none is run: trust_remote_code is never set)."""
    if not isinstance(model_type, str):
        return False
    try:
        # Heavy: transformers is imported only for a folder whose code is asked for.
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    except ImportError:
        return False
    return model_type in CONFIG_MAPPING_NAMES


def check_model_folder(judge_name: str, path: Path) -> None:
    """Refuse a judge ``path`` that would fail to load, or load unsafely: missing, not a
    folder, no ``config.json``, an architecture that needs the folder's own Python code
    (``auto_map``), pickle weights only (``pytorch_model.bin``), or a damaged safetensors
    file. Raises :class:`ModelFolderError` naming the judge and the path."""
    what = f"judge {judge_name!r} (path in models.yaml)"
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise ModelFolderError(f"{what}: {path} does not exist; point 'path' at a local "
                               "Hugging Face model folder") from None
    except OSError as exc:
        raise ModelFolderError(f"{what}: cannot open {path} ({exc.strerror})") from None
    if not stat.S_ISDIR(mode):
        raise ModelFolderError(f"{what}: {path} is {_kind_of(mode)}, not a folder; point "
                               "'path' at the model folder (the one holding config.json)")
    config_path = path / "config.json"
    if not _regular(config_path):
        raise ModelFolderError(f"{what}: {path} is not a model folder (no config.json); "
                               "point 'path' at a local Hugging Face model folder")
    config = _read_json(config_path, what)
    if "auto_map" in config and not _known_architecture(config.get("model_type")):
        raise ModelFolderError(f"{what}: {config_path} asks for Python code shipped with the "
                               "model (auto_map); the evaluator never runs a model's own code "
                               "(trust_remote_code): use a model whose architecture "
                               "transformers implements")
    try:
        files = [p for p in sorted(path.iterdir()) if _regular(p)]
    except OSError as exc:
        raise ModelFolderError(f"{what}: cannot list {path} ({exc.strerror})") from None
    weights = [p for p in files if p.suffix == ".safetensors"]
    if not weights:
        pickles = [p.name for p in files if p.suffix in PICKLE_SUFFIXES]
        if pickles:
            raise ModelFolderError(f"{what}: {path} holds only pickle weights ({pickles[0]}); "
                                   "loading a pickle can run code, so only safetensors are "
                                   "loaded: convert the weights to safetensors")
        raise ModelFolderError(f"{what}: {path} holds no weights (*.safetensors)")
    for weight in weights:
        _check_safetensors(weight, what)


def check_output_path(output_path: Path, *siblings: Path) -> None:
    """Refuse an output that cannot be written: a parent that is a file, a folder that
    cannot be written, a name too long for the file system, an existing FIFO or device.
    ``siblings``: the other files written beside it (manifest, summary). Raises
    :class:`OutputPathError`."""
    output_path = Path(output_path)
    for path in (output_path, *siblings):
        try:
            mode = path.stat().st_mode
        except (FileNotFoundError, NotADirectoryError):  # the folder check below says which
            continue
        except OSError as exc:
            raise OutputPathError(f"{show_path(path)}: cannot be used as output "
                                  f"({exc.strerror})") from None
        if not stat.S_ISREG(mode):
            raise OutputPathError(f"{show_path(path)}: is {_kind_of(mode)}, not a results "
                                  "file; name a new or existing .jsonl file")
        if not os.access(path, os.R_OK | os.W_OK):
            raise OutputPathError(f"{show_path(path)}: exists but cannot be read and written "
                                  "by this user; fix its permissions or name another --output")
    # The nearest folder that exists: the run creates the missing ones below it.
    folder = output_path.absolute().parent
    missing: list[str] = []  # folders the run will create
    while True:
        try:
            mode = folder.stat().st_mode
            break
        except (FileNotFoundError, NotADirectoryError):
            missing.append(folder.name)
            folder = folder.parent
        except OSError as exc:
            raise OutputPathError(f"{show_path(output_path)}: cannot be written "
                                  f"({show_path(folder)}: {exc.strerror})") from None
    if not stat.S_ISDIR(mode):
        raise OutputPathError(f"{show_path(output_path)}: cannot be written: "
                              f"{show_path(folder)} is {_kind_of(mode)}, not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputPathError(f"{show_path(output_path)}: cannot be written: no permission to "
                              f"write in {show_path(folder)} (or it is on a read-only file "
                              "system)")
    try:
        name_max = os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        name_max = 255
    for name in missing:
        if len(os.fsencode(name)) > name_max:
            raise OutputPathError(f"{show_path(output_path)}: a folder name in it is too long "
                                  f"for the file system (at most {name_max} bytes here)")
    for path in (output_path, *siblings):
        # +4: the temporary name ("<name>.tmp") written before an atomic rename.
        if len(os.fsencode(path.name)) + 4 > name_max:
            raise OutputPathError(f"{show_path(path)}: the file name is too long for the file "
                                  f"system (at most {name_max - 4} bytes here)")


@contextmanager
def template_errors(rubric: Rubric) -> Iterator[None]:
    """Turn a rubric template that fails while rendering (a sandbox violation, an
    ``{% include %}`` with nothing to include, an undefined attribute, a range too large)
    into a :class:`RubricError` naming the rubric. Jinja's own message names only template
    parts and types; any other exception's message could quote case text, so only its type
    is named."""
    try:
        yield
    except jinja2.TemplateError as exc:
        raise RubricError(f"rubric {rubric.name!r}: the template cannot be rendered "
                          f"({type(exc).__name__}: {exc.message or 'no message'}); fix the "
                          "rubric") from None
    except (TypeError, OverflowError) as exc:
        # TypeError: "no loader" for {% include/import/extends %}; OverflowError: the
        # sandbox's cap on range(). The message is not shown: it could hold case text.
        raise RubricError(f"rubric {rubric.name!r}: the template cannot be rendered "
                          f"({type(exc).__name__}); a rubric must be one self-contained "
                          "template, without {% include %}, {% import %} or {% extends %}"
                          ) from None
