"""``evaluator report``: the HTML report over result files made with the scripted fake judge
(real trial data when the shared dev data is there), checked as data, as HTML (escaping, no
case text without --show-text, no network references) and in headless Chromium."""

from __future__ import annotations

import base64
import json
import os
import re
import stat
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner

from evaluator.analysis.summary.summary import summarize
from evaluator.cli.main import cli
from evaluator.data.results import read_results
from evaluator.data.sources import CaseSource
from evaluator.judges.backends.fake import FakeBackend
from evaluator.judges.models_file import JudgeSpec
from evaluator.report.build import ReportError, _labels, build_report, status_table
from evaluator.report.html import CSP, render_html, write_report
from evaluator.run.runner import evaluate
from evaluator.run.task import Judge, RunOptions, Task
from tests import browser
from tests.conftest import EXAMPLES, label_source, write_jsonl
from tests.hostile_corpus import CORPUS

pytest.importorskip("scipy", reason="needs the stats extra")
pytest.importorskip("matplotlib", reason="needs the report extra: pip install -e '.[report]'")

TRIAL_FIELDS = ("patient_profile", "trial_id", "trial_title", "eligibility_criteria",
                "ground_truth_label", "ground_truth_explanation", "workflow_answer")
SVG_URI = "data:image/svg+xml;base64,"


def trial_verdict(accuracy: int, index: int, reasoning: str = "ok") -> str:
    return json.dumps({"hallucination": 4 + index % 2, "hallucination_reasoning": reasoning,
                       "accuracy": accuracy, "accuracy_reasoning": reasoning,
                       "clarity": 1 + index % 5, "clarity_reasoning": reasoning})


def run_fake(rows: list[dict], out: Path, judge: str, outputs: list[str],
             rubric: str = "trial_eligibility") -> Path:
    """Judge ``rows`` (written to ``out``/cases.jsonl) with a scripted fake judge."""
    out.mkdir(parents=True, exist_ok=True)
    cases = write_jsonl(out / "cases.jsonl", rows)
    return evaluate(Task(rubric, cases),
                    Judge(judge, spec=JudgeSpec(backend="fake"), backend=FakeBackend(outputs)),
                    RunOptions(out / "results.jsonl")).results_path


def label_of(row: dict, index: int) -> int:
    """The expert label of the dev data, or a made-up one for the bundled examples."""
    return int(row.get("expert_qrel", 1 + index % 2))


@pytest.fixture(scope="module")
def two_runs(trial_rows, tmp_path_factory):
    """Two judges over the same cases: A tracks the label, B is harsher on every third case
    and fails two cases (an invalid verdict, a truncation-free garbage line)."""
    base = tmp_path_factory.mktemp("report")
    rows = [dict(r) for r in trial_rows]
    a_out = [trial_verdict(min(5, 2 + 2 * (label_of(r, i) - 1) + i % 2), i)
             for i, r in enumerate(rows)]
    b_out = [trial_verdict(max(1, min(5, 2 + 2 * (label_of(r, i) - 1) - (i % 3 == 0))), i)
             for i, r in enumerate(rows)]
    b_out[1] = "not json at all"
    b_out[2] = b_out[2].replace('"accuracy": ', '"accuracy": 9') if len(rows) > 2 else b_out[2]
    a = run_fake(rows, base / "a", "judge-a", a_out)
    b = run_fake(rows, base / "b", "judge-b", b_out)
    labels = write_jsonl(base / "labels.jsonl", [{"case_id": r["case_id"],
                                                   "expert_qrel": label_of(r, i)}
                                                  for i, r in enumerate(rows)])
    return {"a": a, "b": b, "labels": labels, "rows": rows, "base": base}


class Tags(HTMLParser):
    """Every start tag with its attributes, and the page's text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


class Rows(HTMLParser):
    """The text of every table row's cells."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def table_rows(html: str) -> list[list[str]]:
    rows = Rows()
    rows.feed(html)
    return rows.rows


def parse(html: str) -> Tags:
    tags = Tags()
    tags.feed(html)
    tags.close()
    return tags


def embedded_svgs(html: str) -> list[str]:
    return [base64.b64decode(uri).decode("utf-8")
            for uri in re.findall(re.escape(SVG_URI) + r"([A-Za-z0-9+/=]+)", html)]


def everything(html: str) -> str:
    """The page and the text of every embedded plot (SVG keeps labels as comments)."""
    return html + "\n".join(embedded_svgs(html))


# ---------------------------------------------------------------- data and comparison


