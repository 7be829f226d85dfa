"""Label Studio (issue 46, items 1 and 2): a sheet written as Label Studio tasks and a
labelling config (``evaluator label SHEET --label-studio OUT``), as blind as the page; and
Label Studio's JSON export read back as a LabelSet (annotators as labellers, choices and
rating results by criterion name, the last annotation counts, cancelled annotations and
"cannot judge" left out and counted, predictions never read), equal to the LabelSet of the
same labels saved through the sheet's journal. Refusals are one line naming the file and
the task and annotation ids, never case text.

The export fixtures follow Label Studio's documented JSON export format
(labelstud.io/guide/export: a list of tasks with ``id``, ``data``, ``annotations``,
``predictions``; an annotation's ``result`` items with ``from_name``, ``to_name``,
``type`` and ``value``), written here by hand."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET

import pytest
from click.testing import CliRunner

from evaluator.analysis.labels import label_studio
from evaluator.analysis.labels.label_studio import claims, read_export
from evaluator.analysis.labels.labelset import LabelSetError
from evaluator.analysis.labels.readers import names_criteria, reader_for
from evaluator.analysis.labels.sheet_reader import read_sheet_labels
from evaluator.cli.main import cli
from evaluator.data.sheet import JournalEntry, append_label, read_sheet_info
from evaluator.label.criteria import label_criteria
from evaluator.label.label_studio import labelling_config, write_label_studio
from evaluator.label.session import LabelError
from evaluator.rubrics.load import load_rubric
from tests.conftest import refused_in_one_line
from tests.label_sheets import (
    CONFIDENCE,
    EXPECTED,
    MARKER,
    make_pairwise_sheet,
    make_single_sheet,
)

RUBRIC = load_rubric("trial_eligibility")
ANA, BEN = "annotator-7", "ben@site.example"  # completed_by 7; {"id": 9, "email": ...}
SECRET = "PHI-SECRET-LS-31"


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def choice(key, alias):
    return {"id": f"r-{key}", "from_name": key, "to_name": "workflow_answer",
            "type": "choices", "origin": "manual", "value": {"choices": [alias]}}


def rating(key, n):
    return {"id": f"r-{key}", "from_name": key, "to_name": "workflow_answer",
            "type": "rating", "origin": "manual", "value": {"rating": n}}


def annotation(aid, who, results, updated="2026-03-09T22:16:08.728541Z", cancelled=False):
    return {"id": aid, "completed_by": who, "result": results, "was_cancelled": cancelled,
            "ground_truth": False, "created_at": "2026-03-09T22:10:00.000000Z",
            "updated_at": updated, "lead_time": 4.288, "result_count": 0, "task": 0,
            "project": 83, "parent_prediction": None, "parent_annotation": None}


def task(tid, data, annotations, predictions=()):
    return {"id": tid, "annotations": annotations, "predictions": list(predictions),
            "drafts": [], "data": data, "meta": {}, "created_at": "2026-03-09T21:52:49Z",
            "updated_at": "2026-03-09T22:16:08Z", "inner_id": tid, "total_annotations":
            len(annotations), "cancelled_annotations": 0, "total_predictions": 0,
            "comment_count": 0, "project": 83, "updated_by": 7, "file_upload": None}


def prediction(key, alias):
    return {"id": 500, "model_version": "judge-v1", "score": 0.93,
            "result": [choice(key, alias)], "task": 0}


# The labels of the fixture: (labeller, case index, accuracy, clarity); None: cannot judge.
LABELS = [(ANA, 0, 4, 5), (ANA, 1, 2, 3), (ANA, 2, None, 4), (ANA, 3, 5, 5),
          (BEN, 0, 3, 5), (BEN, 1, 2, 2), (BEN, 4, 1, 1)]


def export_of(ids, fingerprint, *, extra=None):
    """A Label Studio export of ``LABELS`` on the cases ``ids``: ana (a user id) with
    choices for accuracy and a rating for clarity; ben (a user object with an email). Task 1:
    ana annotated twice, the later by updated_at first in the list (her earlier 1 on
    accuracy does not count); task 2: a cancelled annotation of ben's, and a prediction."""
    by_case: dict[int, list] = {}
    for n, (who, case, accuracy, clarity) in enumerate(LABELS):
        person = 7 if who == ANA else {"id": 9, "email": BEN, "first_name": "Ben"}
        results = [choice("accuracy", "x" if accuracy is None else str(accuracy)),
                   rating("clarity", clarity)]
        by_case.setdefault(case, []).append(annotation(100 + n, person, results))
    by_case[0].append(annotation(90, 7, [choice("accuracy", "1"), rating("clarity", 1)],
                                 updated="2026-03-09T20:00:00.000000Z"))
    by_case[1].append(annotation(91, {"id": 9, "email": BEN},
                                 [choice("accuracy", "5"), rating("clarity", 5)],
                                 cancelled=True))
    tasks = []
    for i, case in enumerate(ids):
        data = {"case_id": case, "sheet_fingerprint": fingerprint,
                "workflow_answer": f"{SECRET} answer {i}"}
        tasks.append(task(11 + i, data, by_case.get(i, []),
                          [prediction("accuracy", "5")] if i == 1 else ()))
    for change in extra or ():
        change(tasks)
    return tasks


