"""Options shared by several commands."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import click

from evaluator.analysis.gates import Gate, GateError, parse_gate
from evaluator.analysis.score_mode import SCORE_MODES
from evaluator.judges.models_file import JudgeConfigError

# Control and format characters (terminal escape sequences, bidi overrides, line and
# paragraph separators): config text printed with them could rewrite the terminal.
_UNPRINTABLE = {"Cc", "Cf", "Zl", "Zp"}

rubrics_dir_option = click.option(
    "--rubrics-dir", "rubrics_dirs", multiple=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path), envvar="EVALUATOR_RUBRICS_DIR",
    help="Extra directory of rubric .yaml files (searched before the built-ins; repeatable; "
         "default: $EVALUATOR_RUBRICS_DIR, ':'-separated).")
models_file_option = click.option(
    "--models-file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None, envvar="EVALUATOR_MODELS_FILE",
    help="models.yaml to use (default: $EVALUATOR_MODELS_FILE, else the project's).")

score_option = click.option(
    "--score", "score_mode", type=click.Choice(SCORE_MODES), default="argmax",
    show_default=True,
    help="Which scores every figure uses: argmax (the verdict as written) or expected (each "
         "score's expected value under the judge's probabilities; records without "
         "distributions are left out and counted).")


def parse_mapping(values: tuple[str, ...]) -> dict[str, str]:
    """``("rubric_field=column", ...)`` -> dict, with a usage error for a malformed item or
    a field given two columns (never silently the last)."""
    mapping: dict[str, str] = {}
    for item in values:
        field, sep, column = item.partition("=")
        if not sep or not field or not column:
            raise click.BadParameter(f"{item!r}: expected RUBRIC_FIELD=COLUMN", param_hint="--map")
        field, column = field.strip(), column.strip()
        if field in mapping and mapping[field] != column:
            raise click.BadParameter(f"{field!r} is mapped twice ({mapping[field]!r} and "
                                     f"{column!r}); give each rubric field one column",
                                     param_hint="--map")
        mapping[field] = column
    return mapping


def printable(text: object) -> str:
    """``text`` with every control or format character but the newline written as an
    escape (``\\x1b``), so config text (a description in models.yaml or a rubric) cannot
    send escape sequences to the terminal."""
    return "".join(ch if ch == "\n" or unicodedata.category(ch) not in _UNPRINTABLE
                   else ch.encode("unicode_escape").decode("ascii") for ch in str(text))


def parse_gates(values: tuple[str, ...]) -> tuple[Gate, ...]:
    """``--pass`` values (``accuracy>=4``, ...) as gates; a malformed one is a usage error
    naming the option."""
    try:
        return tuple(parse_gate(value) for value in values)
    except GateError as exc:
        raise click.BadParameter(str(exc), param_hint="--pass") from None


def parse_systems(text: str | None) -> tuple[str, str] | None:
    """``--systems A,B``: the two names of a pairwise run's candidates."""
    if text is None:
        return None
    names = [name.strip() for name in text.split(",")]
    if len(names) != 2 or not all(names):
        raise JudgeConfigError("--systems: give two names separated by a comma, e.g. "
                               "--systems gpt4o,llama")
    return names[0], names[1]


def tracking_options(command):
    """``--tracking-uri``, ``--experiment`` and ``--run-name``: where ``evaluator log`` and
    ``evaluator run --mlflow`` record a run in MLflow (docs/mlflow.md)."""
    for option in reversed((
        click.option("--tracking-uri", default=None, metavar="URI",
                     help="MLflow tracking URI: a server (http://host:5000) or a folder "
                          "[default: $MLFLOW_TRACKING_URI, else ./mlruns here]."),
        click.option("--experiment", default=None, metavar="NAME",
                     help="MLflow experiment (created if missing) [default: the rubric's "
                          "name]."),
        click.option("--run-name", default=None, metavar="NAME",
                     help="MLflow run name [default: the results file's name without "
                          ".jsonl]."),
    )):
        command = option(command)
    return command