def test_two_files_side_by_side(two_runs):
    report = build_report([two_runs["a"], two_runs["b"]], worst_n=0)
    a, b = report.files
    assert a.label == "judge-a · results.jsonl" and b.label == "judge-b · results.jsonl"
    n = len(two_runs["rows"])
    assert a.summary.status_counts == {"ok": n}
    assert b.summary.status_counts == {"invalid_output": 2, "ok": n - 2}
    assert [f.case_id for f in b.failed] == [two_runs["rows"][i]["case_id"] for i in (1, 2)]
    # Recomputed from the records = what the run wrote beside them.
    for entry, path in ((a, two_runs["a"]), (b, two_runs["b"])):
        written = json.loads(path.with_name("results.summary.json").read_text())
        assert entry.summary.to_json()["criteria"] == written["criteria"]
    accuracy_b = [r.scores["accuracy"] for r in read_results(two_runs["b"]) if r.status == "ok"]
    assert b.values["accuracy"] == accuracy_b
    assert report.worst is None and report.agreement is None


def test_summary_file_is_not_needed(two_runs, tmp_path):
    copy = tmp_path / "only-records.jsonl"
    copy.write_bytes(two_runs["b"].read_bytes())
    report = build_report([copy], worst_n=0)
    [entry] = report.files
    rubric = report.rubric
    assert entry.summary.criteria == summarize(rubric, "judge-b",
                                                  read_results(copy)).criteria
    assert any("no summary file" in note for note in entry.notes)


def test_labels_disambiguate_equal_names():
    paths = [Path("/x/run1/results.jsonl"), Path("/x/run2/results.jsonl")]
    assert _labels(paths, ["j", "j"]) == ["j · run1/results.jsonl", "j · run2/results.jsonl"]
    assert _labels(paths, ["j", "k"]) == ["j · results.jsonl", "k · results.jsonl"]


def test_worst_cases_lowest_first_with_other_files(two_runs):
    report = build_report([two_runs["a"], two_runs["b"]], worst_by="accuracy", worst_n=4)
    worst = report.worst
    assert worst.key == "accuracy" and worst.columns == ["hallucination", "accuracy",
                                                               "clarity"]
    records_b = {r.case_id: r for r in read_results(two_runs["b"])}
    expected = sorted((r.scores["accuracy"], r.case_id) for r in records_b.values()
                      if r.status == "ok")[:4]
    rows_b = worst.by_file[1].rows
    assert [(row.values[1], row.case_id) for row in rows_b] == expected
    records_a = {r.case_id: r for r in read_results(two_runs["a"])}
    for row in rows_b:
        assert row.others == [records_a[row.case_id].scores["accuracy"]]
        assert all(type(v) is int for v in row.values + row.others)
    # In A's list, B's failed cases show their status instead of a score.
    report = build_report([two_runs["a"], two_runs["b"]], worst_by="accuracy", worst_n=10_000)
    others = {row.case_id: row.others[0] for row in report.worst.by_file[0].rows}
    assert others[two_runs["rows"][1]["case_id"]] == "invalid_output"
    assert report.worst.by_file[0].rows[0].record is None  # no text without flag


def test_worst_by_default_and_alias_and_unknown(two_runs):
    assert build_report([two_runs["a"]]).worst.key == "hallucination"
    with pytest.raises(ReportError, match="unknown --worst-by key 'accuracyy'.*accuracy"):
        build_report([two_runs["a"]], worst_by="accuracyy")


def test_agreement_tables_match_the_agreement_function(two_runs):
    from evaluator.analysis.agreement.agreement import agreement

    report = build_report([two_runs["a"], two_runs["b"]], agreement_resamples=100, worst_n=0,
                          labels=label_source(two_runs["labels"], "expert_qrel"))
    direct = agreement(two_runs["b"], label_source(two_runs["labels"], "expert_qrel"),
                       resamples=100)
    assert report.agreement.files[1].result == direct
    html = render_html(report, plots=False)
    spearman = direct.criteria["accuracy"]["spearman"]
    assert f"{spearman['value']:.3f}" in html
    if spearman["ci95"] is not None:
        assert f"[{spearman['ci95'][0]:.3f}, {spearman['ci95'][1]:.3f}]" in html
    else:  # few cases (no ../shared next to a clone): no interval, and the page says why
        assert "needs n &gt;= 4" in html or "needs n >= 4" in html
    assert "Agreement with labels" in html and "confusion matrix" in html


# ---------------------------------------------------------------- the page


