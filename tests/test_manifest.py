"""Provenance: the settings hash and the model fingerprint (no model needed)."""

from __future__ import annotations

import json

import pytest

from evaluator.judges.models_file import JudgeSpec, load_models_file
from evaluator.rubrics.load import load_rubric
from evaluator.run.manifest import (
    build_settings,
    canonical_hash,
    diff_settings,
    model_fingerprint,
    settings_hash,
)


def _settings(spec, model=None):
    rubric = load_rubric("trial_eligibility")
    return build_settings(judge_name="j", spec=spec, model=model or {}, rubric=rubric,
                          schema_text="{}", sampling={"temperature": 0.0},
                          chat_template_kwargs={})


def test_memory_placement_does_not_change_the_settings_hash_but_parallelism_does():
    base = JudgeSpec(backend="vllm", path="/m", engine={"gpu_memory_utilization": 0.9})
    roomier = JudgeSpec(backend="vllm", path="/m", engine={"gpu_memory_utilization": 0.5})
    split = JudgeSpec(backend="vllm", path="/m", engine={"gpu_memory_utilization": 0.9,
                                                         "tensor_parallel_size": 2})
    assert settings_hash(_settings(base)) == settings_hash(_settings(roomier))
    assert diff_settings(_settings(base), _settings(split)) == [
        "judge_config.engine.tensor_parallel_size"]


# What identified each judge before each backend had its own settings model (issue 46):
# the hash of its judge_config then, which a results file's settings hash holds.
JUDGE_CONFIG_HASHES = {
    "smollm2-135m-instruct": "798a05f9c9dff685",  # models.yaml's judges
    "tiny-random": "5b5fc39ae1e62014",
    "fake": "4da0b024fed17f1b",
    "qwen3-8b-vllm": "fef4dc5d14d47dc9",  # models.yaml's commented vLLM example
    "vllm-tp": "ed73a811e031d07c",
    "transformers-threads": "a2d8d18f9754968a",
    "fake-stream": "cfb1f8466107f936",
}
JUDGES = {
    "qwen3-8b-vllm": {"backend": "vllm", "path": "/models/Qwen3-8B", "dtype": "bfloat16",
                      "max_model_len": 16384, "batch_size": 128,
                      "chat_template_kwargs": {"enable_thinking": False},
                      "engine": {"gpu_memory_utilization": 0.90, "tensor_parallel_size": 1}},
    "vllm-tp": {"backend": "vllm", "path": "/m", "engine": {
        "gpu_memory_utilization": 0.9, "tensor_parallel_size": 2,
        "distributed_executor_backend": "mp"}},
    "transformers-threads": {"backend": "transformers", "path": "/m", "threads": 3,
                             "fill_threads": 2, "system_role": False},
    "fake-stream": {"backend": "fake", "stream": True, "dtype": "float16",
                    "max_model_len": 1024},
}


@pytest.mark.parametrize("name", list(JUDGE_CONFIG_HASHES))
def test_a_judge_is_identified_as_before_its_backend_had_its_own_settings(name):
    # Results files written before keep their settings hash, so they still resume.
    spec = (JudgeSpec(**JUDGES[name]) if name in JUDGES
            else load_models_file().judges[name])
    config = _settings(spec)["judge_config"]
    assert canonical_hash(config)[:16] == JUDGE_CONFIG_HASHES[name]


def test_model_fingerprint_hashes_config_and_tokenizer_and_lists_weights(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"layers": 2}))
    (tmp_path / "tokenizer.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"\0" * 128)
    first = model_fingerprint(tmp_path)
    assert first["weight_files"] == {"model.safetensors": 128}
    assert first["tokenizer_hash"] and first["model_hash"]
    (tmp_path / "config.json").write_text(json.dumps({"layers": 3}))
    second = model_fingerprint(tmp_path)
    assert second["model_hash"] != first["model_hash"]
    assert second["tokenizer_hash"] == first["tokenizer_hash"]
    (tmp_path / "chat_template.jinja").write_text("{{ messages }}")
    assert model_fingerprint(tmp_path)["tokenizer_hash"] != first["tokenizer_hash"]
    assert model_fingerprint(None)["model_hash"] is None
