"""Issue 47's 3-label world: two systems of 109 cases, B truly better, a random sheet of
``--n 3`` per system labelled through the journal. No direction and no p-value anywhere
(``estimate``'s text and ``--json``, the HTML report), "too few labels to decide" in their
place, the figures still shown; above the minimum the direction is still stated. And the
paired difference's line under the differences."""

from __future__ import annotations

import json
import re
from html import unescape

import pytest
from click.testing import CliRunner

pytest.importorskip("scipy", reason="needs the stats extra")
pytest.importorskip("matplotlib", reason="needs the report extra: pip install -e '.[report]'")

from evaluator.analysis.minimum import (
    MIN_LABELS_DIFFERENCE,
    MIN_LABELS_ESTIMATE,
    PAIRED_LINE,
    PAIRED_LINE_PLAIN,
)
from evaluator.cli.main import cli
from tests.report_world import two_systems

TOO_FEW = f"too few labels to decide: 3 labelled, at least {MIN_LABELS_DIFFERENCE} needed"
ENOUGH = max(30, MIN_LABELS_DIFFERENCE, MIN_LABELS_ESTIMATE)
DIRECTION = re.compile(r"\b(higher|lower|non-inferior)\b")


def _world(folder, labelled):
    world = two_systems(folder, n=109, labelled=labelled, overlap=0.0, criteria=("clarity",))
    args = [str(world["A"].results), str(world["B"].results), "--labels",
            str(world["A"].sheet), "--labels", str(world["B"].sheet)]
    return world, args


def _invoke(*args):
    run = CliRunner().invoke(cli, [str(a) for a in args])
    assert run.exit_code == 0, run.output
    return run.output


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    folder = tmp_path_factory.mktemp("three-labels")
    world, args = _world(folder / "world", 3)
    page = folder / "report.html"
    _invoke("report", *args, "--html", page)
    return {"text": _invoke("estimate", *args, "--criterion", "clarity"),
            "json": [json.loads(line) for line in
                     _invoke("estimate", *args, "--criterion", "clarity", "--json").splitlines()],
            "html": page.read_text(encoding="utf-8"), "world": world}


@pytest.fixture(scope="module")
def enough(tmp_path_factory):
    folder = tmp_path_factory.mktemp("enough-labels")
    _, args = _world(folder / "world", ENOUGH)
    page = folder / "report.html"
    _invoke("report", *args, "--html", page)
    return {"text": _invoke("estimate", *args, "--criterion", "clarity"),
            "json": [json.loads(line) for line in
                     _invoke("estimate", *args, "--criterion", "clarity", "--json").splitlines()],
            "html": page.read_text(encoding="utf-8")}


def _sentences(html: str, css: str) -> list[str]:
    return [_flat(unescape(re.sub(r"<[^>]+>", "", m)))
            for m in re.findall(rf'<li class="{css}">(.*?)</li>', html, re.DOTALL)]


def test_estimate_text_states_no_direction_and_no_p_value_from_three_labels(three):
    text = three["text"]
    differences = _flat(text[text.index("differences between systems"):])
    assert TOO_FEW in differences
    assert "p -" in differences and not re.search(r"p [<0-9]", differences)
    # The figures are still shown as figures: the difference and its interval.
    assert re.search(r"PPI\+\+ +-?\d+\.\d{3} +\[-?\d+\.\d{3}, -?\d+\.\d{3}\]", differences)
    # Each system's figures say it too, once, and the old warning is not said beside it.
    assert _flat(text).count(f"too few labels to decide: 3 labelled, at least "
                             f"{MIN_LABELS_ESTIMATE} needed (the figures are shown") == 2
    assert "WARNING: 3 labelled" not in text
    assert not DIRECTION.search(text)


def test_estimate_json_withholds_the_p_value_and_carries_the_words(three):
    rows = three["json"]
    (difference,) = [r for r in rows if r["type"] == "difference"]
    assert difference["p"] is None and difference["too_few"] == TOO_FEW
    assert difference["estimate"] is not None and difference["ci"] is not None
    assert difference["label_more"] is None and difference["label_more_text"] is None
    # The new keys come last: the existing keys keep their order.
    assert list(difference)[-4:] == ["lambda", "too_few", "label_more", "label_more_text"]
    estimates = [r for r in rows if r["type"] == "estimate"]
    assert len(estimates) == 2
    for row in estimates:
        assert row["too_few"].startswith("too few labels to decide: 3 labelled")
        assert row["ppi_estimate"] is not None and list(row)[-1] == "too_few"
        # Under the minimum, the judge's intervals are withheld; the labels' own is shown.
        assert row["ppi_ci"] is None and row["judge_bias_ci"] is None
        assert f"at least {MIN_LABELS_ESTIMATE} needed for a 95% interval" in row["ppi_method"]
        assert row["classical_ci"] is not None
    assert not DIRECTION.search(json.dumps(rows))


def test_the_report_states_no_direction_and_no_p_value_from_three_labels(three):
    html = three["html"]
    (difference,) = _sentences(html, "decision-difference")
    assert TOO_FEW in difference and not DIRECTION.search(difference), difference
    assert re.search(r"is -?\d+\.\d{3} \(95% CI -?\d+\.\d{3} to -?\d+\.\d{3}; paired, 3 "
                     r"labelled cases out of 109\)", difference), difference
    for sentence in _sentences(html, "decision-system"):
        assert "too few labels to decide: 3 labelled" in sentence
        # PPI++'s interval is withheld under the minimum: "is given", not "could be made".
        assert "but no interval is given" in sentence and "could be made" not in sentence
        assert not DIRECTION.search(sentence), sentence
        assert "no bias was detected" not in sentence
    # The differences table: the p cell is "-", the words beside it.
    table = html[html.index('id="estimate-differences"'):]
    table = table[:table.index("</table>")]
    cells = [_flat(unescape(re.sub(r"<[^>]+>", "", c)))
             for c in re.findall(r"<td[^>]*>(.*?)</td>", table, re.DOTALL)]
    assert cells[4] == "-" and TOO_FEW in cells[-1], cells
    # The old warning is gone from both places it was said.
    assert "3 labelled case(s): the 95% CIs" not in html


