"""Provenance: the settings hash and the model fingerprint (no model needed)."""

from __future__ import annotations

import json

from evaluator.judges.models_file import JudgeSpec
from evaluator.rubrics.load import load_rubric
from evaluator.run.manifest import (
    build_settings,
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