def write_export(path, tasks):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(tasks, indent=2), encoding="utf-8")
    return path


def save_through_journal(folder, ids):
    """``LABELS`` saved through the sheet's journal, as the labelling page saves them."""
    info = read_sheet_info(folder)
    for who, case, accuracy, clarity in LABELS:
        for key, value in (("accuracy", accuracy), ("clarity", clarity)):
            append_label(folder, JournalEntry(
                labeller=who, time="2026-03-09T22:16:08.728+00:00", case_id=ids[case],
                criterion=key, value=None if value is None else float(value),
                cannot_judge="cannot judge" if value is None else None,
                sheet=info.fingerprint, rubric_hash=info.rubric_hash))


@pytest.fixture
def sheet(tmp_path):
    folder = tmp_path / "study" / "sheet"
    info = make_single_sheet(folder, 6)
    ids = [json.loads(line)["case_id"] for line in
           (folder / "review.jsonl").read_text().splitlines()]
    return folder, info, ids


def one_line(exc, *needles):
    message = str(exc.value)
    assert "\n" not in message and SECRET not in message, message
    for needle in needles:
        assert needle in message, (needle, message)
    return message


# ------------------------------------------------------------------------------- reading


def test_an_export_gives_the_labelset_of_the_same_labels_saved_through_the_sheet(sheet,
                                                                                 tmp_path):
    folder, info, ids = sheet
    export = write_export(tmp_path / "study" / "ls" / "export.json",
                          export_of(ids, info.fingerprint))
    save_through_journal(folder, ids)
    from_sheet = read_sheet_labels(folder, rubric=RUBRIC)
    from_export = read_export(export, rubric=RUBRIC)
    assert from_export.ratings == from_sheet.ratings
    assert from_export.criteria == from_sheet.criteria == ["accuracy", "clarity"]
    assert from_export.rows == from_sheet.rows  # review.jsonl's rows: the design intact
    assert from_export.design_path == folder / "review.jsonl"
    assert from_export.blind is True and from_export.kind == "single"
    assert from_export.labellers == [ANA, BEN]
    assert from_export.ratings["accuracy"][ids[0]] == {ANA: 4.0, BEN: 3.0}  # the last counts
    assert from_export.cannot_judge == from_sheet.cannot_judge == 1
    notes = " ".join(from_export.notes)
    assert "1 annotation(s) cancelled" in notes and "1 prediction(s)" in notes
    assert "cannot judge" in notes
    assert reader_for(export) is not None and names_criteria(export)
    assert reader_for(export).noun == label_studio.NOUN


