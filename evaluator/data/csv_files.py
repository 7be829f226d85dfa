"""CSV as the evaluator reads and writes it: one reader for every CSV file a user names
(cases, labels, a filled-in worksheet), one rule for every cell it writes, and one line for
a file that is not UTF-8.

Reading (:func:`csv_records`): the ``csv`` module's field limit (128 KiB by default: a long
clinical text, or a worksheet with case text that ``review --show-text`` wrote, exceeds it)
is raised to :data:`FIELD_LIMIT` first, quoting is strict (a stray quote is an error, not
text silently merged), and each record comes with the line it starts on. A record that
cannot be read is yielded as a :class:`MalformedCsv` (its lines and what is wrong, never
its text) and the reader goes on, so a cases file reports the row and keeps the others,
while a labels file refuses the whole file in one line.

Writing (:func:`csv_text`; cell by cell :func:`spreadsheet_cell`): a spreadsheet runs a
cell that starts with ``=``, ``+``, ``-`` or ``@`` (also after spaces, and their full-width
forms ``＝＋－＠``, which some spreadsheets honour), tab or carriage return as a formula
(OWASP, "CSV Injection"). Every such cell, case ids included, is written with a leading
``'``, and so is a cell that starts with ``'`` itself, so the escape can be undone without
ambiguity: :func:`read_cell` drops a leading ``'`` exactly when what follows would have
been escaped. A value written and read back is the value (ids join); a hand-made sheet
with plain ids reads as it is. The file (:func:`csv_bytes`) is UTF-8 after a byte-order
mark: without one, Excel on Windows reads a CSV file as Windows-1252, and ``≥``, ``°`` or
an accented id comes out garbled. Every reader decodes ``utf-8-sig``, with or without it.

Encoding (:func:`not_utf8`, :func:`undecodable_line`): a file that is not UTF-8 (a
spreadsheet's plain "CSV" is Windows-1252) is reported by the line of its first byte
that is not, never its text, with what to do.
"""

from __future__ import annotations

import codecs
import csv
import io
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

# 2**31 - 1 fits a C long on every platform; sys.maxsize overflows it on Windows.
FIELD_LIMIT = 2**31 - 1
QUOTING_HINT = ("a field holding a comma, quote or line break must be in double quotes, "
                "with each quote inside it doubled")
# A cell whose first character (after any whitespace) is one of these is run as a formula.
FORMULA_START = frozenset("=+-@\uff1d\uff0b\uff0d\uff20")
# ... and one that starts with one of these, whatever follows (tab, carriage return).
CONTROL_START = frozenset("\t\r")
ESCAPE = "'"
# What Excel needs at the start of a CSV file to read it as UTF-8 (its "CSV UTF-8").
UTF8_BOM = "\ufeff".encode("utf-8")
UTF8_HINT = "re-encode the file as UTF-8"
CSV_UTF8_HINT = 're-encode the file as UTF-8 (from a spreadsheet: save it as "CSV UTF-8")'
UTF16 = "the file is UTF-16 (or UTF-32) encoded; save it as UTF-8"


def utf16(data: bytes) -> bool:
    """Whether a file that should be UTF-8 text is UTF-16 or UTF-32 (a spreadsheet's
    "Unicode Text"): a UTF-16 byte-order mark, or a NUL byte, which UTF-8 text never holds
    and UTF-16 holds in every ASCII character."""
    return data[:2] in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE) or b"\x00" in data


@dataclass(frozen=True)
class MalformedCsv:
    """A record the CSV reader could not read: the lines it spans (``start`` to ``end``,
    to the end of the file when a quote is never closed) and the reader's reason."""

    start: int
    end: int
    reason: str

    @property
    def unclosed(self) -> bool:
        """A quoted field never closed: the record ran to the end of the file."""
        return self.reason == "unexpected end of data"

    @property
    def lines(self) -> str:
        """``line N`` or ``lines N-M``."""
        return f"line {self.start}" if self.start == self.end else f"lines {self.start}-{self.end}"

    def describe(self, *, skipped: bool = False) -> str:
        """What is wrong and where, with what to do (no text of the file); ``skipped``: say
        that the record's lines were skipped (the reader went on)."""
        if self.unclosed:
            return (f"a quoted field in the row starting on line {self.start} is never "
                    f"closed, so {self.lines} (to the end of the file) could not be read; "
                    f"{QUOTING_HINT}")
        skip = f"{self.lines} skipped; " if skipped else ""
        return f"CSV syntax error on line {self.end} ({self.reason}); {skip}{QUOTING_HINT}"


