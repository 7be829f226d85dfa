"""Files a user names are treated as possibly wrong: the input given as the output, a file
without a trailing newline, a symbolic link, a planted temporary file, a report over its own
results, two outputs sharing companions. Each is refused (exit code 2, one line, no
traceback) with every file as it was, or written safely. (Two runs at once: test_locks.py.)"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from evaluator.cli.main import cli
from evaluator.data.files import (
    OutputRefused,
    atomic_writer,
    open_private_append,
    write_json_atomic,
)
from evaluator.data.results import read_results
from tests.conftest import EXAMPLES, example_cases, write_jsonl


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def run(source, output, *extra, rubric="pathology_report"):
    return invoke("run", "-r", rubric, "-m", "fake", "-i", source, "-o", output,
                  "--no-progress", *extra)


def refused(result, *needles):
    """Exit code 2 with one line on stderr naming ``needles``, and no traceback."""
    assert result.exit_code == 2, result.output
    message = result.stderr.strip()
    assert "\n" not in message and "Traceback" not in result.output, result.output
    assert message.startswith("error: "), message
    for needle in needles:
        assert needle in message, (needle, message)
    return message


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _our_lock(path: Path) -> bool:
    """A run's lock file (kept, never removed: a refused run may leave one)."""
    return (path.name.endswith(".evaluator-lock") and not path.is_symlink()
            and path.read_bytes().startswith(b"evaluator run lock for "))


