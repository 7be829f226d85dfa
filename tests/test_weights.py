"""Weight lists: made, verified byte for byte (`evaluator models --verify`), summarised in
the run manifest. Small files stand in for weights: nothing here loads a model."""

from __future__ import annotations

import json

import yaml
from click.testing import CliRunner

from evaluator.cli.main import cli
from evaluator.judges.weights import (
    WEIGHTS_FILE,
    make_weight_list,
    verify_weights,
    weight_list_summary,
    write_weight_list,
)
from evaluator.run.manifest import model_fingerprint


def _judge(tmp_path):
    folder = tmp_path / "judge"
    (folder / "sub").mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(bytes(range(256)) * 4096)  # 1 MiB
    (folder / "config.json").write_text('{"model_type": "llama"}')
    (folder / "sub" / "tokenizer.json").write_text("{}")
    write_weight_list(folder, make_weight_list(folder, "j"))
    return folder


def _models_file(tmp_path, folder):
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump({"default": "j", "judges": {
        "j": {"backend": "transformers", "path": str(folder)}}}))
    return path


def test_a_list_names_every_file_with_its_size_and_hash_and_verifies(tmp_path):
    folder = _judge(tmp_path)
    listed = json.loads((folder / WEIGHTS_FILE).read_text())
    assert [f["path"] for f in listed["files"]] == ["config.json", "model.safetensors",
                                                    "sub/tokenizer.json"]
    assert listed["total_bytes"] == sum(f["size"] for f in listed["files"])
    seen = []
    assert verify_weights(folder, progress=seen.append) == []
    assert sum(seen) == listed["total_bytes"]  # streamed, every byte counted


def test_a_changed_missing_or_added_file_is_named(tmp_path):
    folder = _judge(tmp_path)
    data = bytearray((folder / "model.safetensors").read_bytes())
    data[1000] ^= 1
    (folder / "model.safetensors").write_bytes(bytes(data))
    (folder / "config.json").unlink()
    (folder / "modeling_x.py").write_text("")
    problems = verify_weights(folder)
    assert problems == ["config.json: missing", f"modeling_x.py: not in {WEIGHTS_FILE}",
                        f"model.safetensors: SHA-256 differs from {WEIGHTS_FILE}"]


def test_models_verify_passes_then_fails_naming_the_file(tmp_path):
    folder = _judge(tmp_path)
    models = _models_file(tmp_path, folder)
    ok = CliRunner().invoke(cli, ["models", "--verify", "j", "--models-file", str(models)])
    assert ok.exit_code == 0, ok.output
    assert "verified" in ok.output
    (folder / "sub" / "tokenizer.json").write_text("{ }")
    bad = CliRunner().invoke(cli, ["models", "--verify", "j", "--models-file", str(models)])
    assert bad.exit_code == 1
    assert "sub/tokenizer.json" in bad.output


def test_models_verify_without_a_list_or_an_unknown_judge_is_a_usage_error(tmp_path):
    folder = _judge(tmp_path)
    (folder / WEIGHTS_FILE).unlink()
    models = _models_file(tmp_path, folder)
    for name in ("j", "nope"):
        result = CliRunner().invoke(cli, ["models", "--verify", name, "--models-file",
                                          str(models)])
        assert result.exit_code == 2, result.output


def test_the_manifest_records_which_list_and_whether_names_and_sizes_match(tmp_path):
    folder = _judge(tmp_path)
    summary = model_fingerprint(folder)["weight_list"]
    assert summary["names_and_sizes_match"] is True and len(summary["sha256"]) == 64
    (folder / "config.json").write_text('{"model_type": "llama", "x": 1}')
    assert weight_list_summary(folder)["names_and_sizes_match"] is False
    (folder / WEIGHTS_FILE).unlink()
    assert model_fingerprint(folder)["weight_list"] is None
