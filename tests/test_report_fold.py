"""The HTML report's technical sections folded, its repeated notes collapsed, its header and
its print stylesheet (issue 38, items 2 and 3), checked in the HTML and in headless Chromium
(Playwright with the system Chromium; skipped without them)."""

from __future__ import annotations

import hashlib
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from evaluator.report.build import build_report
from evaluator.report.html import css_string, page_header, render_html, write_report
from evaluator.report.notes import AGREEMENT_STATISTICS, meaningless_note
from tests.conftest import label_source, write_jsonl
from tests.label_browser import launch, playwright_or_reason

pytest.importorskip("scipy", reason="needs the stats extra")
pytest.importorskip("matplotlib", reason="needs the report extra: pip install -e '.[report]'")

# Section id -> its heading: every technical section of the page, folded.
SECTIONS = {"files": "Results files", "status": "Status breakdown", "criteria": "Criteria",
            "confidence": "Judge confidence", "agreement": "Agreement with labels",
            "estimates": "Clinician-level estimates",
            "consistency": "Self-consistency and inter-judge agreement",
            "worst": "Worst cases by accuracy", "about": "About this page"}


def verdict(accuracy: int, index: int) -> str:
    """Hallucination is always 3 (a judge with one value there); accuracy and clarity vary."""
    return json.dumps({"hallucination": 3, "hallucination_reasoning": "r",
                       "accuracy": accuracy, "accuracy_reasoning": "r",
                       "clarity": 1 + index % 5, "clarity_reasoning": "r"})


def run(rows: list[dict], out: Path, judge: str, outputs: list[str],
        rubric: str = "trial_eligibility") -> Path:
    from tests.test_report import run_fake  # the fake-judge run the report tests use

    return run_fake(rows, out, judge, outputs, rubric)


@pytest.fixture(scope="module")
def systems(trial_rows, tmp_path_factory):
    """Two judges of the same cases with labels; judge A gives hallucination 3 on every case;
    A's summary file holds a self-consistency block."""
    base = tmp_path_factory.mktemp("fold")
    rows = [dict(r) for r in trial_rows]
    label = [int(r.get("expert_qrel", 1 + i % 2)) for i, r in enumerate(rows)]
    a = run(rows, base / "a", "judge-a", [verdict(1 + 3 * (label[i] == 2), i)
                                          for i in range(len(rows))])
    b = run(rows, base / "b", "judge-b",
            [verdict(2 + i % 2, i).replace('"hallucination": 3', f'"hallucination": {4 + i % 2}')
             for i in range(len(rows))])
    summary_path = a.with_name("results.summary.json")
    summary = json.loads(summary_path.read_text())
    summary["self_consistency"] = {"runs": 3, "alpha": {"accuracy": 0.81}}
    summary_path.write_text(json.dumps(summary))
    labels = write_jsonl(base / "labels.jsonl", [{"case_id": r["case_id"],
                                                   "expert_qrel": label[i]}
                                                  for i, r in enumerate(rows)])
    report = build_report([a, b], labels=label_source(labels, "expert_qrel"),
                          estimate_criteria=("accuracy",), worst_by="accuracy", worst_n=3,
                          agreement_resamples=100)
    return {"a": a, "b": b, "labels": labels, "report": report, "base": base,
            "html": render_html(report, plots=False)}


VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "wbr"}