def test_above_the_minimum_the_direction_and_p_value_are_still_stated(enough):
    (difference,) = [r for r in enough["json"] if r["type"] == "difference"]
    assert difference["too_few"] is None and difference["p"] is not None
    assert difference["ci"][0] > 0  # B is truly better by about one point
    assert not any(r.get("too_few") for r in enough["json"])
    assert "too few labels" not in enough["text"]
    assert re.search(r"p (<1e-4|0\.\d+)", enough["text"])
    (sentence,) = _sentences(enough["html"], "decision-difference")
    assert re.match(r"By clinicians' standard, mean clarity is \d+\.\d{3} higher for B", sentence)


def test_a_paired_difference_is_said_to_be_its_own_estimate(three, enough):
    for world in (three, enough):
        assert _flat(PAIRED_LINE) in _flat(world["text"])
        (last,) = _sentences(world["html"], "decision-difference")
        assert last.endswith(PAIRED_LINE_PLAIN), last
        assert "need not equal the gap between the two systems' PPI++ values" in _flat(
            unescape(world["html"]))


def test_agree_gives_no_correlation_p_value_from_three_labels(three, tmp_path):
    """agree on 3 labelled cases: Spearman's and Kendall's p are withheld (scipy's
    Spearman p for 3 cases in perfect order is 0), the reason said once."""
    world = three["world"]
    args = [world["A"].results, "--labels", world["A"].sheet]
    shown = json.loads(_invoke("agree", *args, "--json"))
    stats = shown["criteria"]["clarity"]
    assert stats["spearman"]["p"] is None and stats["kendall_tau_b"]["p"] is None
    assert any("too few labels to decide: 3 labelled" in w for w in stats["warnings"])
    assert "too few labels to decide: 3 labelled" in _flat(_invoke("agree", *args))


def test_agree_gives_the_p_value_from_enough_labels(tmp_path):
    world, _ = _world(tmp_path / "world", MIN_LABELS_ESTIMATE)
    shown = json.loads(_invoke("agree", world["A"].results, "--labels", world["A"].sheet,
                               "--json"))
    stats = shown["criteria"]["clarity"]
    assert stats["spearman"]["p"] is not None
    assert not any("too few labels" in w for w in stats["warnings"])


def test_a_difference_of_means_stays_within_the_scales_span(three):
    """Clarity is on 1-5: B - A lies in [-4, 4], and so does its interval (3 labels gave
    [-3.4, 4.6] before), the clip said in the method."""
    rows = [r for r in three["json"] if r.get("type") == "difference"
            and r["criterion"] == "clarity"]
    assert rows
    for row in rows:
        assert -4 <= row["ci"][0] <= row["ci"][1] <= 4
        assert -4 <= row["estimate"] <= 4
    assert any("clipped to [-4, 4]" in row["method"] for row in rows)


def test_an_active_sheet_wider_than_a_random_one_says_so():
    """Issue 47: an active sheet never ends up wider than a random one of its size
    unsaid: worth fewer labels than were labelled gives the note; worth more, or a random
    sheet, none."""
    from types import SimpleNamespace

    from evaluator.analysis.estimate.estimate import active_wider_note

    active = SimpleNamespace(design=SimpleNamespace(kind="active"))
    row = SimpleNamespace(criterion="clarity", effective_labels=21.4, n_labelled=40)
    note = active_wider_note(active, row)
    assert note is not None and note.startswith("NOTE: on clarity, this active sheet's "
                                                "interval is as wide as 21 labels")
    assert "--design random" in note
    assert active_wider_note(active, SimpleNamespace(criterion="clarity",
                                                     effective_labels=55.0,
                                                     n_labelled=40)) is None
    assert active_wider_note(SimpleNamespace(design=SimpleNamespace(kind="random")),
                             row) is None
    assert active_wider_note(active, SimpleNamespace(criterion="clarity",
                                                     effective_labels=None,
                                                     n_labelled=12)) is None


def test_labels_on_another_scale_are_not_bounded_by_the_rubrics(tmp_path):
    """Labels on 0-100 (--label-scale) against a 1-5 rubric: neither a system's interval
    nor the difference is clipped to the rubric's span (that gave [20.557, 4.000])."""
    import csv

    world, _ = _world(tmp_path / "world", 40)
    labels = []
    for name in ("A", "B"):
        with open(world[name].labels_csv, newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
        for row in rows:
            if row["accuracy.label"]:
                row["accuracy.label"] = str(20 * int(float(row["accuracy.label"])))
        target = tmp_path / f"{name}.x20.csv"
        with open(target, "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        labels.append(target)
    shown = [json.loads(line) for line in _invoke(
        "estimate", world["A"].results, world["B"].results, "--labels", labels[0],
        "--labels", labels[1], "--label-field", "accuracy.label", "--label-scale", "0-100",
        "--criterion", "accuracy", "--json").splitlines()]
    for row in shown:
        for key in ("ci", "ppi_ci", "classical_ci"):
            if row.get(key):
                assert row[key][0] <= row[key][1], row
        assert "clipped to [-4, 4]" not in str(row.get("method"))
        assert "over the scale 1-5" not in str(row.get("ppi_method"))
    estimates = [r for r in shown if r.get("type") == "estimate"]
    assert all(r["classical_estimate"] > 20 for r in estimates)  # on 0-100, not cut at 5
