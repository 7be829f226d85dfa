"""The labelling page in a real headless Chromium (the system one, driven by Playwright):
a clinician labels 10 cases with the keyboard alone, a reload half-way resumes, a SIGKILLed
server restarted loses and duplicates nothing, two labellers label at once, a hostile case
renders as text. With EVALUATOR_DOC_SCREENSHOTS=1 the tests also write the screenshots of
docs/labelling.md (docs/images/labelling-*.png)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from evaluator.data.sheet import latest_labels, read_journal
from tests.label_browser import Server, chromium, doc_screenshot, playwright_or_reason
from tests.label_sheets import (
    ALL_TRIAL_CRITERIA,
    IMG,
    SCRIPT,
    longest_trial_rows,
    make_pairwise_sheet,
    make_single_sheet,
)

SKIP = playwright_or_reason()[1]
pytestmark = pytest.mark.skipif(SKIP is not None, reason=SKIP or "")


@pytest.fixture(scope="module")
def browser():
    with chromium() as opened:
        yield opened


@pytest.fixture
def context(browser):
    ctx = browser.new_context(viewport={"width": 1200, "height": 900})
    yield ctx
    ctx.close()


def _key_label(page, keys: str, expect_index: int | None) -> None:
    """Type a value key per criterion, then Enter; wait for the next page."""
    for key in keys:
        page.keyboard.press(key)
    with page.expect_navigation():
        page.keyboard.press("Enter")
    if expect_index is not None:
        assert page.url.endswith(f"/case/{expect_index}"), page.url


def _case_no(page) -> str:
    return page.locator(".case-no").inner_text()


# What the clinician must see together, without scrolling, to label a case: the answer
# being rated (or the two answers), every choice of every criterion and the save button.
MUST_SEE = ("#answer, #left, #right, fieldset.criterion input[type=radio], "
            "fieldset.criterion label.option, #save")
# Each of those that is not wholly inside the window, or is covered or clipped (scrolled
# away inside a column) at its top or bottom edge: a line saying which and where.
OUT_OF_VIEW = """(selector) => {
  const out = [];
  for (const e of document.querySelectorAll(selector)) {
    const r = e.getBoundingClientRect();
    const seen = [r.top + 1, r.bottom - 1].every((y) => {
      const hit = document.elementFromPoint((r.left + r.right) / 2, y);
      return hit && (e.contains(hit) || (e.closest("label") || e).contains(hit));
    });
    if (r.top < 0 || r.left < 0 || r.bottom > innerHeight || r.right > innerWidth || !seen) {
      out.push((e.id || e.name || e.textContent.trim().slice(0, 30)) +
               " at " + [r.left, r.top, r.right, r.bottom].map(Math.round));
    }
  }
  return out;
}"""


def _out_of_view(page) -> list[str]:
    """What of MUST_SEE is out of the window (none: all in view without scrolling)."""
    assert page.evaluate("window.scrollY") == 0
    return page.evaluate(OUT_OF_VIEW, MUST_SEE)


def _check_journal(sheet: Path, labellers: dict[str, int], criteria: int = 2) -> None:
    entries = list(read_journal(sheet))
    keys = Counter((e.labeller, e.case_id, e.criterion) for e in entries)
    assert max(keys.values()) == 1, "a label was written twice"
    for name, cases in labellers.items():
        assert sum(1 for k in keys if k[0] == name) == cases * criteria, name


def test_a_clinician_labels_ten_cases_with_the_keyboard_and_a_reload_resumes(tmp_path, context):
    sheet = tmp_path / "sheet"
    make_single_sheet(sheet, 10)
    with Server(sheet, ["ana"]) as server:
        page = context.new_page()
        page.goto(server.url)
        assert page.url.endswith("/case/1")
        for i in range(1, 6):
            assert f"Case {i} of 10" in _case_no(page)
            _key_label(page, "42", i + 1)
        page.reload()  # half-way: the same case, the progress kept
        assert "Case 6 of 10" in _case_no(page)
        assert "5 of 10 labelled" in page.locator("#progress-text").inner_text()
        page.goto(server.url)  # her link again: the first unlabelled case
        assert page.url.endswith("/case/6")
        page.keyboard.press("ArrowLeft")
        page.wait_for_url("**/case/5")
        assert page.locator('input[name="v.accuracy"][value="4"]').is_checked()
        page.keyboard.press("ArrowRight")
        page.wait_for_url("**/case/6")
        for i in range(6, 11):
            _key_label(page, "35", i + 1 if i < 10 else None)
        assert page.url.endswith("/done")
        assert "All 10 cases labelled" in page.locator("h1").inner_text()
        page.set_viewport_size({"width": 1200, "height": 320})
        doc_screenshot(page, "labelling-end")
    _check_journal(sheet, {"ana": 10})
    latest = latest_labels(read_journal(sheet))
    assert Counter(e.value for k, e in latest.items() if k[2] == "accuracy") == {4: 5, 3: 5}


def test_at_1300_by_900_the_answer_and_every_choice_are_in_view_without_scrolling(
        tmp_path, browser):
    """The longest trial case of the shared data (5,749 characters) and its longest answer
    (1,225), with the three criteria a trial sheet asks (18 choices): the answer being
    rated, every choice and the save button lie inside a 1300 x 900 window as the page
    opens, with JavaScript and without; the context (profile, criteria, reference) scrolls
    in its own column. A narrow window stacks the columns: context, answer, choices."""
    sheet = tmp_path / "sheet"
    rows = longest_trial_rows()
    make_single_sheet(sheet, criteria=ALL_TRIAL_CRITERIA, rows=rows)
    with Server(sheet, ["ana"]) as server:
        for scripts in (True, False):
            ctx = browser.new_context(viewport={"width": 1300, "height": 900},
                                      java_script_enabled=scripts)
            try:
                page = ctx.new_page()
                for i, row in enumerate(rows, start=1):
                    page.goto(server.url.rstrip("/") + f"/case/{i}")
                    assert page.locator("fieldset.criterion input[type=radio]").count() == 18
                    assert _out_of_view(page) == [], (scripts, i)
                    answer = page.locator("#answer pre").inner_text(timeout=5000)
                    assert answer.strip() == row["workflow_answer"].strip()
                    box = page.locator("#answer pre").bounding_box()
                    assert box is not None and box["height"] >= 100  # text, not a sliver
                    context = page.locator("section.context")
                    assert "Eligibility criteria" in context.inner_text()
                    assert context.evaluate("e => e.scrollHeight > e.clientHeight")
                    if scripts and i == 1:
                        doc_screenshot(page, "labelling-case")
                page.set_viewport_size({"width": 600, "height": 900})
                context_box = page.locator("section.context").bounding_box()
                answer_box = page.locator("#answer").bounding_box()
                assert context_box is not None and answer_box is not None
                assert answer_box["y"] >= context_box["y"] + context_box["height"]
            finally:
                ctx.close()


def test_a_server_killed_with_sigkill_and_restarted_loses_and_duplicates_nothing(
        tmp_path, context):
    sheet = tmp_path / "sheet"
    make_single_sheet(sheet, 10)
    page = context.new_page()
    first = Server(sheet, ["ana"])
    page.goto(first.url)
    for i in range(1, 5):
        _key_label(page, "24", i + 1)
    first.kill()
    first.stop()
    saved = list(read_journal(sheet))
    assert len(saved) == 8
    with Server(sheet, ["ana"]) as second:
        page.goto(second.url)
        assert page.url.endswith("/case/5")  # resumes at her first unlabelled case
        assert "4 of 10 labelled" in page.locator("#progress-text").inner_text()
        for i in range(5, 11):
            _key_label(page, "51", i + 1 if i < 10 else None)
    after = list(read_journal(sheet))
    assert after[:8] == saved  # the first server's lines, untouched
    _check_journal(sheet, {"ana": 10})


def test_two_labellers_in_two_browsers_at_once_lose_nothing(tmp_path, browser):
    sheet = tmp_path / "sheet"
    make_single_sheet(sheet, 10)
    with Server(sheet, ["ana", "ben"]) as server:
        pages = {}
        for name in ("ana", "ben"):
            ctx = browser.new_context()
            pages[name] = ctx.new_page()
            pages[name].goto(server.urls[name])
        for i in range(1, 11):
            for name, keys in (("ana", "43"), ("ben", "12")):
                _key_label(pages[name], keys, i + 1 if i < 10 else None)
        for page in pages.values():
            assert "All 10 cases labelled" in page.locator("h1").inner_text()
            page.context.close()
    _check_journal(sheet, {"ana": 10, "ben": 10})
    latest = latest_labels(read_journal(sheet))
    assert {e.value for k, e in latest.items() if k[0] == "ben" and k[2] == "accuracy"} == {1}


def test_a_hostile_case_renders_as_text_and_runs_nothing(tmp_path, context):
    sheet = tmp_path / "sheet"
    make_single_sheet(sheet, 3, hostile=True)
    dialogs, requests, console = [], [], []
    with Server(sheet, ["ana"]) as server:
        page = context.new_page()
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.on("request", lambda r: requests.append(r.url))
        page.on("console", lambda m: console.append(m.text))
        page.goto(server.url)
        page.wait_for_load_state("networkidle")
        texts = page.locator("pre.text").all_inner_texts()
        assert any(SCRIPT in t and IMG in t for t in texts)
        assert page.locator("main img").count() == 0
        _key_label(page, "33", 2)
    assert dialogs == []
    assert not [u for u in requests if u.rstrip("/").endswith("/x")]
    assert all(u.startswith(server.url.split("/l/")[0]) for u in requests)
    assert console == []  # no CSP refusal, no script error


def test_a_pairwise_case_shows_two_answers_and_saves_in_terms_of_the_systems(
        tmp_path, context):
    sheet = tmp_path / "pair"
    make_pairwise_sheet(sheet, 4)
    with Server(sheet, ["ana"]) as server:
        page = context.new_page()
        page.goto(server.url)
        left = page.locator("#left pre").inner_text()
        assert page.locator("#right pre").is_visible()
        page.set_viewport_size({"width": 1300, "height": 900})
        assert _out_of_view(page) == []
        doc_screenshot(page, "labelling-pairwise")
        _key_label(page, "13", 2)  # left better; tie
    entry = next(e for e in read_journal(sheet) if e.criterion == "critical_finding_concordance")
    assert entry.shown_left in ("A", "B")
    assert left.startswith(f"System {entry.shown_left}")
    assert entry.value == entry.shown_left


def test_without_javascript_the_page_is_plain_forms(tmp_path, browser):
    sheet = tmp_path / "sheet"
    make_single_sheet(sheet, 3)
    ctx = browser.new_context(java_script_enabled=False)
    try:
        with Server(sheet, ["ana"]) as server:
            page = ctx.new_page()
            page.goto(server.url)
            page.check('input[name="v.accuracy"][value="2"]')
            page.check('input[name="v.clarity"][value="5"]')
            with page.expect_navigation():
                page.click("#save")
            assert page.url.endswith("/case/2")
            assert "1 of 3 labelled" in page.locator("#progress-text").inner_text()
    finally:
        ctx.close()
    assert [(e.criterion, e.value) for e in read_journal(sheet)] == [
        ("accuracy", 2), ("clarity", 5)]


def test_enter_and_digits_on_a_link_button_or_text_box_are_theirs_not_the_pages(
        tmp_path, context):
    """Enter on a focused link follows it (no save); a digit on a focused link chooses
    nothing; digits in the comment box are typed."""
    sheet = tmp_path / "sheet"
    make_single_sheet(sheet, 4)
    with Server(sheet, ["ana"]) as server:
        page = context.new_page()
        page.goto(server.url.rstrip("/") + "/case/2")
        page.keyboard.press("4")  # accuracy 4, highlight on clarity
        page.focus("#prev")
        page.keyboard.press("3")
        assert not page.locator('input[name="v.clarity"]:checked').count()
        with page.expect_navigation():
            page.keyboard.press("Enter")
        assert page.url.endswith("/case/1")  # followed "previous", saved nothing
        page.focus("#next-unlabelled")
        with page.expect_navigation():
            page.keyboard.press("Enter")
        assert page.url.endswith("/case/2")
        page.click('input[name="comment"]')
        page.keyboard.type("42")
        assert page.input_value('input[name="comment"]') == "42"
        assert not page.locator('input[type=radio]:checked').count()
    assert list(read_journal(sheet)) == []


def test_cannot_judge_with_the_keys_moves_on_and_an_unanswered_case_is_not_saved(
        tmp_path, context):
    """x, then the reason, then Down (or Enter) moves to the next criterion, so the next
    digit is that criterion's; Enter with a criterion unanswered says so and stays."""
    sheet = tmp_path / "sheet"
    make_single_sheet(sheet, 3)
    with Server(sheet, ["ana"]) as server:
        page = context.new_page()
        page.goto(server.url)
        page.keyboard.press("x")
        assert page.evaluate("document.activeElement.name") == "reason.accuracy"
        page.keyboard.type("answer cut off")
        page.keyboard.press("ArrowDown")
        assert page.locator("fieldset.current").get_attribute("data-criterion") == "clarity"
        page.keyboard.press("3")
        assert page.locator('input[name="v.accuracy"][value="x"]').is_checked()
        _key_label(page, "", 2)
        page.keyboard.press("x")
        page.keyboard.type("not in English")
        page.keyboard.press("Enter")  # on to clarity, not a save
        assert page.url.endswith("/case/2")
        assert page.locator("fieldset.current").get_attribute("data-criterion") == "clarity"
        page.keyboard.press("Enter")  # clarity unanswered: not saved, and the page says so
        notice = page.locator("#unanswered")
        notice.wait_for(state="visible")
        assert "clarity" in notice.inner_text()
        assert page.url.endswith("/case/2")
        page.click("#save")  # the button too
        assert page.url.endswith("/case/2") and notice.is_visible()
        page.keyboard.press("5")
        _key_label(page, "", 3)
    assert [(e.case_id == e.case_id, e.criterion, e.value, e.cannot_judge)
            for e in read_journal(sheet)] == [
        (True, "accuracy", None, "answer cut off"), (True, "clarity", 3, None),
        (True, "accuracy", None, "not in English"), (True, "clarity", 5, None)]


def test_the_end_page_has_keys_and_the_progress_bar_stays_in_view(tmp_path, context):
    sheet = tmp_path / "sheet"
    make_single_sheet(sheet, 2)
    with Server(sheet, ["ana"]) as server:
        page = context.new_page()
        page.set_viewport_size({"width": 1200, "height": 400})
        page.goto(server.url)
        page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
        page.wait_for_function("window.scrollY > 0")
        box = page.locator("#progress").bounding_box()
        assert box is not None and 0 <= box["y"] < 400
        _key_label(page, "44", 2)
        _key_label(page, "44", None)
        assert page.url.endswith("/done")
        page.keyboard.press("ArrowLeft")
        page.wait_for_url("**/case/2")
