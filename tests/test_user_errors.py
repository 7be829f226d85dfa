"""Every user error exits 2 with one line on stderr that names the file or field: no
traceback, never exit 1 (which means "some cases have no verdict"), and never case text.

Most cases run in-process through click's CliRunner; the ones where a library could print
on its own (logging, warnings, transformers) run the real command in a subprocess.
"""

from __future__ import annotations

import csv
import json
import os
import pickle
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from evaluator.cli.exit_codes import EXIT_INTERNAL, EXIT_USAGE
from evaluator.cli.main import cli
from evaluator.judges.models_file import MAX_SEED
from tests.conftest import ROOT, write_jsonl

MARKER = "PHI-MARKER-7731"  # in every case field: must never reach stderr


def _rows(n: int = 3) -> list[dict]:
    return [{"case_id": f"c{i}", "Resp": f"{MARKER} answer {i}",
             "Truth": f"{MARKER} truth {i}"} for i in range(n)]


@pytest.fixture
def cases(tmp_path) -> Path:
    return write_jsonl(tmp_path / "cases.jsonl", _rows())


def _models(tmp_path: Path, **judge) -> Path:
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump({"default": "j", "judges": {"j": judge or
                                                               {"backend": "fake"}}}))
    return path


def _run_args(tmp_path: Path, source: Path, models: Path, *extra) -> list[str]:
    return ["run", "-r", "drug_monograph_similarity", "-i", str(source),
            "-o", str(tmp_path / "out" / "r.jsonl"), "--models-file", str(models),
            "--no-progress", *map(str, extra)]


def _invoke(args: list[str]):
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def _assert_one_line(stderr: str, *names: str) -> str:
    """Exactly one error line, naming what is wrong, with no traceback and no case text.
    (A config file that fails validation lists its problems under that line, one
    "  - field: problem" item each: that is the format of every models.yaml/rubric error.)"""
    lines = stderr.strip("\n").splitlines()
    assert lines and lines[0].startswith("error: "), stderr
    assert all(line.startswith("  - ") for line in lines[1:]), stderr
    assert "Traceback" not in stderr and MARKER not in stderr
    for name in names:
        assert name in stderr, (name, stderr)
    return lines[0]


def _subprocess(args: list[str]) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "evaluator", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


# --- the judge's `path` in models.yaml ----------------------------------------------------

def _safetensors(tensors: dict[str, int]) -> bytes:
    """A minimal valid safetensors file: float32 vectors of the given lengths."""
    header, offset = {}, 0
    for name, length in tensors.items():
        header[name] = {"dtype": "F32", "shape": [length], "data_offsets": [offset,
                                                                             offset + 4 * length]}
        offset += 4 * length
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + b"\0" * offset


def _model_folder(root: Path, *, config: dict | None = None, files: dict | None = None) -> Path:
    folder = root / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config or {"model_type": "llama"}))
    for name, data in (files or {}).items():
        (folder / name).write_bytes(data)
    return folder


class _Touch:
    """A pickle that, if it were ever loaded, would create a file: the proof it was not."""

    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self):
        return (Path.touch, (self.path,))


def _path_cases(tmp_path: Path) -> dict[str, tuple[Path, tuple[str, ...]]]:
    """name -> (the judge's path, words its error line must contain)."""
    (tmp_path / "a-file").write_text("x")
    empty = tmp_path / "empty"
    empty.mkdir()
    return {"missing": (tmp_path / "nowhere", ("does not exist",)),
            "a file": (tmp_path / "a-file", ("is a file, not a folder",)),
            "no config.json": (empty, ("no config.json",))}


@pytest.mark.parametrize("case", ["missing", "a file", "no config.json"])
def test_a_wrong_judge_path_is_one_line(tmp_path, cases, case):
    path, words = _path_cases(tmp_path)[case]
    models = _models(tmp_path, backend="transformers", path=str(path))
    result = _invoke(_run_args(tmp_path, cases, models))
    assert result.exit_code == EXIT_USAGE
    _assert_one_line(result.stderr, "judge 'j'", str(path), *words)
    assert not (tmp_path / "out").exists()  # refused before anything was written


def test_pickle_weights_are_refused_and_never_unpickled(tmp_path, cases):
    touched = tmp_path / "unpickled"
    folder = _model_folder(tmp_path, files={"pytorch_model.bin":
                                            pickle.dumps(_Touch(touched))})
    models = _models(tmp_path, backend="transformers", path=str(folder))
    result = _subprocess(_run_args(tmp_path, cases, models))
    assert result.returncode == EXIT_USAGE, result.stderr
    _assert_one_line(result.stderr, str(folder), "pytorch_model.bin", "pickle",
                     "safetensors")
    assert not touched.exists()


