"""``evaluator run``: judge a file of cases (resuming into an existing results file)."""

from __future__ import annotations

import json
import logging
import os
import shlex
import sys
from dataclasses import replace
from pathlib import Path

import click
from tqdm import tqdm

from evaluator.analysis.kinds import analysis_kind
from evaluator.analysis.summary.text import format_summary
from evaluator.api import (
    Judge,
    RunOptions,
    RunStart,
    Task,
    evaluate,
    evaluate_jury,
    resolve_jury,
)
from evaluator.cli.exit_codes import EXIT_SOME_FAILED, interrupted_exit_code
from evaluator.cli.log_cmd import echo_logged
from evaluator.cli.options import (
    models_file_option,
    option_group,
    parse_mapping,
    parse_systems,
    rubrics_dir_option,
    tracking_options,
)
from evaluator.cli.progress import library_progress_hidden
from evaluator.cli.signals import Terminated, sigterm_as_interrupt
from evaluator.common.errors import UserError
from evaluator.data.files import check_path_name, show_path
from evaluator.judges.backends.torch_threads import MAX_THREADS, ThreadChoice, parse_threads
from evaluator.rubrics.load import load_rubric
from evaluator.run.engines import ENGINES, RayOptions
from evaluator.run.jury import member_path
from evaluator.run.manifest import manifest_path_for
from evaluator.run.runner import load_ray_engine
from evaluator.tracking.log_run import TrackingOptions, log_run
from evaluator.tracking.mlflow_store import TrackingError, destination, require_mlflow


def _quiet_ray() -> None:
    """Ray logs its start-up and each dataset's plan at INFO/WARNING on stderr, where the
    progress bar is: shown with -vv only (as for the other libraries)."""
    load_ray_engine()  # imports Ray (which configures its loggers), or says what to install
    level = logging.getLogger("evaluator").getEffectiveLevel()
    for name in ("ray", "ray.data"):
        logging.getLogger(name).setLevel(logging.DEBUG if level <= logging.DEBUG
                                         else logging.ERROR)


def _where(results: Path, summary: Path, scored: bool, cases: int) -> str:
    """Where a finished run's files are, and the command to read it next: the HTML report,
    or for results the report refuses (pairwise) the comparison; for a run of no cases,
    which every reader refuses, that there is nothing to read."""
    lines = [f"results   {show_path(results)}", f"summary   {show_path(summary)}",
             f"manifest  {show_path(manifest_path_for(results))}"]
    if cases == 0:
        return "\n".join([*lines, ("the input held no cases: nothing was judged, nothing to "
                                   "report (check --input)")])
    if not scored:
        return "\n".join([*lines, "the comparison (win rates, position and length bias):",
                          f"  evaluator compare {shlex.quote(str(results))}"])
    command = f"evaluator report {shlex.quote(str(results))}"
    html = f"--html {shlex.quote(str(results.with_suffix('.html')))}"
    lines.append("an HTML report:")
    if len(command) + len(html) + 3 <= 80:
        return "\n".join([*lines, f"  {command} {html}"])
    return "\n".join([*lines, f"  {command} \\", f"      {html}"])


