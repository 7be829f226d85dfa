"""The HTML report as a committee member meets it, in a real headless Chromium (the system
one, driven by Playwright): two synthetic systems with known true means (tests/report_world.py),
60 labels each from blind sheets two clinicians shared.

- On a 1,300-pixel-wide window the decision section lies within the first 1,200 pixels,
  with labels and without.
- Printed with Chromium's print-to-PDF (A4 and Letter), the decision section is the first
  page and only that page, and no table, row, paragraph, heading or plot is split by a page
  break (read from the tagged PDF's structure tree: tests/pdf_layout.py).
- The printed header carries the rubric, the judge, each results file's SHA-256 and the date.

With EVALUATOR_DOC_SCREENSHOTS=1 the tests also write the first-screen screenshots of
docs/reports.md (docs/images/report-*.png)."""

from __future__ import annotations

import hashlib
import re
from datetime import datetime, timezone
from pathlib import Path

import pytest

pytest.importorskip("numpy", reason="needs the stats extra")
pytest.importorskip("scipy", reason="needs the stats extra")
pytest.importorskip("matplotlib", reason="needs the report extra")
pytest.importorskip("pypdf", reason="needs the test extra (pypdf)")

from click.testing import CliRunner

from evaluator.cli.main import cli
from tests.label_browser import chromium, doc_screenshot, playwright_or_reason
from tests.pdf_layout import PdfLayout
from tests.report_world import SECRET, two_systems

SKIP = playwright_or_reason()[1]
pytestmark = pytest.mark.skipif(SKIP is not None, reason=SKIP or "")
WIDTH, FIRST_SCREEN = 1300, 1200
PAPER = ("A4", "Letter")


def _report(out: Path, results: list[Path], *labels: Path, field: str | None = None) -> Path:
    args = ["report", *map(str, results), "--html", str(out), "--resamples", "300"]
    args += ["--label-field", field] if field else []
    for path in labels:
        args += ["--labels", str(path)]
    run = CliRunner().invoke(cli, args)
    assert run.exit_code == 0, run.output
    return out


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """The world and its reports: with the sheets' labels, with labels CSVs, without."""
    folder = tmp_path_factory.mktemp("report-print")
    world = two_systems(folder / "world")
    results = [world["A"].results, world["B"].results]
    return {"world": world,
            "sheets": _report(folder / "sheets.html", results, world["A"].sheet,
                              world["B"].sheet),
            "csv": _report(folder / "csv.html", results, world["A"].labels_csv,
                           world["B"].labels_csv, field="accuracy.label"),
            "none": _report(folder / "none.html", results)}


@pytest.fixture(scope="module")
def three_criteria(tmp_path_factory):
    """The same two systems, their sheets rating all three of the rubric's criteria (what
    `evaluator review` rates by default)."""
    folder = tmp_path_factory.mktemp("report-print-3")
    world = two_systems(folder / "world", criteria=("hallucination", "accuracy", "clarity"))
    return _report(folder / "three.html", [world["A"].results, world["B"].results],
                   world["A"].sheet, world["B"].sheet)


@pytest.fixture(scope="module")
def three_criteria_few(tmp_path_factory):
    """Three criteria on 20-label sheets of which 2 cases were labelled by both clinicians:
    the longest first screen a review's defaults give (a warning for the few labels, a
    too-few-overlap line per criterion)."""
    folder = tmp_path_factory.mktemp("report-print-3-few")
    world = two_systems(folder / "world", criteria=("hallucination", "accuracy", "clarity"),
                        labelled=20, overlap=0.1)
    return _report(folder / "three-few.html", [world["A"].results, world["B"].results],
                   world["A"].sheet, world["B"].sheet)


@pytest.fixture(scope="module")
def browser():
    with chromium() as opened:
        yield opened


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": WIDTH, "height": FIRST_SCREEN})
    context.set_default_timeout(10_000)
    opened = context.new_page()
    requests: list[str] = []
    opened.on("request", lambda request: requests.append(request.url))
    yield opened
    # The page is one file: nothing but itself (and its data: plots) is ever requested.
    assert all(url.startswith(("file:", "data:")) for url in requests), requests
    context.close()


