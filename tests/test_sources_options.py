"""The labels and cases options: declared once (evaluator/cli/options.py), handed to each
command as one LabelSource and one CaseSource, one name per meaning in --help
(--label-id-column, --case-id-column), the old --id-column still read with its old meaning
in each command."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from evaluator.cli.main import cli
from evaluator.data.sources import CaseSource, LabelSource

CLI = Path(__file__).resolve().parent.parent / "evaluator" / "cli"
GROUP = {"--labels", "--label-field", "--label-id-column", "--label-scale", "--cases",
         "--map", "--case-id-column", "--id-column"}
# (command, the function it passes the sources to, "labels"/"cases" for the old --id-column)
COMMANDS = [("agree", "evaluator.cli.agree_cmd.agreement", "labels"),
            ("estimate", "evaluator.cli.estimate_cmd.estimate", "labels"),
            ("log", "evaluator.cli.log_cmd.log_run", "labels"),
            ("review", "evaluator.cli.review_cmd.build_review", "labels"),
            ("compare", "evaluator.cli.compare_cmd.compare", "labels"),
            ("report", "evaluator.cli.report_cmd.write_report", "cases")]


class Passed(Exception):
    """Stops the command once it has passed its sources down (what follows is tested
    with each command)."""


def _passed(monkeypatch, target: str, tmp_path: Path, command: str, *args: str):
    seen: list[tuple] = []

    def capture(*given, **options):
        seen.append((given, options))
        raise Passed

    monkeypatch.setattr(target, capture)
    monkeypatch.chdir(tmp_path)
    for name in ("results.jsonl", "labels.csv", "cases.csv"):
        (tmp_path / name).write_text("case_id\n")
    extra = {"review": ["--out", "sheet"], "report": ["--html", "r.html"]}.get(command, [])
    result = CliRunner().invoke(cli, [command, "results.jsonl", *extra, "--labels",
                                      "labels.csv", "--label-field", "x", *args])
    assert seen, result.output  # the entry point reports Passed as a bug: exit 70
    return seen[0]


@pytest.mark.parametrize(("command", "target", "meaning"), COMMANDS)
def test_canonical_names_pass_what_the_old_spelling_passed(monkeypatch, tmp_path, command,
                                                           target, meaning):
    canonical = f"--{'label' if meaning == 'labels' else 'case'}-id-column"
    old = _passed(monkeypatch, target, tmp_path, command, "--id-column", "rid")
    new = _passed(monkeypatch, target, tmp_path, command, canonical, "rid")
    default = _passed(monkeypatch, target, tmp_path, command)
    assert old == new != default
    assert "rid" in repr(new) and "rid" not in repr(default)


def test_the_commands_receive_one_record_per_source(monkeypatch, tmp_path):
    _, options = _passed(monkeypatch, "evaluator.cli.review_cmd.build_review", tmp_path,
                             "review", "--label-id-column", "lid", "--label-scale", "1-3",
                             "--cases", "cases.csv", "--map", "a=b", "--case-id-column", "cid")
    assert options["labels"] == LabelSource((Path("labels.csv"),), "x", "lid", (1.0, 2.0, 3.0))
    assert options["cases"] == CaseSource(Path("cases.csv"), {"a": "b"}, "cid")


def test_the_old_and_new_spelling_naming_two_columns_is_refused(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    for name in ("results.jsonl", "labels.csv"):
        (tmp_path / name).write_text("case_id\n")
    result = CliRunner().invoke(cli, ["agree", "results.jsonl", "--labels", "labels.csv",
                                      "--label-field", "x", "--id-column", "a",
                                      "--label-id-column", "b"])
    assert result.exit_code == 2
    assert "--label-id-column and --id-column name one column" in result.output


@pytest.mark.parametrize("command", [c for c, _, _ in COMMANDS])
def test_help_shows_one_name_per_meaning(command):
    text = CliRunner().invoke(cli, [command, "--help"]).output
    names = re.findall(r"^\s+(--[a-z-]+)", text, flags=re.MULTILINE)
    assert "--label-id-column" in names and "--id-column" not in names
    assert ("--case-id-column" in names) == (command in ("agree", "review", "report"))


def test_the_labels_and_cases_options_are_declared_in_one_module():
    declared = []
    for path in sorted(CLI.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "option" and node.args
                    and isinstance(node.args[0], ast.Constant) and node.args[0].value in GROUP):
                declared.append((path.name, node.args[0].value))
    # run's --map and --id-column read its own input file: no labels, no ambiguity.
    outside = [d for d in declared if d[0] not in ("options.py", "run_cmd.py")]
    assert not outside, outside
    assert {name for file, name in declared if file == "options.py"} == GROUP