class RunDisplay:
    """What the terminal shows of a run (stderr): the cases read, resume and jury lines, the
    progress bar; where the results are when it is interrupted. ``as_json``: the summary
    (stdout) as JSON instead of the table."""

    def __init__(self, output_path: Path, id_column: str, no_progress: bool,
                 as_json: bool = False):
        self.output_path = self.current = output_path  # current: a jury member's file
        self.id_column, self.no_progress, self.as_json = id_column, no_progress, as_json
        self.bar: tqdm | None = None
        self.jury_size = 0

    def on_start(self, start: RunStart) -> None:
        """The input read and the resume planned (once per jury member): a fresh bar."""
        self.close()
        for path in start.moved_aside:
            click.echo(f"--force-new: kept the previous file as {path}", err=True)
        click.echo(f"{start.valid + start.input_errors} case(s) read: {start.valid} valid, "
                   f"{start.input_errors} with input errors (recorded in the results)", err=True)
        if start.null_ids:
            # Said, not silent: a null id may be a broken export, and line-N ids change
            # when rows are added above.
            click.echo(f"note: {start.null_ids} row(s) have a null {self.id_column!r}: each "
                       "is named line-N after its line number", err=True)
        if start.already_done or start.retried:
            click.echo(f"resuming {self.current}: {start.already_done} case(s) already done, "
                       f"{start.retried} to judge again after a failure", err=True)
        self.bar = tqdm(total=start.to_judge, unit="case", disable=self.no_progress or None,
                        file=sys.stderr, dynamic_ncols=True)

    def on_threads(self, choice: ThreadChoice) -> None:
        """A CPU judge has loaded: torch's thread count and why, above the bar."""
        tqdm.write(choice.describe(), file=sys.stderr)

    def on_member(self, index: int, name: str) -> None:
        """A jury member starts, into its own file."""
        self.current = member_path(self.output_path, name)
        click.echo(f"jury member {index + 1}/{self.jury_size}: {name} -> {self.current}",
                   err=True)

    def progress(self, cases: int) -> None:
        """``cases`` more recorded."""
        if self.bar is not None:
            self.bar.update(cases)

    def close(self) -> None:
        """The bar ends (before any other line)."""
        if self.bar is not None:
            self.bar.close()

    def interrupted(self, exc: KeyboardInterrupt) -> str:
        """The line that says where the finished results are (the bar closed first)."""
        self.close()
        what = (f"terminated ({exc.signal_name})" if isinstance(exc, Terminated)
                else "interrupted")
        written = next((p for p in (self.current, self.output_path)
                        if p.is_file() and p.stat().st_size), None)
        where = (f"finished results are in {show_path(written)}. Re-run the same command to "
                 "resume." if written is not None else "no results were written yet.")
        return f"{what}; {where}"


# run's options in groups, each made into the object(s) the command takes by one build, the
# option_group above them. The builds run in the order listed, so user errors are found in
# the order the options were always checked (the file names first: --output, then --input).
# A build also takes what it needs of another group: --models-file, --rubric, --input,
# --rubrics-dir, --output and --batch-size.
def _take(kwargs: dict, *names: str) -> dict:
    return {name: kwargs.pop(name) for name in names}


def _only_with(kwargs: dict, names: tuple[str, ...], used: bool, needs: str) -> dict:
    """The values of the options ``names`` (taken out of ``kwargs``); a usage error naming
    those given when ``used`` is false."""
    values = _take(kwargs, *names)
    given = [f"--{name.replace('_', '-')}" for name, value in values.items() if value is not None]
    if given and not used:
        raise click.UsageError(f"{', '.join(given)} only apply {needs}")
    return values


def _judge(kwargs: dict) -> dict:
    """``judge``: the :class:`Judge` (the first of ``judges``, the names given)."""
    names = kwargs["judges"]
    threads = kwargs.pop("threads")
    try:
        threads = None if threads is None else parse_threads(threads)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--threads") from None
    kwargs["judge"] = Judge(name=names[0] if names else None,
                            models_path=kwargs.pop("models_file"), threads=threads,
                            **_take(kwargs, "samples", "temperature", "reduce"))
    return kwargs


def _task(kwargs: dict) -> dict:
    """``task``: the :class:`Task` (its rubric still the name given)."""
    # Checked as given: Path("dir/") drops the slash that says a folder was meant.
    check_path_name(kwargs["output_name"])
    check_path_name(kwargs["input_path"], "--input")
    name = kwargs["output_name"]
    if name.startswith("=") and not os.path.lexists(name):
        # click reads `-o=x.jsonl` as -o with the value '=x.jsonl'
        raise UserError(f"--output {show_path(name)} starts with '=' (-o=x.jsonl names "
                        f"'=x.jsonl'); write -o {show_path(name[1:])} instead")
    try:
        mapping = parse_mapping(kwargs.pop("mappings"))
    except click.BadParameter as exc:  # one line, as every user error
        raise UserError(f"--map: {exc.message}") from None
    kwargs["task"] = Task(mapping=mapping, systems=parse_systems(kwargs.pop("systems")),
                          **_take(kwargs, "rubric", "input_path", "rubrics_dirs", "id_column",
                                  "limit", "versus", "answer_column"))
    return kwargs