@pytest.mark.parametrize("damage", ["garbage", "truncated", "header too long", "empty"])
def test_damaged_safetensors_are_refused(tmp_path, cases, damage):
    good = _safetensors({"w": 4, "b": 2})
    data = {"garbage": os.urandom(4096), "truncated": good[:-5],
            "header too long": struct.pack("<Q", 2**40) + good[8:], "empty": b""}[damage]
    folder = _model_folder(tmp_path, files={"model.safetensors": data})
    models = _models(tmp_path, backend="transformers", path=str(folder))
    result = _invoke(_run_args(tmp_path, cases, models))
    assert result.exit_code == EXIT_USAGE
    _assert_one_line(result.stderr, "model.safetensors", "not a valid safetensors file")


def test_a_folder_without_weights_is_refused(tmp_path, cases):
    folder = _model_folder(tmp_path, files={"README.md": b"weights to follow"})
    models = _models(tmp_path, backend="vllm", path=str(folder))
    result = _invoke(_run_args(tmp_path, cases, models))
    assert result.exit_code == EXIT_USAGE
    _assert_one_line(result.stderr, "holds no weights")


def test_remote_code_models_are_refused_and_their_code_never_runs(tmp_path, cases):
    touched = tmp_path / "imported"
    config = {"model_type": "my_private_arch", "architectures": ["MyForCausalLM"],
              "auto_map": {"AutoConfig": "modeling_my.MyConfig",
                           "AutoModelForCausalLM": "modeling_my.MyForCausalLM"}}
    code = f"from pathlib import Path\nPath({str(touched)!r}).touch()\n".encode()
    folder = _model_folder(tmp_path, config=config,
                           files={"modeling_my.py": code,
                                  "model.safetensors": _safetensors({"w": 2})})
    models = _models(tmp_path, backend="transformers", path=str(folder))
    result = _subprocess(_run_args(tmp_path, cases, models))
    assert result.returncode == EXIT_USAGE, result.stderr
    _assert_one_line(result.stderr, "config.json", "auto_map", "trust_remote_code")
    assert not touched.exists()


def test_auto_map_on_an_architecture_transformers_has_is_accepted(tmp_path):
    pytest.importorskip("transformers", reason="needs the transformers extra: make install")
    from evaluator.run.preflight import check_model_folder

    folder = _model_folder(tmp_path, config={"model_type": "llama", "auto_map": {
        "AutoModelForCausalLM": "modeling_x.X"}}, files={"model.safetensors":
                                                         _safetensors({"w": 2})})
    check_model_folder("j", folder)  # transformers' own Llama code is used; nothing from it


def test_the_backend_itself_never_loads_pickle_weights(tmp_path):
    """The backstop behind the preflight check: the loader is told safetensors only."""
    pytest.importorskip("torch", reason="needs the transformers extra: make install")
    import shutil

    import torch
    from safetensors.torch import load_file

    from evaluator.judges.backends import BackendUnavailable
    from evaluator.judges.backends.transformers_backend import TransformersBackend
    from evaluator.judges.models_file import JudgeSpec
    from evaluator.judges.tiny_random import build_tiny_random

    source = build_tiny_random()
    folder = tmp_path / "pickled"
    shutil.copytree(source, folder)
    weights = load_file(folder / "model.safetensors")
    (folder / "model.safetensors").unlink()
    torch.save(weights, folder / "pytorch_model.bin")
    spec = JudgeSpec(backend="transformers", path=folder, device="cpu")
    with pytest.raises(BackendUnavailable, match="cannot load the model"):
        TransformersBackend("j", spec)


# --- rubric templates ---------------------------------------------------------------------

def _custom_rubric(tmp_path: Path, template: str) -> Path:
    folder = tmp_path / "rubrics"
    folder.mkdir(exist_ok=True)
    (folder / "templ.yaml").write_text(yaml.safe_dump({
        "format_version": 1, "name": "templ", "title": "Templ",
        "inputs": {"Resp": {"description": "the answer"}},
        "output": [{"key": "score", "type": "integer", "range": [1, 3]}],
        "template": template}))
    return folder


