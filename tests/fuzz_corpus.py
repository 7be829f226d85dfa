"""A seeded corpus of malformed input rows mixed with good ones (tests/test_input_fuzz.py).

Every row carries ``PHI-MARKER-<n>`` in its case text, standing in for PHI: no message may
ever contain it. Each kind of malformation is a function that turns a good row into the bytes
of a bad one; :class:`Corpus` records the line every row starts on and what it should become.
"""

from __future__ import annotations

import csv
import io
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

MARKER = "PHI-MARKER"
RUBRIC = "trial_eligibility"
FIELDS = ("patient_profile", "trial_id", "trial_title", "eligibility_criteria",
          "ground_truth_label", "ground_truth_explanation", "workflow_answer")
REQUIRED = tuple(name for name in FIELDS if name != "ground_truth_explanation")
COLUMNS = ("case_id", *FIELDS)
BAD_UTF8 = (b"\xff", b"\xfe\xff", b"\x80", b"\xc3\x28", b"\xe2\x28\xa1", b"\xe2\x82",
            b"\xed\xa0\x80", b"\xc0\xaf", b"\xf8\x88\x80\x80\x80", b"\xf4\x90\x80\x80")
WORDS = ("fever", "dyspnea", "troponin 0.4", "HbA1c 7.2%", "métastase", "肺癌", "eGFR < 30",
         "ECOG 1", '"quoted"', "a, b", "n/a", "🙂", "tab\there", "x\u2028y", "\x0c", "\\n")
JSON_ONLY_WORDS = ("nul\x00byte", "esc\x1b", "bell\x07")  # escaped by json.dumps: valid text


@dataclass
class Corpus:
    """One input file: which line holds a good row (its case id) or a bad one (its kind)."""

    path: Path
    good: dict[int, str] = field(default_factory=dict)
    bad: dict[int, str] = field(default_factory=dict)
    next_line: int = 1  # the line the next row starts on
    _data: bytearray = field(default_factory=bytearray)

    def add(self, chunk: bytes, *, good: str | None = None, bad: str | None = None) -> None:
        """Append one row (or, with neither ``good`` nor ``bad``, lines that are no row)."""
        if good is not None:
            self.good[self.next_line] = good
        if bad is not None:
            self.bad[self.next_line] = bad
        self._data += chunk
        self.next_line += chunk.count(b"\n")

    def write(self) -> Corpus:
        """Write the file and return self."""
        self.path.write_bytes(bytes(self._data))
        return self


def _text(rng: random.Random, n: int, *, json_only: bool = False, newlines: bool = False) -> str:
    words = WORDS + (JSON_ONLY_WORDS if json_only else ()) + (("two\nlines",) if newlines else ())
    return " ".join([*rng.choices(words, k=rng.randint(1, 6)), f"{MARKER}-{n}",
                     *rng.choices(words, k=rng.randint(0, 4))])


def _row(rng: random.Random, n: int, case_id: str, *, json_only: bool = False,
         newlines: bool = False) -> dict[str, object]:
    row: dict[str, object] = {"case_id": case_id}
    for name in FIELDS:
        row[name] = _text(rng, n, json_only=json_only, newlines=newlines)
    if json_only and rng.random() < 0.3:
        row["trial_id"] = rng.randint(1, 10**9)  # numbers are accepted as text
    if json_only and rng.random() < 0.3:
        row["ground_truth_explanation"] = rng.choice([None, "", "  "])  # optional: may be empty
    return row


def _after_marker(data: bytes, insert: bytes) -> bytes:
    at = data.index(MARKER.encode()) + len(MARKER)
    return data[:at] + insert + data[at:]


# --- JSONL: each takes (rng, row, n) and returns the line without its terminator -------------

def _truncated(rng, row, n):
    text = json.dumps(row)
    return text[:rng.randrange(1, len(text) - 1)].encode()


def _trailing_garbage(rng, row, n):
    tail = rng.choice([" x", "}", ",", " {}", "]", " // note", " NaN", "\x00", json.dumps(row)])
    return (json.dumps(row) + tail).encode()


def _single_quotes(rng, row, n):
    return str(row).encode()  # a Python dict repr: 'keys' in single quotes


def _not_object(rng, row, n):
    value = rng.choice([list(row.values()), row["patient_profile"], 42, 3.5, None, True, False,
                        [row], f"{MARKER}-{n}"])
    return json.dumps(value).encode()


def _invalid_utf8(rng, row, n):
    line = json.dumps(row, ensure_ascii=rng.random() < 0.5).encode()
    return _after_marker(line, rng.choice(BAD_UTF8))


