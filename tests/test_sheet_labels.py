"""``--labels SHEET_DIR`` (issue 37): agree, estimate and compare read a labelling sheet's
journal (the last label per labeller, case and criterion counts; "cannot judge" left out;
labels of another draw or rubric refused in one line), several labellers' labels of a case
become one by each command's rule (agree: one labeller drawn per case; estimate: their
mean; compare: their majority), the non-blind note, and agree's ceiling."""

from __future__ import annotations

import hashlib
import json

import pytest

pytest.importorskip("sklearn", reason="needs the stats extra")
pytest.importorskip("krippendorff", reason="needs the stats extra")
pytest.importorskip("pingouin", reason="needs the stats extra")

from click.testing import CliRunner

from evaluator.analysis.agreement.agreement import agreement
from evaluator.analysis.agreement.ceiling import ceiling
from evaluator.analysis.designs import random_draw
from evaluator.analysis.estimate.estimate import estimate
from evaluator.analysis.estimate.inputs import GATE_DRAW_SEED
from evaluator.analysis.gates import parse_gate
from evaluator.analysis.labels.sheet_reader import read_sheet_labels
from evaluator.analysis.labels.verdict_seen import VERDICT_SEEN
from evaluator.cli.main import cli
from evaluator.data.sheet import (
    JournalEntry,
    SheetInfo,
    append_label,
    now,
    read_sheet_info,
    write_sheet_info,
)
from evaluator.rubrics.load import load_rubric
from tests.conftest import label_source
from tests.label_world import SECRET, world, write_results, write_rows
from tests.pairwise_world import honest, run_judge
from tests.pairwise_world import write_records as write_pairs

RUBRIC_HASH = load_rubric("trial_eligibility").source_sha256
NOTE_START = VERDICT_SEEN.split("{")[0]


def make_sheet(folder, rows, *, blind=True, criteria=("accuracy",), kind="single",
               rubric="trial_eligibility", rubric_hash=RUBRIC_HASH, **who):
    """A sheet folder as `evaluator review` draws one: review.jsonl rows and sheet.json
    (its fingerprint: review.jsonl's SHA-256)."""
    folder.mkdir(parents=True, exist_ok=True)
    drawn = "".join(json.dumps(r) + "\n" for r in rows).encode()
    (folder / "review.jsonl").write_bytes(drawn)
    write_sheet_info(folder, SheetInfo(
        fingerprint=hashlib.sha256(drawn).hexdigest(), rubric=rubric, rubric_hash=rubric_hash, kind=kind,
        design=rows[0].get("design") or "random", blind=blind, criteria=list(criteria),
        results=[], created=now(), **who))
    return folder


def label(folder, labeller, case, value, criterion="accuracy", **kw):
    entry = {"sheet": read_sheet_info(folder).fingerprint, "rubric_hash": RUBRIC_HASH} | kw
    append_label(folder, JournalEntry(labeller=labeller, time=now(), case_id=case,
                                      criterion=criterion, value=value, **entry))


@pytest.fixture
def run(tmp_path):
    records, truth = world(200, seed=5)
    path = write_results(tmp_path / "results.jsonl", records)
    draw = random_draw([r.case_id for r in records], 80, seed=3)
    rows = [{"case_id": c, **draw.columns(c)} for c in draw.chosen]
    return path, records, truth, draw.chosen, rows


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def one_line_error(result, *phrases):
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.stderr
    for phrase in phrases:
        assert phrase in lines[0], lines[0]
    return lines[0]


