"""The result record (one JSON line per case), the writer that appends them, and the
reader that checks a results file line by line (and finds a line torn by a crash): each
line strictly typed, and each verdict one its rubric can produce
(:mod:`evaluator.data.verdicts`)."""

from __future__ import annotations

import logging
import math
import operator
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from evaluator.common.errors import UserError
from evaluator.common.readable import NotARegularFile, check_regular_file
from evaluator.data.files import (
    atomic_writer,
    fsync_dir,
    make_private_dirs,
    open_private_append,
    truncate_private,
)
from evaluator.data.verdicts import VerdictCheck
from evaluator.rubrics.load import load_rubric
from evaluator.rubrics.rubric import Rubric, RubricError

log = logging.getLogger(__name__)

# 2: adds ``distributions`` (per-score probabilities). Files of version 1 still load.
# 3: a pairwise rubric's records (``pairwise``); absolute records stay version 2.
RECORD_VERSION = 2
PAIRWISE_RECORD_VERSION = 3

# How far from 1 the probabilities of one distribution may sum, and an expected score from
# the sum of value x probability (relative to the largest |value|). A run writes them
# renormalised in float64 (:func:`evaluator.analysis.distributions.summarize`, the value
# walk): off by at most a few units of 1e-16 per value, and a scale has at most 101 values.
# 1e-6 is far above that rounding and far below any edit that moves a figure.
PROBABILITY_TOLERANCE = 1e-6
RUBRIC_NAME = re.compile(r"[a-z0-9][a-z0-9_\-]*")  # as evaluator.rubrics.rubric.Rubric's

Status = Literal[
    "ok",              # a verdict that parsed and passed the output model
    "invalid_output",  # the judge's text did not validate (should not happen when constrained)
    "truncated",       # the judge stopped on the token limit before closing the verdict
    "too_long",        # prompt + longest valid verdict exceed the judge's context
    "input_error",     # the case itself is unusable (missing/empty field, bad row)
    "backend_error",   # the backend raised while judging this case's batch
]


class ScoreDistribution(BaseModel):
    """The judge's probability for every value a rubric allows at one score of a verdict.

    ``probabilities``: value (as a JSON key, e.g. ``"4"``) -> P(value | prompt, verdict so
    far), from the judge's own next-token probabilities at temperature 1 under the grammar,
    summed over every tokenisation of the value ("10" as one token or as "1","0") and
    renormalised over the allowed values. ``expected``: the probability-weighted score.
    ``confidence``: the probability of the value in ``scores`` (None when that value is not
    an allowed one, e.g. the median 2.5 of two samples). ``entropy``: in bits.
    ``coverage``: the share of the probability mass the computation saw (1.0: exact; below
    1 only where a backend returns the top-k log-probabilities and an allowed token was not
    among them). See :mod:`evaluator.analysis.distributions`."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    probabilities: dict[Annotated[str, Field(pattern=r"^-?[0-9]+$")],
                        Annotated[float, Field(ge=0, le=1)]] = Field(min_length=1)
    expected: float
    confidence: Annotated[float, Field(ge=0, le=1)] | None = None
    entropy: Annotated[float, Field(ge=0)]
    coverage: Annotated[float, Field(ge=0, le=1)] = 1.0

    @model_validator(mode="after")
    def _one_distribution(self) -> ScoreDistribution:
        # Plain sums, in C (every line of a results file has several distributions): their
        # rounding, about 1e-16 per value, is far below the tolerance.
        values = list(map(int, self.probabilities))
        _sums_to_one(sum(self.probabilities.values()))
        mean = sum(map(operator.mul, values, self.probabilities.values()))
        if abs(self.expected - mean) > PROBABILITY_TOLERANCE * max(1, *map(abs, values)):
            raise ValueError("expected is not the probability-weighted mean of the values")
        return self


def _sums_to_one(total: float) -> None:
    if abs(total - 1) > PROBABILITY_TOLERANCE:
        raise ValueError(f"the probabilities sum to {total:.6g}, not 1")


def _plain_values(value: Any, where: str = "") -> Any:
    """A verdict's values are JSON numbers, strings, lists and objects: never a boolean
    (no rubric output is one; Python would count true as 1) nor a non-finite number."""
    if isinstance(value, bool):
        raise ValueError(f"{where} is true or false, which no verdict holds")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{where} is NaN or infinite, which no verdict holds")
    if isinstance(value, dict):
        for key, item in value.items():
            if type(item) is not str and type(item) is not int:  # most values: nothing to see
                _plain_values(item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _plain_values(item, f"{where}[{i}]")
    return value


Verdict = Annotated[dict[str, Any], AfterValidator(_plain_values)]


class PanelVerdict(BaseModel):
    """One of several verdicts for a case: a self-consistency sample (``sample``) or a jury
    member's (``judge``, with its own results file's ``settings_hash``)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    sample: int | None = None
    judge: str | None = None
    status: Status
    scores: Verdict | None = None
    aggregates: dict[str, float | None] | None = None
    reason: str | None = None
    finish_reason: str | None = None
    completion_tokens: int | None = None
    settings_hash: str | None = None
    raw_output: str | None = None  # as on ResultRecord: results file only, never logs
    distributions: dict[str, ScoreDistribution] | None = None


