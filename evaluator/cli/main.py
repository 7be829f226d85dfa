"""The ``evaluator`` command group. Each command lives in its own module and calls the API."""

from __future__ import annotations

import logging

import click

from evaluator.cli import (
    agree_cmd,
    models_cmd,
    prepare_cmd,
    report_cmd,
    rubrics_cmd,
    run_cmd,
    validate_cmd,
)
from evaluator.judges.offline import force_offline


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
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


for command in (run_cmd.run, rubrics_cmd.rubrics, models_cmd.models, validate_cmd.validate,
                prepare_cmd.prepare_judge, agree_cmd.agree, report_cmd.report):
    cli.add_command(command)
