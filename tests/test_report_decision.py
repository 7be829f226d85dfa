"""The report's Decision section (issue 38 item 1): on synthetic systems with known true
means and random-design labels (paired), each sentence carries the numbers of the estimates
table's row it speaks for; a difference whose CI holds 0 is never called higher or lower; a
figure without an interval claims nothing; without labels the section says what the judge
alone can tell and how to get labels; the plots are greyscale; and no case text is in it."""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("scipy", reason="needs the stats extra")
pytest.importorskip("sklearn", reason="needs the stats extra")
pytest.importorskip("matplotlib", reason="needs the report extra: pip install -e '.[report]'")

from evaluator.analysis.designs import random_draw
from evaluator.analysis.estimate.records import DifferenceRow, EstimateRow
from evaluator.cli.main import cli
from evaluator.report.build import build_report
from evaluator.report.decision import WITHOUT_LABELS, build_decision, number
from evaluator.report.figures import ReportEstimates
from evaluator.report.html import render_html
from evaluator.rubrics.load import load_rubric
from tests.conftest import label_source, write_jsonl
from tests.label_world import SECRET, read_rows, world, write_results, write_rows
from tests.test_report import TRIAL_FIELDS, embedded_svgs, run_fake, table_rows, trial_verdict

N_CASES, N_LABELS, SEED = 300, 60, 7
SYSTEM_SENTENCE = re.compile(
    r"^(?P<name>\S+) \(#(?P<n>\d+)\): by clinicians' standard, mean (?P<criterion>\S+) is "
    r"(?P<ppi>-?\d+\.\d+) \(95% CI (?P<low>-?\d+\.\d+) to (?P<high>-?\d+\.\d+); "
    r"(?P<labelled>\d+) of (?P<cases>\d+) cases labelled\)\. The judge alone says "
    r"(?P<judge>-?\d+\.\d+)(?P<rest>.*)$")
DIFFERENCE_SENTENCE = re.compile(
    r"^By clinicians' standard, mean (?P<criterion>\S+) is (?P<size>\d+\.\d+) "
    r"(?P<way>higher|lower) for \S+ \(#(?P<b>\d+)\) than for \S+ \(#(?P<a>\d+)\) \(95% CI "
    r"(?P<near>\d+\.\d+) to (?P<far>\d+\.\d+) (?P=way); paired, (?P<labelled>\d+) labelled "
    r"cases out of (?P<cases>\d+)\)\.(?: Each difference is estimated case by case .*)?$")
NO_DIFFERENCE = re.compile(
    r"^No difference detected in mean (?P<criterion>\S+) between \S+ \(#(?P<b>\d+)\) and \S+ "
    r"\(#(?P<a>\d+)\): by clinicians' standard, the labels are consistent with anything from "
    r"(?P<span>.+) \(95% CI; paired, (?P<labelled>\d+) labelled cases out of (?P<cases>\d+)\)\."
    r"(?: (?P<more>.+))?$")


def _system(base: Path, name: str, seed: int, shift: int) -> tuple[Path, Path]:
    """A results file of ``N_CASES`` answers (the judge biased +0.5, the clinicians' true
    labels ``shift`` points up from the world's, capped at 5) and its random worksheet of
    ``N_LABELS`` cases drawn with ``SEED`` (the same cases for every system: paired),
    labelled with the true labels."""
    records, truth = world(N_CASES, seed=seed, bias=0.5, prefix="q")
    if shift:
        truth = {c: min(5, v + shift) for c, v in truth.items()}
        records = [r.model_copy(update={"scores": {
            **r.scores, **{k: min(5, r.scores[k] + shift)
                           for k in ("hallucination", "accuracy", "clarity")}}})
            for r in records]
    results = write_results(base / f"{name}.jsonl", records)
    draw = random_draw([r.case_id for r in records], N_LABELS, seed=SEED)
    sheet = write_rows(base / f"{name}.csv", [
        {"case_id": c, **draw.columns(c), "accuracy.label": truth[c]} for c in draw.chosen])
    return results, sheet


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    """Systems A and B with the same true mean, and C a point higher (1 is the cap)."""
    base = tmp_path_factory.mktemp("decision")
    made = [_system(base, "A", 1, 0), _system(base, "B", 2, 0), _system(base, "C", 3, 1)]
    results, sheets = [m[0] for m in made], [m[1] for m in made]
    report = build_report(results, labels=label_source(sheets, "accuracy.label"),
                          agreement_resamples=100, worst_n=0)
    return {"report": report, "html": render_html(report), "results": results,
            "sheets": sheets}


def section(html: str) -> str:
    found = re.findall(r'<section id="decision".*?</section>', html, re.DOTALL)
    assert len(found) == 1, "no Decision section"
    return found[0]


def items(html: str, css: str) -> list[str]:
    """The text of each ``<li class=css>`` of the Decision section, whitespace undone."""
    return [" ".join(unescape(re.sub(r"<[^>]+>", "", text)).split())
            for text in re.findall(rf'<li class="{css}">(.*?)</li>', section(html), re.DOTALL)]


def table_after(html: str, anchor: str) -> list[list[str]]:
    """The rows of the first table after the element with id ``anchor``."""
    start = html.index(f'id="{anchor}"')
    table = html[html.index("<table", start):html.index("</table>", start)]
    return table_rows(table)