@pytest.mark.parametrize("template", [
    "Judge this.\n{{ ''.__class__.__mro__ }}\n{{ Resp | fence }}",   # sandbox violation
    "Judge this.\n{% include 'other.j2' %}\n{{ Resp | fence }}",     # include: no loader
    "Judge this.\n{% for i in range(10**9) %}{% endfor %}{{ Resp | fence }}",  # huge range
], ids=["sandbox", "include", "range"])
def test_templates_that_cannot_render_are_one_line(tmp_path, template):
    folder = _custom_rubric(tmp_path, template)
    source = write_jsonl(tmp_path / "in.jsonl", [{"case_id": "1", "Resp": MARKER}])
    result = _invoke(["run", "-r", "templ", "--rubrics-dir", str(folder), "-i", str(source),
                      "-o", str(tmp_path / "r.jsonl"), "--models-file", str(_models(tmp_path)),
                      "--no-progress"])
    assert result.exit_code == EXIT_USAGE, result.output
    _assert_one_line(result.stderr, "templ")
    assert not (tmp_path / "r.jsonl").exists()
    checked = _invoke(["validate", "--rubrics-dir", str(folder)])  # renders each rubric once
    assert checked.exit_code == EXIT_USAGE
    _assert_one_line(checked.stderr, "templ")


def test_include_is_one_line_in_a_real_process_too(tmp_path):
    folder = _custom_rubric(tmp_path, "{% include 'x' %}{{ Resp | fence }}")
    source = write_jsonl(tmp_path / "in.jsonl", [{"case_id": "1", "Resp": MARKER}])
    result = _subprocess(["run", "-r", "templ", "--rubrics-dir", str(folder), "-i",
                          str(source), "-o", str(tmp_path / "r.jsonl"), "--models-file",
                          str(_models(tmp_path)), "--no-progress"])
    assert result.returncode == EXIT_USAGE
    _assert_one_line(result.stderr, "templ")


# --- the seed -----------------------------------------------------------------------------

@pytest.mark.parametrize("seed", [-1, MAX_SEED + 1, 2**70])
def test_a_seed_out_of_range_is_refused_before_any_case(tmp_path, cases, seed):
    models = _models(tmp_path, backend="fake", sampling={"seed": seed})
    result = _invoke(_run_args(tmp_path, cases, models))
    assert result.exit_code == EXIT_USAGE
    _assert_one_line(result.stderr, str(models), "seed")


def test_the_last_sample_seed_must_be_in_range_too(tmp_path, cases):
    models = _models(tmp_path, backend="fake", sampling={"seed": MAX_SEED, "temperature": 0.7})
    ok = _invoke(_run_args(tmp_path, cases, models))
    assert ok.exit_code == 0, ok.output  # the largest seed, one sample
    result = _invoke(_run_args(tmp_path, cases, models, "--samples", "3", "--force-new"))
    assert result.exit_code == EXIT_USAGE
    _assert_one_line(result.stderr, "seed", str(MAX_SEED - 2))


# --- the input file -----------------------------------------------------------------------

def test_a_fifo_as_input_is_refused_without_reading_it(tmp_path):
    fifo = tmp_path / "cases.jsonl"
    os.mkfifo(fifo)  # opening it for reading would block forever: it must not be opened
    result = _subprocess(_run_args(tmp_path, fifo, _models(tmp_path)))
    assert result.returncode == EXIT_USAGE
    _assert_one_line(result.stderr, str(fifo), "FIFO")


def test_a_device_as_input_is_refused(tmp_path):
    result = _invoke(_run_args(tmp_path, Path("/dev/null"), _models(tmp_path)))
    assert result.exit_code == EXIT_USAGE
    _assert_one_line(result.stderr, "/dev/null", "device")


# --- the output path ----------------------------------------------------------------------

def test_impossible_output_paths_are_one_line(tmp_path, cases):
    models = _models(tmp_path)
    (tmp_path / "a-file").write_text("x")
    os.mkfifo(tmp_path / "fifo.jsonl")
    for output, words in [
        (tmp_path / "a-file" / "r.jsonl", ("a-file", "not a folder")),
        (tmp_path / "a-file" / "deeper" / "r.jsonl", ("a-file", "not a folder")),
        (tmp_path / ("x" * 300 + ".jsonl"), ("too long",)),
        (tmp_path / ("x" * 300) / "r.jsonl", ("too long",)),
        (tmp_path / "fifo.jsonl", ("FIFO",)),
        (Path("/dev/null/r.jsonl"), ("/dev/null", "not a folder")),
    ]:
        args = _run_args(tmp_path, cases, models)
        args[args.index("-o") + 1] = str(output)
        result = _invoke(args)
        assert result.exit_code == EXIT_USAGE, (output, result.output)
        _assert_one_line(result.stderr, *words)


def _read_only_folder(tmp_path: Path):
    """A folder this process cannot write in: a read-only tmpfs as root, else chmod."""
    folder = tmp_path / "ro"
    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o500)
        return folder, lambda: folder.chmod(0o700)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs",
                              str(folder)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip("root cannot be denied a write here without mounting a read-only tmpfs, "
                    "and mount failed")
    return folder, lambda: subprocess.run(["umount", str(folder)], check=True)