def digests(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (links as their target's name) but the runs' own lock
    files: to show nothing moved."""
    return {str(p.relative_to(folder)): (f"-> {os.readlink(p)}" if p.is_symlink()
                                         else digest(p))
            for p in sorted(folder.rglob("*"))
            if (p.is_symlink() or p.is_file()) and not _our_lock(p)}


@pytest.fixture
def cases(tmp_path) -> Path:
    return write_jsonl(tmp_path / "cases.jsonl", example_cases("pathology_report"))


@pytest.fixture
def done(tmp_path, cases) -> Path:
    """A finished run: results, manifest and summary in tmp_path/out."""
    output = tmp_path / "out" / "results.jsonl"
    assert run(cases, output).exit_code == 0
    return output


# ------------------------------------------------------- 1. the input as the output


def _no_trailing_newline(path: Path, rubric: str) -> Path:
    text = "".join(json.dumps(row) + "\n" for row in example_cases(rubric)[:1]).rstrip("\n")
    path.write_text(text, encoding="utf-8")
    return path


def test_output_equal_to_input_without_trailing_newline_is_refused(tmp_path):
    # The case in the issue: one case, no newline after it. It used to be "repaired" to 0
    # bytes with exit code 0.
    one = _no_trailing_newline(tmp_path / "one.jsonl", "trial_eligibility")
    before = digests(tmp_path)
    refused(run(one, one, rubric="trial_eligibility"), "one.jsonl", "input")
    assert digests(tmp_path) == before


@pytest.mark.parametrize("spelling", ["same", "dotted", "hardlink"])
def test_output_is_never_the_input_however_named(tmp_path, cases, spelling):
    (tmp_path / "sub").mkdir()
    output = {"same": cases, "dotted": tmp_path / "sub" / ".." / "cases.jsonl",
              "hardlink": tmp_path / "again.jsonl"}[spelling]
    if spelling == "hardlink":
        os.link(cases, output)
    before = digests(tmp_path)
    for extra in ((), ("--force-new",)):
        refused(run(cases, output, *extra), "input")
        assert digests(tmp_path) == before


def test_a_file_without_trailing_newline_that_is_not_ours_is_not_repaired(tmp_path, cases):
    notes = tmp_path / "notes.jsonl"
    notes.write_bytes(b'{"note": "kept as it is"}')  # not a result, no newline
    before = digests(tmp_path)
    refused(run(cases, notes), "notes.jsonl", "incomplete line", "not repaired")
    assert digests(tmp_path) == before


def test_a_torn_results_file_without_its_manifest_is_not_repaired(done, cases):
    folder = done.parent
    lines = done.read_bytes().splitlines(keepends=True)
    done.write_bytes(b"".join(lines[:-1]) + lines[-1][:40])
    (folder / "results.manifest.json").unlink()
    before = digests(folder)
    refused(run(cases, done), "results.jsonl", "incomplete line", "results.manifest.json")
    assert digests(folder) == before


def test_a_torn_results_file_with_its_manifest_is_repaired(done, cases):
    # The control: the repair the refusals above must not break.
    lines = done.read_bytes().splitlines(keepends=True)
    done.write_bytes(b"".join(lines[:-1]) + lines[-1][:40])
    assert run(cases, done).exit_code == 0
    ids = [r.case_id for r in read_results(done)]
    assert sorted(ids) == sorted(c["case_id"] for c in example_cases("pathology_report"))


def test_a_file_that_is_not_results_is_refused_even_with_complete_lines(tmp_path, cases):
    other = write_jsonl(tmp_path / "other.jsonl", example_cases("pathology_report"))
    before = digests(tmp_path)
    refused(run(cases, other), "other.jsonl line 1", "not a result record")
    assert digests(tmp_path) == before


# ------------------------------------------------------------- 2. symbolic links


@pytest.mark.parametrize("companion", ["results.jsonl", "results.summary.json",
                                       "results.manifest.json", "results.evaluator-lock"])
def test_a_symlinked_output_or_companion_is_refused(tmp_path, cases, companion):
    victim = tmp_path / "victim.txt"
    victim.write_text("someone else's file\n")
    victim.chmod(0o644)
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / companion).symlink_to(victim)
    before = digests(tmp_path)
    refused(run(cases, folder / "results.jsonl"), companion, "symbolic link")
    assert digests(tmp_path) == before
    assert stat.S_IMODE(victim.stat().st_mode) == 0o644


def test_a_dangling_symlink_creates_nothing(tmp_path, cases):
    link = tmp_path / "link.jsonl"
    link.symlink_to(tmp_path / "elsewhere.jsonl")
    refused(run(cases, link), "symbolic link")
    assert not (tmp_path / "elsewhere.jsonl").exists()


def test_a_symlinked_output_of_a_resumed_run_is_refused(done, cases, tmp_path):
    # The results file is replaced by a link after a first run (a resume would append).
    victim = tmp_path / "victim.jsonl"
    victim.write_bytes(done.read_bytes())
    done.unlink()
    done.symlink_to(victim)
    before = digests(tmp_path)
    refused(run(cases, done, "--force-new"), "symbolic link")
    refused(run(cases, done), "symbolic link")
    assert digests(tmp_path) == before


def test_writers_never_follow_a_link_planted_after_the_checks(tmp_path):
    # O_NOFOLLOW at the open itself: a link made between the check and the write.
    victim = tmp_path / "victim.txt"
    victim.write_text("theirs\n")
    link = tmp_path / "r.jsonl"
    link.symlink_to(victim)
    with pytest.raises(OutputRefused, match="symbolic link"):
        open_private_append(link)
    with pytest.raises(OutputRefused, match="symbolic link"):
        write_json_atomic(link, {"x": 1})
    assert victim.read_text() == "theirs\n" and link.is_symlink()


def test_an_existing_results_file_is_set_to_0600(done, cases):
    done.chmod(0o644)
    assert run(cases, done).exit_code == 0
    for name in ("results.jsonl", "results.summary.json", "results.manifest.json"):
        assert stat.S_IMODE((done.parent / name).stat().st_mode) == 0o600, name


def test_a_file_with_other_hard_links_is_refused(done, cases, tmp_path):
    os.link(done, tmp_path / "elsewhere.jsonl")
    before = digests(tmp_path)
    refused(run(cases, done), "hard links")
    assert digests(tmp_path) == before


# ------------------------------------------------------- 3. temporary files, folders


def test_planted_tmp_files_are_never_written_through(tmp_path, cases):
    folder = tmp_path / "shared"
    folder.mkdir()
    victims = []
    for name in ("results.jsonl", "results.summary.json", "results.manifest.json"):
        victim = tmp_path / f"victim-{name}"
        victim.write_text("theirs\n")
        (folder / f"{name}.tmp").symlink_to(victim)
        victims.append(victim)
    output = folder / "results.jsonl"
    assert run(cases, output).exit_code == 0
    # A resume rewrites the results file (a backend error to judge again) and the manifest.
    lines = output.read_bytes().splitlines()
    record = json.loads(lines[0])
    record.update(status="backend_error", scores=None, aggregates=None, reason="x")
    output.write_bytes(b"\n".join([json.dumps(record).encode()] + lines[1:]) + b"\n")
    assert run(cases, output).exit_code == 0
    assert all(v.read_text() == "theirs\n" for v in victims)
    assert len(read_results(output)) == 3
    leftovers = [p.name for p in folder.iterdir() if p.name.endswith(".tmp")
                 and not p.is_symlink()]
    assert leftovers == []


def test_temporary_files_have_random_names_and_mode_0600(tmp_path):
    target = tmp_path / "summary.json"
    with atomic_writer(target) as handle:
        handle.write(b"{}")
        [tmp] = [p for p in tmp_path.iterdir() if p != target]
        assert tmp.name != "summary.json.tmp" and tmp.name.endswith(".tmp")
        assert stat.S_IMODE(tmp.stat().st_mode) == 0o600
    with atomic_writer(target) as handle:
        [second] = [p for p in tmp_path.iterdir() if p != target]
        assert second.name != tmp.name
    assert target.read_bytes() == b"" and sorted(tmp_path.iterdir()) == [target]


def test_output_folders_are_created_0700(tmp_path, cases):
    old = os.umask(0o022)
    try:
        output = tmp_path / "new" / "deeper" / "results.jsonl"
        assert run(cases, output).exit_code == 0
        html = tmp_path / "reports" / "r.html"
        assert invoke("report", output, "--html", html).exit_code == 0
    finally:
        os.umask(old)
    for folder in (tmp_path / "new", tmp_path / "new" / "deeper", tmp_path / "reports"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder


# ------------------------------------------------------------ 5. report over a file


def test_report_over_its_own_results_is_refused_even_with_overwrite(done, tmp_path):
    before = digests(tmp_path)
    refused(invoke("report", done, "--html", done), "own inputs")
    refused(invoke("report", done, "--html", done, "--overwrite"), "own inputs")
    assert digests(tmp_path) == before


def test_report_over_the_case_file_is_refused_even_with_overwrite(done, cases, tmp_path):
    before = digests(tmp_path)
    refused(invoke("report", done, "--html", cases), ".html or .htm")
    refused(invoke("report", done, "--html", cases, "--overwrite"), ".html or .htm")
    assert digests(tmp_path) == before


@pytest.mark.parametrize("name", ["results.summary.json", "results.manifest.json",
                                  "results.lock", "other.jsonl", "models.yaml", "labels.csv",
                                  "notes"])
def test_report_never_replaces_a_file_that_is_not_html(done, cases, tmp_path, name):
    # The hostile review: --overwrite replaced the summary, the manifest, the lock and
    # another run's results. A report is only ever written to an .html/.htm name.
    other = run(cases, tmp_path / "out" / "other.jsonl")
    assert other.exit_code == 0
    target = done.parent / name
    if not target.exists():
        target.write_text("precious\n")
    before = digests(tmp_path)
    for extra in ((), ("--overwrite",)):
        message = refused(invoke("report", done, "--html", target, *extra), ".html or .htm")
        assert "--overwrite" not in message
    assert digests(tmp_path) == before


def test_report_never_replaces_a_case_file_named_relative_to_another_folder(
        tmp_path, monkeypatch):
    # The run was started in tmp_path with a relative input name; the report runs elsewhere.
    cases = write_jsonl(tmp_path / "cases.jsonl", example_cases("pathology_report"))
    monkeypatch.chdir(tmp_path)
    assert run("cases.jsonl", "results.jsonl").exit_code == 0
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    before = digests(tmp_path)
    refused(invoke("report", tmp_path / "results.jsonl", "--html", cases, "--overwrite"),
            "cases.jsonl")
    assert digests(tmp_path) == before


def test_report_never_replaces_a_moved_case_file(done, cases, tmp_path):
    # Same bytes as the run's input (its SHA-256 is in the manifest), under another name.
    copy = tmp_path / "copy.html"
    copy.write_bytes(cases.read_bytes())
    before = digests(tmp_path)
    refused(invoke("report", done, "--html", copy, "--overwrite"), "copy.html", "case file")
    assert digests(tmp_path) == before


def test_report_over_another_file_needs_overwrite(done, tmp_path):
    page = tmp_path / "notes.html"
    page.write_text("<!DOCTYPE html><title>my notes</title>\n")
    before = digests(tmp_path)
    refused(invoke("report", done, "--html", page), "notes.html", "--overwrite")
    assert digests(tmp_path) == before
    assert invoke("report", done, "--html", page, "--overwrite").exit_code == 0
    assert "Evaluation report" in page.read_text()


def test_a_report_replaces_a_report(done, tmp_path):
    page = tmp_path / "r.html"
    assert invoke("report", done, "--html", page).exit_code == 0
    page.write_text(page.read_text().replace("Evaluation report", "Old report", 1))
    assert invoke("report", done, "--html", page).exit_code == 0
    assert "Old report" not in page.read_text()


def test_report_through_a_symlink_is_refused(done, tmp_path):
    victim = tmp_path / "victim.html"
    victim.write_text("theirs\n")
    link = tmp_path / "r.html"
    link.symlink_to(victim)
    refused(invoke("report", done, "--html", link, "--overwrite"), "symbolic link")
    assert victim.read_text() == "theirs\n" and link.is_symlink()


# ------------------------------------------------- 6. two outputs with the same stem


@pytest.mark.parametrize("extra", [(), ("--force-new",)])
def test_a_second_output_with_the_same_stem_is_refused(tmp_path, cases, extra):
    first = tmp_path / "col.jsonl"
    assert run(cases, first).exit_code == 0
    before = digests(tmp_path)
    refused(run(cases, tmp_path / "col.json", *extra), "col.manifest.json", "col.jsonl",
            "same stem")
    assert digests(tmp_path) == before


@pytest.mark.parametrize("name", ["results.evaluator-lock", "results.manifest.json",
                                  "results.summary.json", "results.jury"])
def test_an_output_named_like_a_companion_is_refused(done, cases, name):
    # results.evaluator-lock would be its own lock file, the others another
    # output's manifest, summary or jury folder.
    folder = done.parent
    target = folder / name
    if not target.exists():
        target.write_bytes(done.read_bytes())
    before = digests(folder)
    for extra in ((), ("--force-new",)):
        refused(run(cases, target, *extra), name, "named like a file a run writes")
        assert digests(folder) == before


@pytest.mark.parametrize("name", ["results.csv", "results.CSV", "results.parquet",
                                  "results.xlsx", "results.html", ".csv", "r.ods"])
def test_an_output_named_like_a_table_or_a_page_is_refused(tmp_path, cases, name):
    # JSON lines in a file named .csv open in a spreadsheet as one blob a row.
    before = digests(tmp_path)
    refused(run(cases, tmp_path / name, "--force-new"), name, "a run writes JSON lines",
            "evaluator export")
    assert digests(tmp_path) == before


def test_a_run_started_under_a_table_name_before_the_refusal_still_resumes(
        tmp_path, cases, monkeypatch):
    # A run an earlier release wrote to old.csv (the refusal patched away) is not stranded:
    # renaming it is refused by its manifest, so refusing it would mean judging it again.
    monkeypatch.setattr("evaluator.run.resume.OTHER_FORMATS", ())
    assert run(cases, tmp_path / "old.csv").exit_code == 0
    monkeypatch.undo()
    lines = (tmp_path / "old.csv").read_text().splitlines()
    (tmp_path / "old.csv").write_text("\n".join(lines[:1]) + "\n")  # one case done
    again = run(cases, tmp_path / "old.csv")
    assert again.exit_code == 0, again.output
    assert "1 case(s) already done" in again.stderr


def test_a_summary_of_another_file_is_refused_without_its_manifest(tmp_path, cases):
    assert run(cases, tmp_path / "col.jsonl").exit_code == 0
    (tmp_path / "col.manifest.json").unlink()
    (tmp_path / "col.jsonl").unlink()
    before = digests(tmp_path)
    refused(run(cases, tmp_path / "col.json"), "col.summary.json", "col.jsonl")
    assert digests(tmp_path) == before


def test_the_report_ignores_a_summary_of_another_file(done, tmp_path):
    from evaluator.report.build import build_report

    summary = done.with_name("results.summary.json")
    stored = json.loads(summary.read_text())
    assert stored["results_file"] == "results.jsonl"
    copy = tmp_path / "out" / "results.json"
    copy.write_bytes(done.read_bytes())
    notes = build_report([copy], worst_n=0).files[0].notes
    assert any("summary of results.jsonl" in note for note in notes), notes


def test_every_example_rubric_still_runs_into_a_fresh_folder(tmp_path):
    # The checks above refuse nothing ordinary: a plain first run and a plain resume.
    source = EXAMPLES / "trial_eligibility.jsonl"
    output = tmp_path / "runs" / "t.jsonl"
    assert run(source, output, rubric="trial_eligibility").exit_code == 0
    before = digest(output)
    assert run(source, output, rubric="trial_eligibility").exit_code == 0
    assert digest(output) == before


@pytest.mark.parametrize("companion", ["results.manifest.json", "results.summary.json"])
@pytest.mark.parametrize("content", ["my notes, not JSON\n", '{"title": "my own json"}\n',
                                     "[1, 2]\n"])
@pytest.mark.parametrize("extra", [(), ("--force-new",)])
def test_a_users_own_manifest_or_summary_is_never_overwritten(tmp_path, cases, companion,
                                                               content, extra):
    (tmp_path / companion).write_text(content)
    before = digests(tmp_path)
    refused(run(cases, tmp_path / "results.jsonl", *extra), companion,
            "not a", "written by this tool")
    assert digests(tmp_path) == before


def test_companions_of_an_earlier_version_still_resume(done, cases):
    # What the first versions wrote: a manifest with settings_hash and runs, a summary with
    # rubric and cases (no results_file, no status_counts).
    summary = done.with_name("results.summary.json")
    summary.write_text(json.dumps({"summary_version": 1, "rubric": "pathology_report",
                                   "judge": "fake", "cases": 3}))
    assert run(cases, done).exit_code == 0
    assert "status_counts" in json.loads(summary.read_text())


def test_renamed_files_are_refused_with_accurate_words(done, cases):
    folder = done.parent
    for path in list(folder.iterdir()):
        if path.name.startswith("results."):
            path.rename(folder / ("qwen." + path.name[len("results."):]))
    message = refused(run(cases, folder / "qwen.jsonl"), "qwen.manifest.json",
                      "was written for the results file results.jsonl", "rename them back")
    assert "belongs to" not in message


@pytest.mark.parametrize(("output", "needle"), [
    ("", "--output is empty"),
    ("folder/", "names a folder"),
    (".", "names a folder"),
    ("existing", "names a folder"),
    ("bad\udcff.jsonl", "not a valid UTF-8 file name"),
])
def test_an_output_name_that_cannot_be_a_results_file_is_refused(tmp_path, cases, monkeypatch,
                                                                 output, needle):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "existing").mkdir()
    before = digests(tmp_path)
    refused(run(cases, output), needle)
    assert digests(tmp_path) == before


def test_an_output_named_by_o_equals_is_refused_unless_it_exists(tmp_path, cases, monkeypatch):
    """`-o=x.jsonl` is click's -o with the value '=x.jsonl': a new file of that name is
    refused, naming what was meant; one that exists (a run started so) still resumes."""
    monkeypatch.chdir(tmp_path)
    before = digests(tmp_path)
    result = invoke("run", "-r", "pathology_report", "-m", "fake", "-i", cases, "-o=x.jsonl",
                    "--no-progress")
    refused(result, "--output =x.jsonl starts with '='", "write -o x.jsonl instead")
    assert digests(tmp_path) == before
    done = run(cases, "=y.jsonl".replace("=", "./="))  # made on purpose: ./=y.jsonl
    assert done.exit_code == 0, done.output
    again = invoke("run", "-r", "pathology_report", "-m", "fake", "-i", cases, "-o=y.jsonl",
                   "--no-progress")
    assert again.exit_code == 0 and "already done" in again.stderr, again.output


def test_an_input_name_that_is_not_utf8_is_refused(tmp_path, cases):
    source = Path(os.fsdecode(bytes(tmp_path) + b"/in\xfe.jsonl"))
    source.write_bytes(cases.read_bytes())
    before = digests(tmp_path)
    message = refused(run(source, tmp_path / "out.jsonl"), "--input", "not a valid UTF-8")
    assert "\\udcfe" in message
    assert digests(tmp_path) == before


def test_a_complete_last_record_without_its_newline_is_kept(done, cases):
    whole = done.read_bytes()
    done.write_bytes(whole.rstrip(b"\n"))  # an editor that drops the final newline
    result = run(cases, done)
    assert result.exit_code == 0, result.output
    assert "0 to judge again" in result.stderr or "judge again" not in result.stderr
    assert f"{len(example_cases('pathology_report'))} case(s) already done" in result.stderr
    assert done.read_bytes() == whole  # nothing judged again, the newline added


def test_a_field_mapped_twice_is_refused(tmp_path, cases):
    result = run(cases, tmp_path / "out.jsonl", "--map", "reference_report=a",
                 "--map", "reference_report=b")
    refused(result, "--map", "'reference_report' is mapped twice ('a' and 'b')")
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize("field", ["batch_size", "max_model_len"])
def test_huge_judge_sizes_are_refused(field):
    from pydantic import ValidationError

    from evaluator.judges.models_file import JudgeSpec

    with pytest.raises(ValidationError, match="less than or equal"):
        JudgeSpec(backend="fake", **{field: 10**23})


@pytest.mark.parametrize("name", ["two\nlines.jsonl", "esc\x1b[31mape.jsonl"])
def test_a_file_name_with_control_characters_stays_on_one_line(tmp_path, cases, name):
    (tmp_path / name).symlink_to(tmp_path / "elsewhere.jsonl")
    message = refused(run(cases, tmp_path / name), "symbolic link")
    assert "\x1b" not in message and ascii(name)[1:-1] in message


def test_an_output_under_a_file_with_a_newline_in_its_name_stays_on_one_line(tmp_path, cases):
    parent = tmp_path / "not\na folder"
    parent.write_text("a file\n")
    message = refused(run(cases, parent / "out.jsonl"), "not a folder")
    assert "not\\na folder" in message