def files_by_number(html: str) -> dict[str, str]:
    return {row[0]: row[1] for row in table_after(html, "files")[1:]}


def test_each_systems_sentence_has_its_estimate_rows_numbers(three):
    html = three["html"]
    labels = files_by_number(html)
    table = {(row[0], row[1]): row for row in table_after(html, "estimates")[1:]}
    sentences = items(html, "decision-system")
    assert len(sentences) == 3
    estimates = three["report"].estimates
    rows = {estimates.label(row.file): row for row in estimates.rows}
    for sentence in sentences:
        match = SYSTEM_SENTENCE.match(sentence)
        assert match, sentence
        label = labels[f"#{match['n']}"]
        assert Path(label.split(" · ")[1]).stem == match["name"]
        cells = table[(label, match["criterion"])]
        # file, criterion, N, labelled, judge only, CI, labels only, CI, PPI++, CI
        assert match["cases"] == cells[2] and match["labelled"] == cells[3]
        assert match["judge"] == cells[4]
        assert match["ppi"] == cells[8]
        assert f"[{match['low']}, {match['high']}]" == cells[9]
        # The judge's bias (not a column of the table) is the same row's figure, stated
        # with its CI on one side of 0: every judge here is biased +0.5.
        row = rows[label]
        low, high = sorted(abs(v) for v in row.judge_bias_ci)
        assert match["rest"] == (f"; on the {match['labelled']} labelled cases it scored "
                                 f"{number(row.judge_bias)} higher than the clinicians "
                                 f"on average (95% CI {number(low)} to {number(high)} "
                                 "higher).")


def test_a_clear_difference_is_stated_with_the_tables_numbers(three):
    html = three["html"]
    labels = files_by_number(html)
    table = {row[1]: row for row in table_after(html, "estimate-differences")[1:]}
    stated = [DIFFERENCE_SENTENCE.match(s) for s in items(html, "decision-difference")]
    stated = [m for m in stated if m]
    assert {(m["b"], m["a"]) for m in stated} == {("3", "1"), ("3", "2")}  # C vs A and B
    for match in stated:
        cells = table[f"{labels['#' + match['b']]} − {labels['#' + match['a']]}"]
        sign = "" if match["way"] == "higher" else "-"
        assert cells[2] == f"{sign}{match['size']}"
        low, high = (float(v) for v in cells[3].strip("[]").split(", "))
        assert sorted([number(abs(low)), number(abs(high))], key=float) == [
            match["near"], match["far"]]
        assert (low > 0) == (match["way"] == "higher") and low * high > 0
        assert match["labelled"] == str(N_LABELS) and match["cases"] == str(N_CASES)
    assert all(m["way"] == "higher" for m in stated)  # C's true mean is higher


def test_a_difference_whose_ci_holds_zero_is_no_difference_detected(three):
    html = three["html"]
    labels = files_by_number(html)
    table = {row[1]: row for row in table_after(html, "estimate-differences")[1:]}
    (sentence,) = [s for s in items(html, "decision-difference")
                   if s.startswith("No difference")]
    match = NO_DIFFERENCE.match(sentence)
    assert match and (match["b"], match["a"]) == ("2", "1"), sentence  # B and A: same truth
    cells = table[f"{labels['#2']} − {labels['#1']}"]
    low, high = (float(v) for v in cells[3].strip("[]").split(", "))
    assert low < 0 < high
    # The interval in words: its two ends, each with its own direction.
    assert match["span"] == (f"B (#2) {number(abs(low))} lower to {number(high)} higher")
    # Outside the interval's words, nothing says higher or lower.
    claim = sentence.replace(match["span"], "")
    assert not re.search(r"higher|lower", claim), claim
    (record,) = [d for d in three["report"].decision.differences if d.b_number == 2]
    assert record.finding == "no difference detected"
    # How many more labels would settle the sign: here more than the cases left.
    assert match["more"].startswith("Labelling every case left (240 more) would not be "
                                    "expected to settle the sign"), sentence


def test_the_forest_plot_and_differences_are_drawn_in_greys(three):
    decision = three["report"].decision
    (outcome,) = decision.outcomes
    assert outcome.scale == (1.0, 5.0) and "1 to 5" in outcome.scale_text
    assert [s.number for s in outcome.systems] == [1, 2, 3]
    images = re.findall(r'<img class="decision-plot"[^>]*src="([^"]+)"', section(three["html"]))
    assert len(images) == 2
    for svg in embedded_svgs(" ".join(images)):
        colours = set(re.findall(r"#([0-9a-fA-F]{6})\b", svg))
        assert colours, "no colour found in the SVG"
        assert all(c[0:2] == c[2:4] == c[4:6] for c in colours), colours
    # Each estimator's mark differs by shape and fill, not colour: an open circle (judge),
    # an open square (labels only) and a filled diamond (PPI++).
    svg = embedded_svgs(images[0])[0]
    assert svg.count('id="m') >= 3