def _how(kwargs: dict) -> dict:
    """``how``: the :class:`RunOptions`, told of progress by ``display`` (a
    :class:`RunDisplay`)."""
    output_path, engine = Path(kwargs.pop("output_name")), kwargs.pop("engine")
    ray = _only_with(kwargs, ("address", "replicas", "gpus_per_replica"), engine == "ray",
                     "to --engine ray")
    try:
        ray_options = None if engine != "ray" else RayOptions(
            address=ray["address"], replicas=ray["replicas"] or 1,
            gpus_per_replica=ray["gpus_per_replica"] or 0.0)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--address") from None
    display = kwargs["display"] = RunDisplay(output_path, kwargs["task"].id_column,
                                             kwargs.pop("no_progress"), kwargs.pop("as_json"))
    kwargs["how"] = RunOptions(output_path=output_path, engine=engine, ray=ray_options,
                               on_start=display.on_start, on_threads=display.on_threads,
                               progress=display.progress,
                               **_take(kwargs, "batch_size", "force_new", "strict", "wait"))
    return kwargs


def _mlflow(kwargs: dict) -> dict:
    """``tracking``: ``--mlflow``'s :class:`TrackingOptions` (None without it); the extra is
    checked before anything is judged."""
    to_mlflow = kwargs.pop("to_mlflow")
    given = _only_with(kwargs, ("tracking_uri", "experiment", "run_name"), to_mlflow,
                       "with --mlflow")
    kwargs["tracking"] = None
    if to_mlflow:
        try:
            require_mlflow()
            destination(given["tracking_uri"])  # a URI that cannot be right: refused before judging
        except TrackingError as exc:
            raise UserError(f"--mlflow: {exc}") from None
        kwargs["tracking"] = TrackingOptions(**given, rubrics_dirs=kwargs["task"].rubrics_dirs)
    return kwargs


