"""One set of rules for a labelling journal's lines (issue 45, items 2 and 3): the labelling
page refuses to start on a line the analysis would refuse (and never counts its case as
labelled), stops taking saves when another server appends such a line, and the analysis
reads the journal strictly (no bool as a number, no number as text, exactly one of value
and reason, a real time, no shown_left on a single-answer sheet, no copied line). Each
refusal is one line naming the journal's line, never its labeller, case or comment."""

from __future__ import annotations

import json

import pytest
from starlette.testclient import TestClient

from evaluator.analysis.labels.labelset import SheetLabelsError
from evaluator.analysis.labels.sheet_reader import read_sheet_labels
from evaluator.data.sheet import JournalEntry, append_label, journal_path, now, read_sheet_info
from evaluator.label.app import build_app
from evaluator.label.session import STOPPED, LabelError, LabelSession
from evaluator.rubrics.load import load_rubric
from tests.label_sheets import make_single_sheet

HOST = "127.0.0.1:8123"
RUBRIC = load_rubric("trial_eligibility")
COMMENT = "SECRET-COMMENT-9f"


@pytest.fixture
def sheet(tmp_path):
    """A sheet of 6 cases, ana given the first 4 and ben the last 4, with ana's labels of
    her first case saved through the page (two lines: accuracy, clarity)."""
    folder = tmp_path / "sheet"
    make_single_sheet(folder, 6)
    ids = [json.loads(line)["case_id"] for line in
           (folder / "review.jsonl").read_text().splitlines()]
    make_single_sheet(folder, 6, labellers=["ana", "ben"],
                      assignment={"ana": ids[:4], "ben": ids[2:]})
    session = LabelSession(folder, ["ana"])
    token = next(iter(session.labellers))
    client = TestClient(build_app(session, [HOST]), base_url=f"http://{HOST}")
    saved = client.post(f"/l/{token}/case/1", data={"v.accuracy": "4", "v.clarity": "3",
                                                    "comment": COMMENT},
                        headers={"origin": f"http://{HOST}"}, follow_redirects=False)
    assert saved.status_code == 303
    assert len(journal_path(folder).read_text().splitlines()) == 2
    return folder, ids


def _first_line(folder, change):
    """Rewrite the journal's first line: ``change`` edits its JSON object, or (a str)
    replaces the text of its value."""
    lines = journal_path(folder).read_text().splitlines()
    if isinstance(change, str):
        entry = json.loads(lines[0])
        lines[0] = lines[0].replace(f'"value":{json.dumps(entry["value"])}', change)
        assert lines[0] != json.dumps(entry)
    else:
        entry = json.loads(lines[0])
        change(entry)
        lines[0] = json.dumps(entry)
    journal_path(folder).write_text("\n".join(lines) + "\n")


def _set(**fields):
    return lambda entry: entry.update(fields)


def _drop(name):
    return lambda entry: entry.pop(name)


HAND_EDITS = {
    "off the scale": (_set(value=7.0), "not on its scale"),
    "between two values": (_set(value=3.5), "not on its scale"),
    "NaN": ('"value":NaN', "not a label value"),
    "text": (_set(value="A"), "text, not a number"),
    "a number as text": (_set(value="4"), "text, not a number"),
    "true": (_set(value=True), "not a label value"),
    "an unlisted labeller": (_set(labeller="eve"), "does not list"),
    "an unassigned case": (None, "did not assign"),  # ben's case (set in the test)
    "a case not on the sheet": (None, "not on the sheet"),
    "an unknown criterion": (_set(criterion="completeness"), "does not rate"),
    "neither value nor reason": (_set(value=None), "exactly one of value and cannot_judge"),
    "both value and reason": (_set(cannot_judge="unreadable"),
                              "exactly one of value and cannot_judge"),
    "a time that is not one": (_set(time="yesterday"), "field 'time'"),
    "a time without its offset": (_set(time="2026-12-06T10:00:00"), "UTC offset"),
    "no time": (_drop("time"), "field 'time'"),
    "shown_left on a single sheet": (_set(shown_left="A"), "shown_left on a single-answer"),
    "another draw": (_set(sheet="0" * 64), "another draw"),
    "another rubric": (_set(rubric_hash="e" * 64), "another version of rubric"),
}