def test_validity_and_what_the_figures_rest_on(three):
    decision = three["report"].decision
    (validity,) = decision.validity
    kappas = [f.result.criteria["accuracy"]["kappa_quadratic"]
              for f in three["report"].agreement.files]
    for index, kappa in enumerate(kappas, start=1):
        low, high = kappa["ci95"]
        assert (f"#{index}: {number(kappa['value'])} (95% CI {number(low)} to "
                f"{number(high)}, n = {N_LABELS})") in validity.line
    assert "no case labelled by two clinicians" in validity.line
    lines = "\n".join(decision.rests_on)
    assert f"random, {N_LABELS} of N = {N_CASES} cases drawn, seed {SEED}" in lines
    assert f"{N_LABELS} labelled cases of {N_CASES}" in lines
    assert "whether the labellers saw one elsewhere is not recorded" in lines
    assert SECRET not in section(three["html"])  # the judge's reasoning in the records


# What a hand-made row leaves out: an estimate row's and a difference's other fields (no
# method: the figure has none recorded).
_ROW = {"system": "-", "labels": "-", "design": "random", "n_drawn": None, "judge_method": "",
        "judge_bias": None, "judge_bias_ci": None, "judge_bias_method": "",
        "classical_method": "", "ppi_se": None, "lam": None, "ppi_method": "",
        "effective_labels": None}
_DIFFERENCE = {"a": "A", "b": "B", "note": "", "p": None, "method": "",
               "judge_difference": None, "judge_difference_ci": None,
               "judge_difference_method": "", "lam": None}


def _decision_of(differences, rows=()):
    """build_decision on hand-made estimate rows and differences of one criterion."""
    rubric = load_rubric("trial_eligibility")
    rows = list(rows) or [
        {"file": f, "criterion": "accuracy", "outcome": "mean", "n_labelled": 40,
         "n_cases": 400, "judge_mean": 3.5, "judge_ci": [3.4, 3.6],
         "classical_estimate": 3.1, "classical_ci": [2.9, 3.3], "ppi_estimate": 3.2,
         "ppi_ci": [3.0, 3.4], "judge_bias": 0.02, "judge_bias_ci": [-0.1, 0.14]}
        for f in ("a/A.jsonl", "b/B.jsonl")]
    differences = [{"criterion": "accuracy", "a_file": "a/A.jsonl", "b_file": "b/B.jsonl",
                    "mode": "paired", "n_labelled": 40, "n_cases": 400, **d}
                   for d in differences]
    estimates = ReportEstimates(
        rows=[EstimateRow(**{**_ROW, **row}) for row in rows],
        differences=[DifferenceRow(**{**_DIFFERENCE, **d}) for d in differences])
    return build_decision(rubric, ["a/A.jsonl", "b/B.jsonl"], estimates, None)


def test_no_interval_claims_nothing_and_an_end_at_zero_is_no_difference():
    decision = _decision_of([
        {"estimate": 0.0, "ci": None, "method": "PPI++; no interval: no variation"},
        {"estimate": 0.2, "ci": [0.0, 0.4]},
        {"estimate": -0.3, "ci": [-0.5, -0.1]},
        {"estimate": None, "ci": None, "method": "no case labelled for both"},
        {"estimate": 0.5, "ci": [0.2, 0.8], "mode": "independent", "n_labelled": None,
         "n_cases": None}])
    none, touching, lower, missing, independent = decision.differences
    assert none.finding == "no interval" and "nothing is claimed" in none.sentence
    assert not re.search(r"higher|lower", none.sentence)
    # Its reason is said once, under the sentences, marked in the sentence.
    assert "between B (#2) and A (#1)¹ (paired" in none.sentence
    assert decision.reasons[0] == ("¹ no variation: the difference in mean accuracy "
                                   "(B (#2) − A (#1)).")
    assert touching.finding == "no difference detected"
    assert "anything from no difference to B (#2) 0.400 higher" in touching.sentence
    assert lower.finding == "lower"
    assert "0.300 lower for B (#2) than for A (#1) (95% CI 0.100 to 0.500 lower" in \
        lower.sentence
    assert missing.finding == "no estimate" and "nothing is claimed" in missing.sentence
    assert decision.reasons[1].startswith("² no case labelled for both")
    assert independent.sentence.endswith(
        "(95% CI 0.200 to 0.800 higher; independent: each system's own labels, 40 of 400 and "
        "40 of 400 cases).")
    # The judge's bias of each system, its CI holding 0: no bias detected, not "too high".
    (outcome,) = decision.outcomes
    for system in outcome.systems:
        assert "no bias was detected" in system.sentence
        assert "0.020 higher" not in system.sentence
        assert ("its mean score is consistent with anything from 0.100 lower to 0.140 higher "
                "than the clinicians'") in system.sentence


def test_without_labels_the_first_screen_says_what_the_judge_alone_can_tell(three, tmp_path):
    report = build_report(three["results"][:2], worst_n=0)
    assert report.decision.labelled is False and not report.decision.outcomes
    html = render_html(report)
    text = " ".join(unescape(re.sub(r"<[^>]+>", " ", section(html))).split())
    for sentence in WITHOUT_LABELS:
        assert " ".join(sentence.split()) in text
    assert "bias is unknown" in text
    for command in ("evaluator review RESULTS --out SHEET_DIR --design random",
                    "evaluator label SHEET_DIR --labeller NAME",
                    "--labels SHEET_DIR"):
        assert command in text
    assert "<img" not in section(html) and "By clinicians' standard" not in text
    assert not items(html, "decision-system") and not items(html, "decision-difference")
    # The section comes before every other section of the page.
    assert html.index('id="decision"') < html.index('id="files"')


