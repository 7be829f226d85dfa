"""The read side treats every file it is given as possibly wrong: a FIFO or a device is
refused before it is opened (a FIFO would hang the command, /dev/zero exhaust memory), a
results file with one case id on two lines is refused (it would be counted twice), error
lines name lines and never case ids, config text cannot send escape sequences to the
terminal, and ``report --show-text`` never shows a file the run did not read."""

from __future__ import annotations

import csv
import importlib.machinery
import importlib.util
import json
import os
from argparse import Namespace
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from evaluator.cli.main import cli
from evaluator.run.manifest import manifest_path_for
from tests.conftest import ROOT, refused_in_one_line, write_jsonl
from tests.pairwise_world import CRITERIA, honest, run_judge, write_records

SECRET = "PHI-SECRET-4410"  # in case text and case ids: must never reach stderr
RUBRIC = "drug_monograph_similarity"


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def refused(result, *needles: str) -> str:
    """Exit code 2, one line on stderr naming ``needles``, no traceback, no case text."""
    return refused_in_one_line(result, SECRET, *needles)


def _rows(n: int = 4, tag: str = "") -> list[dict]:
    return [{"case_id": f"c{i}", "Resp": f"{SECRET}{tag} answer {i}",
             "Truth": f"{SECRET}{tag} truth {i}"} for i in range(n)]


@pytest.fixture
def done(tmp_path) -> Path:
    cases = write_jsonl(tmp_path / "cases.jsonl", _rows())
    output = tmp_path / "out.jsonl"
    result = invoke("run", "-r", RUBRIC, "-m", "fake", "-i", cases, "-o", output,
                    "--no-progress")
    assert result.exit_code == 0, result.output
    return output


@pytest.fixture
def labels(tmp_path) -> Path:
    return write_jsonl(tmp_path / "labels.jsonl",
                       [{"case_id": f"c{i}", "y": i % 3} for i in range(4)])


@pytest.fixture
def fifo(tmp_path) -> Path:
    path = tmp_path / "fifo.jsonl"
    os.mkfifo(path)
    return path


# ------------------------------------------------- C. FIFOs and devices are refused


def test_check_regular_file_names_the_kind(tmp_path, fifo):
    from evaluator.common.readable import NotARegularFile, check_regular_file

    with pytest.raises(NotARegularFile, match="labels file .*fifo.jsonl is a FIFO"):
        check_regular_file(fifo, "labels file")
    with pytest.raises(NotARegularFile, match="is a device"):
        check_regular_file(Path("/dev/zero"), "results file")
    with pytest.raises(NotARegularFile, match="is a folder"):
        check_regular_file(tmp_path, "rubric file")
    check_regular_file(Path(__file__), "test file")  # a regular file passes


def _models_fifo(tmp_path: Path) -> Path:
    path = tmp_path / "models.yaml"
    os.mkfifo(path)
    return path


def test_a_fifo_models_file_is_refused(tmp_path, done):
    models = _models_fifo(tmp_path)
    refused(invoke("models", "--models-file", models), "models file", "FIFO")
    refused(invoke("run", "-r", RUBRIC, "-i", tmp_path / "cases.jsonl", "-o",
                   tmp_path / "new.jsonl", "--models-file", models, "--no-progress"),
            "models file", "FIFO")


def test_a_fifo_rubric_is_refused(tmp_path):
    folder = tmp_path / "rubrics"
    folder.mkdir()
    os.mkfifo(folder / "evil.yaml")
    refused(invoke("rubrics", "--rubrics-dir", folder), "evil.yaml", "FIFO")
    result = invoke("validate", "--rubrics-dir", folder)
    assert result.exit_code == 2 and "evil.yaml is a FIFO" in result.output
    refused(invoke("rubrics", folder / "evil.yaml"), "evil.yaml", "FIFO")


def test_fifo_and_device_results_and_labels_are_refused(tmp_path, done, labels, fifo):
    zero = tmp_path / "zz.jsonl"
    zero.symlink_to("/dev/zero")
    html = tmp_path / "r.html"
    for results, what in ((fifo, "FIFO"), (zero, "device")):
        refused(invoke("agree", results, "--labels", labels, "--label-field", "y"),
                "results file", results.name, what)
        refused(invoke("report", results, "--html", html), "results file", results.name, what)
    refused(invoke("agree", done, "--labels", fifo, "--label-field", "y"), "labels file",
            "FIFO")
    refused(invoke("report", done, "--html", html, "--labels", fifo, "--label-field", "y"),
            "labels file", "FIFO")
    assert not html.exists()


