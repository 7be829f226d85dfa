"""models.yaml parsing is strict."""

from __future__ import annotations

import pytest
import yaml

from evaluator.judges.models_file import JudgeConfigError, load_models_file, resolve_judge


def test_project_models_file_parses_with_embedded_default():
    name, spec = resolve_judge(None)
    assert name == "smollm2-135m-instruct"
    assert spec.embedded == "smollm2-135m-instruct" and spec.sampling.temperature == 0


@pytest.mark.parametrize("judge, message", [
    ({"backend": "transformers", "path": "m", "temprature": 0}, "temprature"),
    ({"backend": "transformers"}, "exactly one of 'path'"),
    ({"backend": "transformers", "path": "m", "sampling": {"temperature": -1}}, "temperature"),
    ({"backend": "llamacpp", "path": "m"}, "backend"),
])
def test_invalid_judges_are_errors(tmp_path, judge, message):
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump({"default": "j", "judges": {"j": judge}}))
    with pytest.raises(JudgeConfigError, match=message) as info:
        load_models_file(path)
    assert str(path) in str(info.value)


def test_relative_paths_resolve_against_the_file(tmp_path):
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump({"default": "j", "judges": {
        "j": {"backend": "transformers", "path": "weights/judge"}}}))
    assert load_models_file(path).judges["j"].path == tmp_path / "weights" / "judge"


def test_unknown_judge_names_the_defined_ones(tmp_path):
    with pytest.raises(JudgeConfigError, match="tiny-random"):
        resolve_judge("nope")


@pytest.mark.parametrize("threads", [1, 16, "auto", "4"])
def test_a_judge_takes_torch_threads_as_a_count_or_auto(tmp_path, threads):
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump({"default": "j", "judges": {
        "j": {"backend": "transformers", "path": "m", "threads": threads}}}))
    assert load_models_file(path).judges["j"].threads == (
        "auto" if threads == "auto" else int(threads))


@pytest.mark.parametrize("threads", [0, -2, 1025, 10**23, 2.5, True, "all", "", [2], {"n": 2}])
def test_a_bad_threads_value_is_one_line_naming_the_key(tmp_path, threads):
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump({"default": "j", "judges": {
        "j": {"backend": "transformers", "path": "m", "threads": threads}}}))
    with pytest.raises(JudgeConfigError) as info:
        load_models_file(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message
    assert "judges.j.threads: " in message
    assert "expected a whole number from 1 to 1024, or auto" in message
    assert message.count("judges.j.threads") == 1  # one problem, not one per union member


def test_threads_is_refused_for_a_vllm_judge(tmp_path):
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump({"default": "j", "judges": {
        "j": {"backend": "vllm", "path": "m", "threads": 2}}}))
    with pytest.raises(JudgeConfigError, match="vLLM sets its own: remove 'threads'"):
        load_models_file(path)