def _one_line(message: str, line: int, ids) -> None:
    assert "\n" not in message
    assert f"journal.jsonl line {line}:" in message
    said = message.split("journal.jsonl", 1)[1]
    for secret in ("ana", *ids, COMMENT):
        assert secret not in said, message


@pytest.mark.parametrize("edit", list(HAND_EDITS))
def test_the_page_and_the_analysis_refuse_the_same_hand_edited_line(sheet, edit):
    sheet, ids = sheet
    change, says = HAND_EDITS[edit]
    if change is None:
        change = _set(case_id=ids[5] if "unassigned" in edit else "not-drawn-77")
    # Before the edit both read the journal: the page counts ana's first case as done.
    assert len(LabelSession(sheet, ["ana"])._by_name["ana"].done) == 1
    read_sheet_labels(sheet, rubric=RUBRIC, rubric_hash=RUBRIC.source_sha256)
    _first_line(sheet, change)
    with pytest.raises(LabelError) as page:
        LabelSession(sheet, ["ana"])
    with pytest.raises(SheetLabelsError) as analysis:
        read_sheet_labels(sheet, rubric=RUBRIC, rubric_hash=RUBRIC.source_sha256)
    for refused in (str(page.value), str(analysis.value)):
        _one_line(refused, 1, ids)
        assert says in refused, refused


def test_an_exact_copy_of_a_line_is_refused_by_both(sheet):
    sheet, ids = sheet
    lines = journal_path(sheet).read_text().splitlines()
    journal_path(sheet).write_text("\n".join([*lines, lines[0]]) + "\n")
    for error, read in ((LabelError, lambda: LabelSession(sheet, ["ana"])),
                        (SheetLabelsError, lambda: read_sheet_labels(sheet, rubric=RUBRIC))):
        with pytest.raises(error, match="line 3: a copy of an earlier line") as caught:
            read()
        _one_line(str(caught.value), 3, ids)


def test_a_whole_last_line_without_its_newline_is_checked_and_a_torn_one_skipped(sheet):
    """A last line without its newline that is whole JSON (an editor's save) is read, and
    refused when it breaks a rule; one that is not whole JSON is a torn write (never
    acknowledged): skipped by both readers, and cut off by the next save."""
    sheet, ids = sheet
    text = journal_path(sheet).read_text()
    first, last = text.splitlines()
    assert '"value":3.0' in last
    journal_path(sheet).write_text(f"{first}\n{last.replace('3.0', 'true')}")  # no newline
    with pytest.raises(SheetLabelsError, match="line 2: field 'value'"):
        read_sheet_labels(sheet, rubric=RUBRIC)
    with pytest.raises(LabelError, match="line 2: field 'value'"):
        LabelSession(sheet, ["ana"])
    journal_path(sheet).write_text(text + first[:40])  # torn
    session = LabelSession(sheet, ["ana"])
    assert len(session._by_name["ana"].done) == 1
    assert read_sheet_labels(sheet, rubric=RUBRIC).ratings["accuracy"] == {
        ids[0]: {"ana": 4.0}}
    assert session.save(session._by_name["ana"], 2, {"v.accuracy": "2", "v.clarity": "5"}
                        ) == (2, None)
    assert journal_path(sheet).read_text().startswith(text)
    assert len(journal_path(sheet).read_text().splitlines()) == 4  # the torn line cut off
    assert LabelSession(sheet, ["ana"])._by_name["ana"].done == set(ids[:2])