SEMICOLON_HINT = ("looks ';'-separated (a spreadsheet's regional setting): save it as "
                  "comma-separated CSV")


def semicolon_separated(header_line: str) -> bool:
    """Whether a CSV file whose first line is ``header_line`` was saved with ';' between
    its fields, as Excel and LibreOffice do where ',' is the decimal mark: the line holds a
    ';' and no ',', or splits into more fields by ';' than by ','. Read as comma-separated,
    such a file is one column, or a syntax error at its first quoted cell; said first, the
    user is told what to do (see :data:`SEMICOLON_HINT`)."""
    line = header_line.rstrip("\r\n")
    if ";" not in line:
        return False
    if "," not in line:
        return True
    try:
        by_comma = next(csv.reader([line]), [])
        by_semicolon = next(csv.reader([line], delimiter=";"), [])
    except csv.Error:  # a quote the line does not close: count the separators instead
        return line.count(";") > line.count(",")
    return len(by_semicolon) > len(by_comma)


def not_utf8(what: str, *, csv_file: bool) -> str:
    """``<what> is not valid UTF-8; <what to do>``, for a reader's message (``what``: the
    line, row or header row, named by the caller); ``csv_file``: the file is CSV, which a
    spreadsheet may have saved in its own encoding, so the hint says how to save it."""
    return f"{what} is not valid UTF-8; {CSV_UTF8_HINT if csv_file else UTF8_HINT}"


def undecodable_line(exc: UnicodeDecodeError) -> int:
    """The line (1-based) of the first byte ``exc`` could not decode, lines ended as the
    CSV reader ends them (``\\n``, ``\\r\\n`` or ``\\r``): for a message that names the line
    and never its text."""
    before = bytes(exc.object[:exc.start])
    return before.count(b"\n") + before.count(b"\r") - before.count(b"\r\n") + 1


def first_line(text: str) -> str:
    """The first line of ``text`` that is not blank (the header line: the reader skips
    blank lines before it), "" for none."""
    return next((line for line in text.splitlines() if line.strip()), "")


def raise_field_limit() -> None:
    """Raise the ``csv`` module's field limit (process-wide) to :data:`FIELD_LIMIT`; never
    lower it."""
    csv.field_size_limit(max(csv.field_size_limit(), FIELD_LIMIT))


def csv_records(handle: Iterable[str]) -> Iterator[tuple[int, list[str] | MalformedCsv]]:
    """``(line, values)`` for every record of a CSV text stream (opened with
    ``newline=""``: a quoted cell may hold line breaks), ``line`` being the one it starts
    on; a record that cannot be read is ``(line, MalformedCsv)`` and reading goes on after
    it. Blank lines come as empty records (``[]``): the caller skips them."""
    raise_field_limit()
    reader = csv.reader(handle, strict=True)
    while True:
        start = reader.line_num + 1
        try:
            values = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            yield start, MalformedCsv(start, reader.line_num, str(exc))
            continue
        yield start, values


def _escaped(text: str) -> bool:
    """Whether :func:`spreadsheet_cell` writes ``text`` with a leading ``'``."""
    return bool(text) and (text[0] == ESCAPE or text[0] in CONTROL_START
                           or text.lstrip()[:1] in FORMULA_START)


def spreadsheet_cell(text: str) -> str:
    """``text`` as a CSV cell no spreadsheet runs as a formula (see the module docstring);
    :func:`read_cell` gives ``text`` back."""
    return ESCAPE + text if _escaped(text) else text


def csv_text(rows: Iterable[Sequence[str]]) -> str:
    """``rows`` (the header first) as CSV text for a spreadsheet: every cell through
    :func:`spreadsheet_cell`, lines ended with CRLF (RFC 4180; with it the ``csv`` module
    also quotes a cell holding a bare carriage return, which would otherwise end the row)."""
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerows([spreadsheet_cell(cell) for cell in row] for row in rows)
    return buffer.getvalue()


def csv_bytes(rows: Iterable[Sequence[str]]) -> bytes:
    """:func:`csv_text` of ``rows`` as the bytes of a CSV file a spreadsheet opens right: a
    UTF-8 byte-order mark (:data:`UTF8_BOM`), then the text in UTF-8."""
    return UTF8_BOM + csv_text(rows).encode("utf-8")


def read_cell(cell: str) -> str:
    """A cell as :func:`spreadsheet_cell` was given it: a leading ``'`` is dropped when what
    follows is a value it would have escaped (a formula trigger, or ``'``), else the cell is
    as it is (a hand-made sheet's plain ``-0042`` is ``-0042``)."""
    if cell[:1] == ESCAPE and _escaped(cell[1:]):
        return cell[1:]
    return cell
