"""The strict YAML loader: duplicate keys, alias expansion, depth and size are bounded, and
every error is one line naming the file, line and column."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluator.limits import MAX_CONFIG_BYTES, MAX_YAML_DEPTH, MAX_YAML_NODES
from evaluator.strict_yaml import YamlRefused, load_yaml_file, parse_yaml

PATH = Path("conf.yaml")


def _refused(text: str | bytes) -> str:
    data = text.encode() if isinstance(text, str) else text
    with pytest.raises(YamlRefused) as info:
        parse_yaml(data, PATH)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{PATH}")
    return message


def test_plain_yaml_parses_as_safe_load_would():
    assert parse_yaml(b"a: 1\nb: [x, {c: true}]\nd: 2024-01-02\n", PATH)["b"] == [
        "x", {"c": True}]


def test_duplicate_keys_name_both_lines():
    message = _refused("a: 1\nb:\n  c: 1\n  c: 2\n")
    assert message.startswith("conf.yaml:4:3: duplicate key 'c' (first at line 3)")


def test_merge_keys_may_be_overridden():
    data = parse_yaml(b"base: &b {x: 1, y: 2}\nuse:\n  <<: *b\n  y: 3\n", PATH)
    assert data["use"] == {"x": 1, "y": 3}


def test_small_aliases_are_fine_and_bombs_are_not():
    assert parse_yaml(b"a: &a [1, 2]\nb: [*a, *a]\n", PATH)["b"] == [[1, 2], [1, 2]]
    levels = ["a: &a [" + ",".join(["x"] * 10) + "]"]
    for prev, cur in zip("abcdef", "bcdefg", strict=True):
        levels.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 10) + "]")
    assert "expand this document beyond" in _refused("\n".join(levels))


def test_a_long_string_repeated_by_aliases_is_refused():
    text = f"a: &a {'x' * 200_000}\nb: [*a, *a, *a, *a, *a, *a]\n"
    assert f"{MAX_YAML_NODES} values or {MAX_CONFIG_BYTES} characters" in _refused(text)


def test_recursive_alias_is_refused():
    assert "refers to a node that contains it" in _refused("a: &a [1, *a]\n")


def test_deep_nesting_and_many_values_are_refused():
    assert f"more than {MAX_YAML_DEPTH} levels" in _refused("[" * 5000 + "]" * 5000)
    assert f"more than {MAX_YAML_NODES} values" in _refused(
        "[" + ",".join(["1"] * (MAX_YAML_NODES + 1)) + "]")


def test_syntax_errors_and_odd_input_are_one_line():
    assert _refused("a: [1, 2\nb: 3\n").startswith("conf.yaml:")
    assert "not UTF-8" in _refused(b"a: \xff\n")
    assert "ValueError" in _refused("a: " + "9" * 5000 + "\n")  # beyond int() digits
    assert "not valid YAML" in _refused("a: 1\n---\nb: 2\n")
    assert "not valid YAML" in _refused("a: !!python/object:os.system x\n")


def test_files_over_the_size_limit_are_not_read(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_bytes(b"#" * (MAX_CONFIG_BYTES + 1))
    with pytest.raises(YamlRefused, match=f"larger than {MAX_CONFIG_BYTES} bytes"):
        load_yaml_file(path, "rubric file")
    with pytest.raises(YamlRefused, match="cannot read rubric file"):
        load_yaml_file(tmp_path / "missing.yaml", "rubric file")
