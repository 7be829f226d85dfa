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