MARK = "PHI9c2d"


def test_no_case_text_in_the_decision_section_even_with_show_text(tmp_path):
    """The page holds case text with --show-text; the Decision section never does, nor a
    case id, nor the judge's reasoning."""
    rows = [{"case_id": f"patient-{i:02d}", **{field: f"{MARK}-{field}-{i}" for field in
                                              TRIAL_FIELDS}} for i in range(24)]
    results = []
    for name, lift in (("A", 0), ("B", 1)):
        outputs = [trial_verdict(min(5, 1 + i % 4 + lift), i, reasoning=f"{MARK}-why-{i}")
                   for i in range(len(rows))]
        results.append(run_fake(rows, tmp_path / name, f"judge-{name}", outputs))
    labels = [write_jsonl(tmp_path / f"{name}.jsonl", [
        {"case_id": r["case_id"], "accuracy.label": min(5, 1 + i % 4 + lift + (i % 3 == 0))}
        for i, r in enumerate(rows) if i % 2 == 0]) for name, lift in (("A", 0), ("B", 1))]
    report = build_report(results, labels=label_source(labels, "accuracy.label"),
                          agreement_resamples=100, worst_n=100, show_text=True)
    html = render_html(report)
    assert MARK in html  # the page has case text (--show-text) ...
    part = section(html)
    assert report.decision.labelled and "by clinicians' standard" in unescape(part).lower()
    assert MARK not in part and "patient-" not in part  # ... the Decision section none
    for svg in embedded_svgs(part):
        assert MARK not in svg and "patient-" not in svg
    assert MARK not in json.dumps(report.decision.to_json())
    # A plain labels file: whether the labellers saw the verdict is not recorded.
    assert any("not recorded whether the labellers saw the judge's verdict" in line
               for line in report.decision.rests_on)


def test_a_gates_pass_rate_is_drawn_from_0_to_1_and_said_as_a_pass_rate():
    rows = [{"file": f, "criterion": "accuracy >= 4", "outcome": "pass rate",
             "n_labelled": 40, "n_cases": 400, "judge_mean": 0.5, "judge_ci": [0.45, 0.55],
             "classical_estimate": 0.4, "classical_ci": [0.26, 0.56], "ppi_estimate": 0.45,
             "ppi_ci": [0.33, 0.57], "judge_bias": 0.1, "judge_bias_ci": [0.02, 0.18]}
            for f in ("a/A.jsonl", "b/B.jsonl")]
    decision = _decision_of([{"criterion": "accuracy >= 4", "estimate": 0.25,
                              "ci": [0.1, 0.4]}], rows)
    (outcome,) = decision.outcomes
    assert outcome.kind == "pass rate" and outcome.scale == (0.0, 1.0)
    assert outcome.systems[0].sentence.startswith(
        "A (#1): by clinicians' standard, the pass rate (accuracy >= 4) is 0.450 (95% CI "
        "0.330 to 0.570; 40 of 400 cases labelled). The judge alone says 0.500; "
        "on the 40 labelled cases it scored 0.100 higher than the clinicians on average (95% "
        "CI 0.020 to 0.180 higher).")
    (difference,) = decision.differences
    assert difference.kind == "pass rate" and difference.finding == "higher"
    assert difference.sentence.startswith(
        "By clinicians' standard, the pass rate (accuracy >= 4) is 0.250 higher for B (#2)")


def _no_tags(html: str) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def test_labels_that_give_no_estimate_are_not_called_no_labels(three, tmp_path):
    """Labels from a priority sheet (chosen for being hard) give no estimate: the first
    screen says why and that labels were given, never "No clinician labels were given"."""
    results = three["results"][0]
    run = CliRunner().invoke(cli, ["review", str(results), "--out", str(tmp_path / "p"),
                                   "--design", "priority", "--n", "20"])
    assert run.exit_code == 0, run.output
    rows = read_rows(tmp_path / "p" / "review.csv")
    for i, row in enumerate(rows):
        row["accuracy.label"] = str(1 + i % 5)
    labels = write_rows(tmp_path / "priority.csv", rows)
    report = build_report([results], labels=label_source([labels], "accuracy.label"),
                          agreement_resamples=100, worst_n=0)
    decision = report.decision
    assert not decision.labelled and "priority" in decision.notes[0]
    text = _no_tags(section(render_html(report)))
    assert "No clinician labels were given" not in text
    assert "Clinician labels were given, but no clinician-level figure could be made" in text
    assert text.index("priority") < text.index("Clinician labels were given")