def test_page_shows_every_section(two_runs):
    report = build_report([two_runs["a"], two_runs["b"]], worst_by="accuracy", worst_n=3)
    html = render_html(report)
    for needle in ("judge-a · results.jsonl", "judge-b · results.jsonl", "Status breakdown",
                   "<h3>hallucination</h3>", "<h3>accuracy</h3>", "<h3>clarity</h3>",
                   "Worst cases by accuracy", "2 failed case(s)"):
        assert needle in html, needle
    n = len(two_runs["rows"])
    statuses = next(row for row in table_rows(html) if row[0].startswith("#2 judge-b"))
    # cases, ok, invalid_output, truncated, too_long, input_error, backend_error, failed
    assert statuses[1:] == [str(n), str(n - 2), "2", "0", "0", "0", "0", "2"]
    first = report.worst.by_file[0].rows[0]
    shown = next(row for row in table_rows(html) if row[0] == first.case_id)
    assert shown[1:] == ["ok", *map(str, first.values), *map(str, first.others)]
    svgs = embedded_svgs(html)
    assert len(svgs) == 1 + 3  # statuses + one per criterion (no aggregates, no thresholds)
    for svg in svgs:
        assert ET.fromstring(svg).tag.endswith("svg")


def test_pass_rates_and_aggregates(tmp_path):
    rows = [json.loads(line) for line in (EXAMPLES / "pathology_report.jsonl").read_text()
            .splitlines() if line]
    outputs = [json.dumps({"critical_finding_concordance": c, "factual_accuracy": 3,
                           "factual_completeness": 2, "overall_equivalence": 3,
                           "reasoning": "r"}) for c in (4, 2, 3)][:len(rows)]
    path = run_fake(rows, tmp_path / "p", "judge-p", outputs, rubric="pathology_report")
    report = build_report([path])
    rate = report.files[0].summary.pass_rates["critical_finding_concordance"]
    assert rate.passed == sum(c >= 3 for c in (4, 2, 3)[:len(rows)])
    html = render_html(report)
    assert "Pass rates" in html and f"{100 * rate.rate:.1f}%" in html
    assert f"[{100 * rate.ci95[0]:.1f}%, {100 * rate.ci95[1]:.1f}%]" in html
    ecg_rows = [json.loads(line) for line in (EXAMPLES / "ecg_interpretation.jsonl")
                .read_text().splitlines() if line]
    ecg = run_fake(ecg_rows, tmp_path / "e", "judge-e", [], rubric="ecg_interpretation")
    html = render_html(build_report([ecg]))
    assert "aggregate: share_above of DiagnosisAccuracy" in html
    ecg_report = build_report([ecg])
    # the scores chart, one per aggregate, one confidence histogram per criterion
    assert len(embedded_svgs(html)) == (1 + len(ecg_report.aggregates)
                                        + len(ecg_report.confidence_criteria))


def constant_pathology_run(tmp_path: Path) -> tuple[Path, list[dict]]:
    """A fake judge's pathology_report run of the example cases (and the cases):
    factual_accuracy 3 and factual_completeness 2 on every case, critical_finding_concordance
    cycling 1-4."""
    rows = [json.loads(line) for line in (EXAMPLES / "pathology_report.jsonl").read_text()
            .splitlines() if line]
    outputs = [json.dumps({"critical_finding_concordance": 1 + i % 4, "factual_accuracy": 3,
                           "factual_completeness": 2, "overall_equivalence": 3,
                           "reasoning": "r"}) for i in range(len(rows))]
    return run_fake(rows, tmp_path / "p", "judge-p", outputs, rubric="pathology_report"), rows


def test_a_constant_criterion_shows_no_interval_and_why(tmp_path):
    """Every factual_accuracy verdict is 3: the page shows no "[3.00, 3.00]" CI (a point is
    not a 95% interval) but the reason, as the summary does."""
    path, rows = constant_pathology_run(tmp_path)
    html = render_html(build_report([path]), plots=False)
    assert "[3.00, 3.00]" not in html and "[2.00, 2.00]" not in html
    [row] = [r for r in table_rows(html[html.index(">factual_accuracy<"):])[:2]
             if r and r[0].startswith("#1")]
    assert row[3] == f"-no interval: all {len(rows)} scores equal", row