def test_one_labeller_sheet_gives_the_figures_of_the_same_labels_as_a_worksheet(run, tmp_path):
    path, _, truth, chosen, rows = run
    sheet = make_sheet(tmp_path / "sheet", rows)
    for case in chosen[:60]:
        label(sheet, "ana", case, 2 if truth[case] == 1 else 1)  # changed: the last counts
        label(sheet, "ana", case, truth[case])
    label(sheet, "ana", chosen[60], None, cannot_judge="image missing")
    csv = write_rows(tmp_path / "review.csv",
                     [{**r, "accuracy.label": truth[r["case_id"]] if r["case_id"] in chosen[:60]
                       else ""} for r in rows])
    from_sheet = agreement(path, label_source(sheet, None), seed=1, resamples=200)
    from_csv = agreement(path, label_source(csv, "accuracy.label"), seed=1, resamples=200)
    assert from_sheet.criteria == from_csv.criteria
    assert from_sheet.joined == 60 and from_sheet.design["kind"] == "random"
    assert from_sheet.sheet.cannot_judge == 1
    assert any("cannot judge" in n for n in from_sheet.sheet.notes)
    assert from_sheet.ceiling == [] and from_sheet.verdict_seen is None
    for field in ("accuracy", "accuracy.label"):  # KEY or KEY.label
        assert agreement(path, label_source(sheet, field), resamples=200,
                         seed=1).criteria == from_csv.criteria


def test_several_labellers_agree_draws_one_labeller_per_case_and_says_so(run, tmp_path):
    path, _, truth, chosen, rows = run
    sheet = make_sheet(tmp_path / "sheet", rows)
    for case in chosen:
        label(sheet, "ana", case, truth[case])
        if case in chosen[:40]:  # overlap: ben labels 40 cases too, one point lower
            label(sheet, "ben", case, max(1, truth[case] - 1))
    report = agreement(path, label_source(sheet, None), seed=7, resamples=200)
    assert report.joined == 80  # each case once
    drawn = read_sheet_labels(sheet).combined("accuracy", "draw", 7)
    picked_ben = sum(1 for c in chosen[:40] if drawn[c] != truth[c] and truth[c] > 1)
    assert 5 < picked_ben < 35  # some cases get ben's label, some ana's
    csv = write_rows(tmp_path / "drawn.csv", [{"case_id": c, "accuracy.label": drawn[c]}
                                              for c in chosen])
    same = agreement(path, label_source(csv, "accuracy.label"), seed=7, resamples=200)
    assert report.criteria["accuracy"]["kappa_quadratic"] == \
        same.criteria["accuracy"]["kappa_quadratic"]
    assert "drawn at random per case (seed 7)" in report.sheet.rule
    assert [(r.labeller, r.n) for r in report.by_labeller["accuracy"]] == [("ana", 80),
                                                                           ("ben", 40)]
    text = invoke("agree", path, "--labels", sheet, "--resamples", 200).stdout
    assert "40 case(s) labelled by two or more" in text
    assert max(map(len, text.splitlines())) <= 80 and SECRET not in text


def test_the_ceiling_is_the_overlap_cases_figures_and_is_printed_for_a_decision(run, tmp_path):
    path, records, truth, chosen, rows = run
    sheet = make_sheet(tmp_path / "sheet", rows)
    overlap = chosen[:50]
    for i, case in enumerate(chosen):
        label(sheet, "ana", case, truth[case])
        if case in overlap:
            label(sheet, "ben", case, min(5, truth[case] + (i % 3 == 0)))
    report = agreement(path, label_source(sheet, "accuracy"), seed=3, resamples=300)
    [found] = report.ceiling
    judge = {r.case_id: r.scores["accuracy"] for r in records}
    expected = ceiling("accuracy", [judge[c] for c in sorted(overlap)],
                       [{"ana": truth[c], "ben": min(5, truth[c] + (chosen.index(c) % 3 == 0))}
                        for c in sorted(overlap)], scale=[1, 2, 3, 4, 5], resamples=300,
                       seed=3)
    assert found == expected and found.n == 50 and found.labellers == ["ana", "ben"]
    kappa = found.statistics["kappa_quadratic"]
    assert kappa.difference.value == pytest.approx(kappa.judge.value - kappa.clinicians.value)
    result = invoke("agree", path, "--labels", sheet, "--resamples", 300, "--seed", 3)
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "ceiling: 50 case(s) labelled by two or more of ana, ben" in text
    assert "judge vs clinicians kw" in text and "clinician vs clinician" in text
    assert "difference" in text and max(map(len, text.splitlines())) <= 80
    assert " ".join(found.reading.split()) in " ".join(text.split())
    assert "(on 50 overlap cases; below about 60" in " ".join(text.split())
    as_json = json.loads(invoke("agree", path, "--labels", sheet, "--resamples", 300,
                                "--seed", 3, "--json").stdout)
    assert as_json["ceiling"][0]["statistics"]["kappa_quadratic"]["difference"]["value"] == \
        pytest.approx(kappa.difference.value)


