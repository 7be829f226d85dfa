"""The labelling sheet's folder (evaluator.data.sheet): sheet.json round trip and refusals,
and the journal: appended in order, last line counts, a torn line cut, private mode."""

from __future__ import annotations

import json
import os
import stat
from multiprocessing import Process

import pytest

from evaluator.data.sheet import (
    JournalEntry,
    SheetError,
    SheetInfo,
    append_label,
    journal_path,
    latest_labels,
    now,
    read_journal,
    read_sheet_info,
    sheet_path,
    write_sheet_info,
)


def _info(**kw) -> SheetInfo:
    base = {"fingerprint": "f" * 64, "rubric": "ecg_interpretation", "rubric_hash": "r" * 64,
                "design": "random", "blind": True, "criteria": ["accuracy"], "results": [],
                "created": now()}
    return SheetInfo(**(base | kw))


def _entry(case: str, value, labeller: str = "ana", **kw) -> JournalEntry:
    return JournalEntry(labeller=labeller, time=now(), case_id=case, criterion="accuracy",
                        value=value, sheet="f" * 64, rubric_hash="r" * 64, **kw)


def test_sheet_info_round_trips_and_assignment_gives_each_labeller_their_cases(tmp_path):
    info = _info(labellers=["ana", "ben"], assignment={"ana": ["c1", "c3"], "ben": ["c2", "c3"]})
    write_sheet_info(tmp_path, info)
    assert stat.S_IMODE(sheet_path(tmp_path).stat().st_mode) == 0o600
    back = read_sheet_info(tmp_path)
    assert back == info
    assert back.cases_of("ana", ["c1", "c2", "c3"]) == ["c1", "c3"]
    assert back.cases_of("zoe", ["c1", "c2"]) == []
    assert _info().cases_of("zoe", ["c1", "c2"]) == ["c1", "c2"]


@pytest.mark.parametrize("content, says", [
    (None, "is not a labelling sheet"),
    ("{", "not valid JSON"),
    (json.dumps({"format": 99}), "sheet format 99"),
    (json.dumps({"format": 1, "rubric": "x"}), "field "),
])
def test_a_missing_or_damaged_sheet_json_is_one_line(tmp_path, content, says):
    if content is not None:
        sheet_path(tmp_path).write_text(content)
    with pytest.raises(SheetError, match=says) as caught:
        read_sheet_info(tmp_path)
    assert "\n" not in str(caught.value)


def test_the_last_line_counts_and_history_is_kept(tmp_path):
    append_label(tmp_path, _entry("c1", 3))
    append_label(tmp_path, _entry("c2", 4))
    append_label(tmp_path, _entry("c1", 5))
    append_label(tmp_path, _entry("c1", 2, labeller="ben"))
    entries = list(read_journal(tmp_path))
    assert [e.value for e in entries] == [3, 4, 5, 2]
    latest = latest_labels(entries)
    assert latest[("ana", "c1", "accuracy")].value == 5
    assert latest[("ben", "c1", "accuracy")].value == 2
    assert len(latest) == 3
    assert stat.S_IMODE(journal_path(tmp_path).stat().st_mode) == 0o600


def test_a_torn_last_line_is_skipped_then_cut_by_the_next_append(tmp_path):
    append_label(tmp_path, _entry("c1", 3))
    with journal_path(tmp_path).open("ab") as handle:  # a writer killed mid-line
        handle.write(b'{"labeller":"ana","time":"2026')
    assert [e.case_id for e in read_journal(tmp_path)] == ["c1"]
    append_label(tmp_path, _entry("c2", 4))
    assert [e.case_id for e in read_journal(tmp_path)] == ["c1", "c2"]
    assert journal_path(tmp_path).read_bytes().count(b"\n") == 2


def test_a_damaged_complete_line_names_the_line_not_its_content(tmp_path):
    append_label(tmp_path, _entry("c1", 3))
    with journal_path(tmp_path).open("ab") as handle:
        handle.write(b'{"comment": "PATIENT SECRET"}\n')
    with pytest.raises(SheetError, match="line 2") as caught:
        list(read_journal(tmp_path))
    assert "SECRET" not in str(caught.value)


def _writer(folder, labeller, n):
    for i in range(n):
        append_label(folder, _entry(f"c{i}", i % 5 + 1, labeller=labeller))


def test_two_processes_appending_at_once_lose_nothing(tmp_path):
    writers = [Process(target=_writer, args=(tmp_path, name, 200)) for name in ("ana", "ben")]
    for w in writers:
        w.start()
    for w in writers:
        w.join()
    entries = list(read_journal(tmp_path))
    assert len(entries) == 400
    assert len(latest_labels(entries)) == 400
    assert not os.path.exists(tmp_path / "journal.jsonl.tmp")


def test_a_whole_last_entry_without_its_newline_counts_and_is_kept(tmp_path):
    """An editor that drops the final newline leaves a whole entry: it is read, and the
    next append ends it instead of cutting it off."""
    append_label(tmp_path, _entry("c1", 3))
    append_label(tmp_path, _entry("c2", 4))
    path = journal_path(tmp_path)
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    assert [e.case_id for e in read_journal(tmp_path)] == ["c1", "c2"]
    append_label(tmp_path, _entry("c3", 5))
    assert [e.case_id for e in read_journal(tmp_path)] == ["c1", "c2", "c3"]


def test_a_torn_line_longer_than_a_read_chunk_is_cut_alone(tmp_path):
    append_label(tmp_path, _entry("c1", 3))
    with journal_path(tmp_path).open("ab") as handle:
        handle.write(b'{"comment":"' + b"x" * 200_000)  # torn, no newline in 64 KiB
    append_label(tmp_path, _entry("c2", 4))
    assert [e.case_id for e in read_journal(tmp_path)] == ["c1", "c2"]
