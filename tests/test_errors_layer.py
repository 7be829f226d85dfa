"""Errors have one home: every exception class the evaluator defines is a
:class:`~evaluator.common.errors.UserError` (one line and its exit code, printed by the
CLI's entry point alone) or is listed below as internal; no command module catches an
exception to print it and exit. Read from the source with ``ast``, as tests/test_layers.py
is; the last tests drive the entry point itself."""

from __future__ import annotations

import ast
import builtins
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from evaluator.cli.exit_codes import EXIT_INPUT_REJECTED, EXIT_SOME_FAILED, EXIT_USAGE
from evaluator.cli.main import cli
from evaluator.common.errors import UserError
from evaluator.run.engines import RayRunFailed
from evaluator.run.judging import InputRejected
from evaluator.run.runner import OutputWriteFailed

PACKAGE = Path(__file__).resolve().parent.parent / "evaluator"

# Exception classes that never reach the CLI, each with the reason. Anything else the
# evaluator raises on purpose is a UserError; what is neither is a bug (exit code 70).
INTERNAL = {
    "_DuplicateKey": "data/cases.py: a signal from the JSON reader's object hook, caught "
                     "where it is raised and turned into an InputFileError",
    "_Changed": "label/session.py: the journal changed under the running page, caught "
                "where it is raised (_take_in) and turned into the page's stopped state",
    "Terminated": "cli/signals.py: SIGTERM and SIGHUP as a KeyboardInterrupt (not an "
                  "Exception): the entry point reports them as an interruption",
}
# What ends a command inside an ``except`` handler (sys.exit, ctx.exit, ctx.fail...).
_EXIT_CALLS = {"exit", "fail", "abort"}
_EXIT_EXCEPTIONS = {"SystemExit", "Exit", "Abort"}


def exception_classes() -> dict[str, tuple[str, list[str]]]:
    """Every class defined at the top of a module in evaluator/: name -> (file, base names)
    (two private classes of one name: their bases together)."""
    found: dict[str, tuple[str, list[str]]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(b).rpartition(".")[2] for b in node.bases]
                file, before = found.get(node.name, (str(path.relative_to(PACKAGE.parent)), []))
                found[node.name] = (file, before + bases)
    return found


def _derives(name: str, classes: dict, test) -> bool:
    if test(name):
        return True
    return name in classes and any(_derives(b, classes, test) for b in classes[name][1])


def _builtin_exception(name: str) -> bool:
    value = getattr(builtins, name, None)
    return isinstance(value, type) and issubclass(value, Exception)


def test_every_exception_class_is_a_user_error_or_listed_as_internal():
    classes = exception_classes()
    exceptions = {name for name in classes if _derives(name, classes, _builtin_exception)}
    assert "RubricError" in exceptions and "InputRejected" in exceptions  # the scan works
    neither = sorted(f"{classes[name][0]}: {name}" for name in exceptions - {"UserError"}
                     if not _derives(name, classes, lambda n: n == "UserError")
                     and name not in INTERNAL)
    assert not neither, ("exception classes that are neither a UserError nor listed as "
                         "internal (derive from evaluator.common.errors.UserError):\n"
                         + "\n".join(neither))
    assert set(INTERNAL) <= set(classes), "an INTERNAL entry names no class: remove it"