def test_no_network_references_anywhere(two_runs):
    html = render_html(build_report([two_runs["a"], two_runs["b"]], worst_n=3))
    page = parse(html)
    assert ("meta", {"http-equiv": "Content-Security-Policy", "content": CSP}) in page.tags
    assert "default-src 'none'" in CSP and "img-src data:" in CSP
    names = {tag for tag, _ in page.tags}
    assert not names & {"script", "link", "iframe", "object", "embed", "base", "form", "video",
                        "audio", "source", "frame"}
    for tag, attrs in page.tags:
        for name, value in attrs.items():
            assert not name.startswith("on"), (tag, name)
            if name in ("src", "href", "srcset", "action", "poster", "data", "background"):
                assert (value or "").startswith("data:image/svg+xml;base64,"), (tag, name)
    assert "http://" not in html and "https://" not in html
    assert "url(" not in html and "@import" not in html
    for svg in embedded_svgs(html):
        for url in re.findall(r"https?://[^\s\"'<>]*", svg):
            assert re.search(r'xmlns(:\w+)?="' + re.escape(url) + '"', svg), url
        assert all(h.startswith("#") for h in re.findall(r'href="([^"]*)"', svg))


def test_summary_blocks_shown_when_present(two_runs, tmp_path):
    base = tmp_path / "blocks"
    base.mkdir()
    results = base / "results.jsonl"
    results.write_bytes(two_runs["a"].read_bytes())
    summary = json.loads(two_runs["a"].with_name("results.summary.json").read_text())
    summary["self_consistency"] = {"runs": 3, "method": "krippendorff ordinal",
                                   "alpha": {"accuracy": 0.8123, "clarity": None},
                                   "per_case": [{"deep": 1}]}
    summary["inter_judge"] = {"judges": ["a", "b"], "alpha": {"accuracy": -0.25}}
    (base / "results.summary.json").write_text(json.dumps(summary))
    html = render_html(build_report([results, two_runs["b"]], worst_n=0), plots=False)
    assert "Self-consistency and inter-judge agreement" in html
    assert "self_consistency" in html and "inter_judge" in html
    assert "0.812" in html and "-0.250" in html and "krippendorff ordinal" in html
    assert "not shown (nested): per_case" in html
    plain = render_html(build_report([two_runs["a"]], worst_n=0), plots=False)
    assert "Self-consistency" not in plain
    (base / "results.summary.json").write_text("{broken")
    report = build_report([results], worst_n=0)
    assert any("could not be read" in note for note in report.files[0].notes)
    assert "Self-consistency" not in render_html(report, plots=False)


def test_without_matplotlib_the_page_says_what_to_install(two_runs, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "matplotlib", None)
    html = render_html(build_report([two_runs["a"]], worst_n=0))
    assert "pip install &#39;evaluator[report]&#39;" in html
    assert SVG_URI not in html


# ---------------------------------------------------------------- case text and hostile text

MARK = "PHI7f3a"


@pytest.fixture
def marked_run(tmp_path):
    """Every input field, the judge's reasoning and one raw output carry a marker."""
    rows = [{"case_id": f"case-{i}", **{field: f"{MARK}-{field}-{i} text" for field in
                                       TRIAL_FIELDS}} for i in range(5)]
    outputs = [trial_verdict(1 + i, i, reasoning=f"{MARK}-reasoning-{i}") for i in range(4)]
    outputs.append(f'{{"hallucination": "{MARK}-raw-output"')
    return run_fake(rows, tmp_path / "marked", "judge-m", outputs)


def test_no_case_text_without_show_text(marked_run, tmp_path):
    out = write_report([marked_run], tmp_path / "r.html", worst_n=100)
    html = out.read_text(encoding="utf-8")
    assert MARK not in everything(html)
    assert "case-0" in html and "No case text" in html  # ids are shown, text is not
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600


def test_show_text_includes_case_and_judge_text(marked_run):
    html = render_html(build_report([marked_run], worst_n=100, show_text=True))
    for i in range(4):  # the ok cases: all of them are among the worst 100
        for field in TRIAL_FIELDS:
            assert f"{MARK}-{field}-{i} text" in html
        assert f"{MARK}-reasoning-{i}" in html
    assert f"{{&#34;hallucination&#34;: &#34;{MARK}-raw-output&#34;" in html  # escaped
    assert "contains case text" in html
    assert MARK not in "\n".join(embedded_svgs(html))


def test_show_text_says_when_the_input_file_is_gone(marked_run):
    marked_run.with_name("cases.jsonl").unlink()
    html = render_html(build_report([marked_run], worst_n=100, show_text=True), plots=False)
    assert "not found: case text unavailable" in html
    assert f"{MARK}-patient_profile" not in html
    assert f"{MARK}-reasoning-0" in html  # the judge's text comes from the results file


def test_show_text_notices_a_changed_input_file(marked_run):
    cases = marked_run.with_name("cases.jsonl")
    lines = cases.read_text().splitlines()
    cases.write_text("\n".join(reversed(lines)) + "\n")
    html = render_html(build_report([marked_run], worst_n=100, show_text=True), plots=False)
    assert "the file changed since the run" in html