def _printable_name(name: str) -> str:
    if not name.isprintable():
        raise ValueError("a system name must be printable (no line breaks or control "
                         "characters)")
    return name


Side = Literal["A", "B"]
Choice = Literal["A", "B", "tie"]
Outcome = Literal["A", "B", "tie", "inconsistent"]
INCONSISTENT = "inconsistent"


class PairOrder(BaseModel):
    """One of the two orders a pair is judged in. ``first``: the candidate shown first
    (``A``: the pair as given; ``B``: swapped). ``verdict`` is the judge's verdict as
    written, where ``"A"`` means the text shown first; ``choices`` and ``probabilities``
    are in candidate terms (``"A"`` is candidate A whichever position it was shown in), so
    the two orders compare directly. ``probabilities``: the judge's exact probability of
    each choice at that point of its verdict (as :class:`ScoreDistribution`)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    first: Side
    status: Status
    verdict: dict[str, Any] | None = None
    choices: dict[str, Choice] | None = None
    probabilities: dict[str, dict[Choice, Annotated[float, Field(ge=0, le=1)]]] | None = None
    reason: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    prompt_hash: str | None = None
    raw_output: str | None = None  # as on ResultRecord: results file only, never logs

    @model_validator(mode="after")
    def _distributions(self) -> PairOrder:
        for probabilities in (self.probabilities or {}).values():
            _sums_to_one(sum(probabilities.values()))
        return self


class PairwiseResult(BaseModel):
    """A pairwise verdict: both orders, and their reconciliation per choice criterion.

    ``systems``: the names of candidates A and B (the two input files' names, or the two
    columns'); ``lengths``: each candidate's length in characters (for length bias);
    ``outcome``: per criterion, the winner when both orders agree (``A``, ``B`` or
    ``tie``), else ``inconsistent`` (the verdict did not survive the swap)."""

    model_config = ConfigDict(extra="forbid")

    # Printed by summary and compare: one printable line each (a run checks them too).
    systems: dict[Side, Annotated[str, Field(min_length=1, max_length=100),
                                  AfterValidator(_printable_name)]]
    lengths: dict[Side, Annotated[int, Field(ge=0)]]
    orders: list[PairOrder] = Field(min_length=2, max_length=2)
    outcome: dict[str, Outcome] | None = None

    @model_validator(mode="after")
    def _outcome_of_the_orders(self) -> PairwiseResult:
        # Analysis reconciles the orders again (compare); export writes ``outcome``: an
        # edited one would give two answers.
        by_first = {order.first: order.choices or {} for order in self.orders}
        if self.outcome is not None and len(by_first) != 2:
            raise ValueError("the two orders must be one with A first and one with B first")
        for key, outcome in (self.outcome or {}).items():
            first, second = by_first["A"].get(key), by_first["B"].get(key)
            if first is None or second is None or outcome != reconcile(first, second):
                raise ValueError(f"outcome {key!r} is not what the two orders' choices give")
        return self


def reconcile(first: str, second: str) -> str:
    """The outcome of a pair from its two orders' choices (in candidate terms): theirs when
    they agree, else ``inconsistent`` (the verdict did not survive the swap)."""
    return first if first == second else INCONSISTENT


class ResultRecord(BaseModel):
    """One case's outcome. A case that could not be judged has a status and a reason,
    never scores."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    record_version: Literal[1, 2, 3] = RECORD_VERSION
    case_id: str
    rubric: str
    judge: str
    status: Status
    scores: Verdict | None = None
    aggregates: dict[str, float | None] | None = None
    reason: str | None = None
    input_file: str | None = None
    input_line: int | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None  # prompt tokens served from the prefix cache (vLLM)
    max_new_tokens: int | None = None
    batch_size: int | None = None
    batch_seconds: float | None = None
    # Resume key: the run's settings (see evaluator.run.manifest) and this case's rendered prompt.
    settings_hash: str | None = None
    prompt_hash: str | None = None
    # The judge's own text when it could not be validated, for debugging. It may quote the
    # case, so it lives only in the (0600) results file, never in logs.
    raw_output: str | None = None
    # Several verdicts per case (``--samples N`` or a jury): each one, and how ``scores``
    # and ``aggregates`` above were reduced from them (see evaluator.analysis.panel).
    samples: list[PanelVerdict] | None = None
    jury: list[PanelVerdict] | None = None
    reduction: dict[str, str] | None = None
    # Per score (path as in evaluator.rubrics.score_paths: "accuracy", "Rhythm[0].Score"):
    # the judge's probabilities over the allowed values. Several verdicts: the mean of
    # their distributions. None for record_version 1 and backends without probabilities.
    distributions: dict[str, ScoreDistribution] | None = None
    # A pairwise rubric's record (record_version 3): both orders and the reconciled outcome,
    # which ``scores`` repeats (criterion -> A, B, tie or inconsistent).
    pairwise: PairwiseResult | None = None

    @model_validator(mode="after")
    def _scores_repeat_the_outcome(self) -> ResultRecord:
        if self.pairwise is not None and self.scores != self.pairwise.outcome:
            raise ValueError("a pairwise record's scores are not its reconciled outcome")
        return self


class ResultsFileDamaged(UserError, ValueError):
    """A complete line of a results file is not a result record: edited or damaged.
    ``problem`` is the message without advice that only ``evaluator run`` can follow."""

    def __init__(self, message: str, *, problem: str | None = None):
        super().__init__(message)
        self.problem = problem or message


@dataclass(frozen=True)
class StoredLine:
    """One complete, valid line of a results file."""

    number: int
    raw: bytes
    record: ResultRecord


@dataclass(frozen=True)
class ResultsScan:
    """A results file checked line by line."""

    lines: list[StoredLine]
    valid_bytes: int   # length of the valid prefix (every complete, valid line)
    torn_bytes: int    # bytes after it: a last line cut short by a crash


def _content_end(path: Path) -> int:
    """Length of the file without its trailing run of NUL bytes and newlines (read from the
    end, in blocks)."""
    with Path(path).open("rb") as handle:
        end = handle.seek(0, os.SEEK_END)
        while end > 0:
            start = max(0, end - (1 << 16))
            handle.seek(start)
            block = handle.read(end - start)
            kept = len(block.rstrip(b"\0\n"))
            if kept:
                return start + kept
            end = start
    return 0


RubricFor = Callable[[ResultRecord], Rubric | None]


def rubrics_by_name(rubrics_dirs: Sequence[Path] = ()) -> RubricFor:
    """The rubric a record names, found as ``--rubrics-dir`` finds it (``rubrics_dirs``
    first, then the built-ins), each loaded once; None when none of that name loads (the
    caller that needs it says so)."""
    loaded: dict[str, Rubric | None] = {}

    def rubric_for(record: ResultRecord) -> Rubric | None:
        name = record.rubric
        if name not in loaded:
            # Only a rubric's name: a record's text never names a file to open.
            if not RUBRIC_NAME.fullmatch(name):
                loaded[name] = None
            else:
                try:
                    loaded[name] = load_rubric(name, tuple(rubrics_dirs))
                except RubricError:
                    loaded[name] = None
        return loaded[name]

    return rubric_for


def one_rubric(rubric: Rubric) -> RubricFor:
    """``rubric`` for the records that name it (a run's own rubric, loaded by the run)."""
    return lambda record: rubric if record.rubric == rubric.name else None


def rubric_and_judge(records: Sequence[ResultRecord], source: Path, rubrics_dirs: Sequence[Path],
                     error: type[UserError]) -> tuple[Rubric, str]:
    """The one rubric (loaded) and judge that ``records``, read from ``source``, name;
    ``error`` when they name several or none."""
    names, judges = sorted({r.rubric for r in records}), sorted({r.judge for r in records})
    if len(names) != 1 or len(judges) != 1:
        raise error(f"{source}: expected the records of one rubric and one judge "
                    f"(found {len(names)} rubric(s), {len(judges)} judge(s))")
    return load_rubric(names[0], tuple(rubrics_dirs)), judges[0]


def rubric_problem(record: ResultRecord, check: VerdictCheck) -> str | None:
    """Why ``record`` holds a verdict its rubric (``check``'s) cannot produce, or None: each
    ``ok`` verdict (a sample's or jury member's too) validates against the rubric's output
    model, a reduced one is a reduction of them, and each distribution is over the allowed
    values of a score the verdict has. A pairwise record's outcome is checked against its
    orders by the model itself."""
    if record.pairwise is not None:
        return None
    panel_name = "samples" if record.samples else "jury"
    panel = record.samples or record.jury or []
    for i, verdict in enumerate(panel):
        if verdict.status == "ok" and verdict.scores is not None:
            problem = (check.verdict(verdict.scores)
                       or check.distributions(verdict.scores, _values(verdict.distributions)))
            if problem:
                return f"{panel_name}.{i}.{problem}"
    if record.status != "ok" or record.scores is None:
        return None
    if panel:
        first = next((v.scores for v in panel if v.status == "ok" and v.scores is not None),
                     None)
        if first is None:
            return f"scores: an ok record whose {panel_name} has no ok verdict"
        problem = check.reduced(record.scores, first)
    else:
        problem = check.verdict(record.scores)
    return problem or check.distributions(record.scores, _values(record.distributions))


def _values(distributions: dict[str, ScoreDistribution] | None) -> dict[str, list[str]]:
    return {path: list(d.probabilities) for path, d in (distributions or {}).items()}


def _damaged(problem: str) -> ResultsFileDamaged:
    return ResultsFileDamaged(
        f"{problem} Move it aside or fix that line, or pass --force-new to start a new file "
        "(the old one is kept).", problem=problem)


class ResultsReader:
    """Iterates the complete, valid lines of a results file one at a time (never reading
    the file whole). An unterminated last line (a write cut by a crash or power loss,
    possibly NUL-filled) is torn, never parsed as a result: after iterating, ``valid_bytes``
    is the length of the valid prefix and ``torn_bytes`` what follows. Any other bad line
    raises :class:`ResultsFileDamaged` naming it.

    Each line is validated strictly (``"3"`` is not a number, ``true`` not 1, NaN and
    Infinity are refused) and, with ``rubric_for`` (see :func:`rubrics_by_name`), each
    record's verdicts against the rubric it returns for the record (None: not checked):
    a score that rubric cannot produce is a damaged line (:func:`rubric_problem`)."""

    def __init__(self, path: Path, rubric_for: RubricFor | None = None):
        self.path = Path(path)
        self.rubric_for = rubric_for
        self.valid_bytes = 0
        self.torn_bytes = 0
        self.unterminated = False  # the last line is a complete record without its newline
        self._checks: dict[int, VerdictCheck] = {}

    def __iter__(self) -> Iterator[StoredLine]:
        content_end = _content_end(self.path)
        size = self.path.stat().st_size
        offset = 0
        number = 0
        with self.path.open("rb") as handle:
            for chunk in handle:
                # No newline: the write of the last line never finished. Only NUL bytes
                # left: what a power cut leaves when the size reached the disk but the data
                # did not.
                if offset >= content_end:
                    break
                if not chunk.endswith(b"\n"):
                    # A complete record whose newline was not written (or was removed by
                    # an editor) is kept: only a line cut short is torn.
                    record = self._complete_record(number + 1, chunk)
                    if record is not None:
                        number += 1
                        offset += len(chunk)
                        self.unterminated = True
                        yield StoredLine(number, chunk, record)
                    break
                number += 1
                raw = chunk[:-1]
                offset += len(chunk)
                if raw.strip():
                    yield StoredLine(number, raw, self._parse(number, raw))
        self.valid_bytes = offset
        self.torn_bytes = size - offset

    def _complete_record(self, number: int, chunk: bytes) -> ResultRecord | None:
        """The record an unterminated last line holds, if it is one whole (a line cut short
        is never valid JSON: the object's closing brace is its last byte). A whole record
        its rubric cannot produce was edited, not cut short: it raises as any other line."""
        if b"\0" in chunk or not chunk.strip():
            return None
        try:
            record = ResultRecord.model_validate_json(chunk, strict=True)
        except ValidationError:
            return None
        return self._checked(number, record)

    def _parse(self, number: int, raw: bytes) -> ResultRecord:
        try:
            record = ResultRecord.model_validate_json(raw, strict=True)
        except ValidationError as exc:
            first = exc.errors(include_input=False, include_url=False)[0]
            where = ".".join(map(str, first["loc"])) or "$"
            raise _damaged(f"{self.path} line {number} is not a result record ({where}: "
                           f"{first['msg']}); the file was edited or damaged.") from None
        return self._checked(number, record)

    def _checked(self, number: int, record: ResultRecord) -> ResultRecord:
        """``record`` (line ``number``) once checked against its rubric, if it has one."""
        rubric = self.rubric_for(record) if self.rubric_for is not None else None
        if rubric is not None:
            check = self._checks.get(id(rubric))
            if check is None or check.rubric is not rubric:
                check = self._checks[id(rubric)] = VerdictCheck(rubric)
            problem = rubric_problem(record, check)
            if problem:
                source = f" ({rubric.source_path})" if rubric.source_path else ""
                raise _damaged(f"{self.path} line {number} holds a verdict rubric "
                               f"{rubric.name!r}{source} cannot produce ({problem}): the "
                               "file was edited or damaged, or the rubric changed since the "
                               "run (give the one it used with --rubrics-dir).")
        return record


def scan_results(path: Path, rubric_for: RubricFor | None = None) -> ResultsScan:
    """Read and validate every line (see :class:`ResultsReader`) into memory."""
    reader = ResultsReader(path, rubric_for)
    lines = list(reader)
    return ResultsScan(lines, reader.valid_bytes, reader.torn_bytes)


def iter_records(path: Path, rubric_for: RubricFor | None = None) -> Iterator[ResultRecord]:
    """Every record of a results file, one at a time (a torn last line is skipped with a
    warning); with ``rubric_for``, checked against the rubric (see :class:`ResultsReader`)."""
    reader = ResultsReader(path, rubric_for)
    for line in reader:
        yield line.record
    if reader.torn_bytes:
        log.warning("%s: ignoring a torn last line (%d bytes)", path, reader.torn_bytes)


def truncate_torn_tail(path: Path, valid_bytes: int, torn_bytes: int,
                       unterminated: bool = False) -> None:
    """Cut a torn last line (``torn_bytes`` after the valid prefix of ``valid_bytes``) off;
    its case is judged again. Only for a results file this tool wrote (the caller checks its
    manifest). A complete last record without its newline (``unterminated``) is kept and
    the newline added."""
    if torn_bytes:
        log.warning("%s: removed a torn last line (%d bytes) left by an interrupted run",
                    path, torn_bytes)
        truncate_private(path, valid_bytes)
    if unterminated:
        log.warning("%s: added the newline missing after its last record", path)
        with open_private_append(path) as handle:
            handle.write(b"\n")
            handle.flush()
            os.fsync(handle.fileno())


def rewrite_results(path: Path, raw_lines: Iterable[bytes]) -> None:
    """Replace a results file with the given lines (streamed), atomically."""
    with atomic_writer(path) as handle:
        for raw in raw_lines:
            handle.write(raw + b"\n")


class ResultWriter:
    """Appends records as JSON lines: each is flushed to the OS as it is written (a killed
    process loses nothing written), and fsynced to disk at most every ``fsync_seconds``
    and on close (a power cut loses at most that window; resume judges those cases again)."""

    def __init__(self, path: Path, *, fsync_seconds: float = 1.0):
        self.path = Path(path)
        make_private_dirs(self.path.parent)
        created = not self.path.exists()
        self._handle = open_private_append(self.path)
        if created:
            fsync_dir(self.path.parent)
        self.fsync_seconds = fsync_seconds
        self._last_sync = time.monotonic()

    def write(self, record: ResultRecord) -> None:
        """Append one record as a single write and flush it to the OS."""
        self._handle.write(record.model_dump_json().encode("utf-8") + b"\n")
        self._handle.flush()
        if time.monotonic() - self._last_sync >= self.fsync_seconds:
            self.sync()

    def sync(self) -> None:
        """Force written records to disk."""
        os.fsync(self._handle.fileno())
        self._last_sync = time.monotonic()

    def close(self) -> None:
        """Flush to disk and close."""
        if not self._handle.closed:
            self._handle.flush()
            self.sync()
            self._handle.close()

    def __enter__(self) -> ResultWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def analysis_lines(reader: ResultsReader) -> Iterator[StoredLine]:
    """The reader's lines for a command other than ``evaluator run``: a damaged line's
    message suggests nothing only ``evaluator run`` accepts (``--force-new``)."""
    try:
        yield from reader
    except ResultsFileDamaged as exc:
        # The reader's advice (--force-new) is an option of `evaluator run` only.
        raise ResultsFileDamaged(f"{exc.problem} Is it a results file written by "
                                 "evaluator run?") from None


def read_results(path: Path, rubrics_dirs: Sequence[Path] = (), *,
                 rubric_for: RubricFor | None = None) -> list[ResultRecord]:
    """Load every record of a results file for analysis (report, agree): each line
    validated, its verdicts against the rubric it names (found as :func:`rubrics_by_name`
    finds it in ``rubrics_dirs``: give the folders the command's ``--rubrics-dir`` gives),
    a torn last line skipped with a warning. Raises :class:`ResultsFileDamaged` for a FIFO
    or device (never opened), a bad line, or one case id on two lines (counting both would
    count one case twice); the messages name lines, never the id, and suggest nothing only
    ``evaluator run`` accepts. ``rubric_for``: the rubrics to check against instead (e.g.
    :func:`one_rubric`, a run's own)."""
    path = Path(path)
    try:
        check_regular_file(path, "results file")
    except NotARegularFile as exc:
        raise ResultsFileDamaged(str(exc)) from None
    reader = ResultsReader(path, rubric_for or rubrics_by_name(rubrics_dirs))
    records: list[ResultRecord] = []
    first_line: dict[str, int] = {}
    for line in analysis_lines(reader):
        earlier = first_line.setdefault(line.record.case_id, line.number)
        if earlier != line.number:
            raise ResultsFileDamaged(
                f"{path} has the same case id on lines {earlier} and {line.number}; a "
                "results file holds one record per case, so it was edited or written by "
                "another tool")
        records.append(line.record)
    if reader.torn_bytes:
        log.warning("%s: ignoring a torn last line (%d bytes)", path, reader.torn_bytes)
    return records