def test_a_bias_without_an_interval_is_said_as_measured_on_the_labelled_cases():
    """Every judge - label difference the same (a judge always 4 above, or always equal):
    the bias was measured there, exactly; only an interval is missing."""
    why = ("judge - label on the labelled cases, t interval; no interval: no variation in "
           "the data (one label, or every value the same)")
    rows = [{"file": f, "criterion": "accuracy", "outcome": "mean", "n_labelled": 40,
             "n_cases": 400, "judge_mean": 5.0, "judge_ci": None, "classical_estimate": 1.0,
             "classical_ci": None, "ppi_estimate": 1.0, "ppi_ci": None,
             "judge_bias": bias, "judge_bias_ci": None, "judge_bias_method": why}
            for f, bias in (("a/A.jsonl", 4.0), ("b/B.jsonl", 0.0))]
    decision = _decision_of([], rows)
    (outcome,) = decision.outcomes
    four, zero = (s.sentence for s in outcome.systems)
    for sentence in (four, zero):
        assert "could not be measured" not in sentence
        assert "nothing is claimed beyond those cases" in sentence
        assert "no interval: no interval" not in sentence
    assert ("on the 40 labelled cases it scored 4.000 higher than the clinicians on average, "
            "but no interval could be made²: nothing is claimed") in four
    # The reason once, for both systems (¹ is the PPI++ figures' own, unrecorded here).
    assert decision.reasons[1] == (
        "² no variation in the data (one label, or every value the same): the judge's bias in "
        "mean accuracy (A (#1), B (#2)).")
    assert "on the 40 labelled cases it scored the same as the clinicians on average" in zero


def test_an_interval_whose_ends_both_print_as_zero_is_said_in_words():
    decision = _decision_of([{"estimate": 0.0001, "ci": [-0.0004, 0.0003]}], [
        {"file": f, "criterion": "accuracy", "outcome": "mean", "n_labelled": 40,
         "n_cases": 400, "judge_mean": 3.5, "judge_ci": [3.4, 3.6],
         "classical_estimate": 3.1, "classical_ci": [2.9, 3.3], "ppi_estimate": 3.2,
         "ppi_ci": [3.0, 3.4], "judge_bias": 0.0001, "judge_bias_ci": [-0.0004, 0.0004]}
        for f in ("a/A.jsonl", "b/B.jsonl")])
    (difference,) = decision.differences
    assert difference.finding == "no difference detected"
    assert "no difference to no difference" not in difference.sentence
    assert "consistent with a difference of less than 0.001 either way" in difference.sentence
    system = decision.outcomes[0].systems[0].sentence
    assert "no difference to no difference" not in system
    assert "its mean score is within less than 0.001 of the clinicians'" in system


def test_validity_in_expected_mode_says_not_applicable_once(three):
    report = build_report(three["results"][:1],
                          labels=label_source([three["sheets"][0]], "accuracy.label"),
                          agreement_resamples=100, worst_n=0, score_mode="expected")
    (validity,) = report.decision.validity
    assert "not applicable to expected scores" in validity.line
    assert "not applicable (not applicable" not in validity.line
    # In kappa's place, the agreement figure that applies to expected scores: the ICC the
    # agreement table shows, with its CI.
    [item] = report.agreement.files
    icc = item.result.criteria["accuracy"]["icc_a1"]
    assert (f"ICC(A,1) {number(icc['value'])} (95% CI {number(icc['ci95'][0])} to "
            f"{number(icc['ci95'][1])}, n = ") in validity.line


def test_with_common_cases_the_page_says_the_estimates_use_each_files_own_cases(three,
                                                                               tmp_path):
    """--common-cases narrows the page's statistics, not PPI++'s population: the banner
    says so, and the Decision's n is each file's own."""
    first, second = three["results"][:2]
    lines = second.read_text().splitlines()
    fewer = tmp_path / "B-fewer.jsonl"
    fewer.write_text("".join(line + "\n" for line in lines[30:]))
    # Plain labels files (no design columns): B's file is not the one its sheet was drawn
    # from. B's labels of the cases it lacks are dropped.
    kept = {json.loads(line)["case_id"] for line in lines[30:]}
    labels = [write_rows(tmp_path / f"{name}.csv", [
        {"case_id": r["case_id"], "accuracy.label": r["accuracy.label"]}
        for r in read_rows(sheet) if name == "A" or r["case_id"] in kept])
        for name, sheet in (("A", three["sheets"][0]), ("B", three["sheets"][1]))]
    report = build_report([first, fewer], labels=label_source(labels, "accuracy.label"),
                          agreement_resamples=100, worst_n=0, common_cases=True)
    assert report.common_cases.n == N_CASES - 30
    (outcome,) = report.decision.outcomes
    assert [s.n_cases for s in outcome.systems] == [N_CASES, N_CASES - 30]
    text = _no_tags(render_html(report, plots=False))
    assert "The clinician-level figures (the Decision and the clinician-level estimates) do " \
           "not: each uses its file's own cases judged ok" in text


def test_three_criteria_are_drawn_in_one_row_of_panels():
    """A rubric's three criteria side by side (not two rows with a hole): the plots stay as
    tall as one criterion's, so the decision keeps its page where it can."""
    from evaluator.report.decision_plots import difference_plot, forest_plot

    def outcome(criterion):
        figure = {"value": 3.0, "ci95": [2.8, 3.2]}
        return {"criterion": criterion, "kind": "mean", "scale": (1.0, 5.0),
                "scale_text": f"{criterion}'s scale, 1 to 5",
                "systems": [{"number": n, "judge": figure, "labels_only": figure,
                             "ppi": figure} for n in (1, 2)]}

    def difference(criterion):
        return {"criterion": criterion, "kind": "mean", "a_number": 1, "b_number": 2,
                "difference": {"value": 0.3, "ci95": [0.1, 0.5]}}

    def height(uri):
        return re.search(r'<svg[^>]*\bheight="([\d.]+)pt"', embedded_svgs(uri)[0])[1]

    one, three_ = ["accuracy"], ["hallucination", "accuracy", "clarity"]
    assert height(forest_plot([outcome(c) for c in three_])) == \
        height(forest_plot([outcome(c) for c in one]))
    assert height(difference_plot([difference(c) for c in three_])) == \
        height(difference_plot([difference(c) for c in one]))


