"""A study's report (issue 48, item 3): it opens with the plan's rule applied to the primary
endpoint in one sentence whose numbers are the differences table's; secondary endpoints
are supporting figures; a constant judge's figure is said to be the labels alone; a plan
edited after the draw is stated and the frozen plan applied; a results file changed since
the draw is refused in one line."""

from __future__ import annotations

import re
from collections.abc import Callable
from html import unescape
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from evaluator.analysis.intervals import format_number
from evaluator.cli.main import cli
from evaluator.data.results import ResultRecord
from evaluator.data.sheet import JournalEntry, append_label, now, read_sheet_info
from evaluator.data.study_draw import labels_dir, read_study_draw, sheet_folders
from evaluator.study.plan import PLAN_FILE
from tests.label_world import SECRET, write_results
from tests.study_world import SYSTEMS, make_study, study_plan

NUMBER = re.compile(r"[-+]?\d+\.\d+")
# label(system index, case position) -> the value every labeller gives
Labels = Callable[[int, int], float]


def _plan(primary: dict, comparison: dict, n: int = 30, secondary: list | None = None) -> dict:
    plan = study_plan(n=n, overlap=0.2)
    plan["primary"] = primary
    plan["comparison"] = {"reference": SYSTEMS[0][0], **comparison}
    plan["secondary"] = secondary if secondary is not None else [{"criterion": "clarity"}]
    return plan


def _constant_judge(study: Path, value: int = 3) -> None:
    """Each system's results rewritten with one score for every case and criterion (the
    same cases, ok): a judge that tells nothing."""
    for _, results, _ in SYSTEMS:
        path = study / results
        records = [ResultRecord.model_validate_json(line)
                   for line in path.read_text().splitlines() if line.strip()]
        for r in records:
            assert r.scores is not None
            for key in ("hallucination", "accuracy", "clarity"):
                r.scores[key] = value
            r.distributions = None
        write_results(path, records)


def _label(study: Path, label: Labels) -> None:
    """Every labeller's labels of her cases on every system's sheet, in its journal."""
    folders = sheet_folders(labels_dir(study), read_study_draw(labels_dir(study)))
    draw = read_study_draw(labels_dir(study))
    position = {c: i for i, c in enumerate(sorted(draw.cases))}
    for k, folder in enumerate(folders):
        info = read_sheet_info(folder)
        for name in info.labellers:
            for case in info.cases_of(name, draw.cases):
                for criterion in info.criteria:
                    append_label(folder, JournalEntry(
                        labeller=name, time=now(), case_id=case, criterion=criterion,
                        value=float(label(k, position[case])), sheet=info.fingerprint,
                        rubric_hash=info.rubric_hash))


def _study(tmp_path: Path, plan: dict, label: Labels, *, cases: int = 60,
           constant: bool = False) -> Path:
    study = make_study(tmp_path / "study", cases=cases, plan=plan)
    if constant:
        _constant_judge(study)
    drawn = CliRunner().invoke(cli, ["study", "draw", str(study)])
    assert drawn.exit_code == 0, drawn.output
    _label(study, label)
    return study


def _report(study: Path, out: Path) -> tuple[str, str]:
    """(the terminal's output, the page's HTML)."""
    run = CliRunner().invoke(cli, ["study", "report", str(study), "--html", str(out),
                                   "--resamples", "200"])
    assert run.exit_code == 0, run.output
    return run.output, out.read_text(encoding="utf-8")


def _text(html: str, element_id: str) -> str:
    found = re.search(rf'id="{element_id}"[^>]*>(.*?)</p>', html, re.DOTALL)
    assert found, element_id
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", found.group(1))).split())


def _table_difference(html: str, outcome: str) -> tuple[str, str]:
    """The differences table's PPI++ estimate and CI for ``outcome`` (as printed)."""
    table = html.split('id="estimate-differences"', 1)[1].split("</table>", 1)[0]
    for row in re.findall(r"<tr>(.*?)</tr>", table, re.DOTALL):
        cells = [unescape(re.sub(r"<[^>]+>", "", c)).strip()
                 for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.DOTALL)]
        if cells and cells[0] == outcome:
            return cells[2], cells[3]
    raise AssertionError(f"no differences row for {outcome!r}")


