"""docs/study.md's recipe, followed verbatim on the example study (issue 48, item 5): every
command of its block runs as written, in a copy of ``examples/study``, but for ``study
label`` (a server the clinicians open), in whose place a script types the labels; the
report then prints exactly what the page shows under "With those labels the report
prints". With EVALUATOR_DOC_SCREENSHOTS=1 (and Chromium) it also writes the page's
screenshot, docs/images/study-report.png."""

from __future__ import annotations

import os
import re
import shlex
import shutil
from pathlib import Path

from click.testing import CliRunner

from evaluator.cli.main import cli
from evaluator.data.sheet import JournalEntry, append_label, now, read_sheet_info
from evaluator.data.study_draw import labels_dir, read_study_draw, sheet_folders

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "study.md"


def _block(marker: str) -> str:
    text = DOC.read_text(encoding="utf-8")
    found = re.search(rf"<!-- {marker} -->\n```\w*\n(.*?)```", text, re.DOTALL)
    assert found, f"docs/study.md has no block after <!-- {marker} -->"
    return found.group(1)


def scripted_label(system: int, case_id: str, criterion: str) -> float:
    """The script's label: a fixed pattern from the case id (not anyone's judgement), the
    candidate a point lower on a quarter of the cases."""
    base = 2 + sum(case_id.encode()) % 4
    lower = system == 1 and sum(case_id.encode()) % 4 == 1 and base > 1
    return float(base - (1 if lower else 0)) if criterion == "accuracy" else float(base)


def type_labels(study: Path) -> int:
    """Every labeller's labels of her queue, in each system's journal; how many."""
    labels = labels_dir(study)
    draw = read_study_draw(labels)
    count = 0
    for k, folder in enumerate(sheet_folders(labels, draw)):
        info = read_sheet_info(folder)
        for name in info.labellers:
            for case in info.cases_of(name, draw.cases):
                for criterion in info.criteria:
                    append_label(folder, JournalEntry(
                        labeller=name, time=now(), case_id=case, criterion=criterion,
                        value=scripted_label(k, case, criterion), sheet=info.fingerprint,
                        rubric_hash=info.rubric_hash))
                    count += 1
    return count


def test_the_recipe_as_written_gives_the_output_it_shows(tmp_path, monkeypatch):
    lines = [line for line in _block("recipe").splitlines() if line.strip()]
    first = lines[0]
    assert first == "cp -r examples/study my-study && cd my-study"
    shutil.copytree(ROOT / "examples" / "study", tmp_path / "my-study")
    monkeypatch.chdir(tmp_path / "my-study")
    runner = CliRunner()
    output = ""
    labelled = 0
    for line in lines[1:]:
        words = shlex.split(line)
        assert words[0] == "evaluator", line
        if words[1:3] == ["study", "label"]:
            labelled = type_labels(Path("."))  # the clinicians' part
            continue
        run = runner.invoke(cli, words[1:])
        assert run.exit_code == 0, (line, run.output)
        output = run.stdout
    assert labelled > 0
    expected = _block("recipe-output")
    assert output == expected, output
    page = Path("study-report.html").read_text(encoding="utf-8")
    sentence = " ".join(expected.split()).split(". ")[0]
    assert sentence in " ".join(page.split())
    if os.environ.get("EVALUATOR_DOC_SCREENSHOTS") == "1":
        from tests.browser import render

        rendered = render(Path("study-report.html").resolve(),
                          ROOT / "docs" / "images" / "study-report.png", width=1100,
                          height=760)
        assert rendered.returncode == 0 and not rendered.console