def _raw_control_char(rng, row, n):  # unescaped inside a string; "\n" would split the line
    char = chr(rng.choice([c for c in range(0x20) if c != 0x0A]))
    return _after_marker(json.dumps(row).encode(), char.encode())


def _nul_byte(rng, row, n):  # between tokens or inside a string
    line = json.dumps(row).encode()
    return line.replace(b", ", b",\x00 ", 1) if rng.random() < 0.5 else _after_marker(line, b"\0")


def _wrong_field_type(rng, row, n):
    name = rng.choice(FIELDS)
    values = [[f"{MARKER}-{n}"], {"text": f"{MARKER}-{n}"}, True, False, float("nan"),
              float("inf"), float("-inf"), [], {}] + ([None] if name in REQUIRED else [])
    row[name] = rng.choice(values)
    return json.dumps(row).encode()


def _wrong_id(rng, row, n):
    row["case_id"] = rng.choice([[f"id-{n}"], {"id": n}, True, False, float("nan"),
                                 float("inf"), "", "   ", "x" * 300 + f"{MARKER}-{n}",
                                 f"id\x01{MARKER}-{n}", f"id\n{MARKER}-{n}", "\ud800",
                                 "\u200b"])
    return json.dumps(row).encode()


def _missing_field(rng, row, n):
    for name in rng.sample(REQUIRED, rng.randint(1, 3)):
        del row[name]
    return json.dumps(row).encode()


def _empty_field(rng, row, n):
    row[rng.choice(REQUIRED)] = rng.choice(["", " ", "\t\n", "\u3000", "\xa0 ", "\r\n"])
    return json.dumps(row).encode()


def _lone_surrogate(rng, row, n):  # valid JSON, but \ud83d alone is no character
    row[rng.choice(FIELDS)] = rng.choice(["\ud83d", "\udc00", "x\udfff "]) + f"{MARKER}-{n}"
    return json.dumps(row).encode()


def _duplicate_key(rng, row, n):
    key = rng.choice([*row, "k" * 300 + "\x07"])
    extra = f", {json.dumps(key)}: {json.dumps(f'{MARKER}-{n}')}"
    if key not in row:
        extra *= 2
    return (json.dumps(row)[:-1] + extra + "}").encode()


def _deep_nesting(rng, row, n):
    depth = rng.choice([1100, 5000, 50000])
    row["patient_profile"] = "@NEST@"
    return json.dumps(row).replace('"@NEST@"', "[" * depth + "]" * depth).encode()


def _huge_number(rng, row, n):
    row["trial_id"] = "@NUMBER@"
    return json.dumps(row).replace('"@NUMBER@"', "9" * rng.randint(4301, 20000)).encode()


def _utf16_line(rng, row, n):
    return json.dumps(row).encode("utf-16-le")  # ASCII JSON: no 0x0A byte but the newline


JSONL_KINDS: dict[str, tuple[Callable, str]] = {
    "truncated": (_truncated, "not valid JSON"),
    "trailing_garbage": (_trailing_garbage, "not valid JSON"),
    "single_quotes": (_single_quotes, "not valid JSON"),
    "not_object": (_not_object, "expected a JSON object"),
    "invalid_utf8": (_invalid_utf8, "not valid UTF-8"),
    "raw_control_char": (_raw_control_char, "not valid JSON"),
    "nul_byte": (_nul_byte, "not valid JSON"),
    "wrong_field_type": (_wrong_field_type, "expected text, got"),
    "wrong_id": (_wrong_id, "case id"),
    "missing_field": (_missing_field, "required field is missing"),
    "empty_field": (_empty_field, "required field is empty"),
    "lone_surrogate": (_lone_surrogate, "surrogate"),
    "duplicate_key": (_duplicate_key, "more than once"),
    "deep_nesting": (_deep_nesting, "nested too deeply"),
    "huge_number": (_huge_number, "number is too long"),
    "utf16_line": (_utf16_line, "not valid JSON"),
}


