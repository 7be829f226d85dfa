"""``evaluator export``: a results file as a flat Parquet table for pandas, polars, DuckDB or
Spark (pyarrow, the ``parquet`` extra, imported only here and only when called).

The records are read twice, streamed, and never held whole: the first pass checks them (one
rubric, scores the rubric declares) and finds the case files they name, so that the target
is known to be safe before anything is written; the second converts them
:data:`BATCH_ROWS` at a time and hands each batch to a :class:`pyarrow.parquet.ParquetWriter`
writing into a temporary file that replaces the target at the end
(:func:`evaluator.data.files.atomic_writer`: mode 0600, renamed into place). The columns are
:func:`evaluator.report.export_columns.export_columns`'s; no case text ever, and the judge's
own text only with ``with_text``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluator.common.errors import UserError
from evaluator.common.readable import NotARegularFile, check_regular_file
from evaluator.data.files import atomic_writer, show_path
from evaluator.data.parquet_input import ParquetInputError, require_pyarrow
from evaluator.data.results import (
    ResultRecord,
    ResultsFileDamaged,
    ResultsReader,
    RubricFor,
    StoredLine,
    analysis_lines,
    one_rubric,
    rubrics_by_name,
)
from evaluator.report.export_columns import (
    Column,
    export_columns,
    fractional_scores,
    undeclared_scores,
)
from evaluator.report.targets import (
    Target,
    case_files,
    check_name,
    check_replace,
    refuse_inputs,
    refuse_recorded_input,
)
from evaluator.rubrics.load import load_rubric
from evaluator.rubrics.rubric import Rubric, RubricError

BATCH_ROWS = 8192            # records converted and written at a time (one row group each)
EXPORT_VERSION = 1
METADATA_KEY = b"evaluator.export"  # in the file's key-value metadata: an export of ours


class ExportError(UserError, ValueError):
    """The results file cannot be exported as asked (one line, no case text)."""


@dataclass(frozen=True)
class Exported:
    """What :func:`export_parquet` wrote: the file, its row count and its columns."""

    path: Path
    rows: int
    columns: list[str]
    torn_bytes: int = 0  # a last line cut short by a crash: not a record, not exported


def is_export_file(path: Path) -> bool:
    """Whether ``path`` is a Parquet file :func:`export_parquet` wrote (its footer's
    metadata carries :data:`METADATA_KEY`); False for anything unreadable."""
    try:
        pq = require_pyarrow()
        import pyarrow as pa  # the parquet extra (present: pyarrow.parquet imported above)

        with pa.OSFile(str(path)) as source:
            metadata = pq.read_schema(source).metadata or {}
    except (ParquetInputError, OSError, ValueError):
        return False
    return METADATA_KEY in metadata


EXPORT_TARGET = Target("Parquet export", "--parquet", (".parquet",), is_export_file)


@dataclass
class _Scan:
    """What the first pass learnt: the rubric, whether integer scores are fractional, the
    case files named, the number of records."""

    rubric: Rubric | None = None
    fractional: bool = False
    input_files: set[str] = field(default_factory=set)
    records: int = 0
    torn_bytes: int = 0


def _lines(path: Path, rubric_for: RubricFor,
           scan: _Scan | None = None) -> Iterator[StoredLine]:
    """The records' lines, each checked against its rubric (``rubric_for``); ``scan``
    learns the length of a torn last line (skipped)."""
    reader = ResultsReader(path, rubric_for)
    try:
        yield from analysis_lines(reader)
    except ResultsFileDamaged as exc:
        raise ExportError(str(exc)) from None
    if scan is not None:
        scan.torn_bytes = reader.torn_bytes


def _scan(path: Path, rubrics_dirs: Sequence[Path]) -> _Scan:
    """The first pass: one rubric's records, each verdict with only keys that rubric
    declares (the rubric of that name today may not be the one the run used)."""
    scan = _Scan()
    for line in _lines(path, rubrics_by_name(rubrics_dirs), scan):
        record = line.record
        if scan.rubric is None:
            scan.rubric = _rubric(path, record.rubric, rubrics_dirs)
        elif record.rubric != scan.rubric.name:
            raise ExportError(f"{show_path(path)} line {line.number} is a record of rubric "
                              f"{record.rubric!r}, the lines before it of "
                              f"{scan.rubric.name!r}; a results file holds one rubric's "
                              "records")
        extra = undeclared_scores(scan.rubric, record.scores or {})
        if extra:
            where = f" ({scan.rubric.source_path})" if scan.rubric.source_path else ""
            raise ExportError(f"{show_path(path)} line {line.number} has the score "
                              f"{extra[0]!r}, which rubric {scan.rubric.name!r}{where} does "
                              "not declare: the rubric changed since the run, or it is "
                              "another rubric of that name; give the one the run used "
                              "(--rubrics-dir)")
        scan.fractional = scan.fractional or fractional_scores(record)
        if record.input_file:
            scan.input_files.add(record.input_file)
        scan.records += 1
    if scan.rubric is None:
        raise ExportError(f"{show_path(path)} holds no records; nothing to export")
    return scan


def _rubric(results: Path, name: str, rubrics_dirs: Sequence[Path]) -> Rubric:
    try:
        return load_rubric(name, tuple(rubrics_dirs))
    except RubricError as exc:
        raise ExportError(f"{show_path(results)}: cannot load its rubric: {exc}") from None


def _arrow_type(pa: Any, kind: str) -> Any:
    scalar = {"string": pa.string(), "int64": pa.int64(), "float64": pa.float64()}
    if kind.startswith("list<"):
        return pa.list_(scalar[kind[5:-1]])
    return scalar[kind]


def _batch(pa: Any, schema: Any, columns: Sequence[Column], records: list[ResultRecord],
           first_line: int) -> Any:
    arrays = []
    for column, arrow_field in zip(columns, schema, strict=True):
        try:
            arrays.append(pa.array([column.value(r) for r in records], type=arrow_field.type))
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            # pyarrow's message would quote the value: name the column and lines only.
            raise ExportError(f"records on lines {first_line}-{first_line + len(records) - 1}: "
                              f"a value of column {column.name!r} is not of type "
                              f"{column.kind}; was the results file edited?") from None
    return pa.record_batch(arrays, schema=schema)


def export_parquet(results: Path, output: Path, *, with_text: bool = False,
                   overwrite: bool = False, rubrics_dirs: Sequence[Path] = ()) -> Exported:
    """Write ``results`` (a results file) to ``output`` as Parquet, one row per record.

    ``output`` must end in ``.parquet``; an existing file is replaced only when it is an
    export of this tool (:func:`is_export_file`) or with ``overwrite``, and never when it is
    ``results``, a case file its records name or whose SHA-256 its manifest records, or a
    symbolic link (:class:`evaluator.data.files.OutputRefused`). ``with_text`` adds the
    judge's written text (it can quote the case). The rubric is loaded by the records'
    name (``rubrics_dirs`` as for ``evaluator run``)."""
    results, output = Path(results), Path(output)
    try:
        pq = require_pyarrow()
    except ParquetInputError as exc:
        raise ExportError(str(exc)) from None
    import pyarrow as pa  # the parquet extra (present: pyarrow.parquet imported above)

    try:
        check_regular_file(results, "results file")
    except NotARegularFile as exc:
        raise ExportError(str(exc)) from None
    check_name(output, [results], EXPORT_TARGET)
    scan = _scan(results, rubrics_dirs)
    # Parquet is also a case format: the case files are known only once the records are.
    refuse_inputs(output, sorted(case_files(results, scan.input_files)), EXPORT_TARGET)
    refuse_recorded_input(output, [results], EXPORT_TARGET)
    check_replace(output, overwrite, EXPORT_TARGET)
    rubric = scan.rubric
    assert rubric is not None  # _scan raises for a file without records
    columns = export_columns(rubric, fractional=scan.fractional, with_text=with_text)
    meta = {"export_version": EXPORT_VERSION, "results_file": results.name,
            "rubric": rubric.name, "with_text": with_text}
    schema = pa.schema([pa.field(c.name, _arrow_type(pa, c.kind)) for c in columns],
                       metadata={METADATA_KEY: json.dumps(meta).encode()})
    rows = 0
    with atomic_writer(output) as handle:
        with pq.ParquetWriter(handle, schema) as writer:
            pending: list[ResultRecord] = []
            first_line = 1
            for line in _lines(results, one_rubric(rubric)):
                if not pending:
                    first_line = line.number
                pending.append(line.record)
                if len(pending) == BATCH_ROWS:
                    writer.write_batch(_batch(pa, schema, columns, pending, first_line))
                    rows += len(pending)
                    pending = []
            if pending:
                writer.write_batch(_batch(pa, schema, columns, pending, first_line))
                rows += len(pending)
        if rows != scan.records:
            # The file changed between the passes (a run resumed into it meanwhile).
            raise ExportError(f"{show_path(results)} changed while it was exported; export "
                              "it again when no run is writing to it")
    return Exported(output, rows, [c.name for c in columns], scan.torn_bytes)