def test_fifo_companions_do_not_hang_the_report(tmp_path, done):
    for companion in (tmp_path / "out.manifest.json", tmp_path / "out.summary.json"):
        companion.unlink()
        os.mkfifo(companion)
    result = invoke("report", done, "--html", tmp_path / "r.html", "--show-text")
    assert result.exit_code == 0, result.output
    assert "out.summary.json is not a regular file" in (tmp_path / "r.html").read_text()


# ------------------------------------------------ D. one case id on two lines


def _duplicated(done: Path) -> Path:
    lines = done.read_bytes().splitlines(keepends=True)
    copy = done.with_name("dup.jsonl")
    copy.write_bytes(b"".join(lines) + lines[1])
    return copy


def test_report_and_agree_refuse_a_case_id_twice(tmp_path, done, labels):
    dup = _duplicated(done)
    for result in (invoke("report", dup, "--html", tmp_path / "r.html"),
                   invoke("agree", dup, "--labels", labels, "--label-field", "y")):
        message = refused(result, "dup.jsonl", "lines 2 and 5")
        assert "c1" not in message
    assert not (tmp_path / "r.html").exists()


def _edit_line(done: Path, edit) -> Path:
    """A copy of ``done`` with its second record changed by ``edit`` (NaN and Infinity
    written as Python's json writes them)."""
    lines = done.read_text().splitlines()
    record = json.loads(lines[1])
    edit(record)
    lines[1] = json.dumps(record)
    copy = done.with_name("edited.jsonl")
    copy.write_text("\n".join(lines) + "\n")
    return copy


def _score(value):
    return lambda record: record["scores"].__setitem__("Score", value)


def _mass(record):
    probabilities = record["distributions"]["Score"]["probabilities"]
    for value in map(str, range(1, 11)):  # each still in [0, 1]; together 1.8
        probabilities[value] += 0.08


@pytest.mark.parametrize("edit, named", [
    (_score(99), "scores.Score"), (_score(True), "Score is true or false"),
    (_score("3"), "scores.Score"), (_score(float("nan")), "Score is NaN or infinite"),
    (_score(float("inf")), "Score is NaN or infinite"),
    (_mass, "the probabilities sum to 1.8"),
], ids=["99", "true", "string", "nan", "infinity", "sum-1.8"])
def test_a_score_the_rubric_cannot_produce_is_a_damaged_line_everywhere(tmp_path, done, labels,
                                                                        edit, named):
    """Score 99 on the 0-10 scale moved the summary's mean and export wrote it; true counted
    as 1, "3" as 3; NaN and Infinity made summary and agree exit 70 (internal error)."""
    edited = _edit_line(done, edit)
    commands = [("summary", edited),
                ("agree", edited, "--labels", labels, "--label-field", "y"),
                ("estimate", edited, "--labels", labels, "--label-field", "y",
                 "--criterion", "Score"),
                ("review", edited, "--out", tmp_path / "review"),
                ("report", edited, "--html", tmp_path / "r.html")]
    if importlib.util.find_spec("pyarrow"):
        commands.append(("export", edited, "--parquet", tmp_path / "x.parquet"))
    for command in commands:
        message = refused(invoke(*command), "edited.jsonl line 2", named)
        assert "c1" not in message
    assert not any((tmp_path / name).exists() for name in ("review", "r.html", "x.parquet"))


# ---------------------------------------------------- E. lines, never case ids


@pytest.mark.parametrize("rows, words", [
    ([{"case_id": SECRET, "y": 1}, {"case_id": SECRET, "y": 2}], ("lines 1 and 2",)),
    ([{"case_id": SECRET, "y": "high"}], ("line 1", "not a number")),
    ([{"case_id": SECRET, "z": 1}, {"case_id": "b", "y": 1}], ("line 1", "'y' is missing")),
])
def test_label_errors_name_lines_not_case_ids(tmp_path, done, rows, words):
    bad = write_jsonl(tmp_path / "bad-labels.jsonl", rows)
    refused(invoke("agree", done, "--labels", bad, "--label-field", "y"), *words)
    refused(invoke("report", done, "--html", tmp_path / "r.html", "--labels", bad,
                   "--label-field", "y"), *words)


# ------------------------------------------------ F. config text is printed inert