def test_show_text_reads_the_input_with_the_runs_mapping(tmp_path):
    rows = [{"id": f"m{i}", **{f: f"{MARK}-{f}-{i}" for f in TRIAL_FIELDS if f != "workflow_answer"},
             "answer": f"{MARK}-answer-{i}"} for i in range(3)]
    cases = write_jsonl(tmp_path / "cases.jsonl", rows)
    results = evaluate(Task("trial_eligibility", cases, mapping={"workflow_answer": "answer"},
                            id_column="id"),
                       Judge("judge-m", spec=JudgeSpec(backend="fake"), backend=FakeBackend([])),
                       RunOptions(tmp_path / "results.jsonl")).results_path
    plain = render_html(build_report([results], worst_n=10, show_text=True), plots=False)
    assert f"{MARK}-answer-0" not in plain and "another --id-column" in plain
    no_map = render_html(build_report([results], worst_n=10, show_text=True,
                                      cases=CaseSource(None, {}, "id")),
                         plots=False)
    assert f"{MARK}-answer-0" not in no_map and "pass the same options to the report" in no_map
    mapped = render_html(build_report([results], worst_n=10, show_text=True,
                                      cases=CaseSource(None, {"workflow_answer": "answer"}, "id")),
                         plots=False)
    assert f"{MARK}-answer-0" in mapped and f"{MARK}-trial_title-2" in mapped
    assert "the file changed" not in mapped and "pass the same" not in mapped


HOSTILE_IDS = ['<script>alert("id")</script>', '"><img src=x onerror=alert(1)>',
               "{{ 7*7 }}{% raw %}", "</td></tr></table><h1>broken</h1>", "&amp; &lt;"]


@pytest.fixture
def hostile_run(tmp_path):
    texts = [h.text for h in CORPUS] + ['<script>alert("text")</script>',
                                        "<style>body{display:none}</style>",
                                        '<img src="http://example.invalid/x.png">']
    rows = [{"case_id": HOSTILE_IDS[i] if i < len(HOSTILE_IDS) else f"h{i}",
             **{field: text for field in TRIAL_FIELDS}} for i, text in enumerate(texts)]
    outputs = [trial_verdict(1 + i % 5, i, reasoning="<script>judge()</script>")
               for i in range(len(rows))]
    return run_fake(rows, tmp_path / "hostile", "<b>judge</b>", outputs)


def test_hostile_text_and_ids_are_escaped(hostile_run, tmp_path):
    html = render_html(build_report([hostile_run], worst_n=1000, show_text=True))
    page = parse(html)
    names = [tag for tag, _ in page.tags]
    assert "script" not in names and "form" not in names
    assert names.count("h1") == 1  # the page's own title only
    assert all(attrs.get("src", SVG_URI).startswith(SVG_URI) for tag, attrs in page.tags
               if tag == "img")
    assert not any(name.startswith("on") for _, attrs in page.tags for name in attrs)
    assert names.count("style") == 1
    assert "&lt;script&gt;alert(&#34;text&#34;)&lt;/script&gt;" in html
    text = "".join(page.text)
    for case_id in HOSTILE_IDS:
        assert case_id in text  # shown as text, exactly
    assert "{{ 7*7 }}" in text and "&lt;b&gt;judge&lt;/b&gt;" in html
    assert "http://example.invalid" not in [attrs.get("src") for _, attrs in page.tags]


# ---------------------------------------------------------------- CLI


def invoke(*args):
    return CliRunner().invoke(cli, ["report", *map(str, args)], catch_exceptions=False)


def test_cli_writes_the_report(two_runs, tmp_path):
    out = tmp_path / "sub" / "report.html"
    result = invoke(two_runs["a"], two_runs["b"], "--html", out, "--labels", two_runs["labels"],
                    "--label-field", "expert_qrel", "--resamples", 100, "--worst-by",
                    "accuracy", "--worst", 2)
    assert result.exit_code == 0, result.output
    html = out.read_text(encoding="utf-8")
    assert "Agreement with labels" in html and "Worst cases by accuracy" in html
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600


def one_line_error(result, *needles):
    assert result.exit_code == 2, result.output
    message = result.output.strip()
    assert "\n" not in message and "Traceback" not in message, message
    for needle in needles:
        assert needle in message, (needle, message)