def build_jsonl(path: Path, *, seed: int = 1, per_kind: int = 66, good: int = 130) -> Corpus:
    """A JSONL file: a BOM, CRLF and LF ends, blank lines, good rows and every bad kind."""
    rng = random.Random(seed)
    plan = ["good"] * good + [kind for kind in JSONL_KINDS for _ in range(per_kind)]
    rng.shuffle(plan)
    corpus = Corpus(path)
    for n, kind in enumerate(plan):
        end = rng.choice([b"\n", b"\r\n"])
        if rng.random() < 0.05:
            corpus.add(rng.choice([b"\n", b"  \t\n", b"\r\n", b"\xef\xbb\xbf\n"]))
        if kind != "good":
            line = JSONL_KINDS[kind][0](rng, _row(rng, n, f"bad-{n}"), n)
            corpus.add(line + end, bad=kind)
            continue
        row = _row(rng, n, f"good-{n}", json_only=True)
        if n % 40 == 0:
            row["workflow_answer"] = f"{MARKER}-{n} " + "long answer " * 30_000  # ~360 KB
        if rng.random() < 0.1:
            row["case_id"] = rng.choice([None, "absent"])  # no id: the line number is the id
            if row["case_id"] == "absent":
                del row["case_id"]
        row["extra_column"] = rng.choice([1, None, [1, 2], {"a": "b"}])  # unknown keys: ignored
        bom = b"\xef\xbb\xbf" if n == 0 or rng.random() < 0.02 else b""  # start; concatenation
        line = bom + json.dumps(row, ensure_ascii=rng.random() < 0.5).encode() + end
        expected_id = str(row.get("case_id") or f"line-{corpus.next_line}")
        corpus.add(line, good=expected_id)
    return corpus.write()


# --- CSV: each takes (rng, values, n) and returns the row's bytes, terminator included ------

def _csv_line(values: list[str]) -> bytes:
    out = io.StringIO()
    csv.writer(out, lineterminator="\r\n").writerow(values)
    return out.getvalue().encode()


def _csv_too_many_values(rng, values, n):
    return _csv_line(values + [f"extra {MARKER}-{n}"] * rng.randint(1, 3))


def _csv_too_few_values(rng, values, n):
    return _csv_line(values[:-rng.randint(1, 4)])


def _csv_invalid_utf8(rng, values, n):
    return _after_marker(_csv_line(values), rng.choice(BAD_UTF8))


def _csv_nul_byte(rng, values, n):
    return _after_marker(_csv_line(values), b"\0")


def _csv_stray_quote(rng, values, n):  # text after a closing quote: an error in strict mode
    values[1] = "@QUOTED@"
    tail = rng.choice(["x", " ", " more text"])
    return _csv_line(values).replace(b"@QUOTED@", f'"{MARKER}-{n} said"{tail}'.encode())


def _csv_empty_field(rng, values, n):
    values[COLUMNS.index(rng.choice(REQUIRED))] = rng.choice(["", "  ", "\t"])
    return _csv_line(values)


def _csv_bad_id(rng, values, n):
    values[0] = rng.choice(["", "   ", "x" * 300 + f"{MARKER}-{n}", f"id\x01{MARKER}-{n}"])
    return _csv_line(values)


CSV_KINDS: dict[str, tuple[Callable, str]] = {
    "csv_too_many_values": (_csv_too_many_values, "values but the header has"),
    "csv_too_few_values": (_csv_too_few_values, "values but the header has"),
    "csv_invalid_utf8": (_csv_invalid_utf8, "not valid UTF-8"),
    "csv_nul_byte": (_csv_nul_byte, "NUL byte"),
    "csv_stray_quote": (_csv_stray_quote, "CSV syntax error"),
    "csv_empty_field": (_csv_empty_field, "required field is empty"),
    "csv_bad_id": (_csv_bad_id, "case id"),
}
UNTERMINATED = ("csv_unterminated_quote", "never closed")  # only possible as the last row


def build_csv(path: Path, *, seed: int = 2, per_kind: int = 34, good: int = 50) -> Corpus:
    """A CSV file (BOM, CRLF): good rows, some multi-line or over 128 KiB, and every bad kind.

    Bad rows stay on one line: after a syntax error the csv module resumes on the next line.
    """
    rng = random.Random(seed)
    plan = ["good"] * good + [kind for kind in CSV_KINDS for _ in range(per_kind)]
    rng.shuffle(plan)
    corpus = Corpus(path)
    corpus.add(b"\xef\xbb\xbf" + _csv_line(list(COLUMNS)))
    for i, kind in enumerate(plan):
        n = 100_000 + i
        if rng.random() < 0.05:
            corpus.add(rng.choice([b"\r\n", b"   \r\n"]))
        if kind != "good":
            values = [str(v) for v in _row(rng, n, f"csv-bad-{n}").values()]
            corpus.add(CSV_KINDS[kind][0](rng, values, n), bad=kind)
            continue
        row = _row(rng, n, f"csv-good-{n}", newlines=True)
        if i % 20 == 0:
            row["patient_profile"] = f"{MARKER}-{n} " + "long profile " * 15_000  # ~190 KB
        corpus.add(_csv_line([str(v) for v in row.values()]), good=str(row["case_id"]))
    n = 100_000 + len(plan)
    corpus.add(f'csv-bad-{n},"{MARKER}-{n} never closed,a,b\r\n'.encode(), bad=UNTERMINATED[0])
    return corpus.write()