def _box(page, selector: str) -> dict:
    box = page.locator(selector).bounding_box()
    assert box is not None, f"{selector} is not shown"
    return box


@pytest.mark.parametrize("which", ["sheets", "csv", "none"])
def test_the_decision_section_is_on_the_first_screen(pages, page, which):
    page.goto(pages[which].as_uri())
    box = _box(page, "#decision")
    assert box["y"] + box["height"] <= FIRST_SCREEN, box
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH
    text = page.locator("#decision").inner_text()
    if which == "none":
        # Without labels: what the judge-only figures can and cannot tell, and the way to
        # clinician-level ones.
        assert "review" in text and "--design random" in text
        assert page.locator("#decision img").count() == 0
    else:
        assert page.locator("#decision img").count() >= 2  # the forest and difference plots
        assert "95% CI" in text
    assert SECRET not in page.content()
    if which != "csv":
        doc_screenshot(page, {"sheets": "report-decision", "none": "report-no-labels"}[which])


def test_the_first_screen_states_the_true_difference_with_a_ci_that_holds_it(pages, page):
    """The world's truth is known: B's answers are better by the difference of the true
    means. The page says B is higher, with a CI that holds that difference, and each
    system's clinician-level CI holds its true mean, while the judge alone is off (A's
    judge is biased +0.5: its mean lies outside A's CI)."""
    world = pages["world"]
    page.goto(pages["sheets"].as_uri())
    text = " ".join(page.locator("#decision").inner_text().split())
    true_a, true_b = world["A"].true_mean, world["B"].true_mean
    for criterion in ("accuracy", "clarity"):
        found = re.search(rf"mean {criterion} is (\d+\.\d+) higher for B \(#2\) than for "
                          rf"A \(#1\) \(95% CI (\d+\.\d+) to (\d+\.\d+) higher", text)
        assert found, text[:600]
        assert float(found[2]) <= true_b - true_a <= float(found[3]), (found[0], true_b - true_a)
        for name, truth in (("A (#1)", true_a), ("B (#2)", true_b)):
            level = re.search(rf"{re.escape(name)}: by clinicians' standard, mean {criterion} "
                              rf"is (\d+\.\d+) \(95% CI (\d+\.\d+) to (\d+\.\d+);", text)
            assert level and float(level[2]) <= truth <= float(level[3]), (name, truth)
        judge_a = re.search(rf"A \(#1\): by clinicians' standard, mean {criterion} is "
                            rf"[^)]*\)\. The judge alone says (\d+\.\d+)", text)
        assert judge_a and float(judge_a[1]) > true_a + 0.3


@pytest.mark.parametrize("paper", PAPER)
@pytest.mark.parametrize("which", ["sheets", "none"])
def test_printed_the_decision_is_one_page_and_nothing_is_split(pages, page, tmp_path, paper,
                                                                which):
    page.goto(pages[which].as_uri())
    pdf = tmp_path / f"{which}-{paper}.pdf"
    page.pdf(path=str(pdf), format=paper, tagged=True, print_background=True)
    layout = PdfLayout(pdf)
    assert layout.pages >= 3
    # The decision section is page 1 and all of page 1: each of its paragraphs, start and
    # end, is on page 1 and nowhere else, and page 2 holds the section that follows it.
    paragraphs = [line.strip() for line in page.locator("#decision").inner_text().splitlines()
                  if len(line.strip()) > 20]
    assert len(paragraphs) >= 4
    for text in paragraphs:
        for piece in (text[:50], text[-50:]):
            assert layout.page_of_text(piece) == [0], (piece, layout.texts[:2])
    after = page.evaluate(
        "document.querySelector('#decision').nextElementSibling.innerText").strip()
    assert 1 in layout.page_of_text(after.splitlines()[0]), layout.texts[1][:300]
    split = [(e.kind, e.alt, sorted(e.pages)) for e in layout.split()]
    assert not split, split
    # Folded sections print open: every section's body is on paper.
    for heading in ("Status breakdown", "Results files"):
        assert layout.page_of_text(heading), heading
    assert SECRET not in "".join(layout.texts)