def test_cli_errors(two_runs, tmp_path):
    html = tmp_path / "r.html"
    missing = tmp_path / "nope.jsonl"
    result = invoke(missing, "--html", html)
    assert result.exit_code == 2 and "nope.jsonl" in result.output
    one_line_error(invoke(two_runs["a"], "--html", html, "--worst-by", "bogus"),
                   "unknown --worst-by key 'bogus'", "accuracy")
    rows = [json.loads(line) for line in (EXAMPLES / "pathology_report.jsonl").read_text()
            .splitlines() if line]
    other = run_fake(rows, tmp_path / "path", "judge-p", [], rubric="pathology_report")
    one_line_error(invoke(two_runs["a"], other, "--html", html), str(other),
                   "'pathology_report'", "'trial_eligibility'", "one rubric")
    one_line_error(invoke(two_runs["a"], two_runs["a"], "--html", html), "given twice")
    unrelated = write_jsonl(tmp_path / "labels.jsonl", [{"case_id": "zzz", "y": 1}])
    one_line_error(invoke(two_runs["a"], "--html", html, "--labels", unrelated,
                          "--label-field", "y"), "no case id", "labels.jsonl")
    one_line_error(invoke(two_runs["a"], "--html", html, "--labels", two_runs["labels"],
                          "--label-field", "nope"), "label field 'nope'")
    result = invoke(two_runs["a"], "--html", html, "--labels", two_runs["labels"])
    assert result.exit_code == 2 and "--label-field" in result.output
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    one_line_error(invoke(empty, "--html", html), "empty.jsonl", "no result records")
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_text('{"not": "a record"}\n')
    result = invoke(damaged, "--html", html)
    assert result.exit_code == 2 and "damaged.jsonl line 1" in result.output
    assert not html.exists()


# ---------------------------------------------------------------- in a real browser

needs_chromium = pytest.mark.skipif(
    browser.find_chromium() is None,
    reason="no chromium binary (make chromium installs Debian's; or set EVALUATOR_CHROMIUM)")


@needs_chromium
def test_report_renders_in_headless_chromium(hostile_run, two_runs, tmp_path):
    image = pytest.importorskip("PIL.Image", reason="Pillow comes with matplotlib")
    page = tmp_path / "report.html"
    write_report([two_runs["a"], two_runs["b"]], page, agreement_resamples=100, worst_n=5,
                 labels=label_source(two_runs["labels"], "expert_qrel"))
    shot = browser.render(page, tmp_path / "report.png")
    assert shot.returncode == 0, shot.stderr[-2000:]
    assert shot.console == [], shot.console
    # The technical sections are folded (closed <details>): the same page with every one
    # opened, as a reader clicking them would, is where the plots must be drawn.
    html = page.read_text(encoding="utf-8")
    opened = tmp_path / "opened.html"
    opened.write_text(html.replace("<details ", "<details open ").replace(
        "<details>", "<details open>"), encoding="utf-8")
    assert opened.read_text(encoding="utf-8").count("<details open") == html.count("<details")
    shot = browser.render(opened, tmp_path / "opened.png")
    assert shot.returncode == 0 and shot.console == [], shot.console
    with image.open(shot.png) as png:
        assert png.size == (1280, 4000)
        rgb = png.convert("RGB")
        colours = rgb.getcolors(maxcolors=1 << 20)
        assert colours is not None and len(colours) > 50
        white = next((count for count, colour in colours if colour == (255, 255, 255)), 0)
        assert white < 0.97 * 1280 * 4000
        # The first file's bars (matplotlib's tab10 blue, used nowhere in the page's CSS):
        # the embedded SVG plots were drawn.
        assert any(colour == (0x1F, 0x77, 0xB4) for _, colour in colours)
    # Hostile case text on the page, shown: still nothing on the console.
    hostile_page = write_report([hostile_run], tmp_path / "hostile.html", worst_n=1000,
                                show_text=True)
    shot = browser.render(hostile_page, tmp_path / "hostile.png")
    assert shot.returncode == 0 and shot.console == [], shot.console