class Page(HTMLParser):
    """The page's structure: each ``details.section`` (id, open, heading in its summary,
    first paragraph after the summary), every element's id, the meaningless-notes, the
    header's hashes and the style text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.sections: list[dict] = []
        self.ids: list[str] = []
        self.notes: list[str] = []
        self.hashes: list[dict] = []
        self.style = ""
        self.header_text: list[str] = []
        self._stack: list[tuple[str, dict]] = []
        self._capture: list[str] | None = None
        self._section: dict | None = None
        self._in_header = False
        self._in_style = False
        self._hash: dict | None = None
        self._after_summary = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.append(attrs["id"])
        classes = (attrs.get("class") or "").split()
        if tag == "details" and "section" in classes:
            self._section = {"id": attrs.get("id"), "open": "open" in attrs, "heading": None,
                             "summary_tags": [], "first": None, "purpose": None}
            self.sections.append(self._section)
        elif self._section is not None and self._stack and self._stack[-1][0] == "summary" \
                and self._section["heading"] is None:
            self._section["summary_tags"].append(tag)
        if self._section is not None and self._section["first"] is None and \
                self._after_summary and tag != "summary":
            self._section["first"] = (tag, classes)
        if tag == "header":
            self._in_header = True
        if tag == "code" and ("short-hash" in classes or "full-hash" in classes):
            self._hash = {"class": classes[0], "title": attrs.get("title"), "text": ""}
            self.hashes.append(self._hash)
        if tag == "style":
            self._in_style = True
        if tag in VOID:
            return
        self._stack.append((tag, attrs))
        if tag in ("h2", "p") and self._capture is None:
            self._capture = []

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if tag == "code":
            self._hash = None
        if any(t == tag for t, _ in self._stack):
            while self._stack[-1][0] != tag:
                self._stack.pop()
            open_tag, attrs = self._stack.pop()
            classes = (attrs.get("class") or "").split()
            if open_tag in ("h2", "p") and self._capture is not None:
                text = " ".join("".join(self._capture).split())
                self._capture = None
                if open_tag == "h2" and self._section is not None and \
                        self._section["heading"] is None:
                    self._section["heading"] = text
                elif open_tag == "p" and "purpose" in classes and self._section is not None:
                    self._section["purpose"] = text
                elif open_tag == "p" and "meaningless" in classes:
                    self.notes.append(text)
        if tag == "summary" and self._section is not None:
            self._after_summary = True
        if tag == "details" and self._section is not None and not any(
                t == "details" for t, _ in self._stack):
            self._section, self._after_summary = None, False
        if tag == "header":
            self._in_header = False
        if tag == "style":
            self._in_style = False

    def handle_data(self, data):
        if self._capture is not None:
            self._capture.append(data)
        if self._in_header:
            self.header_text.append(data)
        if self._hash is not None:
            self._hash["text"] += data
        if self._in_style:
            self.style += data


def parse(html: str) -> Page:
    page = Page()
    page.feed(html)
    page.close()
    return page


def print_block(style: str) -> str:
    """The body of the style's ``@media print { ... }``, whitespace collapsed."""
    start = style.index("@media print")
    depth, i = 0, style.index("{", start)
    for j in range(i, len(style)):
        depth += {"{": 1, "}": -1}.get(style[j], 0)
        if depth == 0:
            return " ".join(style[i + 1:j].split())
    raise AssertionError("unbalanced @media print block")


# ---------------------------------------------------------------- folded sections


def test_technical_sections_are_closed_details_with_a_purpose(systems):
    page = parse(systems["html"])
    found = {s["id"]: s for s in page.sections}
    assert {key: s["heading"] for key, s in found.items()} == SECTIONS
    for key, section in found.items():
        assert not section["open"], key                      # folded until asked for
        assert section["summary_tags"] == ["h2"], key        # the heading is the handle
        assert section["first"] == ("p", ["purpose"]), key   # the body opens with its purpose
        purpose = section["purpose"]
        # One plain sentence: ends with a full stop, no second sentence inside.
        assert purpose.endswith(".") and not re.search(r"[.!?] [A-Z]", purpose), purpose
    # Ids the docs and the other tests link to, once each.
    assert len(page.ids) == len(set(page.ids))
    for kept in ("score-mode", *SECTIONS):
        assert kept in page.ids, kept


def test_pass_rates_section_is_folded_too(tmp_path):
    from tests.test_report import constant_pathology_run

    path, _ = constant_pathology_run(tmp_path)
    page = parse(render_html(build_report([path]), plots=False))
    [section] = [s for s in page.sections if s["id"] == "pass-rates"]
    assert section["heading"] == "Pass rates" and not section["open"]
    assert section["first"] == ("p", ["purpose"]) and section["purpose"].endswith(".")