def test_labels_counted_per_criterion_when_the_criteria_were_labelled_to_different_extents(
        tmp_path):
    """A sheet's criteria labelled to different extents ("cannot judge" on some cases of
    one): what the figures rest on gives each criterion's count, as its sentences do."""
    from evaluator.data.sheet import JournalEntry, append_label, now, read_sheet_info
    from tests.report_world import two_systems

    world = two_systems(tmp_path / "w", n=200, labelled=40)
    sheet = world["A"].sheet
    info = read_sheet_info(sheet)
    for case in sorted(info.assignment["ana"])[:7]:  # ana changes her mind: cannot judge
        append_label(sheet, JournalEntry(
            labeller="ana", time=now(), case_id=case, criterion="clarity", value=None,
            cannot_judge="not enough information", sheet=info.fingerprint,
            rubric_hash=load_rubric(info.rubric).source_sha256))
    report = build_report([world["A"].results], labels=label_source(sheet, None),
                          agreement_resamples=200)
    rows = {r.criterion: r.n_labelled for r in report.estimates.rows}
    assert rows["accuracy"] == 40 and rows["clarity"] < 40
    [labels] = [line for line in report.decision.rests_on if line.startswith("Labels:")]
    assert f"accuracy 40, clarity {rows['clarity']} labelled cases of 200" in labels


# Issue 45, item 6: the decision page's rough edges.


def test_too_few_overlap_cases_are_said_as_such_not_as_none(tmp_path):
    """Two cases labelled by both clinicians are fewer than a ceiling needs (agree makes none
    under MIN_OVERLAP): the line says so, not that no case was labelled by two."""
    from evaluator.analysis.agreement.agreement import MIN_OVERLAP
    from tests.report_world import two_systems

    world = two_systems(tmp_path / "w", n=200, labelled=20, overlap=0.1)
    report = build_report([world["A"].results, world["B"].results],
                          labels=label_source([world["A"].sheet, world["B"].sheet], None),
                          agreement_resamples=100, worst_n=0)
    assert MIN_OVERLAP > 2
    for validity in report.decision.validity:
        assert "no case labelled by two clinicians" not in validity.line
        assert validity.line.endswith(
            f"; clinicians vs each other: too few overlap cases (2) for a ceiling (it needs "
            f"{MIN_OVERLAP}).")
    assert "too few overlap cases (2) for a ceiling" in _no_tags(section(render_html(
        report, plots=False)))
    # The count comes from agree's own record of the sheet, per criterion.
    assert [item.result.sheet.overlap for item in report.agreement.files] == [
        {"accuracy": 2, "clarity": 2}] * 2


def _constant_judge(tmp_path: Path, labelled: int, label=None) -> list[Path]:
    """Two systems (A, B: results file and labels CSV each, in that order) whose judge
    gives accuracy 4 on every case, ``labelled`` cases of each on a random sheet (paired),
    labelled ``label`` (None: the world's true label)."""
    paths = []
    for name, seed in (("A", 1), ("B", 2)):
        records, truth = world(100, seed=seed, prefix="q")
        records = [r.model_copy(update={"scores": {**r.scores, "accuracy": 4}})
                   for r in records]
        results = write_results(tmp_path / f"{name}.jsonl", records)
        draw = random_draw([r.case_id for r in records], labelled, seed=3)
        paths += [results, write_rows(tmp_path / f"{name}.csv", [
            {"case_id": c, **draw.columns(c),
             "accuracy.label": truth[c] if label is None else label} for c in draw.chosen])]
    return paths


def _one_value(tmp_path: Path) -> list[Path]:
    """Two systems whose judge gives accuracy 4 on every case and whose 20 labels are all 3
    (random sheets, paired): every figure of accuracy is a point, for the same reason."""
    return _constant_judge(tmp_path, 20, label=3)


def test_a_reason_and_a_warning_are_each_said_once_naming_what_they_are_about(tmp_path):
    """"no variation in the data" was said five times on the page, and the fewer-than-30-
    labels warning twice without saying whose: each is said once now, naming the figures
    and the systems (results files) it is about."""
    a, a_labels, b, b_labels = _one_value(tmp_path)
    html_path = tmp_path / "page.html"
    run = CliRunner().invoke(cli, ["report", str(a), str(b), "--labels", str(a_labels),
                                   "--labels", str(b_labels), "--label-field",
                                   "accuracy.label", "--resamples", "200", "--html",
                                   str(html_path)])
    assert run.exit_code == 0, run.output
    # Nothing on stderr but the line saying where the page is.
    assert run.stderr.splitlines() == [f"report: {html_path}"]
    html = html_path.read_text()
    assert html.count("no variation in the data") == 1
    text = _no_tags(section(html))
    assert ("¹ no variation in the data (one label, or every value the same): the difference "
            "in mean accuracy (B (#2) − A (#1)); mean accuracy by clinicians' standard "
            "(A (#1), B (#2)); the judge's bias in mean accuracy (A (#1), B (#2)).") in text
    # Each figure's sentence carries the reason's mark.
    assert all("no interval could be made¹" in s for s in items(html, "decision-system"))
    assert "between B (#2) and A (#1)¹" in items(html, "decision-difference")[0]
    # 20 labels per system are above the minimum for a system's figures (issue 47): no warning
    # about them any more (a difference's own sentence says whether its pairs are enough).
    assert re.findall(r"Warning[^:]*: 20 labelled case\(s\)", text) == []