def test_a_bad_line_from_another_server_stops_the_saves_and_says_which_line(sheet):
    sheet, ids = sheet
    session = LabelSession(sheet, ["ana"])
    told: list[str] = []
    session.notify = told.append
    token = next(iter(session.labellers))
    client = TestClient(build_app(session, [HOST]), base_url=f"http://{HOST}")
    info = read_sheet_info(sheet)
    assert client.get(f"/l/{token}/case/2").status_code == 200
    # Another server (or a hand) appends a label off the scale for ana's second case.
    append_label(sheet, JournalEntry(labeller="ana", time=now(), case_id=ids[1],
                                     criterion="accuracy", value=7, sheet=info.fingerprint,
                                     rubric_hash=info.rubric_hash))
    before = journal_path(sheet).read_bytes()
    page = client.get(f"/l/{token}/case/2")
    assert page.status_code == 503 and page.text.strip() == STOPPED
    assert ids[1] not in page.text
    saved = client.post(f"/l/{token}/case/3", data={"v.accuracy": "4", "v.clarity": "4"},
                        headers={"origin": f"http://{HOST}"}, follow_redirects=False)
    assert saved.status_code == 503
    assert journal_path(sheet).read_bytes() == before  # nothing more saved
    assert session._by_name["ana"].done == {ids[0]}  # the bad line counts nothing
    assert client.get(f"/l/{token}/").status_code == 503
    assert len(told) == 1  # the operator is told once, naming the line
    _one_line(told[0], 3, ids)
    assert "not on its scale" in told[0]
    assert session.save(session._by_name["ana"], 3, {"v.accuracy": "4",
                                                     "v.clarity": "4"}) == (0, STOPPED)


def _serve(folder):
    session = LabelSession(folder, ["ana"])
    told: list[str] = []
    session.notify = told.append
    token = next(iter(session.labellers))
    client = TestClient(build_app(session, [HOST]), base_url=f"http://{HOST}")

    def save(index, accuracy="4", clarity="4"):
        return client.post(f"/l/{token}/case/{index}",
                           data={"v.accuracy": accuracy, "v.clarity": clarity},
                           headers={"origin": f"http://{HOST}"}, follow_redirects=False)

    return session, client, token, save, told


def test_a_journal_an_editor_saved_without_its_last_newline_keeps_the_page_going(sheet):
    """The page counts a whole last line without its newline; its next save ends that line,
    and the line is not read again as a copy of itself (the page stopped there once)."""
    sheet, ids = sheet
    journal = journal_path(sheet)
    journal.write_bytes(journal.read_bytes().rstrip(b"\n"))
    session, client, token, save, told = _serve(sheet)
    assert session._by_name["ana"].done == {ids[0]}
    assert save(2).status_code == 303
    assert client.get(f"/l/{token}/case/3").status_code == 200
    assert save(3, "2", "5").status_code == 303
    assert client.get(f"/l/{token}/case/1").status_code == 200
    assert told == [] and session.broken is None
    assert session._by_name["ana"].done == set(ids[:3])
    assert len(journal.read_text().splitlines()) == 6
    assert read_sheet_labels(sheet, rubric=RUBRIC).ratings["accuracy"] == {
        ids[0]: {"ana": 4.0}, ids[1]: {"ana": 4.0}, ids[2]: {"ana": 2.0}}


def test_cr_line_ends_and_a_mistyped_last_line_are_refused_never_cut(sheet):
    """A journal saved with CR-only line ends, or whose last line (no newline) was mended
    with a typo, is neither torn nor readable: both readers refuse it naming the line, and
    a save refuses to cut it (it used to truncate the whole journal)."""
    sheet, _ids = sheet
    journal = journal_path(sheet)
    good = journal.read_bytes()
    journal.write_bytes(good.replace(b"\n", b"\r"))
    for error, read in ((LabelError, lambda: LabelSession(sheet, ["ana"])),
                        (SheetLabelsError, lambda: read_sheet_labels(sheet, rubric=RUBRIC))):
        with pytest.raises(error, match="line 1: holds a carriage return"):
            read()
    first, last = good.decode().splitlines()
    mended = f"{first}\n{last[:-1]},}}".encode()  # a trailing comma, no newline
    journal.write_bytes(mended)
    with pytest.raises(SheetLabelsError, match="line 2: not a journal entry"):
        read_sheet_labels(sheet, rubric=RUBRIC)
    journal.write_bytes(good)
    _session, client, token, save, told = _serve(sheet)
    typed = good + last[:-1].replace("4.0", "2.0").encode() + b",}"  # typed in, no newline
    journal.write_bytes(typed)
    assert save(2).status_code in (400, 503)
    assert journal.read_bytes() == typed  # nothing cut, nothing added
    assert client.get(f"/l/{token}/case/2").status_code == 503
    assert len(told) == 1 and "line 3: the last line is neither" in told[0]


@pytest.mark.parametrize("tail", [b'{"labeller":"an', b'{"labeller":"ana","comment":"a}',
                                  b"{", '{"comment":"é'.encode()[:-1]])