def catch_print_exit(source: str) -> list[str]:
    """The ``except`` handlers of ``source`` that end the command themselves (a handler may
    report and carry on, as ``run`` does when MLflow fails after a finished run), but for a
    Ctrl-C's (:exc:`KeyboardInterrupt` is no error: ``run`` says where the results are)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ExceptHandler):
            continue
        if node.type is not None and ast.unparse(node.type) == "KeyboardInterrupt":
            continue
        for inner in (n for stmt in node.body for n in ast.walk(stmt)):
            called = isinstance(inner, ast.Call) and getattr(inner.func, "attr",
                                                             getattr(inner.func, "id", None))
            raised = isinstance(inner, ast.Raise) and inner.exc is not None and ast.unparse(
                inner.exc.func if isinstance(inner.exc, ast.Call) else inner.exc
            ).rpartition(".")[2]
            if called in _EXIT_CALLS or raised in _EXIT_EXCEPTIONS:
                found.append(f"line {node.lineno}: except "
                             f"{ast.unparse(node.type) if node.type else ''} ... {called or raised}")
                break
    return found


def test_the_check_finds_a_catch_print_exit_block():
    old = ("try:\n    go()\nexcept (AgreementError, StatsUnavailable) as exc:\n"
           "    click.echo(f'error: {exc}', err=True)\n    sys.exit(EXIT_USAGE)\n"
           "try:\n    go()\nexcept ValueError:\n    raise SystemExit(2)\n"
           "try:\n    go()\nexcept TrackingError as exc:\n    raise UserError(str(exc))\n")
    assert len(catch_print_exit(old)) == 2  # the translation into a UserError is allowed


def test_no_command_module_catches_an_exception_to_print_and_exit():
    wrong = [f"{path.name} {where}" for path in sorted((PACKAGE / "cli").glob("*_cmd.py"))
             for where in catch_print_exit(path.read_text(encoding="utf-8"))]
    assert not wrong, ("a command prints an error and exits itself; raise a UserError "
                       "(evaluator/common/errors.py) and let the entry point print it:\n"
                       + "\n".join(wrong))


def test_every_command_function_is_named_name_command():
    for name, command in cli.commands.items():
        assert command.callback.__name__ == f"{name.replace('-', '_')}_command", name


def test_exit_codes_are_read_from_the_error_classes():
    assert EXIT_USAGE == UserError.exit_code == 2
    assert EXIT_INPUT_REJECTED == InputRejected.exit_code == 3
    assert EXIT_SOME_FAILED == OutputWriteFailed.exit_code == RayRunFailed.exit_code == 1


class _Stopped(UserError):
    exit_code = 3


@pytest.fixture
def raising():
    """A command ``raise`` on the real command group that raises what a test sets."""
    raised: list[BaseException] = []

    @click.command("raise")
    def raise_command() -> None:
        raise raised[0]

    cli.add_command(raise_command)
    yield raised
    cli.commands.pop("raise")


@pytest.mark.parametrize("error, code", [
    (UserError("labels.csv line 3: 'score.label' is 'x'; give a number"), 2),
    (_Stopped("labels.csv line 3: 'score.label' is 'x'; give a number"), 3),
])
def test_a_user_error_is_one_line_and_its_exit_code(raising, error, code):
    raising.append(error)
    result = CliRunner().invoke(cli, ["raise"])
    assert result.exit_code == code
    assert result.stderr == "error: labels.csv line 3: 'score.label' is 'x'; give a number\n"
    assert result.stdout == ""


def test_a_user_errors_control_characters_are_escaped(raising):
    raising.append(UserError("models.yaml: judge 'a\x1b[2Jb' is unknown"))
    result = CliRunner().invoke(cli, ["raise"])
    assert result.exit_code == 2
    assert result.stderr == "error: models.yaml: judge 'a\\x1b[2Jb' is unknown\n"


@pytest.mark.parametrize("verbose", [[], ["-vv"]])
def test_anything_else_is_a_bug_exit_70_naming_only_its_type(raising, verbose):
    raising.append(RuntimeError("Jane Doe, MRN 0012345"))
    result = CliRunner().invoke(cli, [*verbose, "raise"])
    assert result.exit_code == 70
    last = result.stderr.splitlines()[-1]
    assert last.startswith("error: internal error (RuntimeError); this is a bug")
    assert "Jane Doe" not in last
    # The message shows only in the traceback, which -vv asks for.
    assert ("Jane Doe, MRN 0012345" in result.stderr) == bool(verbose)


# --- usage errors click finds: one line too ------------------------------------------------
# (each was click's block: "Usage: ...", "Try '... --help' for help.", a blank line,
# "Error: ...")

def _see(command: str) -> str:
    return f" (see {command} --help)"


@pytest.mark.parametrize("args, line", [
    (["run", "-r", "pathology_report", "-i", "nowhere.jsonl", "-o", "o.jsonl"],
     "error: --input: file 'nowhere.jsonl' does not exist" + _see("evaluator run")),
    (["run", "-r", "pathology_report", "-i", "folder", "-o", "o.jsonl"],
     "error: --input: file 'folder' is a directory" + _see("evaluator run")),
    (["run", "-r", "pathology_report", "-i", "r.jsonl"],
     "error: missing option '--output' / '-o'" + _see("evaluator run")),
    (["run", "--engine", "spark"],
     "error: --engine: 'spark' is not one of 'local', 'ray'" + _see("evaluator run")),
    (["run", "-r"], "error: option '-r' requires an argument" + _see("evaluator run")),
    (["agree", "r.jsonl", "--labels"],
     "error: option '--labels' requires an argument" + _see("evaluator agree")),
    (["summary"], "error: missing argument 'RESULTS'" + _see("evaluator summary")),
    (["report", "--labels", "nope.csv", "r.jsonl"],
     "error: --labels: path 'nope.csv' does not exist" + _see("evaluator report")),
    (["review", "--design", "x", "r.jsonl"],
     "error: --design: 'x' is not one of 'priority', 'random', 'active'"
     + _see("evaluator review")),
    (["agree", "--bogus", "r.jsonl"],
     "error: no such option '--bogus'" + _see("evaluator agree")),
    (["--bogus"],
     "error: no such option '--bogus'. Did you mean '--verbose'?" + _see("evaluator")),
    (["summ"], "error: no such command 'summ'. Did you mean 'summary'?" + _see("evaluator")),
    (["run", "--limt", "3"],  # click's ". (Did you mean" loses its full stop mid-line
     "error: no such option '--limt' (Did you mean one of: '--input', '--limit', '--wait'?)"
     + _see("evaluator run")),
    # raised by the command's own checks, as click.UsageError
    (["log", "r.jsonl", "--criterion", "accuracy"],
     "error: --criterion only apply with --labels" + _see("evaluator log")),
    (["run", "-i", "a\x1b[2J\nb.jsonl"],  # a typed value cannot rewrite the terminal
     "error: --input: file 'a\\x1b[2J\\nb.jsonl' does not exist" + _see("evaluator run")),
])
def test_a_usage_error_click_finds_is_one_line_exit_2(tmp_path, monkeypatch, args, line):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "folder").mkdir()
    (tmp_path / "r.jsonl").write_text("")
    result = CliRunner().invoke(cli, args, prog_name="evaluator")
    assert (result.exit_code, result.stdout) == (2, ""), result.output
    assert result.stderr == line + "\n"


def test_a_value_from_the_environment_is_named_so(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.jsonl").write_text("")
    result = CliRunner().invoke(cli, ["run", "-r", "pathology_report", "-i", "x.jsonl",
                                      "-o", "o.jsonl"],
                                prog_name="evaluator",
                                env={"EVALUATOR_MODELS_FILE": "gone.yaml"})
    assert result.exit_code == 2
    assert result.stderr == ("error: --models-file (from $EVALUATOR_MODELS_FILE): file "
                             "'gone.yaml' does not exist" + _see("evaluator run") + "\n")


def test_a_usage_error_through_the_installed_entry_is_one_line(tmp_path):
    """`python -m evaluator`, as a user runs it: one non-empty line on stderr, exit 2."""
    env = dict(os.environ, PYTHONPATH=str(PACKAGE.parent))
    for args, command in ((["run", "-i", "nowhere.jsonl"], "run "), (["summary"], "summary "),
                          (["nosuch"], ""),
                          (["report", "--labels", "nope.csv", "r.jsonl"], "report ")):
        done = subprocess.run([sys.executable, "-m", "evaluator", *args], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=120,
                              check=False)
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert done.returncode == 2 and done.stdout == "", (args, done.stderr)
        assert len(lines) == 1 and lines[0].startswith("error: "), (args, done.stderr)
        assert lines[0].endswith(f"(see python -m evaluator {command}--help)"), lines[0]


def test_help_version_and_abort_are_unchanged(raising):
    for args in (["--help"], ["-h"], ["run", "--help"]):
        shown = CliRunner().invoke(cli, args, prog_name="evaluator")
        assert shown.exit_code == 0 and shown.stdout.startswith("Usage: evaluator "), args
    bare = CliRunner().invoke(cli, [], prog_name="evaluator")  # click >= 8.2: help, exit 2
    assert bare.exit_code == 2 and "Commands:" in bare.output and "error:" not in bare.output
    version = CliRunner().invoke(cli, ["--version"])
    assert version.exit_code == 0 and "version" in version.stdout
    raising.append(click.Abort())
    aborted = CliRunner().invoke(cli, ["raise"])
    assert (aborted.exit_code, aborted.stderr) == (1, "Aborted!\n")
