"""Options shared by several commands."""

from __future__ import annotations

import functools
import unicodedata
from pathlib import Path

import click

from evaluator.analysis.gates import Gate, GateError, parse_gate
from evaluator.analysis.label_files import parse_label_scale
from evaluator.analysis.labels.readers import FIELD_NEEDED, field_needed
from evaluator.analysis.score_mode import SCORE_MODES
from evaluator.data.sources import CaseSource, LabelSource
from evaluator.judges.models_file import JudgeConfigError
from evaluator.label.serve import Listen

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


EXISTING_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)
# A labels file or a labelling sheet's folder (issue 37): a folder is checked for its
# sheet.json where the labels are read.
SHEET_OR_FILE = click.Path(exists=True, path_type=Path)


def option_group(build, *options):
    """A decorator adding ``options`` to a command, which receives the record ``build``
    makes of their values (taken out of its keyword arguments) instead; without ``options``,
    of the options the decorators below it declare. The builds run in the order the
    decorators are listed, each before the command."""
    def decorate(command):
        @functools.wraps(command)
        def wrapper(*args, **kwargs):
            return command(*args, **build(kwargs))
        for option in reversed(options):
            wrapper = option(wrapper)
        return wrapper
    return decorate


def _id_column(kwargs: dict, canonical: str, alias: str) -> str:
    """The id column given by the canonical option or its old, hidden spelling (not both)."""
    name = canonical.lstrip("-").replace("-", "_")
    value, old = kwargs.pop(name), kwargs.pop(f"old_{name}", None)
    if old is not None and value != "case_id" and old != value:
        raise click.UsageError(f"{canonical} and {alias} name one column: give one")
    return value if old is None else old


def label_options(purpose: str, *, required: bool = False, multiple: bool = False,
                  path_type: click.Path = EXISTING_FILE, scale: bool = True,
                  old_id: bool = True, sheets: bool = False):
    """``--labels`` (what for: ``purpose``; repeatable with ``multiple``), ``--label-field``,
    ``--label-id-column`` and ``--label-scale``, handed to the command as ``labels``: a
    :class:`LabelSource`, None when none of them is given. ``old_id``: the command's
    ``--id-column`` (hidden) is the old spelling of ``--label-id-column``. ``sheets``:
    ``--labels`` may also be labels that name their criteria (a labelling sheet's folder, a
    Label Studio export: :mod:`evaluator.analysis.labels.readers`); ``--label-field`` is
    then the criterion (optional), and with a labels file required when ``required``."""
    options = [
        click.option("--labels", "label_paths", multiple=multiple, required=required,
                     type=(SHEET_OR_FILE if sheets and path_type is EXISTING_FILE
                           else path_type),
                     help=("Labels file (.csv, .jsonl or .parquet, e.g. a filled-in "
                           "review.csv)"
                           + (", a labelling sheet's folder (SHEET_DIR of evaluator "
                              "review: its journal's labels) or a Label Studio JSON export"
                              if sheets else "")
                           + f": {purpose}")),
        click.option("--label-field", required=required and not sheets,
                     help="The labels file's field holding the label"
                          + ("; with a sheet folder, the criterion (KEY or KEY.label; "
                             "default: every criterion the command compares)."
                             if sheets else ".")),
        click.option("--label-id-column", default="case_id", show_default=True,
                     help="The labels file's case id column."),
        *([click.option("--label-scale", default=None, metavar="VALUES",
                        help="The labels' possible values, e.g. 0,1,2 or 1-5 (default for a "
                             "KEY.label field: KEY's scale in the rubric; else the values "
                             "observed). A label outside it is an error.")] if scale else []),
        click.option("--id-column", "old_label_id_column", default=None, hidden=True),
    ]

    def build(kwargs: dict) -> dict:
        given = kwargs.pop("label_paths")
        paths = tuple(given) if multiple else (given,) if given is not None else ()
        field, text = kwargs.pop("label_field"), kwargs.pop("label_scale", None)
        id_column = _id_column(kwargs, "--label-id-column", "--id-column")
        values = tuple(parse_label_scale(text)) if text is not None else None
        kwargs["labels"] = (None if not paths and field is None and values is None
                            else LabelSource(paths, field, id_column, values))
        if sheets and required and field_needed(kwargs["labels"]):
            raise click.UsageError(FIELD_NEEDED)
        return kwargs
    return option_group(build, *(options if old_id else options[:-1]))


def case_options(purpose: str, *, path_type: click.Path = EXISTING_FILE, old_id: bool = False):
    """``--cases`` (what for: ``purpose``), ``--map`` and ``--case-id-column``: how the run
    read its cases, handed to the command as ``cases``, a :class:`CaseSource`. ``old_id``:
    the command's ``--id-column`` (hidden) is the old spelling of ``--case-id-column``."""
    options = [
        click.option("--cases", "cases_path", default=None, type=path_type,
                     help=f"The cases file the run read (default: the one the records name, "
                          f"beside RESULTS or here): {purpose}"),
        click.option("--map", "mappings", multiple=True, metavar="FIELD=COLUMN",
                     help="The --map options the run used to read its cases (repeatable)."),
        click.option("--case-id-column", default="case_id", show_default=True,
                     help="The --id-column the run used to read its cases."),
        click.option("--id-column", "old_case_id_column", default=None, hidden=True),
    ]

    def build(kwargs: dict) -> dict:
        kwargs["cases"] = CaseSource(kwargs.pop("cases_path"),
                                     parse_mapping(kwargs.pop("mappings")),
                                     _id_column(kwargs, "--case-id-column", "--id-column"))
        return kwargs
    return option_group(build, *(options if old_id else options[:-1]))


def listen_options(command):
    """``--port``, ``--host``, ``--tls-cert`` and ``--tls-key`` of a labelling page, handed to
    the command as ``listen``: a :class:`~evaluator.label.serve.Listen`."""
    options = [
        click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True,
                     help="Port to serve on (0: a free one)."),
        click.option("--host", default="127.0.0.1", show_default=True, metavar="ADDRESS",
                     help="Address or host name to serve on (one address, never all of "
                          "them); any other than loopback needs --tls-cert and --tls-key "
                          "(HTTPS only)."),
        click.option("--tls-cert", type=click.Path(exists=True, dir_okay=False,
                                                   path_type=Path),
                     default=None, help="The site's certificate (PEM) for --host."),
        click.option("--tls-key", type=click.Path(exists=True, dir_okay=False, path_type=Path),
                     default=None, help="Its private key (PEM)."),
    ]

    def build(kwargs: dict) -> dict:
        kwargs["listen"] = Listen(kwargs.pop("host"), kwargs.pop("port"),
                                  kwargs.pop("tls_cert"), kwargs.pop("tls_key"))
        return kwargs
    return option_group(build, *options)(command)