def test_an_interval_past_the_scale_is_clipped_there_and_the_clip_marked():
    """A judge-only normal-approximation CI below the scale's minimum: the axis stays the
    rubric's scale (not widened for an interval's end), the interval is cut at 1 and an
    arrowhead marks the cut."""
    from evaluator.report.decision_plots import clip_interval, forest_figure, forest_plot

    rows = [{"file": f, "criterion": "accuracy", "outcome": "mean", "n_labelled": 40,
             "n_cases": 400, "judge_mean": 1.2, "judge_ci": [0.7, 1.7],
             "classical_estimate": 1.5, "classical_ci": [1.1, 1.9], "ppi_estimate": 1.4,
             "ppi_ci": [1.0, 1.8], "judge_bias": -0.2, "judge_bias_ci": [-0.4, 0.0]}
            for f in ("a/A.jsonl", "b/B.jsonl")]
    (outcome,) = _decision_of([{"estimate": 0.1, "ci": [-0.2, 0.4]}], rows).outcomes
    assert outcome.scale == (1.0, 5.0) and "widened" not in outcome.scale_text
    assert clip_interval([0.7, 1.7], 1.0, 5.0) == (1.0, 1.7, True, False)
    data = [outcome.model_dump()]
    svg = embedded_svgs(forest_plot(data))[0]
    assert svg.count('id="clipped-low"') == 2 and 'id="clipped-high"' not in svg
    (axes,) = forest_figure(data).axes
    low, high = axes.get_xlim()
    assert 0.8 < low < 1.0 and 5.0 < high < 5.2
    assert "arrowhead: CI clipped" in axes.get_xlabel()


def test_a_difference_without_an_interval_gets_an_axis_scaled_to_its_criterion():
    """A file and its copy: every per-case difference 0, no interval. The axis was -0.001 to
    0.001; it now reaches a tenth of the criterion's span either side (0.4 on 1 to 5), the
    point is at 0 with "no interval" beside it."""
    from evaluator.report.decision_plots import (
        MIN_REACH,
        difference_figure,
        difference_plot,
        difference_reach,
    )

    decision = _decision_of([{"estimate": 0.0, "ci": None,
                              "method": "PPI++; no interval: no variation"}])
    (difference,) = decision.differences
    data = [{**difference.model_dump(), "scale": (1.0, 5.0)}]
    assert difference_reach(data, 4.0) == pytest.approx(MIN_REACH * 4.0)
    (axes,) = difference_figure(data).axes
    low, high = axes.get_xlim()
    assert low == pytest.approx(-high) and 0.4 <= high < 0.5
    assert 'id="no-interval"' in embedded_svgs(difference_plot(data))[0]
    # The decision hands the plot its criterion's scale.
    assert difference.scale == (1.0, 5.0)
    # A pass rate's difference reaches at most 1 either side, however wide its CI.
    wide = [{"criterion": "accuracy >= 4", "kind": "pass rate", "scale": (0.0, 1.0),
             "a_number": 1, "b_number": 2, "difference": {"value": 0.5, "ci95": [-0.2, 1.3]}}]
    assert difference_reach(wide, 1.0) == 1.0
    assert 'id="clipped-high"' in embedded_svgs(difference_plot(wide))[0]


