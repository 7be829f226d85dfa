"""``evaluator doctor``: will this host start the judge? One line per check."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import click
from tqdm import tqdm

from evaluator.api import resolve_judge
from evaluator.cli.exit_codes import EXIT_OK, EXIT_SOME_FAILED
from evaluator.cli.options import models_file_option, printable
from evaluator.doctor.diagnose import DoctorOptions, diagnose
from evaluator.doctor.report import DoctorReport

WIDTH = 80
NAME_WIDTH = 10  # the checks' name column, wider when a name is (a server's checks)


def format_report(report: DoctorReport) -> str:
    """The report as text, every line at most :data:`WIDTH` columns: a header, one
    (wrapped) entry per check, a verdict."""
    lines = textwrap.wrap(printable(f"evaluator doctor: judge {report.judge} "
                                    f"({report.backend})"), WIDTH)
    names = max([NAME_WIDTH - 1, *(len(c.name) for c in report.checks)]) + 1
    for check in report.checks:
        lines += textwrap.wrap(printable(check.message), WIDTH,
                               initial_indent=f"{check.status:8}{check.name:{names}}",
                               subsequent_indent=" " * (8 + names), break_on_hyphens=False)
    counts = {s: sum(c.status == s for c in report.checks) for s in ("warning", "failed")}
    verdict = ("some checks failed: fix those first" if counts["failed"]
               else "nothing stops the judge from starting")
    warnings = "1 warning" if counts["warning"] == 1 else f"{counts['warning']} warnings"
    lines.append(f"{counts['failed']} failed, {warnings}: {verdict}")
    return "\n".join(lines)


class _HashingBar:
    """A progress bar for re-hashing the weights, shown on a terminal only (never in logs
    or pipes) and only once hashing starts."""

    def __init__(self, name: str):
        self.name, self.bar = name, None

    def update(self, n_bytes: int) -> None:
        if self.bar is None:
            self.bar = tqdm(unit="B", unit_scale=True, desc=f"hashing {self.name}'s weights",
                            disable=None, file=sys.stderr, leave=False)
        self.bar.update(n_bytes)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


@click.command("doctor")
@click.option("--model", "model_name", metavar="NAME", default=None,
              help="The judge to check (default: models.yaml's default).")
@models_file_option
@click.option("--lock", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None,
              help="The lock the install came from, to compare installed packages with "
                   "[default: an installed bundle's bundle/requirements.txt].")
@click.option("--output-dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path("."), show_default=True,
              help="Where outputs will go (free disk is checked there).")
@click.option("--quick", is_flag=True,
              help="Check the weights' file names and sizes against their list, without "
                   "re-hashing every byte.")
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
def doctor_command(model_name: str | None, models_file: Path | None, lock: Path | None,
                   output_dir: Path, quick: bool, as_json: bool) -> None:
    """Check that this host can start a judge: Python and packages against the lock,
    torch's CUDA build against the driver, GPUs and free memory, vLLM, the judge's
    weights and estimated memory, disk, offline switches. Exit 0 when nothing failed
    (warnings allowed), 1 when a check failed, 2 on a user error."""
    name, spec = resolve_judge(model_name, models_file)
    options = DoctorOptions(lock=lock, output_dir=output_dir, rehash_weights=not quick)
    if sys.stderr.isatty():
        click.echo("checking (torch and vLLM are imported in a subprocess: up to a minute)",
                   err=True)
    bar = _HashingBar(name)
    try:
        report = diagnose(name, spec, options, progress=bar.update)
    finally:
        bar.close()
    if as_json:
        click.echo(json.dumps(report.model_dump(mode="json"), indent=1))
    else:
        click.echo(format_report(report))
    sys.exit(EXIT_SOME_FAILED if report.status == "failed" else EXIT_OK)
