"""Reading the rows of a Parquet file, one record batch at a time (pyarrow, the ``parquet``
extra, imported only when a ``.parquet`` file is read).

Only the columns a run needs are read, batch by batch (:meth:`pyarrow.parquet.ParquetFile.
iter_batches`, with buffered reads and no pre-buffering of whole row groups), so memory
stays flat however many rows the file holds. Cells come out as pyarrow converts them to
Python (:meth:`pyarrow.RecordBatch.to_pylist`): ``str`` for string columns, ``int``/``float``
/``Decimal`` for numbers, ``None`` for nulls, ``list``/``dict`` for lists and structs, and so
on; what counts as text is decided by the case reader (:mod:`evaluator.data.cases`), the same
way for every format. Messages name the file, rows and columns, never a cell's value.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from evaluator.common.errors import UserError

PARQUET_EXTRA_HINT = "pip install 'evaluator[parquet]'"
BATCH_ROWS = 1024           # rows converted to Python at a time
_READ_BUFFER = 1 << 20      # bytes read at a time from a column chunk (never a whole row group)


class ParquetInputError(UserError, ValueError):
    """The Parquet file as a whole cannot be read (pyarrow missing, not Parquet, damaged,
    two columns of one name)."""


class NotUtf8:
    """A string cell whose bytes are not valid UTF-8 (stands in for the value, which is
    never converted or shown)."""


def require_pyarrow() -> Any:
    """``pyarrow.parquet``, or :class:`ParquetInputError` saying which extra to install."""
    try:
        import pyarrow.parquet as pq  # the parquet extra: loaded only for a Parquet file
    except ImportError:
        raise ParquetInputError(f"reading or writing Parquet needs pyarrow: "
                                f"{PARQUET_EXTRA_HINT}") from None
    return pq


def _unreadable(path: Path, exc: BaseException) -> ParquetInputError:
    # pyarrow's own message is not shown: for a damaged page it could quote its bytes.
    return ParquetInputError(f"{path}: cannot be read as Parquet ({type(exc).__name__}): not "
                             "a Parquet file, or a damaged one; write it again (e.g. "
                             "DataFrame.to_parquet) or give a .jsonl or .csv file")


class ParquetRows:
    """The rows of one Parquet file, restricted to ``columns`` (None: every column; those
    the file lacks are left out of every row, as a CSV header without them). Opening reads and checks the
    footer; iterating yields ``(row number from 1, {column: value})``."""

    def __init__(self, path: Path, columns: Sequence[str] | None):
        self.path = Path(path)
        pq = require_pyarrow()
        import pyarrow as pa  # the parquet extra (present: pyarrow.parquet imported above)

        self._errors: tuple[type[BaseException], ...] = (pa.ArrowException, OSError)
        if os.path.getsize(self.path) == 0:
            raise ParquetInputError(f"{path}: the file is empty (0 bytes), not a Parquet file")
        # OSFile: a local file only, never a URI pyarrow might resolve to a file system.
        self._source = pa.OSFile(os.fspath(self.path))
        try:
            self._file = pq.ParquetFile(self._source, buffer_size=_READ_BUFFER,
                                        pre_buffer=False)
            names = self._file.schema_arrow.names
            self.columns = _present(self.path, names, names if columns is None else columns)
        except BaseException as exc:
            self._source.close()
            if isinstance(exc, self._errors):
                raise _unreadable(self.path, exc) from None
            raise

    def __iter__(self) -> Iterator[tuple[int, dict[str, object]]]:
        number = 0
        try:
            if not self.columns:  # no column of interest: still one row per row
                for group in range(self._file.num_row_groups):
                    for _ in range(self._file.metadata.row_group(group).num_rows):
                        number += 1
                        yield number, {}
                return
            batches = self._file.iter_batches(batch_size=BATCH_ROWS, columns=self.columns,
                                              use_threads=False)
            for batch in batches:
                for row in _python_rows(batch):
                    number += 1
                    yield number, row
        except self._errors as exc:
            raise _unreadable(self.path, exc) from None
        finally:
            self._source.close()


def _present(path: Path, names: Sequence[str], wanted: Sequence[str]) -> list[str]:
    """The ``wanted`` columns the file has, each once; two columns of one name are refused
    (which one a field comes from would be a guess)."""
    present = []
    for column in dict.fromkeys(wanted):
        positions = [i for i, name in enumerate(names, start=1) if name == column]
        if len(positions) > 1:
            raise ParquetInputError(f"{path}: columns {positions[0]} and {positions[1]} are "
                                    f"both named {column!r}; each column needs a unique name")
        if positions:
            present.append(column)
    return present


def _python_rows(batch: Any) -> list[dict[str, object]]:
    """The batch's rows as dicts. A string column holding bytes that are not UTF-8 makes
    pyarrow's conversion fail for the whole batch: then the cells are converted one by one
    and each bad one becomes :class:`NotUtf8`, so the other rows are still read."""
    try:
        return batch.to_pylist()
    except UnicodeDecodeError:
        pass
    rows: list[dict[str, object]] = [{} for _ in range(batch.num_rows)]
    for name, column in zip(batch.schema.names, batch.columns, strict=True):
        for row, cell in zip(rows, column, strict=True):
            try:
                row[name] = cell.as_py()
            except UnicodeDecodeError:
                row[name] = NotUtf8()
    return rows