def test_a_ceiling_on_six_overlap_cases_shows_the_figures_and_decides_nothing(run, tmp_path):
    path, _, truth, chosen, rows = run
    sheet = make_sheet(tmp_path / "sheet", rows)
    for i, case in enumerate(chosen):
        label(sheet, "ana", case, truth[case])
        if i < 6:
            label(sheet, "ben", case, min(5, truth[case] + (i % 2)))
    result = invoke("agree", path, "--labels", sheet, "--resamples", 200)
    assert result.exit_code == 0, result.output
    flat = " ".join(result.stdout.split())
    assert "ceiling: 6 case(s)" in flat and "judge vs clinicians kw" in flat
    assert "too few overlap cases (6) to decide" in flat
    assert "about as well" not in flat and "agrees with a clinician" not in flat


def test_estimate_takes_the_mean_of_a_cases_labellers(run, tmp_path):
    path, _, truth, chosen, rows = run
    sheet = make_sheet(tmp_path / "sheet", rows)
    for case in chosen:
        label(sheet, "ana", case, truth[case])
        if case in chosen[:30]:
            label(sheet, "ben", case, 5)
    means = {c: (truth[c] + 5) / 2 if c in chosen[:30] else truth[c] for c in chosen}
    csv = write_rows(tmp_path / "means.csv", [{**r, "mean": means[r["case_id"]]} for r in rows])
    from_sheet = estimate([path], label_source(sheet, None))
    from_csv = estimate([path], label_source(csv, "mean"), criteria=["accuracy"])
    a, b = from_sheet.estimates[0], from_csv.estimates[0]
    assert a.ppi_estimate == pytest.approx(b.ppi_estimate) and a.ppi_ci == b.ppi_ci
    assert a.n_labelled == 80 and a.design == "random"
    notes = from_sheet.systems[0].notes
    assert any("the mean of its labellers' labels" in n for n in notes)
    # A mean of two labels is no value of the scale: not a scale note.
    assert from_sheet.scale_note is None
    result = invoke("estimate", path, "--labels", sheet)
    assert result.exit_code == 0, result.output
    # A gate's pass rate: one labeller's label drawn per case (0/1 kept).
    drawn = read_sheet_labels(sheet).combined("accuracy", "draw", GATE_DRAW_SEED)
    assert sum(drawn[c] == 5 and truth[c] != 5 for c in chosen[:30]) > 3
    csv = write_rows(tmp_path / "drawn.csv", [{**r, "drawn": drawn[r["case_id"]]}
                                              for r in rows])
    gate = [parse_gate("accuracy>=4")]
    gated = estimate([path], label_source(sheet, None), gates=gate).estimates[1]
    same = estimate([path], label_source(csv, "drawn"), criteria=["accuracy"],
                    gates=gate).estimates[1]
    assert gated.outcome == "pass rate" and gated.ppi_ci == same.ppi_ci


def test_estimate_asks_which_criterion_of_a_sheet_of_several(run, tmp_path):
    path, _, _, chosen, rows = run
    sheet = make_sheet(tmp_path / "sheet", rows, criteria=("accuracy", "clarity"))
    label(sheet, "ana", chosen[0], 3)
    one_line_error(invoke("estimate", path, "--labels", sheet), "rates accuracy, clarity",
                   "--label-field")


