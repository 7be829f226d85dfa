"""The tiny random judge model: built offline, deterministic, loadable, and usable to generate."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import threading
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from evaluator.judges import tiny_random
from evaluator.judges.model_folder import COMPLETE_MARKER, is_complete, move_into_place
from evaluator.judges.tiny_random import (
    TINY_RANDOM_VERSION,
    build_tiny_random,
    tiny_random_dir,
)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def cache_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("evaluator-cache")


@pytest.fixture(scope="module")
def built(cache_root) -> Path:
    """One build, shared by the module's tests, into a private cache root."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EVALUATOR_CACHE", str(cache_root))
        folder = build_tiny_random()
        assert folder == tiny_random_dir()
    return folder


@pytest.fixture(scope="module")
def tokenizer(built):
    from evaluator.judges.offline import force_offline

    force_offline()
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(built, local_files_only=True)


@pytest.fixture(scope="module")
def model(built):
    from evaluator.judges.offline import force_offline

    force_offline()
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(built, local_files_only=True).eval()


def test_folder_is_complete_and_versioned(built, cache_root):
    assert built == cache_root / "models" / f"tiny-random-v{TINY_RANDOM_VERSION}"
    assert is_complete(built)
    assert (built / COMPLETE_MARKER).is_file()
    for name in (
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
    ):
        assert (built / name).is_file(), name
    # No temporary build folders left behind.
    assert [p.name for p in built.parent.iterdir()] == [built.name]


def test_second_call_reuses_the_folder(built, cache_root, monkeypatch):
    monkeypatch.setenv("EVALUATOR_CACHE", str(cache_root))
    marker = built / COMPLETE_MARKER
    before = marker.stat().st_mtime_ns

    def fail(_folder):
        raise AssertionError("a complete folder must not be rebuilt")

    monkeypatch.setattr(tiny_random, "_write_model", fail)
    assert build_tiny_random() == built
    assert marker.stat().st_mtime_ns == before


def test_tokenizer_special_tokens_and_chat_template(tokenizer):
    assert tokenizer.eos_token == "<|im_end|>"
    assert tokenizer.pad_token == "<|endoftext|>"
    assert tokenizer.bos_token is None
    assert 1000 <= len(tokenizer) <= 2048
    assert "<|im_start|>" in tokenizer.all_special_tokens

    messages = [
        {"role": "system", "content": "You are a judge."},
        {"role": "user", "content": "Rate this answer."},
    ]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text == (
        "<|im_start|>system\nYou are a judge.<|im_end|>\n"
        "<|im_start|>user\nRate this answer.<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    without = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)
    assert without == text[: -len("<|im_start|>assistant\n")]
    # Special tokens are single tokens; no BOS is prepended.
    ids = tokenizer(text)["input_ids"]
    assert ids[0] == tokenizer.convert_tokens_to_ids("<|im_start|>")
    assert ids.count(tokenizer.eos_token_id) == 2


def test_tokens_span_several_characters(tokenizer):
    text = '{"Score": 2, "Explanation": "The answer omits the renal dose adjustment."}'
    tokens = tokenizer.tokenize(text)
    assert len(tokens) < len(text) / 3
    assert "Score" in tokens


@pytest.mark.parametrize(
    "text",
    [
        "Plain ASCII, with  double spaces\tand tabs\nand newlines.",
        "Température 37,5 °C — naïve café, µg/kg, ≤ 5 mmol/L ± 0.2",
        "血压 160/95 mmHg; дыхание 24/мин; 🩺💊 ☺ \u200b zero-width",
        '{"Score": 3, "Explanation": "Ünïcödé \\"quoted\\" text"}',
    ],
)
def test_unicode_round_trips(tokenizer, text):
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids) == text


def test_model_config(model, tokenizer, built):
    import torch

    config = model.config
    assert config.model_type == "llama"
    assert config.head_dim >= 32
    assert config.hidden_size // config.num_attention_heads == config.head_dim
    assert config.num_hidden_layers == 2
    assert config.max_position_embeddings >= 32768
    assert config.vocab_size == len(tokenizer)
    assert config.eos_token_id == tokenizer.eos_token_id
    assert model.dtype == torch.float32
    assert model.generation_config.eos_token_id == tokenizer.eos_token_id
    assert model.generation_config.pad_token_id == tokenizer.pad_token_id
    assert not (built / "pytorch_model.bin").exists()


