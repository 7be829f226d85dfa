"""Errors have one home: every exception class the evaluator defines is a
:class:`~evaluator.common.errors.UserError` (one line and its exit code, printed by the
CLI's entry point alone) or is listed below as internal; no command module catches an
exception to print it and exit. Read from the source with ``ast``, as tests/test_layers.py
is; the last tests drive the entry point itself."""

from __future__ import annotations

import ast
import builtins
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