def test_labels_of_another_draw_or_rubric_are_refused_in_one_line(run, tmp_path):
    path, _, _, chosen, rows = run
    sheet = make_sheet(tmp_path / "sheet", rows)
    label(sheet, "ana", chosen[0], 3)
    label(sheet, "ana", chosen[1], 3, sheet="0" * 64)
    one_line_error(invoke("agree", path, "--labels", sheet), "line 2: saved on another draw")
    one_line_error(invoke("report", path, "--labels", sheet, "--html", tmp_path / "r.html"),
                   "line 2: saved on another draw")
    other = make_sheet(tmp_path / "other", rows)
    label(other, "ana", chosen[0], 3, rubric_hash="e" * 64)
    one_line_error(invoke("agree", path, "--labels", other), "another version of rubric")
    one_line_error(invoke("estimate", path, "--labels", other), "another version of rubric")
    off = make_sheet(tmp_path / "off", rows)
    label(off, "ana", chosen[0], 9)
    one_line_error(invoke("agree", path, "--labels", off),
                   "line 1: the value on 'accuracy' is not on its scale")
    edited = make_sheet(tmp_path / "edited", rows)
    label(edited, "ana", chosen[0], 3)
    with (edited / "review.jsonl").open("a") as handle:  # a row added by hand
        handle.write(json.dumps({**rows[0], "case_id": "case-0199"}) + "\n")
    one_line_error(invoke("agree", path, "--labels", edited), "review.jsonl was changed")


def test_labels_of_a_sheet_drawn_before_the_rubric_file_changed_are_read_with_a_note(
        run, tmp_path):
    """Results, sheet and labels all made with an earlier version of the rubric file (a new
    release, an edit): the labels are the sheet's, so they are read, and a note says the
    rubric file has changed since."""
    path, _, _, chosen, rows = run
    old = "d" * 64
    sheet = make_sheet(tmp_path / "sheet", rows, rubric_hash=old)
    for case in chosen[:40]:
        label(sheet, "ana", case, 3, rubric_hash=old)
    done = invoke("agree", path, "--labels", sheet)
    assert done.exit_code == 0, done.output
    assert "has changed since the sheet was drawn" in done.output


def test_hand_added_lines_for_an_unlisted_labeller_or_an_unassigned_case_are_refused(run,
                                                                                      tmp_path):
    path, _, truth, chosen, rows = run
    ana, ben = chosen[:50], chosen[40:]
    sheet = make_sheet(tmp_path / "sheet", rows, labellers=["ana", "ben"],
                       assignment={"ana": ana, "ben": ben})
    for case in ana:
        label(sheet, "ana", case, truth[case])
    for case in ben:
        label(sheet, "ben", case, truth[case])
    assert agreement(path, label_source(sheet, None), resamples=200).joined == 80
    journal = (sheet / "journal.jsonl").read_bytes()
    label(sheet, "eve", chosen[0], truth[chosen[0]], comment="SECRET-COMMENT")  # line 91
    line = one_line_error(invoke("agree", path, "--labels", sheet), "line 91",
                          "does not list")
    assert "eve" not in line and "SECRET" not in line and chosen[0] not in line
    (sheet / "journal.jsonl").write_bytes(journal)
    label(sheet, "ana", chosen[70], truth[chosen[70]])  # ben's case, not ana's: line 91
    line = one_line_error(invoke("agree", path, "--labels", sheet), "line 91",
                          "did not assign")
    assert chosen[70] not in line
    one_line_error(invoke("estimate", path, "--labels", sheet), "line 91")


def test_a_csv_still_needs_its_label_field_and_a_plain_folder_is_refused(run, tmp_path):
    path, *_ = run
    csv = write_rows(tmp_path / "l.csv", [{"case_id": "case-0000", "x": 3}])
    result = invoke("agree", path, "--labels", csv)
    assert result.exit_code == 2 and "--label-field" in result.output
    (tmp_path / "plain").mkdir()
    one_line_error(invoke("agree", path, "--labels", tmp_path / "plain", "--label-field", "x"),
                   "without a sheet.json")


