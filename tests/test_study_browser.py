"""A study labelled in a real headless Chromium (the system one, driven by Playwright): two
clinicians label a two-system study with the keyboard through ``evaluator study label``;
no response of their sessions (URL, headers, body) names a system, its files or its sheet
folder; each journal holds its system's labels; and the paired difference ``estimate``
reads from the two sheets is the one recomputed by hand from the journals and the results.
With EVALUATOR_DOC_SCREENSHOTS=1 it writes docs/images/study-label.png."""

from __future__ import annotations

import sys
from collections import defaultdict

import pytest
from click.testing import CliRunner

from evaluator.analysis.estimate import ppi
from evaluator.analysis.estimate.estimate import estimate
from evaluator.cli.main import cli
from evaluator.data.results import read_results
from evaluator.data.sheet import latest_labels, read_journal
from evaluator.data.sources import LabelSource
from evaluator.data.study_draw import labels_dir, read_study_draw, sheet_folders
from tests.label_browser import Server, chromium, doc_screenshot, playwright_or_reason
from tests.study_world import ANSWERS, SYSTEMS, make_study, study_plan
from tests.test_study_label import leaks

SKIP = playwright_or_reason()[1]
pytestmark = pytest.mark.skipif(SKIP is not None, reason=SKIP or "")
STUDY = [sys.executable, "-m", "evaluator", "study"]


def _keys(system: int, case_id: str, labeller: str) -> str:
    """The keys a clinician types for an item: accuracy, then clarity (1-5 each)."""
    number = int(case_id[2:])
    accuracy = 1 + (2 * system + number + len(labeller)) % 5
    return f"{accuracy}{1 + (number + system) % 5}"


def test_two_clinicians_label_a_study_blind_and_the_paired_difference_is_their_labels(
        tmp_path):
    study = make_study(tmp_path / "study", cases=30,
                       plan=study_plan(n=22, overlap=0.2))
    drawn = CliRunner().invoke(cli, ["study", "draw", str(study)])
    assert drawn.exit_code == 0, drawn.output
    labels = labels_dir(study)
    draw = read_study_draw(labels)
    typed: dict[int, dict[tuple[str, str], float]] = {0: {}, 1: {}}
    seen: list[tuple[str, str]] = []

    def keep(response) -> None:
        try:
            body = response.text()
        except Exception:  # noqa: BLE001 (a redirect has no body to read)
            body = ""
        headers = "\n".join(f"{k}: {v}" for k, v in response.headers.items())
        seen.append((response.url, f"{headers}\n{response.request.post_data or ''}\n{body}"))

    with Server(study, ["ana", "ben"], command=STUDY) as server, chromium() as browser:
        printed = "\n".join(server.printed)
        assert leaks(printed) == []  # the terminal's lines name no system either
        for name, url in server.urls.items():
            context = browser.new_context(viewport={"width": 1300, "height": 900})
            page = context.new_page()
            page.on("response", keep)
            page.goto(url)
            items = draw.queues[name]
            for index, (system, case_id) in enumerate(items, start=1):
                assert page.url.endswith(f"/case/{index}"), page.url
                answer = page.locator("#answer pre").inner_text()
                assert answer.strip() == ANSWERS[system].format(i=int(case_id[2:]))
                if name == "ana" and index == 1:
                    doc_screenshot(page, "study-label")
                keys = _keys(system, case_id, name)
                for key in keys:
                    page.keyboard.press(key)
                with page.expect_navigation():
                    page.keyboard.press("Enter")
                typed[system][(name, case_id)] = float(keys[0])
            assert page.url.endswith("/done")
            assert f"All {len(items)} answers labelled" in page.locator("h1").inner_text()
            context.close()
    assert len(seen) > 2 * len(draw.queues["ana"])
    for url, text in seen:
        assert leaks(url) == [] and leaks(text) == [], (url, leaks(url + text))
    # Each journal: the labels typed on its system's items, and no other.
    folders = sheet_folders(labels, draw)
    per_case: dict[int, dict[str, list[float]]] = {0: defaultdict(list), 1: defaultdict(list)}
    for system, folder in enumerate(folders):
        latest = latest_labels(read_journal(folder))
        got = {(k[0], k[1]): e.value for k, e in latest.items() if k[2] == "accuracy"}
        assert got == typed[system]
        for (_, case_id), value in got.items():
            per_case[system][case_id].append(value)
    # The paired difference B - A the estimate gives, and the same by hand: PPI++ on the
    # per-case label differences (each case's label the mean of its labellers') with the
    # judge's per-case differences (difference() in evaluator/analysis/estimate).
    results = [study / results for _, results, _ in SYSTEMS]
    report = estimate(results, LabelSource(tuple(folders), "accuracy"),
                      criteria=["accuracy"])
    (row,) = [d for d in report.differences if d.criterion == "accuracy"]
    assert row.mode == "paired" and row.n_labelled == len(draw.cases)
    judge = [{r.case_id: float(r.scores["accuracy"]) for r in read_results(path)
              if r.status == "ok"} for path in results]
    population = sorted(judge[0])
    label = [{c: sum(v) / len(v) for c, v in per_case[k].items()} for k in (0, 1)]
    both = [c for c in population if c in label[0] and c in label[1]]
    assert sorted(both) == sorted(draw.cases)
    gap = {c: judge[1][c] - judge[0][c] for c in population}
    by_hand = ppi.ppi_mean([label[1][c] - label[0][c] for c in both],
                           [gap[c] for c in both],
                           [gap[c] for c in population if c not in set(both)])
    assert by_hand.estimate is not None
    assert row.estimate == pytest.approx(by_hand.estimate, abs=1e-12)