def _numbers_match_the_table(sentence: str, html: str, outcome: str) -> list[float]:
    """The sentence's first three numbers (B - A and its CI) are the table's, as printed."""
    estimate, ci = _table_difference(html, outcome)
    low, high = ci.strip("[]").split(", ")
    numbers = NUMBER.findall(sentence)
    assert [float(n) for n in numbers[:3]] == [float(estimate), float(low), float(high)]
    assert numbers[1] == low and numbers[2] == high, (numbers, ci)
    return [float(n) for n in numbers]


def _better(k: int, i: int) -> float:
    """B's label is A's plus one or two: B clearly better on every case."""
    a = 2 + i % 2
    return a if k == 0 else a + 1 + (i % 3 == 0)


def test_superiority_shown_its_numbers_the_tables(tmp_path):
    plan = _plan({"criterion": "accuracy"}, {"type": "superiority"})
    out, html = _report(_study(tmp_path, plan, _better), tmp_path / "r.html")
    sentence = _text(html, "study-primary")
    b, a = SYSTEMS[1][0], SYSTEMS[0][0]
    assert sentence.startswith(f"{b} is better than {a} on mean accuracy: {b} - {a} = +")
    numbers = _numbers_match_the_table(sentence, html, "accuracy")
    assert numbers[1] > 0  # the whole CI above 0: the rule's condition, on the page's numbers
    assert sentence.split(". ")[0] in " ".join(out.split())  # the terminal says it too
    # The secondary endpoint is a figure that decides nothing, named as such.
    assert "they decide nothing" in html and "mean clarity:" in html
    # Systems by their names, not their file names, in the study block.
    block = html.split('id="study"', 1)[1].split("</section>", 1)[0]
    assert SYSTEMS[0][1] not in block and SYSTEMS[1][1] not in block


def test_non_inferiority_shown_above_the_margin(tmp_path):
    plan = _plan({"criterion": "accuracy"}, {"type": "non-inferiority", "margin": 0.25})

    def slightly_better(k: int, i: int) -> float:
        a = 2 + i % 2
        return a if k == 0 else a + (i % 3 == 0)

    _, html = _report(_study(tmp_path, plan, slightly_better), tmp_path / "r.html")
    sentence = _text(html, "study-primary")
    assert " is non-inferior to " in sentence
    numbers = _numbers_match_the_table(sentence, html, "accuracy")
    assert numbers[3] == -0.25 and numbers[1] > -0.25
    assert sentence.endswith("above the pre-declared margin -0.250.")


def test_non_inferiority_not_shown_says_where_the_ci_reaches(tmp_path):
    plan = _plan({"criterion": "accuracy"}, {"type": "non-inferiority", "margin": 0.25})

    def worse(k: int, i: int) -> float:
        a = 3 + i % 2
        return a if k == 0 else a - (i % 2 == 0)

    _, html = _report(_study(tmp_path, plan, worse), tmp_path / "r.html")
    sentence = _text(html, "study-primary")
    assert sentence.startswith(f"Non-inferiority of {SYSTEMS[1][0]} to {SYSTEMS[0][0]} on mean "
                               "accuracy is not shown")
    numbers = _numbers_match_the_table(sentence, html, "accuracy")
    reaches = re.search(r"the CI reaches (-?\d+\.\d+), below the pre-declared margin -0\.250",
                        sentence)
    assert reaches and float(reaches.group(1)) == numbers[1] < -0.25


def test_a_pass_rate_endpoint(tmp_path):
    plan = _plan({"criterion": "accuracy", "statistic": "pass_rate", "gate": "accuracy>=4"},
                 {"type": "superiority"})

    def passes_more(k: int, i: int) -> float:
        return (4 if i % 3 == 0 else 3) if k == 0 else (3 if i % 4 == 0 else 4)

    _, html = _report(_study(tmp_path, plan, passes_more), tmp_path / "r.html")
    sentence = _text(html, "study-primary")
    assert sentence.startswith(f"{SYSTEMS[1][0]} is better than {SYSTEMS[0][0]} on pass rate "
                               "of accuracy>=4")
    _numbers_match_the_table(sentence, html, "accuracy >= 4")


