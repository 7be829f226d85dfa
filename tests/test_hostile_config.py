"""Hostile or mistaken configuration (rubric files, models.yaml) is refused by `validate` and
`run`: exit 2, one line naming the file and what is wrong, no traceback, no case text, and
bounded memory and time. Legitimate rubrics keep working."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from evaluator.cli.main import cli
from tests.conftest import BUILTIN, EXAMPLES, PAIRWISE_BUILTIN, ROOT, write_jsonl

SECRET = "PHI-SECRET-7731 Jane Roe, MRN 0042"  # must never appear in an error

MODELS = "default: fake\njudges:\n  fake:\n    backend: fake\n"

# 9 levels of 9 aliases: ~400 bytes that expand to 9**9 (387 million) strings.
BOMB_LEVELS = "abcdefghi"


def _bomb(indent: str) -> str:
    lines = [f'{indent}a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, cur in itertools.pairwise(BOMB_LEVELS):
        lines.append(f"{indent}{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def rubric_yaml(*, key: str = "score", scale: str = "range: [1, 3]", items: str = "",
                template: str = "Rate this:\n{{ note | fence }}", extra: str = "",
                name: str = "hostile") -> str:
    """A small rubric file as text (so that anchors and duplicate keys can be written)."""
    body = textwrap.indent(template, "  ")
    return (f"format_version: 1\nname: {name}\ntitle: Hostile\n"
            "inputs:\n  note:\n    description: a clinical note\n"
            f"output:\n  - key: {key}\n    type: integer\n    {scale}\n"
            "  - key: why\n    type: string\n    max_length: 50\n"
            f"{items}{extra}template: |\n{body}\n")


@pytest.fixture
def env(tmp_path):
    """A rubrics dir, a fake-judge models.yaml and one case holding SECRET."""
    rubrics = tmp_path / "rubrics"
    rubrics.mkdir()
    models = tmp_path / "models.yaml"
    models.write_text(MODELS, encoding="utf-8")
    cases = write_jsonl(tmp_path / "cases.jsonl", [{"case_id": "c1", "note": SECRET}])
    return tmp_path, rubrics, models, cases


def _validate_args(rubrics: Path, models: Path) -> list[str]:
    return ["validate", "--rubrics-dir", str(rubrics), "--models-file", str(models)]


def _run_args(rubric: Path | str, rubrics: Path, models: Path, cases: Path,
              out: Path) -> list[str]:
    return ["run", "-r", str(rubric), "--rubrics-dir", str(rubrics), "-i", str(cases),
            "-o", str(out), "-m", "fake", "--models-file", str(models), "--no-progress"]


def _invoke(args: list[str]):
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def assert_refused(result, path: Path, *needles: str) -> str:
    """Exit 2, exactly one line on stderr naming the file and each needle, no traceback,
    no case text."""
    assert result.exit_code == 2, (result.exit_code, result.output, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    line = lines[0]
    assert str(path) in line or str(path.resolve()) in line, line
    for needle in needles:
        assert needle in line, line
    for text in (result.stdout, result.stderr):
        assert "Traceback" not in text and SECRET not in text
    return line


def _both_commands(env, rubric_text: str, *needles: str) -> None:
    tmp_path, rubrics, models, cases = env
    path = rubrics / "hostile.yaml"
    path.write_text(rubric_text, encoding="utf-8")
    assert_refused(_invoke(_validate_args(rubrics, models)), path, *needles)
    out = tmp_path / "out.jsonl"
    assert_refused(_invoke(_run_args("hostile", rubrics, models, cases, out)), path, *needles)
    assert not out.exists()  # nothing was judged


# --------------------------------------------------------------------------------------------
# Item 7: YAML anchor bombs and duplicate keys, in models.yaml and in rubric files.
# Memory and time are measured in a child process (under an address-space limit, so that a
# regression fails instead of swapping the machine).
# --------------------------------------------------------------------------------------------

_CHILD = r"""
import json, resource, sys, time
limit = int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from click.testing import CliRunner
from evaluator.cli.main import cli
report = []
for args in json.loads(sys.argv[1]):
    start = time.monotonic()
    try:
        result = CliRunner().invoke(cli, args)
        code, err = result.exit_code, result.stderr
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            err += "\nTraceback: " + type(result.exception).__name__
    except MemoryError:
        code, err = -1, "Traceback: MemoryError"
    report.append({"code": code, "stderr": err, "seconds": time.monotonic() - start,
                   "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024})
print(json.dumps(report))
"""
CHILD_MEMORY_LIMIT = 3 * 1024**3  # far above the CLI's needs, far below a bomb's
CHILD_TIMEOUT = 240


def run_bounded(invocations: list[list[str]]) -> list[dict]:
    """Run CLI invocations in one child process (the first should be a legitimate warm-up);
    each entry reports exit code, stderr, seconds and the process's peak RSS so far."""
    done = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(invocations),
                           str(CHILD_MEMORY_LIMIT)],
                          capture_output=True, text=True, timeout=CHILD_TIMEOUT, cwd=ROOT,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


# Peak RSS may grow by at most this much over a legitimate `validate` in the same process,
# and a refusal may take at most this long (a slow, shared CI core included).
MEMORY_HEADROOM_MB = 150
REFUSAL_SECONDS = 20


def _assert_bounded(report: list[dict], paths: list[Path], needles: list[str]) -> None:
    baseline = report[0]
    assert baseline["code"] == 0, baseline["stderr"]
    for entry, path, needle in zip(report[1:], paths, needles, strict=True):
        lines = [line for line in entry["stderr"].splitlines() if line.strip()]
        assert entry["code"] == 2, entry
        assert len(lines) == 1 and str(path) in lines[0] and needle in lines[0], entry
        assert "Traceback" not in entry["stderr"] and SECRET not in entry["stderr"]
        assert entry["peak_mb"] < baseline["peak_mb"] + MEMORY_HEADROOM_MB, entry
        assert entry["seconds"] < REFUSAL_SECONDS, entry


def test_anchor_bombs_and_runaway_templates_are_refused_fast_in_bounded_memory(env):
    tmp_path, _, models, cases = env
    legit = tmp_path / "legit"
    legit.mkdir()
    bomb_models = tmp_path / "bomb-models.yaml"
    bomb_models.write_text(MODELS + "    chat_template_kwargs:\n" + _bomb("      "),
                           encoding="utf-8")
    assert len(bomb_models.read_bytes()) < 520
    dirs = {}
    hostile = {
        "bomb": rubric_yaml(name="bomb", extra="chat_template_kwargs:\n" + _bomb("  ")),
        "huge_range": rubric_yaml(name="huge_range", scale="range: [0, 1000000000000]"),
        "huge_repeat": rubric_yaml(name="huge_repeat",
                                   template="{{ note | fence }}{{ 'A' * 3000000000 }}"),
        "nested_range": rubric_yaml(name="nested_range", template=(
            "{{ note | fence }}{% for i in range(100000) %}{% for j in range(100000) %}"
            "{% endfor %}{% endfor %}")),
    }
    for name, text in hostile.items():
        dirs[name] = tmp_path / name
        dirs[name].mkdir()
        (dirs[name] / f"{name}.yaml").write_text(text, encoding="utf-8")
    out = tmp_path / "out.jsonl"
    invocations = [_validate_args(legit, models),
                   _validate_args(legit, bomb_models),
                   _run_args("pathology_report", legit, bomb_models,
                             EXAMPLES / "pathology_report.jsonl", out)]
    paths, needles = [bomb_models, bomb_models], ["aliases (*name) expand"] * 2
    for name in hostile:
        invocations += [_validate_args(dirs[name], models),
                        _run_args(name, dirs[name], models, cases, out)]
        paths += [dirs[name] / f"{name}.yaml"] * 2
    needles += (["aliases (*name) expand"] * 2 + ["less than or equal to 1000000"] * 2
                + ["'*' goes over the limit"] * 2 + ["more than 100000 iterations"] * 2)
    _assert_bounded(run_bounded(invocations), paths, needles)
    assert not out.exists()


def test_aliases_within_the_bound_still_work(env):
    _, rubrics, models, _ = env
    models.write_text("default: fake\njudges:\n  fake: &base {backend: fake}\n"
                      "  other:\n    <<: *base\n    description: merged, then overridden\n"
                      "  third: *base\n", encoding="utf-8")
    result = _invoke(_validate_args(rubrics, models))
    assert result.exit_code == 0, result.output
    assert "3 judges" in result.stdout


def test_duplicate_keys_in_models_yaml(env):
    tmp_path, rubrics, models, _ = env
    models.write_text("default: fake\njudges:\n  fake:\n    backend: fake\n"
                      "    batch_size: 4\n    batch_size: 400\n", encoding="utf-8")
    line = assert_refused(_invoke(_validate_args(rubrics, models)), models,
                          "duplicate key 'batch_size'", "first at line 5")
    assert f"{models}:6:5:" in line
    result = _invoke(_run_args("pathology_report", rubrics, models,
                               EXAMPLES / "pathology_report.jsonl", tmp_path / "o.jsonl"))
    assert_refused(result, models, "duplicate key 'batch_size'")


def test_duplicate_keys_in_a_rubric(env):
    text = rubric_yaml().replace("title: Hostile\n", "title: Hostile\ntitle: Again\n")
    _both_commands(env, text, "duplicate key 'title'", "hostile.yaml:4:1:")


def test_duplicate_nested_keys_in_a_rubric(env):
    text = rubric_yaml(scale="range: [1, 3]\n    description: a\n    description: b")
    _both_commands(env, text, "duplicate key 'description'")


# --------------------------------------------------------------------------------------------
# Item 8: output keys, scale and list sizes.
# --------------------------------------------------------------------------------------------

def test_underscore_output_key_is_refused(env):
    _both_commands(env, rubric_yaml(key="_score"), "output.0", "'_score'",
                   "must not start with '_'")


@pytest.mark.parametrize("key", ["model_config", "model_fields", "json", "copy", "schema"])
def test_reserved_output_key_is_refused(env, key):
    _both_commands(env, rubric_yaml(key=key), "output.0", f"'{key}'", "reserved")


def test_reserved_item_keys_are_refused(env):
    items = ("  - key: findings\n    type: items\n    values: [0, 1]\n    max_items: 3\n"
             "    explanation_max_length: 20\n    score_key: _s\n")
    _both_commands(env, rubric_yaml(items=items), "output.2", "score_key", "'_s'")


def test_huge_range_is_refused(env):
    _both_commands(env, rubric_yaml(scale="range: [0, 1000000000000]"), "output.0",
                   "range.1", "less than or equal to 1000000")


def test_long_range_is_refused(env):
    _both_commands(env, rubric_yaml(scale="range: [-1000000, 1000000]"), "output.0",
                   "2000001 values", "at most 101")


def test_huge_values_list_is_refused(env):
    values = ", ".join(str(v) for v in range(500))
    _both_commands(env, rubric_yaml(scale=f"values: [{values}]"), "output.0", "values",
                   "at most 101")


def test_huge_score_value_is_refused(env):
    _both_commands(env, rubric_yaml(scale="values: [0, 99999999999999999999]"), "output.0",
                   "less than or equal to 1000000")


def test_huge_max_items_is_refused(env):
    items = ("  - key: findings\n    type: items\n    values: [0, 1]\n"
             "    max_items: 1000000000\n    explanation_max_length: 20\n")
    _both_commands(env, rubric_yaml(items=items), "output.2", "max_items",
                   "less than or equal to 100")


def test_absurd_token_budget_is_refused(env):
    items = "".join(f"  - key: list{i}\n    type: items\n    values: [0, 1]\n"
                    "    max_items: 100\n    explanation_max_length: 4000\n" for i in range(2))
    _both_commands(env, rubric_yaml(items=items), "longest valid verdict", "at most 32768")


def test_a_non_mapping_rubric_and_a_huge_file_are_refused(env):
    _both_commands(env, "- just\n- a list\n", "must be a YAML mapping")
    _both_commands(env, rubric_yaml() + "#" * (1024 * 1024), "larger than 1048576 bytes")


# --------------------------------------------------------------------------------------------
# Item 8: the Jinja sandbox has limits, and case text is printed only through fence/inline,
# enforced while rendering (the templates below pass the static check at load time).
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("template, needle", [
    ("{{ note | fence }}{{ 'A' * 3000000000 }}", "'*' goes over the limit"),
    (("{{ note | fence }}{% for i in range(100000) %}{% for j in range(100000) %}"
      "{% endfor %}{% endfor %}"), "more than 100000 iterations"),
    (("{{ note | fence }}{% set ns = namespace(s='ab') %}{% for i in range(64) %}"
      "{% set ns.s = ns.s ~ ns.s %}{% endfor %}"), "'~' goes over the limit"),
    ("{{ note | fence }}{{ 'ab' | center(3000000000) }}", "filter 'center' goes over"),
    ("{{ note | fence }}{{ 'a'.ljust(3000000000) }}", "attribute 'ljust' of 'str'"),
    ("{{ note | fence }}{{ '%3000000000d' % 1 }}", "'%' string formatting"),
    ("{{ note | fence }}{{ 7 ** 7777777 }}", "more than 1024 bits"),
    ("{{ note | fence }}{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "RecursionError"),
])
def test_template_resource_limits(env, template, needle):
    _both_commands(env, rubric_yaml(template=template), "template line 1", needle)


UNFENCED = [
    ("{% set x = note %}{{ x }}", "printed directly"),
    ("{% set x = note %}{{ x | upper }}", "given to filter 'upper'"),
    ("{% set x = note %}{{ x ~ '' }}", "joined with '~'"),
    ("{% for c in note %}{{ c }}{% endfor %}", "looped over"),
    ("{% set x = note %}{{ x[0:10] }}", "sliced"),
    ("{% set x = note %}{{ x + '' }}", "used with '+'"),
    ("{% set x = note %}{{ [x] }}", "printed inside a list"),
    ("{% set x = note %}{{ [x] | join }}", "given to filter 'join'"),
    ("{% set x = note %}{{ x.upper() }}", "accessed (.upper)"),
    ("{% macro m(v) %}{{ v }}{% endmacro %}{% set x = note %}{{ m(x) }}", "printed directly"),
    # Fenced text cannot be unfenced again:
    ("{% set x = note | fence %}{{ x | replace('`', '') }}",
     "fenced case text is given to filter 'replace'"),
    ("{% set x = note | fence %}{{ x[3:-3] }}", "fenced case text is sliced"),
    ("{% set x %}{{ note | fence }}{% endset %}{{ x | replace('`', '') }}",
     "fenced case text is given"),
    ("{% set x = note | fence %}{% for c in x %}{{ c }}{% endfor %}",
     "fenced case text is looped over"),
]


@pytest.mark.parametrize("template, needle", UNFENCED)
def test_case_text_is_printed_only_through_fence_or_inline(env, template, needle):
    line_needles = ("template line 1", needle, "case")
    _both_commands(env, rubric_yaml(template=template), *line_needles)


@pytest.mark.parametrize("template", ["{{ note }}", "{{ note | upper }}", "{{ note ~ '' }}",
                                      "{{ note | fence | replace('`', '') }}"])
def test_unfenced_templates_are_also_refused_at_load(env, template):
    _both_commands(env, rubric_yaml(template=template), "without '| fence'")


@pytest.mark.parametrize("name", ["format", "tojson", "wordwrap", "batch", "random"])
def test_unbounded_filters_are_unavailable(env, name):
    _both_commands(env, rubric_yaml(template=f"{{{{ note | fence }}}}{{{{ 'x' | {name} }}}}"),
                   "template: Jinja2 syntax error line 1", f"No filter named '{name}'")


# --------------------------------------------------------------------------------------------
# Legitimate rubrics are unchanged.
# --------------------------------------------------------------------------------------------

def test_validate_passes_on_the_builtins():
    result = _invoke(["validate"])
    assert result.exit_code == 0, result.output
    for name in BUILTIN + PAIRWISE_BUILTIN:
        assert f"ok  rubric {name}:" in result.stdout
    assert "all rubrics and models.yaml are valid" in result.stdout


@pytest.mark.parametrize("name", BUILTIN + PAIRWISE_BUILTIN)
def test_builtins_run_with_the_fake_judge(env, name):
    tmp_path, rubrics, models, _ = env
    out = tmp_path / f"{name}.jsonl"
    result = _invoke(_run_args(name, rubrics, models, EXAMPLES / f"{name}.jsonl", out))
    assert result.exit_code == 0, result.output
    assert {json.loads(line)["status"] for line in out.read_text().splitlines()} == {"ok"}


def test_a_user_rubric_with_ordinary_jinja_still_works(env):
    template = ("{% macro section(title) %}## {{ title }}{% endmacro %}"
                "{{ section('Case') }}\n"
                "{% set block = note | fence %}{% if note %}{{ block ~ '\\n' }}{% endif %}"
                "{% for lead in ['I', 'II', 'III'] %}{{ loop.index }}={{ lead | lower }} "
                "{% endfor %}\n"
                "{% set n = 6 * 7 %}{{ n }} {{ 'x' * 3 }} {{ ['b', 'a'] | sort | join(',') }}"
                "{% if note == 'never' %}no{% endif %}")
    tmp_path, rubrics, models, cases = env
    (rubrics / "hostile.yaml").write_text(rubric_yaml(template=template), encoding="utf-8")
    result = _invoke(_validate_args(rubrics, models))
    assert result.exit_code == 0, result.output
    from evaluator.rubrics.fence import fence
    from evaluator.rubrics.load import load_rubric_file
    from evaluator.rubrics.render import render_messages

    [message] = render_messages(load_rubric_file(rubrics / "hostile.yaml"), {"note": SECRET})
    assert message["content"] == (f"## Case\n{fence(SECRET)}\n1=i 2=ii 3=iii \n"
                                  "42 xxx a,b")
    out = tmp_path / "out.jsonl"
    result = _invoke(_run_args("hostile", rubrics, models, cases, out))
    assert result.exit_code == 0, result.output