# ---------------------------------------------------------------- collapsed notes


def test_a_constant_judge_criterion_gives_one_line_not_one_per_statistic(systems):
    page = parse(systems["html"])
    hallucination = [n for n in page.notes if "for hallucination" in n]
    assert [n for n in hallucination if n.startswith("* #1 ")] == [
        ("* #1 judge-a · results.jsonl: all agreement statistics are meaningless for "
         "hallucination: the judge gave 3 on every case")]
    # Judge B's hallucination (two values) may have a statistic or two marked: one line too.
    assert len([n for n in hallucination if n.startswith("* #2 ")]) <= 1
    for key in systems["report"].scored_keys:
        for i in (1, 2):
            assert len([n for n in page.notes
                        if n.startswith(f"* #{i} ") and f"for {key}" in n]) <= 1, (key, i)
    assert not any("meaningless here" in n for n in page.notes)
    # Presentation only: the agreement result still marks every statistic, and the table
    # still stars each of them.
    result = systems["report"].agreement.files[0].result.criteria["hallucination"]
    assert all(result[key].get("meaningless") == "the judge gives one value"
               for key, _ in AGREEMENT_STATISTICS)
    html = systems["html"]
    table = html[html.index("<h3>hallucination</h3>", html.index('id="agreement"')):]
    start = table.index('<td class="l">#1')
    first_row = table[start:table.index("</tr>", start)]
    assert first_row.count("*<br>") == len(AGREEMENT_STATISTICS)


def test_meaningless_note_groups_by_reason():
    def stat(why=None, **extra):
        return {"value": 0.5, **({"meaningless": why} if why else {}), **extra}

    none = {key: stat() for key, _ in AGREEMENT_STATISTICS}
    assert meaningless_note("accuracy", none) is None
    assert meaningless_note("accuracy", None) is None
    labels = {**{key: stat("the labels have one value") for key, _ in AGREEMENT_STATISTICS},
              "judge_values_used": [1, 2], "label_values_used": [2]}
    assert meaningless_note("accuracy", labels) == \
        "all agreement statistics are meaningless for accuracy: every label is 2"
    some = {**none, "exact": stat("chance alone gives 0.950"),
            "within_one": stat("chance alone gives 0.950")}
    assert meaningless_note("clarity", some) == \
        "exact and within one are meaningless for clarity: chance alone gives 0.950"
    mixed = {**some, "within_one": stat("it is fixed by the labels alone")}
    assert meaningless_note("clarity", mixed) == (
        "meaningless for clarity: exact (chance alone gives 0.950); within one (it is fixed "
        "by the labels alone)")
    # A statistic that does not apply (expected scores: no categories) is not counted.
    expected = {**{key: stat("the judge gives one value") for key, _ in AGREEMENT_STATISTICS},
                "exact": {"value": None, "not_applicable": "not categories"},
                "judge_values_used": [2.5]}
    assert meaningless_note("accuracy", expected) == \
        "all agreement statistics are meaningless for accuracy: the judge gave 2.5 on every case"


# ---------------------------------------------------------------- header


def test_header_holds_rubric_judges_date_and_each_files_sha256(systems):
    page = parse(systems["html"])
    header = " ".join(" ".join(page.header_text).split())
    report = systems["report"]
    assert report.rubric.title in header and "trial_eligibility" in header
    assert "judges judge-a, judge-b" in header and report.generated in header
    expected = [hashlib.sha256(Path(p).read_bytes()).hexdigest()
                for p in (systems["a"], systems["b"])]
    short = [h for h in page.hashes if h["class"] == "short-hash"]
    full = [h for h in page.hashes if h["class"] == "full-hash"]
    assert [h["title"] for h in short] == expected
    assert [h["text"] for h in short] == [h[:12] for h in expected]
    assert [h["text"] for h in full] == expected