def test_the_printed_header_names_rubric_judge_files_and_date(pages, page, tmp_path):
    world = pages["world"]
    page.goto(pages["sheets"].as_uri())
    pdf = tmp_path / "header.pdf"
    page.pdf(path=str(pdf), format="A4", tagged=True)
    first = " ".join(PdfLayout(pdf).texts[0].split())
    assert "trial_eligibility" in first and "hand" in first  # the rubric and the judge
    for system in world.values():
        digest = hashlib.sha256(system.results.read_bytes()).hexdigest()
        assert digest[:12] in first, (system.name, first[:400])
    assert datetime.now(timezone.utc).date().isoformat() in first  # the date it was made


# Three criteria (what `evaluator review` rates by default on trial_eligibility): page 1 of
# A4 holds the decision; Letter, 18 mm shorter, does not (docs/reports.md): there it runs on
# to page 2, and the next section still starts a page of its own.
@pytest.mark.parametrize(("paper", "decision_pages"), [("A4", {0}), ("Letter", {0, 1})])
def test_three_criteria_fit_page_1_of_a4_and_run_on_unsplit_on_letter(three_criteria, page,
                                                                      tmp_path, paper,
                                                                      decision_pages):
    page.goto(three_criteria.as_uri())
    pdf = tmp_path / f"three-{paper}.pdf"
    page.pdf(path=str(pdf), format=paper, tagged=True, print_background=True)
    layout = PdfLayout(pdf)
    lines = [line.strip() for line in page.locator("#decision").inner_text().splitlines()
             if len(line.strip()) > 20]
    pages = {p for text in lines for piece in (text[:50], text[-50:])
             for p in layout.page_of_text(piece)}
    assert pages == decision_pages, pages
    assert layout.page_of_text(lines[0][:50]) == [0]
    after = page.evaluate(
        "document.querySelector('#decision').nextElementSibling.innerText").strip()
    assert layout.page_of_text(after.splitlines()[0]) == [max(decision_pages) + 1]
    split = [(e.kind, e.alt, sorted(e.pages)) for e in layout.split()]
    assert not split, split


@pytest.mark.parametrize("which", ["three_criteria", "three_criteria_few"])
def test_three_criteria_fit_the_first_screen(request, page, which):
    """The docs promise the decision box within the first 1,200 pixels of a 1,300-pixel-wide
    window; with three criteria it ended at 1,229 (issue 45). Measured in Chromium: the
    box's bottom, and the two plots side by side (the difference plot right of the forest
    plot, its top level with it)."""
    page.goto(request.getfixturevalue(which).as_uri())
    box = _box(page, "#decision")
    assert box["y"] + box["height"] <= FIRST_SCREEN, box
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH
    forest, difference = _box(page, ".decision-forest img"), _box(page, ".decision-diff img")
    assert difference["x"] >= forest["x"] + forest["width"]
    assert abs(difference["y"] - forest["y"]) < 1
    if which == "three_criteria_few":
        text = page.locator("#decision").inner_text()
        assert text.count("too few overlap cases (2) for a ceiling") == 3
        # 20 labels per system are above the minimum for a system's figures and a paired
        # difference (issue 47): no warning about them.
        assert "20 labelled case(s): the 95% CIs" not in text
        assert "too few labels to decide" not in text


def test_the_terms_open_from_the_link_without_javascript(pages, browser):
    """The glossary is a closed <details> under the section; the section's link opens it
    (Chromium opens a closed <details> holding a link's target), with JavaScript off and
    the page's own CSP."""
    context = browser.new_context(viewport={"width": WIDTH, "height": FIRST_SCREEN},
                                  java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(pages["sheets"].as_uri())
        terms = page.locator("#decision-terms")
        assert terms.get_attribute("open") is None
        assert not page.locator("#decision-terms-list").is_visible()
        page.locator('#decision a[href="#decision-terms-list"]').click()
        page.wait_for_function("document.querySelector('#decision-terms').open")
        assert page.locator("#decision-terms-list").is_visible()
        assert "quadratic-weighted kappa" in page.locator("#decision-terms-list").inner_text()
    finally:
        context.close()