def test_without_its_sheet_an_export_is_refused_and_without_a_fingerprint_is_rows(sheet,
                                                                                  tmp_path):
    """Tasks exported from a sheet are read with that sheet's design or not at all (a
    priority sheet's design moved away would pass as a random sample); tasks of the site's
    own (no fingerprint) are a row each, the design unknown."""
    _, info, ids = sheet
    export = write_export(tmp_path / "elsewhere" / "deep" / "export.json",
                          export_of(ids, info.fingerprint))
    with pytest.raises(LabelSetError) as caught:
        read_export(export, rubric=RUBRIC)
    one_line(caught, "is not beside the export", "put the export in the sheet's")

    def unmarked(tasks):
        for each in tasks:
            del each["data"]["sheet_fingerprint"]

    export = write_export(tmp_path / "elsewhere" / "own.json",
                          export_of(ids, info.fingerprint, extra=[unmarked]))
    labels = read_export(export, rubric=RUBRIC)
    assert [row for _, row in labels.rows] == [{"case_id": c} for c in ids]
    assert labels.blind is None and labels.design_path == export
    assert labels.criteria == ["accuracy", "clarity"]
    assert labels.ratings["clarity"][ids[4]] == {BEN: 1.0}


def test_the_order_of_annotations_without_times_is_the_exports(sheet, tmp_path):
    _, info, ids = sheet

    def untimed(tasks):
        for a in tasks[0]["annotations"]:
            del a["updated_at"], a["created_at"]

    export = write_export(tmp_path / "study" / "x" / "export.json",
                          export_of(ids, info.fingerprint, extra=[untimed]))
    labels = read_export(export, rubric=RUBRIC)
    assert labels.ratings["accuracy"][ids[0]][ANA] == 1.0  # the last in the list


def test_what_is_claimed(sheet, tmp_path):
    _, info, ids = sheet
    export = write_export(tmp_path / "export.json", export_of(ids, info.fingerprint))
    assert claims(export)
    assert not claims(write_export(tmp_path / "labels.jsonl", export_of(ids, "f")))
    assert not claims(write_export(tmp_path / "object.json", {"data": {}}))
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    assert not claims(fifo)  # never opened: it would hang


# ------------------------------------------------------------------------------ refusals


def _refused(tmp_path, sheet, change, *needles):
    _, info, ids = sheet
    export = write_export(tmp_path / "study" / "ls" / "export.json",
                          export_of(ids, info.fingerprint, extra=[change]))
    with pytest.raises(LabelSetError) as exc:
        read_export(export, rubric=RUBRIC)
    return one_line(exc, str(export), *needles)


def test_an_unknown_criterion_is_refused_naming_task_and_annotation(sheet, tmp_path):
    def typo(tasks):
        tasks[1]["annotations"][0]["result"][0]["from_name"] = "accurasy"

    shown = _refused(tmp_path, sheet, typo, "task 12 annotation 101", "not a criterion")
    assert "accurasy" not in shown  # a control's name is the site's text: never echoed


@pytest.mark.parametrize("change, needle", [
    (lambda tasks: tasks[3]["annotations"][0]["result"][1].update(value={"rating": 10 ** 400}),
     "not a number on its scale"),
    (lambda tasks: tasks[2].update(predictions=5), "predictions are not a list"),
    (lambda tasks: tasks[2].update(predictions="abc"), "predictions are not a list"),
    (lambda tasks: tasks[3]["annotations"][0].update(was_cancelled="true"),
     "was_cancelled is not true or false"),
])
def test_wrong_types_are_refused_in_one_line_not_a_crash(sheet, tmp_path, change, needle):
    _refused(tmp_path, sheet, change, needle)


def test_a_deeply_nested_or_empty_export_is_refused_in_one_line(sheet, tmp_path):
    _, info, ids = sheet
    folder = tmp_path / "study" / "ls"
    folder.mkdir(parents=True)
    deep = folder / "deep.json"
    deep.write_text('[{"data": {"case_id": "%s"}, "x": %s%s}]' % (ids[0], "[" * 900, "]" * 900),
                    encoding="utf-8")
    # Deep but well formed, a task of the site's own with no annotation: read, never a
    # RecursionError; with a key given twice at the bottom, refused in one line.
    assert read_export(deep, rubric=RUBRIC).ratings == {}
    deep.write_text('[{"data": {"case_id": "%s"}, "x": %s{"a": 1, "a": 2}%s}]'
                    % (ids[0], "[" * 900, "]" * 900), encoding="utf-8")
    with pytest.raises(LabelSetError) as exc:
        read_export(deep, rubric=RUBRIC)
    one_line(exc, "one key twice")
    empty = folder / "empty.json"
    empty.write_text("[]", encoding="utf-8")
    with pytest.raises(LabelSetError) as exc:
        read_export(empty, rubric=RUBRIC)
    one_line(exc, "no task")


