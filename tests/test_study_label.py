"""A study's labelling page (issue 48, item 2) through Starlette's TestClient: one queue per
clinician over both systems' sheets; nothing any response carries (URL, header, body)
names a system, its results or cases file, or its sheet folder; each label goes to its
system's sheet journal, and only there."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from evaluator.cli.main import cli
from evaluator.data.sheet import latest_labels, read_journal
from evaluator.data.study_draw import labels_dir, sheet_folders, study_draw_path
from evaluator.label.app import STATIC, build_app
from evaluator.label.session import LabelError
from evaluator.label.study_session import StudySession
from tests.study_world import ANSWERS, SYSTEMS, make_study

HOST = "127.0.0.1:8123"
ORIGIN = f"http://{HOST}"


def system_words() -> list[str]:
    """What no response may carry: each system's name, results and cases file names (and
    their stems), and the sheet folders' names."""
    words = [w for name, results, cases in SYSTEMS
             for w in (name, results, cases, results.removesuffix(".jsonl"))]
    return [*words, "system-1", "system-2"]


# "system-" followed by anything but "ui" (the page's font, system-ui, in label.css).
SHEET_WORD = re.compile(r"system-(?!ui)", re.IGNORECASE)


def leaks(text: str) -> list[str]:
    """The system words ``text`` carries (case ignored)."""
    lower = text.lower()
    found = [w for w in system_words() if w.lower() in lower]
    return found + (["system-"] if SHEET_WORD.search(text) else [])


@pytest.fixture
def study(tmp_path):
    folder = make_study(tmp_path / "study")
    run = CliRunner().invoke(cli, ["study", "draw", str(folder)])
    assert run.exit_code == 0, run.output
    return folder


def _value(system: int, case_id: str, labeller: str) -> str:
    """A label that differs by system, case and labeller (1-5)."""
    return str(1 + (3 * system + int(case_id[2:]) + len(labeller)) % 5)


def test_two_clinicians_label_their_queues_blind_and_each_label_goes_to_its_system(study):
    session = StudySession(labels_dir(study))
    draw = session.draw
    client = TestClient(build_app(session, [HOST]), base_url=ORIGIN)
    seen: list[tuple[str, str]] = []  # (what was asked, everything that came back)

    def keep(answer) -> None:
        headers = "\n".join(f"{k}: {v}" for k, v in answer.headers.items())
        seen.append((str(answer.request.url),
                     f"{answer.status_code}\n{headers}\n{answer.text}"))

    saved: dict[int, dict[tuple[str, str], float]] = {0: {}, 1: {}}
    assert sorted(p.name for p in session.labellers.values()) == ["ana", "ben"]
    for person in session.labellers.values():
        base = f"/l/{person.token}"
        items = draw.queues[person.name]
        start = client.get(f"{base}/", follow_redirects=False)
        keep(start)
        assert start.headers["location"] == f"{base}/case/1"
        refused = client.post(f"{base}/case/1", data={"v.accuracy": "3"},
                              headers={"origin": ORIGIN}, follow_redirects=False)
        keep(refused)
        assert refused.status_code == 400  # clarity not answered: the page again, why
        for index, (system, case_id) in enumerate(items, start=1):
            page = client.get(f"{base}/case/{index}")
            keep(page)
            assert f"Answer {index} of {len(items)}" in page.text
            # The answer of the item's system, and not the other's.
            number = int(case_id[2:])
            assert ANSWERS[system].format(i=number) in page.text
            assert ANSWERS[1 - system].format(i=number) not in page.text
            value = _value(system, case_id, person.name)
            answer = client.post(f"{base}/case/{index}",
                                 data={"v.accuracy": value, "v.clarity": "3"},
                                 headers={"origin": ORIGIN}, follow_redirects=False)
            keep(answer)
            assert answer.status_code == 303
            following = "/done" if index == len(items) else f"/case/{index + 1}"
            assert answer.headers["location"] == base + following
            saved[system][(person.name, case_id)] = float(value)
        again = client.get(f"{base}/case/1")  # a saved item shows its labels
        keep(again)
        assert "saved" in again.text and f"{len(items)} of {len(items)} labelled" in again.text
        done = client.get(f"{base}/done")
        keep(done)
        assert f"All {len(items)} answers labelled" in done.text
        for name in STATIC:
            keep(client.get(f"{base}/static/{name}"))
        assert session.first_unlabelled(person) is None
    for url, text in seen:
        assert leaks(url) == [] and leaks(text) == [], (url, leaks(url + text))
    # Each system's journal holds exactly the labels saved on that system's items.
    for system, folder in enumerate(sheet_folders(labels_dir(study), draw)):
        latest = latest_labels(read_journal(folder))
        got = {(k[0], k[1]): e.value for k, e in latest.items() if k[2] == "accuracy"}
        assert got == saved[system]
        assert all(e.judge_seen is False for e in latest.values())