def _texts(figure) -> list[tuple[str, object]]:
    """Every caption, title, tick and row label and note drawn on ``figure``, with its
    extent in the drawn figure (a tick outside its axis's view is not drawn)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    renderer = canvas.get_renderer()
    found = list(figure.texts)
    for axes in figure.axes:
        if not axes.axison:
            continue
        found += [axes.title, axes.xaxis.label, axes.yaxis.label, *axes.texts]
        (x0, x1), (y0, y1) = sorted(axes.get_xlim()), sorted(axes.get_ylim())
        found += [t for t in axes.get_xticklabels() if x0 <= t.get_position()[0] <= x1]
        found += [t for t in axes.get_yticklabels() if y0 <= t.get_position()[1] <= y1]
    return [(t.get_text(), t.get_window_extent(renderer)) for t in dict.fromkeys(found)
            if t.get_visible() and t.get_text().strip()]


def test_no_caption_of_the_decision_plots_runs_into_another():
    """Three criteria side by side with the longest captions the section writes (labels on
    another scale: the axis widened; intervals clipped): no two texts of a plot overlap."""
    from itertools import combinations

    from evaluator.report.decision_plots import difference_figure, forest_figure

    criteria = ("hallucination", "accuracy", "clarity")
    wide = {"value": 3.0, "ci95": [0.6, 5.6]}
    outcomes = [{"criterion": c, "kind": "mean", "scale": (1.0, 5.0),
                 "scale_text": f"{c}'s scale, 1 to 5; widened to hold every estimate",
                 "systems": [{"number": n, "judge": wide, "labels_only": wide, "ppi": wide}
                             for n in (1, 2)]} for c in criteria]
    differences = [{"criterion": c, "kind": "mean", "scale": (1.0, 5.0), "a_number": 1,
                    "b_number": 2, "difference": figure}
                   for c in criteria for figure in ({"value": 0.0, "ci95": None},)]
    differences += [{"criterion": "accuracy >= 4", "kind": "pass rate", "scale": (0.0, 1.0),
                     "a_number": 1, "b_number": 2,
                     "difference": {"value": 0.5, "ci95": [-0.2, 1.3]}}]
    for figure in (forest_figure(outcomes), difference_figure(differences),
                   difference_figure(differences[:3])):
        texts = _texts(figure)
        assert len(texts) > 10
        clash = [(a, b) for (a, box_a), (b, box_b) in combinations(texts, 2)
                 if box_a.overlaps(box_b)]
        assert not clash, clash


def test_the_terms_are_explained_once_folded_and_page_1_speaks_plainly(three):
    """Page 1's jargon (PPI++, κw, λ, "a point is not a 95% CI, so this claims nothing"):
    the sentences speak plainly, each plot has one plain caption, and each term is explained
    once, in a folded glossary under the section that works without JavaScript."""
    html = three["html"]
    part = section(html)
    sentences = items(html, "decision-system") + items(html, "decision-difference")
    for sentence in sentences:
        assert "PPI++" not in sentence and "λ" not in sentence
    text = _no_tags(part)
    assert "λ" not in text and "a point is not" not in text
    assert "quadratic-weighted" not in text  # explained in the glossary, not here
    captions = re.findall(r"<figcaption>(.*?)</figcaption>", part, re.DOTALL)
    assert len(captions) == 2
    for caption in captions:
        assert _no_tags(caption).count(". ") == 0 and _no_tags(caption).endswith(".")
    # The glossary: right after the section, closed, each term once.
    after = html[html.index("</section>", html.index('id="decision"')):]
    glossary = re.search(r'<details class="decision-terms" id="decision-terms">(.*?)'
                         r"</details>", after, re.DOTALL)
    assert glossary and after.index("<details") < after.index('id="files"')
    terms = [_no_tags(t) for t in re.findall(r"<dt>(.*?)</dt>", glossary[1], re.DOTALL)]
    for term in ("PPI++", "95% CI", "κw", "λ", "no interval", "the judge's bias",
                 "overlap cases", "paired"):
        assert sum(term in t for t in terms) == 1, (term, terms)
    assert html.count("quadratic-weighted kappa") == 1
    # The section links to the terms (a link into a closed <details> opens it: no script).
    assert 'href="#decision-terms-list"' in part and 'id="decision-terms-list"' in glossary[1]
    assert "<script" not in html.lower()


def test_an_undecided_sign_says_how_many_more_labels_would_settle_it_and_few_say_so():
    """Issue 47: "label about N more" ends a no-difference sentence; under the minimum the
    sentence gives the figures and "too few labels to decide", no direction."""
    more = ("label about 120 more cases (per system, paired) to settle the sign, with 80% "
            "chance if the difference and spread stay as seen")
    few = "too few labels to decide: 4 labelled, at least 10 needed"
    decision = _decision_of([
        {"estimate": 0.1, "ci": [-0.05, 0.25], "label_more": 120, "label_more_text": more},
        {"estimate": 0.6, "ci": [0.2, 1.0], "n_labelled": 4, "too_few": few}])
    undecided, too_few = decision.differences
    assert undecided.sentence.endswith(" Label about 120 more cases (per system, paired) to "
                                       "settle the sign, with 80% chance if the difference "
                                       "and spread stay as seen.")
    assert too_few.finding == "too few labels"
    assert too_few.sentence == ("The difference in mean accuracy, B (#2) − A (#1), is 0.600 "
                                "(95% CI 0.200 to 1.000; paired, 4 labelled cases out of "
                                f"400): {few}.")
    assert decision.paired_line is not None


def test_a_constant_judge_is_said_to_add_nothing_the_figure_is_the_labels(tmp_path):
    """Issue 48 item 4: a judge giving accuracy 4 on every case adds nothing to the
    clinician-level figure (lambda 0): its sentence says the figure is the labels alone,
    not the judge corrected; a judge that does add (the three systems' world) is not."""
    paths = _constant_judge(tmp_path, 30)
    report = build_report([paths[0], paths[2]],
                          labels=label_source([paths[1], paths[3]], "accuracy.label"),
                          agreement_resamples=100, worst_n=0)
    sentences = [s.sentence for o in report.decision.outcomes for s in o.systems]
    assert len(sentences) == 2
    for sentence in sentences:
        assert ("30 of 100 cases labelled; the labels alone: the judge's scores added "
                "nothing (weight lambda 0)") in sentence, sentence


def test_a_judge_that_adds_is_not_said_to_add_nothing(three):
    sentences = [s.sentence for o in three["report"].decision.outcomes for s in o.systems]
    assert sentences and not any("the labels alone" in s for s in sentences)
