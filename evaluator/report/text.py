"""Case text and the judge's own text for the HTML report's ``--show-text`` mode.

A result record names where its case came from (``input_file``, ``input_line``); the text is
read back from that file with :func:`evaluator.data.cases.read_cases`, the reader the run
used, once its SHA-256 matches the input hash the manifest recorded (so a file of the same
name elsewhere is never shown). When the file is gone, changed (another hash, another case
id on that line) or unreadable, the page says so instead of showing text. Nothing here runs
without ``--show-text``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from evaluator.common.readable import check_regular_file
from evaluator.data.cases import Case, InputFileError, InputProblem, read_cases
from evaluator.data.results import ResultRecord
from evaluator.data.sources import CaseSource
from evaluator.report.data import ReportData
from evaluator.rubrics.rubric import ItemsCriterion, Rubric, StringField
from evaluator.run.manifest import manifest_path_for, recorded_input_hashes, sha256_file


def judge_text(record: ResultRecord, rubric: Rubric) -> list[tuple[str, str]]:
    """The judge's own words in a record (string fields, item explanations, raw output):
    they may quote the case, so they are shown only with ``show_text``."""
    out: list[tuple[str, str]] = []
    for field in rubric.output:
        value = (record.scores or {}).get(field.key)
        if isinstance(field, StringField) and isinstance(value, str):
            out.append((field.key, value))
        elif isinstance(field, ItemsCriterion) and isinstance(value, list):
            lines = [f"{item.get(field.score_key)}: {item.get(field.explanation_key)}"
                     for item in value if isinstance(item, dict)]
            out.append((field.key, "\n".join(lines)))
    if record.raw_output is not None:
        out.append(("raw_output", record.raw_output))
    return out


class _InputFiles:
    """Each input file read once; its rows by line number, or why it could not be read."""

    def __init__(self, rubric: Rubric, mapping: Mapping[str, str] | None, id_column: str):
        self.rubric, self.mapping, self.id_column = rubric, dict(mapping or {}), id_column
        self._cache: dict[Path, dict[int, Case | InputProblem] | str] = {}
        self._hashes: dict[Path, str | None] = {}

    def _find(self, recorded: str, results_path: Path) -> Path | str:
        """The case file the run read: the recorded path relative to the results file's
        folder, else to the current directory (absolute as given), accepted only when its
        SHA-256 is one the manifest recorded for the run's input. Any other file, even one
        holding the same case ids on the same lines, is another file: a note says why."""
        path = Path(recorded)
        candidates = [path] if path.is_absolute() else [results_path.parent / path, path]
        existing = [c for c in dict.fromkeys(candidates) if c.is_file()]
        if not existing:
            return f"input file {recorded} not found: case text unavailable"
        recorded_hashes = recorded_input_hashes(results_path)
        if not recorded_hashes:
            return (f"{manifest_path_for(results_path).name} is missing or records no input "
                    f"hash, so {recorded} cannot be shown to be the file the run read: case "
                    "text not shown")
        for candidate in existing:
            if self._sha256(candidate) in recorded_hashes:
                return candidate
        return (f"input file {recorded} is not the file the run read (its SHA-256 is not the "
                "one in the manifest): the file changed since the run; case text not shown")

    def _sha256(self, path: Path) -> str | None:
        key = path.resolve()
        if key not in self._hashes:
            try:
                check_regular_file(path, "input file")
                self._hashes[key] = sha256_file(path)
            except (OSError, ValueError):
                self._hashes[key] = None
        return self._hashes[key]

    def rows(self, recorded: str, results_path: Path) -> dict[int, Case | InputProblem] | str:
        path = self._find(recorded, results_path)
        if isinstance(path, str):
            return path
        key = path.resolve()
        if key not in self._cache:
            try:
                items = read_cases(path, self.rubric, mapping=self.mapping,
                                   id_column=self.id_column)
                self._cache[key] = {item.line: item for item in items}
            except InputFileError as exc:
                self._cache[key] = f"input file cannot be read: {exc}"
        return self._cache[key]


def case_text(record: ResultRecord, results_path: Path,
              files: _InputFiles) -> tuple[list[tuple[str, str]], str | None]:
    """(field name, text) pairs for a record's case, or a note saying why there are none."""
    if not record.input_file or record.input_line is None:
        return [], "the record does not name its input file and line"
    rows = files.rows(record.input_file, results_path)
    if isinstance(rows, str):
        return [], rows
    item = rows.get(record.input_line)
    if item is None:
        return [], (f"line {record.input_line} of {record.input_file} holds no case now: "
                    "the file changed since the run")
    if item.case_id != record.case_id:
        return [], (f"line {record.input_line} of {record.input_file} now holds case "
                    f"{item.case_id!r}, not {record.case_id!r}: the file changed since the run, or "
                    "the run used another --id-column (pass the same one to the report)")
    if isinstance(item, InputProblem):
        return [], (f"the row cannot be read with the rubric's fields ({item.message}); if the "
                    "run used --map or --id-column, pass the same options to the report")
    return list(item.fields.items()), None


def attach_text(report: ReportData, cases: CaseSource) -> None:
    """Add ``text``, ``text_note`` and ``judge_text`` to the worst-case rows and
    ``judge_text`` to the failed cases of a :func:`evaluator.report.build.build_report`
    result, each case read as ``cases`` says (its mapping and id column)."""
    rubric = report.rubric
    files = _InputFiles(rubric, cases.mapping, cases.id_column)
    paths = {entry.label: Path(entry.path) for entry in report.files}
    if report.worst:
        for group in report.worst.by_file:
            for row in group.rows:
                if row.record is not None:
                    row.text, row.text_note = case_text(row.record, paths[group.label], files)
                    row.judge_text = judge_text(row.record, rubric)
    for entry in report.files:
        for failed in entry.failed:
            if failed.record is not None:
                failed.judge_text = judge_text(failed.record, rubric)