def test_the_printed_pages_header_is_escaped_for_css(tmp_path, trial_rows):
    hostile = '</style><script>alert(1)</script>"\\\n;}@import'
    assert css_string(hostile).startswith('"') and css_string(hostile).endswith('"')
    body = str(css_string(hostile))[1:-1]
    assert re.fullmatch(r"([A-Za-z0-9 ]|\\[0-9a-f]+ )*", body), body
    assert re.sub(r"\\([0-9a-f]+) ", lambda m: chr(int(m.group(1), 16)), body) == hostile
    path = run([dict(r) for r in trial_rows], tmp_path / "h", hostile,
               [verdict(1 + i % 5, i) for i in range(len(trial_rows))])
    report = build_report([path], worst_n=0)
    html = render_html(report, plots=False)
    assert html.count("<style>") == 1 and html.count("</style>") == 1
    style = parse(html).style
    assert "<script" not in html and "@import" not in style and "</" not in style
    assert str(css_string(page_header(report))) in html


# ---------------------------------------------------------------- print stylesheet


def test_print_stylesheet_rules(systems):
    style = parse(systems["html"]).style
    rules = print_block(style)
    for needle in ("details::details-content { content-visibility: visible; }",
                   "summary { list-style: none; }",
                   "summary::-webkit-details-marker { display: none; }",
                   'summary::marker { content: ""; }',
                   "h1, h2, h3, h4, summary { break-after: avoid; }",
                   "pre { max-height: none; overflow: visible; }",
                   "#decision { break-after: page; }",
                   "* { color: #000 !important; }"):
        assert needle in rules, needle
    avoid = re.search(r"([^{}]*)\{ break-inside: avoid; \}", rules)
    assert avoid is not None
    kept = {s.strip() for s in avoid.group(1).split(",")}
    assert {"table", "img", "p", "li", ".note", "pre"} <= kept, kept
    page_rule = style[style.index("@page"):style.index("@media print")]
    assert "margin:" in page_rule and not re.search(r"(^|[\s;{])size:", page_rule)  # A4, Letter


# ---------------------------------------------------------------- in Chromium

sync_playwright, SKIP = playwright_or_reason()


@pytest.mark.skipif(SKIP is not None, reason=SKIP or "")
def test_folded_on_screen_and_open_in_print_in_chromium(systems, tmp_path):
    page_path = write_report([systems["a"], systems["b"]], tmp_path / "report.html",
                             labels=label_source(systems["labels"], "expert_qrel"),
                             estimate_criteria=("accuracy",), worst_by="accuracy",
                             worst_n=3, agreement_resamples=100)
    purposes = [f"#{key} p.purpose" for key in SECTIONS]
    with sync_playwright() as playwright:
        browser = launch(playwright)
        page = browser.new_page(viewport={"width": 1300, "height": 1300})
        console: list[str] = []
        page.on("console", lambda message: console.append(message.text))
        page.goto(page_path.resolve().as_uri())
        assert all(page.locator(s).count() == 1 for s in purposes)
        assert not any(page.locator(s).is_visible() for s in purposes)
        assert page.locator("#criteria img.plot").first.is_visible() is False
        page.emulate_media(media="print")
        assert all(page.locator(s).is_visible() for s in purposes)
        # Nested folds print open too (a confusion matrix inside the agreement section).
        assert page.locator("#agreement details table").first.is_visible()
        assert page.locator("#criteria img.plot").first.is_visible()
        pdf = page.pdf(format="A4")
        browser.close()
    assert console == []
    pypdf = pytest.importorskip("pypdf", reason="reading the printed PDF needs pypdf")
    out = tmp_path / "report.pdf"
    out.write_bytes(pdf)
    texts = [" ".join(p.extract_text().split()) for p in pypdf.PdfReader(out).pages]
    assert len(texts) > 1
    # The @page margin box repeats rubric and judges on every printed page.
    assert all("trial_eligibility · judge-a, judge-b · generated" in t for t in texts), texts
    assert all(f"page {i} of {len(texts)}" in t for i, t in enumerate(texts, start=1))
    printed = " ".join(texts)
    assert "safe to open without a network" in printed   # the last folded section's body