def test_an_empty_worksheet_beside_a_journal_with_labels_points_to_the_sheet(run, tmp_path):
    path, _, truth, chosen, rows = run
    sheet = make_sheet(tmp_path / "sheet", rows)
    csv = write_rows(sheet / "review.csv", [{**r, "accuracy.label": ""} for r in rows])
    line = one_line_error(invoke("agree", path, "--labels", csv, "--label-field",
                                 "accuracy.label"), "no labels yet")
    assert "journal" not in line
    label(sheet, "ana", chosen[0], truth[chosen[0]])  # saved on the page: the CSV stays empty
    one_line_error(invoke("agree", path, "--labels", csv, "--label-field", "accuracy.label"),
                   "the labels are in the sheet's journal", f"give --labels {sheet}")


@pytest.mark.parametrize("blind, seen", [(True, False), (False, False), (True, True)])
def test_the_non_blind_note(run, tmp_path, blind, seen):
    path, _, truth, chosen, rows = run
    sheet = make_sheet(tmp_path / "sheet", rows, blind=blind)
    for case in chosen:
        label(sheet, "ana", case, truth[case], judge_seen=seen and case in chosen[:7])
    noted = not blind or seen
    for command in ("agree", "estimate"):
        result = invoke(command, path, "--labels", sheet)
        assert result.exit_code == 0, result.output
        flat = " ".join(result.stdout.split())  # the note is wrapped at 80 columns
        assert (NOTE_START in flat) == noted, (command, result.stdout)
        if seen:
            assert "7 label(s) were saved after the verdict was shown" in flat
    # The review.csv of a sheet that is not blind carries the note too.
    csv = write_rows(sheet / "review.csv", [{**r, "accuracy.label": truth[r["case_id"]]}
                                            for r in rows])
    for command in ("agree", "estimate"):
        result = invoke(command, path, "--labels", csv, "--label-field", "accuracy.label")
        assert result.exit_code == 0, result.output
        assert (NOTE_START in " ".join(result.stdout.split())) == (not blind)


@pytest.mark.parametrize("extra, noted", [
    ({}, False), ({"accuracy.score": 3}, True), ({"min_confidence": 0.6}, True),
    ({"design": "priority"}, True)])
def test_the_non_blind_note_for_a_labels_file_outside_its_sheet_folder(run, tmp_path, extra,
                                                                       noted):
    # The usual path: the worksheet mailed to a clinician and back, no sheet.json beside it.
    # A priority sheet's design, or any judge column a non-blind sheet shows, gives the note.
    path, _, truth, _, rows = run
    csv = write_rows(tmp_path / "back.csv", [{**r, **extra, "accuracy.label": truth[r["case_id"]]}
                                             for r in rows])
    commands = ("agree",) if "design" in extra else ("agree", "estimate")  # estimate: refused
    for command in commands:
        result = invoke(command, path, "--labels", csv, "--label-field", "accuracy.label",
                        "--criterion", "accuracy")
        assert result.exit_code == 0, result.output
        flat = " ".join(result.stdout.split())
        assert (NOTE_START in flat) == noted, (command, result.stdout)
        if noted:
            assert ("priority worksheet" if "design" in extra else next(iter(extra))) in flat