def test_escape_sequences_in_config_text_are_not_printed_raw(tmp_path):
    models = tmp_path / "models.yaml"
    models.write_text(yaml.safe_dump({"default": "j", "judges": {"j": {
        "backend": "fake", "description": "nice\x1b]0;pwned\x07 \x1b[2J judge"}}}))
    result = invoke("models", "--models-file", models)
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output and "\x07" not in result.output
    assert "\\x1b]0;pwned\\x07" in result.output
    rubric = yaml.safe_load((ROOT / "prompts" / f"{RUBRIC}.yaml").read_text())
    rubric["description"] = "rubric \x1b[31mred\x1b[0m\u202e"
    folder = tmp_path / "rubrics"
    folder.mkdir()
    (folder / f"{RUBRIC}.yaml").write_text(yaml.safe_dump(rubric, allow_unicode=True))
    result = invoke("rubrics", "--rubrics-dir", folder, RUBRIC)
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output and "\u202e" not in result.output
    assert "\\x1b[31mred" in result.output


# ------------------------------------------- G. advice each command can follow


def test_report_and_agree_never_suggest_force_new(tmp_path, labels):
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"case_id": "x"}])
    for result in (invoke("report", bad, "--html", tmp_path / "r.html"),
                   invoke("agree", bad, "--labels", labels, "--label-field", "y")):
        message = refused(result, "bad.jsonl", "line 1")
        assert "--force-new" not in message