def test_an_unwritable_output_folder_is_one_line(tmp_path, cases):
    folder, undo = _read_only_folder(tmp_path)
    try:
        args = _run_args(tmp_path, cases, _models(tmp_path))
        args[args.index("-o") + 1] = str(folder / "sub" / "r.jsonl")
        result = _invoke(args)
    finally:
        undo()
    assert result.exit_code == EXIT_USAGE
    _assert_one_line(result.stderr, str(folder), "cannot be written")


# --- no case text on stderr (item 11) -----------------------------------------------------

def _write_csv(path: Path, rows: list[list[str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)
    return path


def test_a_csv_without_header_never_prints_its_first_row(tmp_path):
    # No header row, and the first case has two equal values: they would be "repeated
    # column names".
    source = _write_csv(tmp_path / "in.csv", [["1", MARKER, MARKER],
                                              ["2", f"{MARKER} b", f"{MARKER} c"]])
    result = _invoke(_run_args(tmp_path, source, _models(tmp_path)))
    assert result.exit_code == EXIT_USAGE
    _assert_one_line(result.stderr, "columns 2 and 3", "header row")


def test_a_csv_without_header_in_a_real_process(tmp_path):
    """The first row taken as a header names no rubric input: every row is an input error,
    reported (on stderr, through logging) by line and field name, never the "header"."""
    source = _write_csv(tmp_path / "in.csv", [["1", f"{MARKER} a", f"{MARKER} b"],
                                              ["2", f"{MARKER} c", f"{MARKER} d"]])
    result = _subprocess(_run_args(tmp_path, source, _models(tmp_path)))
    assert result.returncode == 1  # cases without a verdict (input errors), not a crash
    assert "in.csv:2 field 'Resp': required field is missing" in result.stderr
    assert MARKER not in result.stderr and "Traceback" not in result.stderr


def test_a_wrong_id_column_never_prints_values_as_ids(tmp_path):
    rows = [{"case_id": f"c{i}", "Resp": f"{MARKER} same answer", "Truth": f"t{i}"}
            for i in range(3)]
    source = write_jsonl(tmp_path / "in.jsonl", rows)
    result = _invoke(_run_args(tmp_path, source, _models(tmp_path), "--id-column", "Resp"))
    assert result.exit_code == EXIT_USAGE
    _assert_one_line(result.stderr, "duplicate case ids", "lines 1 and 2", "lines 1 and 3",
                     "'Resp'")


def test_a_wrong_id_column_with_bad_rows_in_a_real_process(tmp_path):
    rows = [{"case_id": "a", "Resp": f"{MARKER} one", "Truth": "t"},
            {"case_id": "b", "Resp": f"{MARKER} two", "Truth": ""}]
    source = write_jsonl(tmp_path / "in.jsonl", rows)
    result = _subprocess(_run_args(tmp_path, source, _models(tmp_path), "--id-column",
                                   "Resp", "--strict"))
    assert result.returncode == 3
    assert "in.jsonl:2 field 'Truth'" in result.stderr
    assert MARKER not in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("hidden", [True, False], ids=["--no-progress", "default"])
def test_no_progress_hides_the_weight_loading_bar(tmp_path, hidden):
    pytest.importorskip("torch", reason="needs the transformers extra: make install")
    source = write_jsonl(tmp_path / "in.jsonl", _rows(1))
    models = tmp_path / "models.yaml"
    models.write_text(yaml.safe_dump({"default": "tiny", "judges": {"tiny": {
        "backend": "tiny-random", "device": "cpu", "batch_size": 1}}}))
    args = _run_args(tmp_path, source, models)
    if not hidden:
        args.remove("--no-progress")
    result = _subprocess(args)
    assert result.returncode in (0, 1), result.stderr  # a random judge may fail a verdict
    assert ("Loading weights" in result.stderr) is not hidden
    assert MARKER not in result.stderr


# --- what is not a user error -------------------------------------------------------------

def test_a_bug_is_an_internal_error_exit_70_without_case_text(tmp_path, cases, monkeypatch):
    from evaluator.analysis.kinds import absolute

    def broken(*args, **kwargs):
        raise KeyError(MARKER)  # as if a bug put case text in an exception

    monkeypatch.setattr(absolute, "summarize", broken)
    result = _invoke(_run_args(tmp_path, cases, _models(tmp_path)))
    assert result.exit_code == EXIT_INTERNAL
    # The run had started (one line said how many cases were read); then one error line.
    line = _assert_one_line(result.stderr.split("\n", 1)[1], "internal error (KeyError)",
                            "-vv", "bug")
    assert "Traceback" not in line
    verbose = _invoke(["-vv", *_run_args(tmp_path, cases, _models(tmp_path))])
    assert verbose.exit_code == EXIT_INTERNAL
    assert "Traceback" in verbose.stderr and "broken" in verbose.stderr