def test_compare_reads_a_pairwise_sheet_by_majority(tmp_path):
    records = run_judge(honest, 40, seed=4, criteria=("accuracy",))
    path = write_pairs(tmp_path / "ab.jsonl", records)
    pairs_hash = load_rubric("trial_eligibility_pairwise").source_sha256
    rows = [{"case_id": r.case_id} for r in records]
    sheet = make_sheet(tmp_path / "sheet", rows, kind="pairwise",
                       rubric="trial_eligibility_pairwise", rubric_hash=pairs_hash)
    truth = {r.case_id: ("tie" if r.scores["accuracy"] == "inconsistent"
                         else r.scores["accuracy"]) for r in records}
    flip = {"A": "B", "B": "A", "tie": "tie"}
    for i, r in enumerate(records):
        c = r.case_id
        values = {"ana": truth[c], "ben": truth[c], "cy": flip[truth[c]]}
        if i % 4 == 0:  # ana and ben differ, cy sides with neither: a tie between choices
            values = {"ana": "A", "ben": "B", "cy": "tie"}
        for name, value in values.items():
            label(sheet, name, c, value, rubric_hash=pairs_hash)
    majority = read_sheet_labels(sheet, pairwise=True).combined("accuracy", "majority")
    assert all(majority[r.case_id] == ("tie" if i % 4 == 0 else truth[r.case_id])
               for i, r in enumerate(records))
    result = invoke("compare", path, "--labels", sheet, "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["comparisons"][0]["labels"]["n"] == 40
    assert any("majority" in note for note in document["notes"])
    csv = write_rows(tmp_path / "m.csv", [{"case_id": c, "p": v} for c, v in majority.items()])
    same = json.loads(invoke("compare", path, "--labels", csv, "--label-field", "p",
                             "--json").stdout)
    assert document["comparisons"][0]["labels"] == same["comparisons"][0]["labels"]


def test_report_reads_every_criterion_of_a_sheet_without_label_field(run, tmp_path,
                                                                     monkeypatch):
    # docs/labelling.md: `evaluator report RESULTS --labels SHEET_DIR --html rep.html`.
    path, _, truth, chosen, rows = run
    sheet = make_sheet(tmp_path / "sheet", rows, criteria=("accuracy", "clarity"))
    for case in chosen:
        label(sheet, "ana", case, truth[case])
        label(sheet, "ana", case, truth[case], criterion="clarity")
    out = tmp_path / "rep.html"
    from evaluator.analysis.labels import sheet_reader

    reads = []
    real = sheet_reader.read_sheet_labels

    def counted(folder, **kwargs):
        reads.append(folder)
        return real(folder, **kwargs)

    monkeypatch.setattr(sheet_reader, "read_sheet_labels", counted)
    result = invoke("report", path, "--labels", sheet, "--html", out, "--resamples", 200)
    assert result.exit_code == 0, result.output
    # The sheet's labels are read once, for the agreement and both criteria's estimates.
    assert reads == [sheet]
    html = out.read_text()
    agreement_part = html[html.index('id="agreement"'):html.index('id="estimates"')]
    estimates_part = html[html.index('id="estimates"'):]
    for key in ("accuracy", "clarity"):
        assert f">{key}<" in agreement_part
        assert f'<td class="l">{key}</td>' in estimates_part
    assert "no clinician-level estimate" not in html
    # A labels file still needs its field.
    csv = write_rows(tmp_path / "l.csv", [{"case_id": c, "x": truth[c]} for c in chosen])
    refused = invoke("report", path, "--labels", csv, "--html", tmp_path / "r2.html")
    assert refused.exit_code == 2 and "--label-field" in refused.output


def test_the_html_report_shows_the_ceiling_beside_the_agreement(run, tmp_path):
    from markupsafe import escape

    from evaluator.report.build import build_report
    from evaluator.report.html import render_html

    path, _, truth, chosen, rows = run
    sheet = make_sheet(tmp_path / "sheet", rows, blind=False)
    for i, case in enumerate(chosen):
        label(sheet, "ana", case, truth[case])
        if i < 30:
            label(sheet, "ben", case, min(5, truth[case] + (i % 2)))
    report = build_report([path], labels=label_source(sheet, None), agreement_resamples=200)
    [item] = report.agreement.files
    [found] = item.result.ceiling
    html = render_html(report, plots=False)
    assert "The ceiling, #1" in html and "clinician vs clinician" in html
    kappa = found.statistics["kappa_quadratic"]
    for figure in (kappa.judge, kappa.clinicians, kappa.difference):
        assert f"{figure.value:.3f}".replace("-", "") in html
    assert "judge vs each labeller" in html and "Not blind" in html
    assert found.n == 30 and str(escape(found.reading)) in html
    assert "about as well as clinicians" not in html
    assert SECRET not in html


def _label_studio_export(folder, labels):
    """The labels ``labels`` ((labeller, case, value) on accuracy) as Label Studio's JSON
    export of the sheet ``folder``'s tasks (evaluator label --label-studio) gives them:
    one task per drawn case, an annotation per labeller, a choices result whose alias is
    the value; ben's as a rating result."""
    fingerprint = read_sheet_info(folder).fingerprint
    by_case: dict[str, list] = {}
    for n, (who, case, value) in enumerate(labels):
        result = ({"from_name": "accuracy", "to_name": "answer", "type": "rating",
                   "value": {"rating": value}} if who == "ben" else
                  {"from_name": "accuracy", "to_name": "answer", "type": "choices",
                   "value": {"choices": [str(value)]}})
        by_case.setdefault(case, []).append(
            {"id": 1000 + n, "completed_by": {"id": 3 if who == "ana" else 4, "email": who},
             "result": [result], "was_cancelled": False,
             "updated_at": "2026-03-09T22:16:08.728541Z"})
    rows = [json.loads(line) for line in (folder / "review.jsonl").read_text().splitlines()]
    tasks = [{"id": i, "data": {"case_id": row["case_id"], "sheet_fingerprint": fingerprint},
              "annotations": by_case.get(row["case_id"], []), "predictions": []}
             for i, row in enumerate(rows, start=1)]
    path = folder / "export.json"
    path.write_text(json.dumps(tasks), encoding="utf-8")
    return path


def test_a_label_studio_export_gives_the_figures_of_the_same_labels_on_the_sheet(run,
                                                                               tmp_path):
    """Two annotators in Label Studio (choices and rating results) give the agree and
    estimate figures the same labels give saved through the sheet's journal (issue 46)."""
    path, _, truth, chosen, rows = run
    sheet = make_sheet(tmp_path / "sheet", rows)
    given = [("ana", case, truth[case]) for case in chosen]
    given += [("ben", case, max(1, truth[case] - 1)) for case in chosen[:40]]
    for who, case, value in given:
        label(sheet, who, case, value)
    export = _label_studio_export(sheet, given)
    from_sheet = agreement(path, label_source(sheet, None), seed=7, resamples=200)
    from_export = agreement(path, label_source(export, None), seed=7, resamples=200)
    assert from_export.criteria == from_sheet.criteria
    assert from_export.joined == from_sheet.joined == 80
    assert from_export.design == from_sheet.design  # the sheet's design, intact
    assert from_export.ceiling == from_sheet.ceiling
    assert [(r.labeller, r.n) for r in from_export.by_labeller["accuracy"]] == [
        ("ana", 80), ("ben", 40)]
    a = estimate([path], label_source(sheet, None)).estimates
    b = estimate([path], label_source(export, None)).estimates
    assert [(r.ppi_estimate, r.ppi_ci, r.n_labelled) for r in a] == [
        (r.ppi_estimate, r.ppi_ci, r.n_labelled) for r in b]
    # Through the CLI, with no --label-field: the export names its criterion.
    for command in ("agree", "estimate"):
        by_sheet = invoke(command, path, "--labels", sheet, "--json")
        by_export = invoke(command, path, "--labels", export, "--json")
        assert by_sheet.exit_code == by_export.exit_code == 0, by_export.output
        assert (by_export.stdout.replace(str(export), "LABELS")
                == by_sheet.stdout.replace(str(sheet), "LABELS")
                .replace("the sheet LABELS", "the Label Studio export LABELS"))