def _build_bundle():
    loader = importlib.machinery.SourceFileLoader("build_bundle",
                                                  str(ROOT / "scripts" / "build-bundle"))
    spec = importlib.util.spec_from_loader("build_bundle", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def _bundle_args(tmp_path: Path, models: Path) -> Namespace:
    return Namespace(out=tmp_path / "bundle", models_file=models, lock=ROOT / "locks" / "cpu.txt",
                     judge=[], python_version=None, platform=None, tools=None, sign_key=None,
                     tar=False)


def test_build_bundle_reads_models_yaml_strictly(tmp_path):
    bb = _build_bundle()
    models = tmp_path / "models.yaml"
    models.write_text("default: j\ndefault: k\njudges: {}\n")
    with pytest.raises(bb.BuildError, match="duplicate key"):
        bb.build(_bundle_args(tmp_path, models))
    assert not (tmp_path / ".bundle.partial").exists()


@pytest.mark.parametrize("planted", ["symlink", "foreign folder"])
def test_build_bundle_never_removes_a_staging_folder_it_did_not_make(tmp_path, planted):
    bb = _build_bundle()
    victim = tmp_path / "precious"
    victim.mkdir()
    (victim / "keep.txt").write_text("mine\n")
    staging = tmp_path / ".bundle.partial"
    if planted == "symlink":
        staging.symlink_to(victim)
    else:
        staging.mkdir()
        (staging / "keep.txt").write_text("mine\n")
    with pytest.raises(bb.BuildError, match="remove it yourself"):
        bb.build(_bundle_args(tmp_path, ROOT / "models.yaml"))
    assert (victim / "keep.txt").read_text() == "mine\n"
    assert os.path.lexists(staging)
    if planted == "foreign folder":
        assert (staging / "keep.txt").exists()


def test_build_bundle_removes_its_own_stale_staging_folder(tmp_path):
    bb = _build_bundle()
    staging = tmp_path / ".bundle.partial"
    staging.mkdir()
    (staging / bb.STAGING_MARKER).write_text("x\n")
    bb.remove_stale_staging(staging)
    assert not staging.exists()


# --------------------------------------- B. --show-text shows only the run's own file


def _run_in(folder: Path, monkeypatch, tag: str) -> Path:
    folder.mkdir()
    write_jsonl(folder / "cases.jsonl", _rows(tag=tag))
    monkeypatch.chdir(folder)
    result = invoke("run", "-r", RUBRIC, "-m", "fake", "-i", "cases.jsonl", "-o",
                    "results.jsonl", "--no-progress")
    assert result.exit_code == 0, result.output
    return folder / "results.jsonl"


def _page(results: Path, tmp_path: Path) -> str:
    html = tmp_path / "page.html"
    result = invoke("report", results, "--html", html, "--show-text", "--overwrite")
    assert result.exit_code == 0, result.output
    return html.read_text(encoding="utf-8")


def test_show_text_from_another_folder_shows_the_runs_own_file(tmp_path, monkeypatch):
    # Same file name and same case ids in the report's folder: a different patient's text.
    results = _run_in(tmp_path / "a", monkeypatch, "-A")
    other = tmp_path / "b"
    other.mkdir()
    write_jsonl(other / "cases.jsonl", _rows(tag="-B"))
    monkeypatch.chdir(other)
    page = _page(results, tmp_path)
    assert f"{SECRET}-A answer 0" in page and f"{SECRET}-B" not in page
    (tmp_path / "a" / "cases.jsonl").unlink()  # the run's file is gone: nothing is shown
    page = _page(results, tmp_path)
    assert SECRET not in page and "not the file the run read" in page


def test_show_text_without_a_manifest_shows_no_case_text(tmp_path, done):
    manifest_path_for(done).unlink()
    page = _page(done, tmp_path)
    assert f"{SECRET} answer 0" not in page and "cannot be shown to be the file" in page


def test_agree_json_still_works(done, labels):
    result = invoke("agree", done, "--labels", labels, "--label-field", "y", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)


# ------------------------------------------------- a CSV cell over 128 KiB

DEFAULT_CSV_LIMIT = 131_072


@pytest.fixture
def default_csv_limit():
    """The csv module's field limit as a fresh process has it (131,072 characters); the
    commands raise it themselves, so :func:`fresh` sets it back before each."""
    previous = csv.field_size_limit(DEFAULT_CSV_LIMIT)
    yield
    csv.field_size_limit(previous)


def fresh(*args):
    csv.field_size_limit(DEFAULT_CSV_LIMIT)
    return invoke(*args)


def test_a_cell_over_the_csv_field_limit_is_read_by_every_command(tmp_path,
                                                                  default_csv_limit):
    # A long case on a --show-text sheet that review itself wrote, and a long comment in a
    # preferences file: agree, estimate, review and compare read them.
    pytest.importorskip("sklearn", reason="compare needs the stats extra")
    long_text = f"{SECRET} " + "x" * 140_000
    rows = [{"case_id": f"c{i}", "Resp": long_text if i == 0 else f"{SECRET} {i}",
             "Truth": f"truth {i}"} for i in range(4)]
    cases = write_jsonl(tmp_path / "cases.jsonl", rows)
    results = tmp_path / "out.jsonl"
    assert fresh("run", "-r", RUBRIC, "-m", "fake", "-i", cases, "-o", results,
                 "--no-progress").exit_code == 0
    sheet = tmp_path / "sheet"
    done = fresh("review", results, "--out", sheet, "--design", "random", "--n", "4",
                 "--show-text", "--cases", cases)
    assert done.exit_code == 0, done.output
    csv.field_size_limit(2**31 - 1)  # this test's own read of the sheet
    with (sheet / "review.csv").open(newline="", encoding="utf-8-sig") as handle:
        table = list(csv.reader(handle))
    assert max(len(cell) for row in table for cell in row) > DEFAULT_CSV_LIMIT
    label = table[0].index("Score.label")
    for position, row in enumerate(table[1:]):
        row[label] = str(position % 2)
    filled = tmp_path / "filled.csv"
    with filled.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(table)
    agreed = fresh("agree", results, "--labels", filled, "--label-field", "Score.label",
                   "--resamples", "100", "--json")
    assert agreed.exit_code == 0, agreed.output
    assert json.loads(agreed.output[agreed.output.index("{"):])["joined"] == 4
    estimated = fresh("estimate", results, "--labels", filled, "--label-field", "Score.label",
                      "--json")
    assert estimated.exit_code == 0, estimated.output
    assert json.loads(estimated.output.splitlines()[0])["n_labelled"] == 4
    again = fresh("review", results, "--out", tmp_path / "next", "--labels", filled,
                  "--label-field", "Score.label")
    assert again.exit_code == 0, again.output
    assert "every judged case is labelled already (4 labelled)" in again.output
    records = run_judge(honest, 20, seed=4, criteria=CRITERIA)
    pairs = write_records(tmp_path / "ab.jsonl", records)
    preferences = tmp_path / "preferences.csv"
    with preferences.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["case_id", "preference", "comment"])
        writer.writerows([r.case_id, "A", long_text if i == 0 else "fine"]
                         for i, r in enumerate(records))
    compared = fresh("compare", pairs, "--criterion", "accuracy", "--labels", preferences,
                     "--label-field", "preference", "--json")
    assert compared.exit_code == 0, compared.output
    assert json.loads(compared.stdout)["comparisons"][0]["labels"]["n"] == 20
    for output in (agreed, estimated, again, compared):
        assert SECRET not in output.output


def test_a_malformed_labels_csv_is_refused_naming_file_and_line(tmp_path, done):
    labels = tmp_path / "labels.csv"
    labels.write_text(f'case_id,y,note\nc0,1,fine\nc1,2,"{SECRET}" said\nc2,0,ok\n')
    message = refused(invoke("agree", done, "--labels", labels, "--label-field", "y"),
                      str(labels), "line 3", "CSV syntax error")
    assert "double quotes" in message
