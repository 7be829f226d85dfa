"""The ``evaluator`` command group. Each command lives in its own module and calls the API."""

from __future__ import annotations

import logging
import os
import sys
import traceback
from typing import Any

import click

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


def exit_code_for(exc: BaseException, verbose: int) -> int:
    """Report an exception a command raised, in one line on stderr, and return the exit
    code: a :class:`~evaluator.common.errors.UserError` prints its message (escaped:
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
    """The command group; an error a command leaves unhandled becomes one line and an exit
    code (:func:`exit_code_for`), never a bare traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
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
                doctor_cmd.doctor_command):
    cli.add_command(command)