def test_too_few_labels_states_no_verdict(tmp_path):
    plan = _plan({"criterion": "accuracy"}, {"type": "superiority"}, n=12)
    _, html = _report(_study(tmp_path, plan, _better), tmp_path / "r.html")
    sentence = _text(html, "study-primary")
    assert sentence.startswith("Too few labels to decide: 12 labelled, at least 20 needed")
    assert "better than" not in sentence and "non-inferior" not in sentence
    assert 'data-verdict="too few labels"' in html
    _numbers_match_the_table(sentence, html, "accuracy")


def test_a_constant_judge_is_said_to_add_nothing(tmp_path):
    plan = _plan({"criterion": "accuracy"}, {"type": "superiority"})
    _, html = _report(_study(tmp_path, plan, _better, constant=True), tmp_path / "r.html")
    primary = _text(html, "study-primary")
    assert _text(html, "study-judge").startswith(
        "The judge added nothing to this figure (PPI++ weight 0): it is the labels alone")
    assert "corrected" not in primary
    _numbers_match_the_table(primary, html, "accuracy")


def test_a_plan_edited_after_the_draw_is_stated_and_the_frozen_plan_applied(tmp_path):
    plan = _plan({"criterion": "accuracy"}, {"type": "non-inferiority", "margin": 0.25})
    study = _study(tmp_path, plan, _better)
    frozen = read_study_draw(labels_dir(study)).plan_sha256
    edited = {**plan, "comparison": {**plan["comparison"], "margin": 1.5}}
    (study / PLAN_FILE).write_text(yaml.safe_dump(edited, sort_keys=False), encoding="utf-8")
    out, html = _report(study, tmp_path / "r.html")
    changed = _text(html, "study-plan-changed")
    assert changed.startswith("Plan changed after labelling began:")
    assert f"sha256 {frozen[:12]} it had when the labels were drawn" in changed
    assert "the decision applies the plan as declared then" in changed
    assert "margin -0.250" in _text(html, "study-primary")  # the frozen margin, not 1.5
    assert "WARNING: Plan changed after labelling began" in " ".join(out.split())
    (study / PLAN_FILE).unlink()  # gone altogether: still the frozen plan, and said so
    _, html = _report(study, tmp_path / "r2.html")
    assert "is gone or cannot be read" in _text(html, "study-plan-changed")


def test_a_results_file_changed_since_the_draw_is_refused_in_one_line(tmp_path):
    plan = _plan({"criterion": "accuracy"}, {"type": "superiority"})
    study = _study(tmp_path, plan, _better)
    results = study / SYSTEMS[1][1]
    results.write_text(results.read_text() + "\n")
    run = CliRunner().invoke(cli, ["study", "report", str(study), "--html",
                                   str(tmp_path / "r.html")])
    assert run.exit_code == 2, run.output
    line = run.output.strip()
    assert "\n" not in line and "Traceback" not in line and SECRET not in line
    assert "has changed since the study's labels were drawn" in line
    assert SYSTEMS[1][0] in line


def test_a_study_not_yet_drawn_is_refused_in_one_line(tmp_path):
    study = make_study(tmp_path / "study", plan=_plan({"criterion": "accuracy"},
                                                      {"type": "superiority"}))
    run = CliRunner().invoke(cli, ["study", "report", str(study), "--html",
                                   str(tmp_path / "r.html")])
    assert run.exit_code == 2, run.output
    assert len(run.output.strip().splitlines()) == 1 and "Traceback" not in run.output


@pytest.mark.parametrize("value", [0.25, -0.25, 0.0004])
def test_numbers_are_written_as_the_tables_write_them(value):
    # The sentence's formatter is the tables' (three decimals, never "-0.000").
    from evaluator.study.summary import fmt

    assert fmt(value) == format_number(value, 3)


def _refused(study: Path, out: Path) -> str:
    run = CliRunner().invoke(cli, ["study", "report", str(study), "--html", str(out)])
    assert run.exit_code == 2, run.output
    assert "Traceback" not in run.output and SECRET not in run.output
    lines = run.output.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_a_frozen_plan_edited_by_hand_is_refused(tmp_path):
    plan = _plan({"criterion": "accuracy"}, {"type": "non-inferiority", "margin": 0.25})
    study = _study(tmp_path, plan, _better)
    record = labels_dir(study) / "study-draw.json"
    record.write_text(record.read_text().replace("margin: 0.25", "margin: 0.05"))
    line = _refused(study, tmp_path / "r.html")
    assert "the frozen plan is not the text whose SHA-256 is plan_sha256" in line