def test_the_draw_and_the_plan_name_the_systems_but_no_page_does(study):
    """The words searched for are there to be found: in the server's own files."""
    record = study_draw_path(labels_dir(study)).read_text()
    assert all(name in record for name, _, _ in SYSTEMS)
    assert leaks(record)


def test_one_labeller_of_the_study_gets_her_queue_only(study):
    session = StudySession(labels_dir(study), ["ben"])
    assert [p.name for p in session.labellers.values()] == ["ben"]
    person = next(iter(session.labellers.values()))
    assert len(person.cases) == len(session.draw.queues["ben"])
    assert person.cases == [str(i) for i in range(1, len(person.cases) + 1)]
    with pytest.raises(LabelError, match="not one of the study's labellers"):
        StudySession(labels_dir(study), ["cara"])


def test_progress_counts_the_queue_across_both_sheets(study):
    session = StudySession(labels_dir(study), ["ana"])
    person = next(iter(session.labellers.values()))
    client = TestClient(build_app(session, [HOST]), base_url=ORIGIN)
    base = f"/l/{person.token}"
    for index in (2, 3):
        client.post(f"{base}/case/{index}", data={"v.accuracy": "4", "v.clarity": "4"},
                    headers={"origin": ORIGIN}, follow_redirects=False)
    assert person.done == {"2", "3"}
    view = session.view(person, 1)
    assert (view.index, view.total, view.done, view.next_unlabelled) == (
        1, len(person.cases), 2, 4)  # the next after this one, 2 and 3 being done
    assert session.view(person, 4).next_unlabelled == 5
    start = client.get(f"{base}/", follow_redirects=False)
    assert start.headers["location"] == f"{base}/case/1"
    # Another server's save on a sheet counts here too (the journal is the store).
    other = StudySession(labels_dir(study), ["ana"])
    them = next(iter(other.labellers.values()))
    other.save(them, 1, {"v.accuracy": "2", "v.clarity": "2"})
    session.refresh()
    assert person.done == {"1", "2", "3"}


@pytest.mark.parametrize("damage", ["queue", "sheet"])
def test_an_edited_draw_or_sheet_is_refused_at_start(study, damage):
    labels = labels_dir(study)
    target = study_draw_path(labels)
    data = json.loads(target.read_text())
    if damage == "queue":  # one item dropped from ana's queue
        data["queues"]["ana"] = data["queues"]["ana"][1:]
        target.write_text(json.dumps(data))
        match = "ana's queue is not her cases"
    else:  # the sheet folders swapped
        first, second = labels / "system-1", labels / "system-2"
        first.rename(labels / "swap")
        second.rename(first)
        (labels / "swap").rename(second)
        match = "is not the sheet the study drew"
    with pytest.raises(LabelError, match=match):
        StudySession(labels)


def test_a_folder_without_a_draw_is_refused_in_one_line(tmp_path):
    with pytest.raises(LabelError, match="holds no study draw") as caught:
        StudySession(tmp_path)
    assert "\n" not in str(caught.value)


def test_a_systems_sheet_of_a_study_is_not_labelled_on_its_own(study):
    for extra in ([], ["--label-studio", str(study / "ls")]):
        run = CliRunner().invoke(cli, ["label", str(labels_dir(study) / "system-1"),
                                       "--labeller", "ana", *extra])
        assert run.exit_code == 2 and "Traceback" not in run.output
        assert "evaluator study label STUDY_DIR" in run.output
        assert len(run.output.strip().splitlines()) == 1


def test_a_study_moved_as_a_whole_still_opens_for_labelling(tmp_path):
    """sheet.json records where the run read its cases (an absolute path here): a study
    folder moved elsewhere finds its answers beside it, checked by their SHA-256."""
    import shutil

    from evaluator.label.study_session import StudySession

    study = make_study(tmp_path / "study")
    assert CliRunner().invoke(cli, ["study", "draw", str(study)]).exit_code == 0
    moved = tmp_path / "elsewhere" / "study"
    moved.parent.mkdir()
    shutil.move(str(study), str(moved))
    session = StudySession(labels_dir(moved))
    person = next(iter(session.labellers.values()))
    assert session.view(person, 1).answer is not None
    # Another file of the same name is not taken for it: the SHA-256 decides.
    cases = moved / SYSTEMS[0][2]
    cases.write_text(cases.read_text() + "\n")
    with pytest.raises(Exception, match="has changed since the run"):
        StudySession(labels_dir(moved))