def test_greedy_generate_runs(model, tokenizer):
    import torch

    messages = [{"role": "user", "content": "Score the answer from 1 to 3."}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    enc = tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        first = model.generate(**enc, max_new_tokens=8, do_sample=False)
        second = model.generate(**enc, max_new_tokens=8, do_sample=False)
    prompt_len = enc["input_ids"].shape[1]
    assert prompt_len < first.shape[1] <= prompt_len + 8
    assert torch.equal(first, second)
    assert isinstance(tokenizer.decode(first[0, prompt_len:]), str)


def test_build_is_deterministic(built, tmp_path):
    from safetensors.torch import load_file

    other = build_tiny_random(tmp_path / "again")
    assert other == tmp_path / "again" and is_complete(other)
    assert _sha256(other / "tokenizer.json") == _sha256(built / "tokenizer.json")
    assert _sha256(other / "model.safetensors") == _sha256(built / "model.safetensors")
    a = load_file(built / "model.safetensors")
    b = load_file(other / "model.safetensors")
    assert a.keys() == b.keys()
    for name in a:
        assert a[name].equal(b[name]), name
    assert (other / COMPLETE_MARKER).read_text() == (built / COMPLETE_MARKER).read_text()


def test_force_rebuilds(tmp_path):
    folder = build_tiny_random(tmp_path / "m")
    (folder / "stray.txt").write_text("left over")
    assert build_tiny_random(folder, force=True) == folder
    assert is_complete(folder)
    assert not (folder / "stray.txt").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]


def test_incomplete_folder_is_replaced(tmp_path):
    target = tmp_path / "m"
    target.mkdir()
    (target / "config.json").write_text("{}")  # a crashed copy without the marker
    assert build_tiny_random(target) == target
    assert is_complete(target)
    assert (target / "model.safetensors").is_file()


def test_concurrent_builds_share_one_folder(tmp_path):
    target = tmp_path / "race"
    results: list[Path] = []
    errors: list[BaseException] = []

    def build():
        try:
            results.append(build_tiny_random(target))
        except Exception as exc:  # noqa: BLE001 - any failure is reported below
            errors.append(exc)

    threads = [threading.Thread(target=build) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert results == [target] * 3
    assert is_complete(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["race"]


def test_losing_the_rename_race_keeps_the_winner(built, tmp_path):
    import shutil

    target = tmp_path / "m"
    shutil.copytree(built, target)
    loser = tmp_path / ".m.tmp-loser"
    shutil.copytree(built, loser)
    (loser / "from-loser").write_text("")
    move_into_place(loser, target, force=False)
    assert is_complete(target)
    assert not (target / "from-loser").exists()


def test_import_is_light():
    code = (
        "import sys, evaluator.judges.tiny_random as t; "
        "heavy = [m for m in ('torch', 'transformers', 'tokenizers') if m in sys.modules]; "
        "assert not heavy, heavy; print(t.TINY_RANDOM_VERSION)"
    )
    repo = Path(__file__).resolve().parents[1]
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=repo
    )
    assert out.stdout.strip() == str(TINY_RANDOM_VERSION)


def test_outlines_llguidance_generator_builds(model, tokenizer):
    outlines = pytest.importorskip("outlines")
    schema = (
        '{"type":"object","properties":{"a":{"enum":[1,2,3]}},'
        '"required":["a"],"additionalProperties":false}'
    )
    m = outlines.from_transformers(model, tokenizer)
    from evaluator.judges.backends.grammar import constraint_schema

    generator = outlines.Generator(m, outlines.types.JsonSchema(constraint_schema(schema)),
                                   backend="llguidance")
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Pick a."}], tokenize=False, add_generation_prompt=True
    )
    import json

    assert json.loads(generator(text, max_new_tokens=16))["a"] in (1, 2, 3)