def test_a_sheet_folder_that_is_not_its_systems_is_refused(tmp_path):
    import shutil

    plan = _plan({"criterion": "accuracy"}, {"type": "superiority"})
    study = _study(tmp_path, plan, _better)
    labels = labels_dir(study)
    shutil.rmtree(labels / "system-2")
    shutil.copytree(labels / "system-1", labels / "system-2")
    line = _refused(study, tmp_path / "r.html")
    assert f"(the sheet of {SYSTEMS[1][0]}) is not the sheet the study drew for it" in line
    shutil.rmtree(labels / "system-2")
    (labels / "system-2").symlink_to(labels / "system-1")
    assert "is missing or not a folder" in _refused(study, tmp_path / "r.html")
    (labels / "system-2").unlink()
    assert "is missing or not a folder" in _refused(study, tmp_path / "r.html")


def test_a_study_without_a_label_yet_says_so(tmp_path):
    study = make_study(tmp_path / "study", cases=30,
                       plan=_plan({"criterion": "accuracy"}, {"type": "superiority"}, n=20))
    assert CliRunner().invoke(cli, ["study", "draw", str(study)]).exit_code == 0
    line = _refused(study, tmp_path / "r.html")
    assert "no label is saved yet" in line and "evaluator study label" in line


def test_a_results_path_of_the_frozen_plan_is_named_as_the_frozen_plans(tmp_path):
    plan = _plan({"criterion": "accuracy"}, {"type": "superiority"})
    study = _study(tmp_path, plan, _better)
    (study / "moved").mkdir()
    (study / SYSTEMS[1][1]).rename(study / "moved" / SYSTEMS[1][1])
    line = _refused(study, tmp_path / "r.html")
    assert line.startswith("error: the plan frozen at the draw (")
    assert "study-draw.json) cannot be applied" in line


def test_identical_labels_give_no_verdict_and_say_why(tmp_path):
    plan = _plan({"criterion": "accuracy"}, {"type": "non-inferiority", "margin": 0.25})
    _, html = _report(_study(tmp_path, plan, lambda k, i: 3 + i % 2), tmp_path / "r.html")
    sentence = _text(html, "study-primary")
    assert 'data-verdict="no interval"' in html
    assert sentence.startswith(f"No verdict: the difference {SYSTEMS[1][0]} - {SYSTEMS[0][0]} "
                               "on mean accuracy has no interval from its 30 labelled cases")
    assert "nothing is decided" in sentence and "Too few" not in sentence
    assert 'id="study-judge"' not in html  # no figure read, so nothing said the judge added


def _items(html: str, start: str) -> list[str]:
    """The raw HTML of each list item whose text starts with ``start``."""
    return re.findall(rf"<li>({re.escape(start)}.*?)</li>", html, re.DOTALL)


def test_the_agreement_lines_call_the_systems_by_their_names(tmp_path):
    # A name with characters HTML would read as markup: escaped wherever the page shows it.
    name = "Quorvane <b>&"
    plan = _plan({"criterion": "accuracy"}, {"type": "superiority"})
    plan["systems"][1]["name"] = name
    _, html = _report(_study(tmp_path, plan, _better), tmp_path / "r.html")
    assert name not in html and "Quorvane &lt;b&gt;&amp;" in html
    block = html.split('id="study"', 1)[1].split("</section>", 1)[0]
    (agreement,) = _items(block, "Agreement, accuracy:")
    # The judge's agreement and the clinicians' with each other (the ceiling), per system.
    text = unescape(agreement)
    assert "clinicians vs each other" in text
    judge, ceiling = text.split("clinicians vs each other", 1)
    for part in (judge, ceiling):
        assert f"{SYSTEMS[0][0]}: " in part and f"{name}: " in part, part
    assert "#1" not in text and "#2" not in text
    # The Decision section's lines that list systems call them so too.
    decision = html.split('id="study"', 1)[1].split("</section>", 1)[1]
    lines = [unescape(line) for start in ("accuracy: judge vs clinicians", "Design: ",
                                          "Labels: ", "Blind: ")
             for line in _items(decision, start)]
    assert len(lines) == 4, lines
    for line in lines:
        assert SYSTEMS[0][0] in line and name in line, line
        assert "#1" not in line and "#2" not in line, line