@needs_chromium
def test_the_console_check_catches_errors(two_runs, tmp_path):
    """The check above would fail on a broken script or a refused network load."""
    html = render_html(build_report([two_runs["a"]], worst_n=0), plots=False)
    assert "</body>" in html
    broken = tmp_path / "broken.html"
    without_csp, removed = re.subn(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", html)
    assert removed == 1
    broken.write_text(without_csp.replace("</body>",
                                          "<script>undefinedFunction()</script></body>"))
    shot = browser.render(broken, tmp_path / "broken.png", height=600)
    assert any("Uncaught ReferenceError" in line for line in shot.console), shot.stderr[-3000:]
    fetching = tmp_path / "fetching.html"
    fetching.write_text(html.replace("</body>", '<img src="http://127.0.0.1:9/x.png"></body>'))
    shot = browser.render(fetching, tmp_path / "fetching.png", height=600)
    assert any("Content Security Policy" in line and "127.0.0.1" in line
               for line in shot.console), shot.stderr[-3000:]
    inline = tmp_path / "inline.html"
    inline.write_text(html.replace("</body>", "<script>1</script></body>"))
    shot = browser.render(inline, tmp_path / "inline.png", height=600)
    assert any("inline" in line for line in shot.console), shot.stderr[-3000:]


# --- issue 17: case sets, --common-cases, agreement warnings and bias figures in the page -

@pytest.fixture(scope="module")
def unequal_runs(trial_rows, tmp_path_factory):
    """Judge A on every case, judge B on the first third only (a smaller case set), and a
    constant judge C on every case."""
    base = tmp_path_factory.mktemp("unequal")
    rows = [dict(r) for r in trial_rows]
    third = max(3, len(rows) // 3)
    a = run_fake(rows, base / "a", "judge-a",
                 [trial_verdict(1 + 3 * (label_of(r, i) == 2), i) for i, r in enumerate(rows)])
    b = run_fake(rows[:third], base / "b", "judge-b",
                 [trial_verdict(2 + (i % 2), i) for i in range(third)])
    c = run_fake(rows, base / "c", "judge-c", [trial_verdict(2, i) for i in range(len(rows))])
    labels = write_jsonl(base / "labels.jsonl", [
        {"case_id": r["case_id"], "expert_qrel": label_of(r, i),
         "generator_model": r.get("generator_model", f"gen-{i % 2}")}
        for i, r in enumerate(rows)])
    return {"a": a, "b": b, "c": c, "labels": labels, "n": len(rows), "third": third}


def test_different_case_sets_are_said_and_common_cases_compares_like_with_like(unequal_runs):
    runs = unequal_runs
    plain = build_report([runs["a"], runs["b"]], worst_n=0)
    assert vars(plain.case_sets) == {"ok_counts": [runs["n"], runs["third"]], "differ": True,
                                  "common": runs["third"]}
    assert plain.files[0].summary.criteria["accuracy"].n == runs["n"]
    html = render_html(plain, plots=False)
    assert "judged on different case sets" in html and "--common-cases" in html
    common = build_report([runs["a"], runs["b"]], worst_n=3, common_cases=True,
                          agreement_resamples=100, labels=label_source(runs["labels"],
                                                                       "expert_qrel"))
    assert vars(common.common_cases) == {"n": runs["third"], "union": runs["n"]}
    for entry in common.files:
        assert entry.summary.criteria["accuracy"].n == runs["third"]
        assert len(entry.values["accuracy"]) == runs["third"]
    assert [item.result.joined for item in common.agreement.files] == \
        [runs["third"]] * 2
    assert not common.agreement.n_differs
    first_ids = {r.case_id for r in read_results(runs["b"])}
    assert all(row.case_id in first_ids for row in common.worst.by_file[0].rows)
    html = render_html(common, plots=False)
    assert f"Common cases: n = {runs['third']}</strong>" in html
    assert "judged on different case sets" not in html
    # The status table still counts every record.
    assert status_table(common)[0].cases == runs["n"]


def test_agreement_warnings_methods_and_bias_figures_in_the_page(unequal_runs, tmp_path):
    runs = unequal_runs
    out = tmp_path / "r.html"
    result = invoke(runs["a"], runs["c"], "--html", out, "--labels", runs["labels"],
                    "--label-field", "expert_qrel", "--resamples", 100, "--by",
                    "generator_model", "--label-scale", "1-2", "--worst", 0)
    assert result.exit_code == 0, result.output
    html = out.read_text(encoding="utf-8")
    text = " ".join(parse(html).text)
    assert "the judge gave the same value (2) to all" in text            # judge C
    assert "all agreement statistics are meaningless for accuracy: the judge gave 2 on " \
        "every case" in text
    assert "bootstrap BCa, 100 resamples" in text and "Wilson" in text
    assert "F distribution (pingouin)" in text
    assert "rows: label, --label-scale; columns: judge, rubric scale" in text
    assert "verbosity: score vs length" in text and "judge's verdict (completion tokens)" in text
    assert "generator_model" in text and "score vs rest" in text
    assert "-0.00" not in text
    if (runs["n"]) == 109:   # the shared dev data: the reference label gives the label away
        assert "circular labels: 'expert_qrel' can be read from the input field " \
               "'ground_truth_label'" in text


def test_agreement_rows_name_the_file_they_belong_to(unequal_runs):
    runs = unequal_runs
    report = build_report([runs["a"], runs["c"]], worst_n=0, agreement_resamples=100,
                          labels=label_source(runs["labels"], "expert_qrel"))
    html = render_html(report, plots=False)
    text = " ".join(parse(html).text)
    # Judge C (#2) is the constant one: its warnings and * notes say #2, never #1.
    assert "(#2 judge-c · results.jsonl): the judge gave the same value (2)" in text
    assert "(#1 judge-a · results.jsonl): the judge gave the same value" not in text
    assert "* #2 judge-c · results.jsonl: all agreement statistics are meaningless for " \
        "accuracy: the judge gave 2 on every case" in text
    assert "* #1 judge-a · results.jsonl: all agreement statistics" not in text
    verbosity = [row for row in table_rows(html) if row and row[0].startswith("judge's verdict")]
    assert [row[1] for row in verbosity] == ["#1", "#2"] * len(report.scored_keys)


# --- a newcomer's review of one page: criteria without labels, and two judge-only CIs ----

def _section(html: str, name: str, after: str) -> str:
    """The page's ``name`` section (from its id to the next section's)."""
    start = html.index(f'id="{name}"')
    return html[start:html.index(f'id="{after}"', start)]


@pytest.fixture(scope="module")
def labelled_on_accuracy(tmp_path_factory):
    """Two systems whose labels (``accuracy.label``) rate accuracy only, of the three
    criteria the rubric scores, and the report built on them."""
    from tests.report_world import two_systems

    world = two_systems(tmp_path_factory.mktemp("acc"), n=150, labelled=40,
                        criteria=("accuracy",))
    labels = label_source([world["A"].labels_csv, world["B"].labels_csv], "accuracy.label")
    report = build_report([world["A"].results, world["B"].results], labels=labels,
                          agreement_resamples=100, worst_n=0)
    return world, report, render_html(report, plots=False)


def test_a_criterion_without_labels_gets_one_line_not_a_row_of_dashes(labelled_on_accuracy):
    _, report, html = labelled_on_accuracy
    assert report.scored_keys[:3] == ["hallucination", "accuracy", "clarity"]
    why = "no labels given (--label-field accuracy.label rates accuracy only)"
    assert report.agreement.unlabelled == {"hallucination": why, "clarity": why}
    section = _section(html, "agreement", "estimates")
    text = " ".join(" ".join(parse(section).text).split())
    assert f"hallucination : {why}" in text and f"clarity : {why}" in text
    headings = [t for t, _ in parse(section).tags if t == "h3"]
    assert len(headings) == 1 and "<h3>accuracy</h3>" in section
    rows = table_rows(section)
    # No row whose figures are all dashes, and no table with a header and no rows.
    assert not [r for r in rows if len(r) > 1 and all(c in ("-", "") for c in r[1:])]
    assert "verbosity: score vs length" not in section   # no lengths: no table at all
    # accuracy's table: file, n and 8 statistics, one row per file.
    assert [r[1] for r in rows if r and r[0].startswith("#") and len(r) == 10] == ["40", "40"]


def test_the_page_says_which_ci_each_judge_only_mean_has(labelled_on_accuracy):
    """The estimates' judge-only CI is the normal one (as PPI++'s), the Criteria section's
    the summary's bootstrap: both stay as they were, and each section says which it is."""
    import math
    import statistics

    world, report, html = labelled_on_accuracy
    scores = [r.scores["accuracy"] for r in read_results(world["A"].results)]
    mean, half = statistics.fmean(scores), 1.959963984540054 * statistics.stdev(scores)
    half /= math.sqrt(len(scores))
    [row] = [r for r in report.estimates.rows
             if r.criterion == "accuracy" and r.file == str(world["A"].results)]
    assert row.judge_mean == pytest.approx(mean)
    assert row.judge_ci == pytest.approx([mean - half, mean + half])
    boot = report.files[0].summary.criteria["accuracy"].ci95
    assert boot != pytest.approx(row.judge_ci, abs=1e-6)   # two intervals, one mean
    estimates = " ".join(" ".join(parse(_section(html, "estimates", "consistency")
                                        if 'id="consistency"' in html else
                                        html[html.index('id="estimates"'):]).text).split())
    assert ("Judge only : the judge's mean over every case with a normal-approximation "
            "(CLT) 95% CI, the same kind as PPI++'s") in estimates
    assert "percentile-bootstrap CI" in estimates
    criteria = " ".join(" ".join(parse(_section(html, "criteria", "agreement")).text).split())
    assert "percentile bootstrap" in criteria
    assert ("number of cases. The Clinician-level estimates section's judge only figure is "
            "the judge's mean with a normal-approximation CI") in criteria