@click.command("run")
@click.option("--rubric", "-r", required=True, help="Rubric name (see `evaluator rubrics`) or path.")
@click.option("--input", "-i", "input_path", required=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Cases: .jsonl, .csv or .parquet, one case per line/row.")
@click.option("--output", "-o", "output_name", required=True,
              type=str,  # checked as given (check_path_name): one line for every problem
              help="Results .jsonl. If it exists, the run resumes: finished cases are skipped. "
                   "<name>.summary.json and <name>.manifest.json are written beside it, and "
                   "<name>.evaluator-lock is held while the run lasts.")
@option_group(_judge)
@click.option("--model", "-m", "judges", multiple=True, help="Judge name from models.yaml "
              "(default: the file's default). Repeat it for a jury: every case is judged by "
              "each judge in turn, one model loaded at a time; or name a jury from models.yaml.")
@click.option("--samples", type=click.IntRange(min=1), default=1, show_default=True,
              help="Judge each case N times (self-consistency; needs a temperature above 0).")
@click.option("--temperature", type=click.FloatRange(0.0, 2.0), default=None,
              help="Sampling temperature (default: the judge's, from models.yaml).")
@click.option("--reduce", type=click.Choice(["median", "mean", "majority"]), default=None,
              help="How several samples' or judges' scores become one (integer criteria; "
                   "aggregates use mean, or median with median) [default: median, or the "
                   "jury's own].")
@click.option("--threads", default=None, metavar="N|auto",
              help="torch's threads for a judge on the CPU: a count, or auto (the free CPUs "
                   "this process may use) [default: the judge's threads in models.yaml, else "
                   f"auto; 1 to {MAX_THREADS}]. Wins over OMP_NUM_THREADS.")
@option_group(_task)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Judge only the first N cases.")
@click.option("--batch-size", type=click.IntRange(min=1), default=None,
              help="Cases per generate call; a vllm judge: requests in flight, each "
                   "replaced as it ends (default: the judge's batch_size).")
@click.option("--map", "mappings", multiple=True, metavar="FIELD=COLUMN",
              help="Read rubric input FIELD from COLUMN (repeatable).")
@click.option("--id-column", default="case_id", show_default=True,
              help="Column holding the case id (rows without it get line-N).")
@click.option("--versus", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="Pairwise rubric: a second case file (the same case ids) whose "
              "answers are candidate B; INPUT's are candidate A. Needs --answer-column.")
@click.option("--answer-column", default=None, metavar="COLUMN",
              help="--versus: the column holding each file's answer.")
@click.option("--systems", default=None, metavar="A,B",
              help="Pairwise rubric: names for candidates A and B [default: the two files' "
                   "names with --versus, else the two candidate columns'].")
@rubrics_dir_option
@models_file_option
@option_group(_how)
@click.option("--force-new", is_flag=True, help="Start OUTPUT afresh instead of resuming; the "
              "existing files are kept, renamed to <name>.superseded-<time>.")
@click.option("--strict", is_flag=True, help="Stop at the first case that cannot be judged "
              "(bad row: before the model loads; too long for the judge) with exit code 3.")
@click.option("--wait", is_flag=True, help="When another run is writing to OUTPUT, wait for "
              "it to end and then resume (default: refuse at once, exit code 2).")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON (as written "
              "to <name>.summary.json) instead of the table.")
@click.option("--engine", type=click.Choice(ENGINES), default="local", show_default=True,
              help="local: judge in this process. ray: spread the batches over judge replicas "
                   "on a Ray cluster (needs the ray extra).")
@click.option("--address", default=None, help="--engine ray: 'auto' (or the head's HOST:PORT) "
              "joins the Ray cluster this machine is a node of (`ray start`) [default: a "
              "private local cluster for this run].")
@click.option("--replicas", type=click.IntRange(min=1), default=None,
              help="--engine ray: judge replicas, each loading the judge once [default: 1].")
@click.option("--gpus-per-replica", type=click.FloatRange(min=0), default=None,
              help="--engine ray: GPUs per replica (set tensor_parallel_size to match for "
                   "vLLM; a fraction packs replicas on a GPU) [default: 0].")
@option_group(_mlflow)
@click.option("--mlflow", "to_mlflow", is_flag=True,
              help="When the run ends, record it in MLflow as `evaluator log` does (no case "
                   "text; needs the mlflow extra). A failure to log exits 1; the results are "
                   "kept: log them with `evaluator log`.")
@tracking_options
def run_command(task: Task, judges: tuple[str, ...], judge: Judge, how: RunOptions,
                display: RunDisplay, tracking: TrackingOptions | None) -> None:
    """Judge every case in INPUT with a rubric and write one result per case to OUTPUT."""
    # SIGTERM (docker stop, schedulers) stops the run as Ctrl-C does (see the except
    # clauses below); --no-progress hides the libraries' bars too. Both end with the command.
    context = click.get_current_context()
    context.with_resource(sigterm_as_interrupt())
    context.with_resource(library_progress_hidden(display.no_progress))
    rubric = str(task.rubric)  # the name given, for where to read the results next
    try:
        if how.engine == "ray":
            _quiet_ray()
        jury = resolve_jury(judges, judge.models_path)
        # Loaded here (as the run would first thing) to choose the rubric's kind once.
        loaded = load_rubric(rubric, task.rubrics_dirs)
        task = replace(task, rubric=loaded)
        if jury is None:
            result = evaluate(task, judge, how)
        else:
            display.jury_size = len(jury[1].judges)
            result = evaluate_jury(task, jury[0], jury[1], judge, how,
                                   on_member=display.on_member)
    except KeyboardInterrupt as exc:  # not an error: says where the finished results are
        click.echo(display.interrupted(exc), err=True)
        sys.exit(interrupted_exit_code(exc))
    finally:  # before any error's line (the CLI's entry point prints it)
        display.close()
    # The table `evaluator summary` prints (80 columns); --json: the whole summary, as
    # written to <name>.summary.json. Where the files are goes to stderr either way.
    click.echo(json.dumps(result.summary.to_json(), indent=2) if display.as_json
               else format_summary(result.summary))
    scored = analysis_kind(loaded).elsewhere(how.output_path, rubric, "report") is None
    click.echo(_where(result.results_path, result.summary_path, scored,
                      result.summary.cases), err=True)
    logged = tracking is None or _log(result.results_path, tracking)
    if result.failed:
        click.echo(f"{result.failed} case(s) have no verdict; see 'status' and 'reason' in the "
                   "results", err=True)
    if result.failed or not logged:
        sys.exit(EXIT_SOME_FAILED)


def _log(results: Path, tracking: TrackingOptions) -> bool:
    """Log the finished run to MLflow; a failure is one line (the run's files stay as they
    are, complete) and False: the run then exits 1, like a run with cases left unjudged."""
    try:
        echo_logged(log_run(results, tracking))
    except UserError as exc:
        click.echo(f"error: --mlflow: the run finished and its results are complete, but "
                   f"logging it failed: {exc}", err=True)
        return False
    return True