def test_a_torn_write_is_skipped_and_cut_whatever_byte_it_stops_at(sheet, tail):
    sheet, ids = sheet
    journal = journal_path(sheet)
    good = journal.read_bytes()
    journal.write_bytes(good + tail)
    assert read_sheet_labels(sheet, rubric=RUBRIC).ratings["accuracy"] == {ids[0]: {"ana": 4.0}}
    _session, _client, _token, save, told = _serve(sheet)
    assert save(2).status_code == 303
    after = journal.read_bytes()
    assert after.startswith(good) and after.endswith(b"\n")
    assert [json.loads(line)["case_id"] for line in after.splitlines()] == [ids[0]] * 2 + [
        ids[1]] * 2  # the torn bytes cut off, the save whole
    assert told == []


@pytest.mark.parametrize("change, says", [
    (lambda j, good: j.write_bytes(good.replace(b'"value":4.0', b'"value":5.0')[:-1] + b" "),
     "was edited"),
    (lambda j, good: j.write_bytes(good.splitlines(keepends=True)[0]), "was shortened"),
    (lambda j, good: j.unlink(), "was removed"),
    (lambda j, good: (j.rename(j.with_name("old.jsonl")), j.write_bytes(good + good[:10])),
     "was replaced"),
])
def test_a_journal_changed_under_the_running_page_stops_it_saying_how(sheet, change, says):
    sheet, _ids = sheet
    journal = journal_path(sheet)
    _session, client, token, save, told = _serve(sheet)
    change(journal, journal.read_bytes())
    before = journal.read_bytes() if journal.exists() else None
    assert client.get(f"/l/{token}/case/2").status_code == 503
    assert save(2).status_code == 503
    assert (journal.read_bytes() if journal.exists() else None) == before
    assert len(told) == 1 and says in told[0] and "journal.jsonl" in told[0]


def test_a_journal_that_cannot_be_read_stops_the_page_without_a_traceback(sheet):
    sheet, _ids = sheet
    journal = journal_path(sheet)
    _session, client, token, _save, told = _serve(sheet)
    journal.unlink()
    journal.mkdir()  # a folder where the journal was
    answer = client.get(f"/l/{token}/case/2")
    assert answer.status_code == 503 and answer.text.strip() == STOPPED
    assert len(told) == 1


@pytest.mark.parametrize("line, says", [
    (None, "a field the journal's format does not have"),
    (b"[" * 100000, "not a journal entry"),
])
def test_odd_last_lines_are_one_line_without_their_content(sheet, line, says):
    sheet, _ids = sheet
    journal = journal_path(sheet)
    good = journal.read_bytes()
    if line is None:  # a whole entry with one key more, named after a patient
        line = json.dumps({**json.loads(good.splitlines()[0]), "Mrs SECRETNAME": 1}).encode()
    for ending in (b"\n", b""):
        journal.write_bytes(good + line + ending)
        for error, read in ((LabelError, lambda: LabelSession(sheet, ["ana"])),
                            (SheetLabelsError, lambda: read_sheet_labels(sheet, rubric=RUBRIC))):
            with pytest.raises(error) as caught:
                read()
            assert "line 3:" in str(caught.value) and says in str(caught.value)
            assert "SECRET" not in str(caught.value) and "\n" not in str(caught.value)


def test_a_byte_order_mark_is_named(sheet):
    sheet, _ids = sheet
    journal = journal_path(sheet)
    journal.write_bytes(b"\xef\xbb\xbf" + journal.read_bytes())
    with pytest.raises(SheetLabelsError, match="line 1: starts with a byte-order mark"):
        read_sheet_labels(sheet, rubric=RUBRIC)


def test_values_are_checked_against_the_rubric_the_labels_were_given_on(sheet, tmp_path):
    """A label given on the sheet's rubric stays readable when the rubric file has changed
    since (a note says so): its scale is not the one the labeller saw."""
    sheet, ids = sheet
    changed = RUBRIC.model_copy(update={"source_sha256": "f" * 64})
    labels = read_sheet_labels(sheet, rubric=changed, rubric_hash="f" * 64)
    assert labels.ratings["accuracy"] == {ids[0]: {"ana": 4.0}}
    assert any("has changed since the sheet was drawn" in n for n in labels.notes)
