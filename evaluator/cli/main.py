"""The ``evaluator`` command group. Each command lives in its own module and calls the API."""

from __future__ import annotations

import logging
import os
import sys
import traceback
from typing import Any

import click
from click.core import ParameterSource

from evaluator.cli import (
    agree_cmd,
    compare_cmd,
    doctor_cmd,
    estimate_cmd,
    export_cmd,
    label_cmd,
    log_cmd,
    models_cmd,
    prepare_cmd,
    report_cmd,
    review_cmd,
    rubrics_cmd,
    run_cmd,
    study_cmd,
    study_report_cmd,
    summary_cmd,
    validate_cmd,
)
from evaluator.cli.exit_codes import (
    EXIT_BROKEN_PIPE,
    EXIT_INTERNAL,
    EXIT_SOME_FAILED,
    interrupted_exit_code,
)
from evaluator.cli.options import printable
from evaluator.common.errors import UserError
from evaluator.judges.offline import force_offline
from evaluator.run.runner import disk_full

# click's "no arguments: show the help" (click >= 8.2) is a usage error too; it stays the help.
_HELP_FOR_NO_ARGS = getattr(click.exceptions, "NoArgsIsHelpError", ())


def _clause(text: str) -> str:
    """click's message as a clause of the tool's one line: its capital and full stop dropped,
    as the tool's own messages have none ("File 'x' does not exist." -> "file 'x' does not
    exist")."""
    text = text.strip().replace(". (", " (")  # "no such option 'x'. (Did you mean ...?)"
    if text[:1].isupper() and text[1:2].islower():
        text = text[0].lower() + text[1:]
    return text[:-1] if text.endswith(".") and not text.endswith("..") else text


def _given_for(exc: click.BadParameter) -> str | None:
    """What a bad value was given for: the hint the raiser gave, else the option's longest
    name (``--input``, not ``-i``) or the argument's (``RESULTS``), with the environment
    variable the value came from when the user did not type it."""
    if exc.param_hint is not None:
        hint = exc.param_hint
        return hint if isinstance(hint, str) else " / ".join(hint)
    param, ctx = exc.param, exc.ctx
    if param is None:
        return None
    name = (max(param.opts, key=len) if isinstance(param, click.Option)
            else param.human_readable_name)
    if ctx is not None and param.name is not None and (
            ctx.get_parameter_source(param.name) is ParameterSource.ENVIRONMENT):
        envvars = [param.envvar] if isinstance(param.envvar, str) else param.envvar or []
        name += next((f" (from ${var})" for var in envvars if os.environ.get(var)), "")
    return name


def usage_line(exc: click.UsageError) -> str:
    """A usage error click found (a missing or bad option or argument, an unknown option or
    command) as the tool's one line, ``error: <click's message>``, ending with where the
    command's options are described, instead of click's four lines ("Usage: ...",
    "Try ... for help.", a blank line, "Error: ...")."""
    given = (_given_for(exc) if isinstance(exc, click.BadParameter)
             and not isinstance(exc, click.MissingParameter) else None)
    what = f"{given}: {_clause(exc.message)}" if given else _clause(exc.format_message())
    ctx = exc.ctx  # None for the few errors click's option parser raises without one
    if ctx is not None and ctx.command.get_help_option(ctx) is not None:
        help_name = max(ctx.command.get_help_option_names(ctx), key=len)
        what += f" (see {ctx.command_path} {help_name})"
    # A typed value may hold a newline (a file name): escaped, so the error stays one line.
    return printable(f"error: {what}").replace("\n", "\\n")