def test_an_off_scale_value_is_refused(sheet, tmp_path):
    def seven(tasks):
        tasks[3]["annotations"][0]["result"][1]["value"] = {"rating": 7}

    _refused(tmp_path, sheet, seven, "task 14 annotation 103", "not on its scale")


def test_an_annotator_the_sheet_does_not_list_is_refused(tmp_path):
    folder = tmp_path / "study" / "sheet"
    info = make_single_sheet(folder, 6, labellers=[ANA])
    ids = [json.loads(line)["case_id"] for line in
           (folder / "review.jsonl").read_text().splitlines()]
    export = write_export(tmp_path / "study" / "export.json", export_of(ids, info.fingerprint))
    with pytest.raises(LabelSetError) as exc:
        read_export(export, rubric=RUBRIC)
    one_line(exc, "task 11 annotation 104", "does not list")


def test_duplicate_keys_and_text_that_is_not_json_are_refused(sheet, tmp_path):
    _, info, ids = sheet
    export = write_export(tmp_path / "export.json", export_of(ids, info.fingerprint))
    text = export.read_text()
    export.write_text(text.replace('"was_cancelled": false,',
                                   '"was_cancelled": false, "was_cancelled": true,', 1))
    with pytest.raises(LabelSetError) as exc:
        read_export(export, rubric=RUBRIC)
    one_line(exc, str(export), "task 11", "one key twice")
    export.write_text(text[: len(text) // 2])
    with pytest.raises(LabelSetError) as exc:
        read_export(export, rubric=RUBRIC)
    one_line(exc, str(export), "not valid JSON")


def test_a_file_over_the_size_limit_is_refused_unparsed(sheet, tmp_path, monkeypatch):
    _, info, ids = sheet
    export = write_export(tmp_path / "export.json", export_of(ids, info.fingerprint))
    monkeypatch.setattr(label_studio, "MAX_LABEL_STUDIO_BYTES", 1000)
    with pytest.raises(LabelSetError) as exc:
        read_export(export, rubric=RUBRIC)
    one_line(exc, str(export), "larger than 1,000 bytes")


def test_a_task_without_its_case_id_or_a_case_twice_is_refused(sheet, tmp_path):
    def no_id(tasks):
        del tasks[2]["data"]["case_id"]

    _refused(tmp_path, sheet, no_id, "task 13", "no case_id")

    def twice(tasks):
        tasks[2]["data"]["case_id"] = tasks[0]["data"]["case_id"]

    _refused(tmp_path, sheet, twice, "task 13", "the same case as task 11")


# ------------------------------------------------------------------------------- writing


def test_a_sheet_exported_as_tasks_and_annotated_reads_back_as_the_sheet(sheet, tmp_path):
    folder, _, ids = sheet
    out = tmp_path / "study" / "ls"
    written = write_label_studio(folder, out)
    assert written.count == 6 and (written.tasks.stat().st_mode & 0o777) == 0o600
    assert (written.config.stat().st_mode & 0o777) == 0o600
    tasks = json.loads(written.tasks.read_text())
    assert [t["data"]["case_id"] for t in tasks] == ids
    config = ET.fromstring(written.config.read_text())
    names = {c.get("name") for c in config.iter("Choices")}
    assert names == {"accuracy", "clarity"}
    aliases = [c.get("alias") for c in config.find("Choices[@name='accuracy']")]
    assert aliases == ["1", "2", "3", "4", "5", "x"]
    texts = {t.get("name") for t in config.iter("Text")}
    assert texts == set(RUBRIC.inputs) and all(
        "$" + name in {t.get("value") for t in config.iter("Text")} for name in texts)
    # Label Studio imports the tasks (giving each an id) and its annotators label them.
    imported = []
    for n, t in enumerate(tasks):
        by_case = [(who, a, c) for who, case, a, c in LABELS if case == n]
        annotations = [annotation(200 + 10 * n + k,
                                  7 if who == ANA else {"id": 9, "email": BEN},
                                  [choice("accuracy", "x" if a is None else str(a)),
                                   choice("clarity", str(c))])
                       for k, (who, a, c) in enumerate(by_case)]
        imported.append(task(40 + n, t["data"], annotations))
    export = write_export(out / "project-83-at-2026-03-10.json", imported)
    save_through_journal(folder, ids)
    back = read_export(export, rubric=RUBRIC)
    assert back.ratings == read_sheet_labels(folder, rubric=RUBRIC).ratings
    assert back.rows == read_sheet_labels(folder, rubric=RUBRIC).rows


@pytest.mark.parametrize("blind", [True, False])
def test_the_tasks_and_config_are_as_blind_as_the_page(tmp_path, blind):
    folder = tmp_path / "sheet"
    make_single_sheet(folder, 5, blind=blind)  # review.jsonl holds the judge's cells
    assert MARKER in (folder / "review.jsonl").read_text()
    written = write_label_studio(folder, tmp_path / "ls")
    both = written.tasks.read_text() + written.config.read_text()
    for leak in (MARKER, str(EXPECTED), str(CONFIDENCE), "results.jsonl", "distribution",
                 "confidence", "expected", "reasoning\""):
        assert leak not in both, leak
    for t in json.loads(written.tasks.read_text()):
        assert set(t) == {"data"}
        assert set(t["data"]) == {"case_id", "sheet_fingerprint", *RUBRIC.inputs}


def test_the_config_escapes_the_rubric_text(tmp_path):
    rubric = RUBRIC.model_copy(update={"description": "x"})
    criteria = label_criteria(rubric, ["accuracy"])
    hostile = criteria[0].__class__(criteria[0].key, 'a "<b>" & </Choices><x/>', "scale",
                                    criteria[0].options)
    config = ET.fromstring(labelling_config(rubric, [hostile]))
    assert [h.get("value") for h in config.iter("Header")][-1] == \
        'accuracy: a "<b>" & </Choices><x/>'
    assert config.find("x") is None
    control = criteria[0].__class__(criteria[0].key, "1-5 \x01 5 = best", "scale",
                                    criteria[0].options)
    with pytest.raises(LabelError) as exc:  # ElementTree would write a file no parser reads
        labelling_config(rubric, [control])
    one_line(exc, "control character")


def test_the_cli_writes_refuses_to_overwrite_and_refuses_a_pairwise_sheet(sheet, tmp_path):
    folder, _, _ = sheet
    out = tmp_path / "ls"
    result = invoke("label", folder, "--label-studio", out)
    assert result.exit_code == 0, result.output
    assert "6 task(s)" in result.stdout and "--labels" in result.stdout
    assert SECRET not in result.output
    refused_in_one_line(invoke("label", folder, "--label-studio", out), SECRET,
                        "tasks.json exists", "--overwrite")
    assert invoke("label", folder, "--label-studio", out, "--overwrite").exit_code == 0
    refused_in_one_line(invoke("label", folder, "--label-studio", out, "--labeller", "ana"),
                        SECRET, "--labeller")
    refused_in_one_line(invoke("label", folder, "--overwrite", "--labeller", "ana"), SECRET,
                        "--overwrite goes with --label-studio")
    refused_in_one_line(invoke("label", folder), SECRET, "--labeller NAME")  # the page's rule
    pairwise = tmp_path / "pairwise"
    make_pairwise_sheet(pairwise)
    refused_in_one_line(invoke("label", pairwise, "--label-studio", tmp_path / "p"), SECRET,
                        "pairwise sheet")
    with pytest.raises(LabelError):
        write_label_studio(pairwise, tmp_path / "p")