def exit_code_for(exc: BaseException, verbose: int) -> int:
    """Report an exception a command raised, in one line on stderr, and return the exit
    code: a usage error click found prints :func:`usage_line` and exits 2; a
    :class:`~evaluator.common.errors.UserError` prints its message (escaped:
    config text may hold control characters) and exits with its ``exit_code``; a full disk
    exits 1 (what was written is kept); anything else is a bug and exits 70 naming only the
    exception's type, since its message or traceback may quote case text; -vv prints the
    traceback as well. This is the one place commands' errors become text."""
    if isinstance(exc, KeyboardInterrupt):
        click.echo("interrupted", err=True)
        return interrupted_exit_code(exc)
    if isinstance(exc, BrokenPipeError):
        # The reader went away (`evaluator rubrics | head -1`): nothing to say, and stdout
        # must not be flushed again at exit (Python would report the pipe once more).
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):  # a stdout with no file descriptor (tests)
            pass
        return EXIT_BROKEN_PIPE
    if isinstance(exc, click.UsageError):
        click.echo(usage_line(exc), err=True)
        return exc.exit_code
    if isinstance(exc, UserError):
        click.echo(printable(f"error: {exc}"), err=True)
        return exc.exit_code
    if disk_full(exc):
        click.echo(f"error: cannot write {exc.filename or 'a file'} ({exc.strerror}); free "
                   "some space and re-run the same command", err=True)
        return EXIT_SOME_FAILED
    if verbose >= 2:
        click.echo("".join(traceback.format_exception(exc)).rstrip("\n"), err=True)
    click.echo(f"error: internal error ({type(exc).__name__}); this is a bug in the "
               "evaluator. Re-run with -vv for the traceback (it may quote case text: keep "
               "it inside the hospital)", err=True)
    return EXIT_INTERNAL


class _Commands(click.Group):
    """The command group; an error a command leaves unhandled, or a usage error click finds
    in the command line, becomes one line and an exit code (:func:`exit_code_for`), never a
    bare traceback or click's usage block."""

    def make_context(self, info_name: str | None, args: list[str],
                     parent: click.Context | None = None, **extra: Any) -> click.Context:
        # The group's own options (`evaluator --bogus`) are parsed here, before invoke.
        try:
            return super().make_context(info_name, args, parent, **extra)
        except _HELP_FOR_NO_ARGS:
            raise
        except click.UsageError as exc:
            raise click.exceptions.Exit(exit_code_for(exc, 0)) from None

    def resolve_command(self, ctx: click.Context, args: list[str]) -> Any:
        resolved = super().resolve_command(ctx, args)
        ctx.meta["evaluator.command"] = resolved[:2]
        return resolved

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except _HELP_FOR_NO_ARGS:
            raise
        except click.UsageError as exc:  # an unknown command, a command's options
            if exc.ctx is None and "evaluator.command" in ctx.meta:
                # click's option parser raises a few errors ("option '-r' requires an
                # argument") without the command's context: it names the command's help.
                name, command = ctx.meta["evaluator.command"]
                exc.ctx = click.Context(command, info_name=name, parent=ctx)
            ctx.exit(exit_code_for(exc, ctx.params.get("verbose") or 0))
        except (click.exceptions.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except (Exception, KeyboardInterrupt) as exc:
            ctx.exit(exit_code_for(exc, ctx.params.get("verbose") or 0))


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", count=True, help="More log output (-v info, -vv debug).")
@click.version_option(package_name="evaluator")
def cli(verbose: int) -> None:
    """Offline clinical LLM-judge evaluator: score generated clinical text against references
    with a local judge model and a rubric. Nothing is downloaded at run time."""
    force_offline()
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    # Third-party libraries log at INFO about weights and caches; keep them quiet unless -vv.
    for noisy in ("transformers", "outlines", "httpx", "urllib3", "huggingface_hub"):
        logging.getLogger(noisy).setLevel(logging.DEBUG if verbose >= 2 else logging.ERROR)


for command in (run_cmd.run_command, rubrics_cmd.rubrics_command, models_cmd.models_command,
                validate_cmd.validate_command, prepare_cmd.prepare_judge_command,
                agree_cmd.agree_command, report_cmd.report_command,
                summary_cmd.summary_command, review_cmd.review_command,
                estimate_cmd.estimate_command, compare_cmd.compare_command,
                export_cmd.export_command, label_cmd.label_command, log_cmd.log_command,
                doctor_cmd.doctor_command, study_cmd.study_command):
    cli.add_command(command)
study_cmd.study_command.add_command(study_report_cmd.study_report_command)
