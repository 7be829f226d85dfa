"""``evaluator log`` and ``evaluator run --mlflow`` against a real MLflow tracking server
(``mlflow server``, SQLite backend, artifacts proxied to a temporary folder, on 127.0.0.1:
started once per session) and against the default local store, read back with MLflow's own
client. Case text carries a marker that must appear in no param, metric, tag or artifact;
a tracker that is down or refuses is one line, exit 2, the run's files untouched; telemetry
is off in a process where MLflow would otherwise send it."""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from evaluator.analysis.agreement.agreement import agreement
from evaluator.analysis.estimate.estimate import estimate
from evaluator.analysis.gates import parse_gate
from evaluator.cli.main import cli
from evaluator.judges.backends.fake import FakeBackend
from evaluator.judges.models_file import JudgeSpec
from evaluator.judges.offline import MLFLOW_TELEMETRY_ENV
from evaluator.run.runner import evaluate
from evaluator.run.task import Judge, RunOptions, Task
from evaluator.tracking.log_run import TrackingOptions, log_run
from evaluator.tracking.mlflow_store import MlflowMissing, TrackingError
from tests.conftest import EXAMPLES, ROOT, label_source, write_jsonl

if not __import__("importlib.util").util.find_spec("mlflow"):
    pytest.skip("needs the mlflow extra (and the test-tools extra for its server)",
                allow_module_level=True)
# This process reads runs back with mlflow: telemetry off before anything imports it (the
# code under test sets it too; the telemetry test below runs in a clean subprocess).
os.environ.update(MLFLOW_TELEMETRY_ENV)

MARK = "PHI_MARKER_123"
CRITERIA = ("critical_finding_concordance", "factual_accuracy", "factual_completeness",
            "overall_equivalence")
SERVER_START_LIMIT = 240  # seconds; ~30 s on two busy cores


# ------------------------------------------------------------------------------ helpers

def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def hashes(*paths: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


def companions(results: Path) -> list[Path]:
    return [results, results.with_name(results.stem + ".summary.json"),
            results.with_name(results.stem + ".manifest.json")]


def one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: ") and "Traceback" not in stderr
    return lines[0]


def client(uri: str):
    # Imported here: the module is skipped without mlflow.
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=uri)


def everything_logged(mlflow_client, run_id: str, into: Path) -> str:
    """Every param, metric name, tag and artifact byte of a run, as one text."""
    run = mlflow_client.get_run(run_id)
    folder = Path(mlflow_client.download_artifacts(run_id, "", str(into)))
    artifacts = [p.read_bytes().decode("utf-8", "replace")
                 for p in sorted(folder.rglob("*")) if p.is_file()]
    return "\n".join([json.dumps(run.data.params), json.dumps(run.data.tags),
                      json.dumps(sorted(run.data.metrics)), *artifacts])


def verdict(i: int, reasoning: str) -> str:
    return json.dumps({"critical_finding_concordance": 1 + i % 4,
                       "factual_accuracy": 1 + (i // 2) % 3,
                       "factual_completeness": 1 + i % 3,
                       "overall_equivalence": 1 + (i * 3) % 4, "reasoning": reasoning})


def marked_run(folder: Path, n: int = 14) -> Path:
    """A finished pathology run with the scripted fake judge: a marker in every case field
    (not the ids) and in the judge's reasoning; one invalid verdict quoting the marker."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = [{"case_id": f"case-{i:02d}", "reference_report": f"{MARK} reference {i} Jane Doe",
             "generated_report": f"{MARK} generated {i} MRN 0042"} for i in range(n)]
    cases = write_jsonl(folder / "cases.jsonl", rows)
    outputs = [verdict(i, f"{MARK} reasoning {i}") for i in range(n - 1)]
    outputs.append(f'{{"critical_finding_concordance": "{MARK} raw"')
    judge = Judge("judge-m", spec=JudgeSpec(backend="fake"), backend=FakeBackend(outputs))
    return evaluate(Task("pathology_report", cases), judge,
                    RunOptions(folder / "results.jsonl")).results_path


# ------------------------------------------------------------------------------ fixtures

@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory):
    """A real ``mlflow server`` on 127.0.0.1 (SQLite backend, artifacts proxied to a
    folder), started once for the session; yields its URI and how long it took to start."""
    base = tmp_path_factory.mktemp("mlflow-server")
    port = free_port()
    log = (base / "server.log").open("wb")
    env = {**os.environ, **MLFLOW_TELEMETRY_ENV, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server",
         "--backend-store-uri", f"sqlite:///{base / 'mlflow.db'}",
         "--artifacts-destination", str(base / "artifacts"),
         "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
        stdout=log, stderr=subprocess.STDOUT, env=env, cwd=base, start_new_session=True)
    uri = f"http://127.0.0.1:{port}"
    try:
        while True:
            if process.poll() is not None:
                pytest.fail("mlflow server exited:\n" + (base / "server.log").read_text()[-3000:])
            try:
                with urllib.request.urlopen(f"{uri}/health", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() - started > SERVER_START_LIMIT:
                pytest.fail("mlflow server did not start:\n"
                            + (base / "server.log").read_text()[-3000:])
            time.sleep(0.25)
        yield {"uri": uri, "start_seconds": time.monotonic() - started,
               "artifacts": base / "artifacts"}
    finally:
        # The server's own process group (start_new_session): uvicorn and its worker.
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    return marked_run(tmp_path_factory.mktemp("marked"))


@pytest.fixture
def here(tmp_path, monkeypatch) -> Path:
    """A current folder of the test's own, with no tracking URI inherited."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return tmp_path


# ------------------------------------------------------------------------------ a server

def test_log_to_a_server_reads_back_params_metrics_tags_and_artifacts(
        mlflow_server, finished, tmp_path):
    before = hashes(*companions(finished))
    result = invoke("log", finished, "--tracking-uri", mlflow_server["uri"],
                    "--experiment", "pathology-server", "--run-name", "first")
    assert result.exit_code == 0, result.output
    run_id = result.stdout.strip()
    assert f"logged run 'first' ({run_id}) in experiment 'pathology-server'" in result.stderr
    assert hashes(*companions(finished)) == before
    mlflow_client = client(mlflow_server["uri"])
    run = mlflow_client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.info.run_name == "first"
    assert mlflow_client.get_experiment(run.info.experiment_id).name == "pathology-server"

    summary = json.loads(companions(finished)[1].read_text())
    manifest = json.loads(companions(finished)[2].read_text())
    metrics = run.data.metrics
    for key in CRITERIA:
        entry = summary["criteria"][key]
        assert entry["n"] == 13 and entry["sd"] > 0  # varied scores, one invalid verdict
        assert metrics[f"criterion/{key}/mean"] == entry["mean"]
        assert metrics[f"criterion/{key}/sd"] == entry["sd"]
        assert metrics[f"criterion/{key}/n"] == entry["n"]
        assert [metrics[f"criterion/{key}/mean_ci95_low"],
                metrics[f"criterion/{key}/mean_ci95_high"]] == entry["ci95"]
    assert metrics["status/ok"] == 13 and metrics["status/invalid_output"] == 1
    assert metrics["status/backend_error"] == 0 and metrics["cases"] == 14
    rate = summary["pass_rates"]["critical_finding_concordance"]
    assert metrics["pass_rate/critical_finding_concordance/rate"] == rate["rate"]
    assert metrics["pass_rate/critical_finding_concordance/rate_ci95_high"] == rate["ci95"][1]

    params = run.data.params
    settings = manifest["settings"]
    assert params["settings_hash"] == manifest["settings_hash"]
    assert params["rubric"] == "pathology_report" and params["judge"] == "judge-m"
    assert params["rubric_file_hash"] == settings["rubric_file_hash"]
    assert params["sampling.temperature"] == str(settings["sampling"]["temperature"])
    assert params["sampling.seed"] == str(settings["sampling"]["seed"])
    assert params["record_version"] == "2" and params["evaluator_version"] == "0.1.0"
    assert "model_hash" not in params  # the fake judge has no model folder
    assert not any("/" in value for value in params.values())  # no paths
    tags = run.data.tags
    assert tags["evaluator.results_file"] == "results.jsonl"
    assert tags["evaluator.version"] == "0.1.0"
    assert tags["evaluator.settings_hash"] == manifest["settings_hash"]
    assert tags["evaluator.contains_case_text"] == "false"

    listed = sorted(f.path for f in mlflow_client.list_artifacts(run_id, "evaluator"))
    assert listed == ["evaluator/manifest.json", "evaluator/report.html",
                      "evaluator/summary.json"]
    folder = Path(mlflow_client.download_artifacts(run_id, "evaluator", str(tmp_path)))
    assert json.loads((folder / "summary.json").read_text()) == summary
    assert (folder / "manifest.json").read_bytes() == companions(finished)[2].read_bytes()
    assert "case-13" in (folder / "report.html").read_text()  # the failed case: ids only
    assert MARK not in everything_logged(mlflow_client, run_id, tmp_path / "all")
    # Found by its tags, as a platform team would.
    found = mlflow_client.search_runs(
        [run.info.experiment_id],
        filter_string="tags.`evaluator.results_file` = 'results.jsonl'")
    assert [r.info.run_id for r in found] == [run_id]


def test_with_results_uploads_the_case_text_and_says_so(mlflow_server, finished, tmp_path):
    result = invoke("log", finished, "--tracking-uri", mlflow_server["uri"],
                    "--experiment", "pathology-server", "--with-results")
    assert result.exit_code == 0, result.output
    run_id = result.stdout.strip()
    mlflow_client = client(mlflow_server["uri"])
    assert mlflow_client.get_run(run_id).data.tags["evaluator.contains_case_text"] == "true"
    # The scan that finds no marker above finds it here: it can fail.
    assert MARK in everything_logged(mlflow_client, run_id, tmp_path)
    folder = Path(mlflow_client.download_artifacts(run_id, "evaluator", str(tmp_path / "d")))
    assert (folder / "results.jsonl").read_bytes() == finished.read_bytes()


def test_run_mlflow_end_to_end_with_the_fake_judge(mlflow_server, tmp_path):
    models = tmp_path / "models.yaml"
    models.write_text(yaml.safe_dump({"default": "fake", "judges": {"fake": {"backend": "fake"}}}))
    out = tmp_path / "e2e.jsonl"
    result = invoke("run", "-r", "pathology_report", "-i", EXAMPLES / "pathology_report.jsonl",
                    "-o", out, "--models-file", models, "--no-progress", "--mlflow",
                    "--tracking-uri", mlflow_server["uri"], "--experiment", "e2e", "--json")
    assert result.exit_code == 0, result.output
    assert "mlflow: logged run 'e2e'" in result.stderr
    assert json.loads(result.stdout)["status_counts"] == {"ok": 3}  # stdout: the summary only
    mlflow_client = client(mlflow_server["uri"])
    experiment = mlflow_client.get_experiment_by_name("e2e")
    [run] = mlflow_client.search_runs([experiment.experiment_id])
    summary = json.loads(out.with_name("e2e.summary.json").read_text())
    assert run.data.metrics["status/ok"] == 3
    assert run.data.metrics["criterion/overall_equivalence/mean"] == (
        summary["criteria"]["overall_equivalence"]["mean"])
    assert run.data.tags["evaluator.results_file"] == "e2e.jsonl"
    # The fake judge gives every case the same verdict: each mean is a point, so no CI
    # metrics, and a tag per mean says why (the summary's ci_note).
    for key in CRITERIA:
        assert summary["criteria"][key]["ci95"] is None
        assert f"criterion/{key}/mean_ci95_low" not in run.data.metrics
        assert run.data.tags[f"evaluator.no_ci/criterion/{key}/mean"] == \
            "no interval: all 3 scores equal"


# ------------------------------------------------------------------------------ locally

def test_default_is_a_private_local_store_here(here, finished):
    result = invoke("log", finished)
    assert result.exit_code == 0, result.output
    store = here / "mlruns"
    assert f"at the local MLflow store {store.as_uri()} (the default" in result.stderr
    assert stat.S_IMODE(store.stat().st_mode) == 0o700
    run = client(store.as_uri()).get_run(result.stdout.strip())
    summary = json.loads(companions(finished)[1].read_text())
    assert run.data.metrics["criterion/factual_accuracy/mean"] == (
        summary["criteria"]["factual_accuracy"]["mean"])
    assert run.info.experiment_id in result.stderr  # the run's folder is printed
    text = "".join(p.read_bytes().decode("utf-8", "replace")
                   for p in store.rglob("*") if p.is_file())
    assert "critical_finding_concordance" in text and MARK not in text


def test_labels_log_the_agreement_and_estimate_figures(here, finished):
    labels = write_jsonl(here / "labels.jsonl", [
        {"case_id": f"case-{i:02d}", "clinician": 1 + (i + i // 5) % 4} for i in range(14)])
    result = invoke("log", finished, "--labels", labels, "--label-field", "clinician",
                    "--criterion", "critical_finding_concordance",
                    "--pass", "critical_finding_concordance>=3", "--resamples", "200")
    assert result.exit_code == 0, result.output
    metrics = client((here / "mlruns").as_uri()).get_run(result.stdout.strip()).data.metrics
    gate = parse_gate("critical_finding_concordance>=3")
    report = agreement(finished, label_source(labels, "clinician"),
                       criteria=["critical_finding_concordance"], resamples=200, gates=[gate])
    stats = report.criteria["critical_finding_concordance"]
    prefix = "agreement/critical_finding_concordance"
    assert metrics[f"{prefix}/n"] == stats["n"] == 13
    for name in ("spearman", "kappa_quadratic", "krippendorff_alpha_ordinal", "exact"):
        assert metrics[f"{prefix}/{name}"] == stats[name]["value"]
        assert metrics[f"{prefix}/{name}_ci95_low"] == stats[name]["ci95"][0]
    # 13 joined cases are under the minimum for a p-value (issue 47): none, and none logged.
    assert stats["spearman"]["p"] is None and f"{prefix}/spearman_p" not in metrics
    [gate_row] = report.gates
    rule = [k for k in metrics if k.startswith("agreement_gate/")][0].split("/")[1]
    assert rule.startswith("critical_finding_concordance_ge_3-")
    assert metrics[f"agreement_gate/{rule}/sensitivity"] == gate_row["sensitivity"]["value"]
    assert metrics[f"agreement_gate/{rule}/tp"] == gate_row["tp"]
    rows = estimate([finished], label_source([labels], "clinician"),
                    criteria=["critical_finding_concordance"], gates=[gate]).estimates
    by_criterion = {row.criterion: row for row in rows}
    row = by_criterion["critical_finding_concordance"]
    assert metrics["estimate/critical_finding_concordance/ppi"] == row.ppi_estimate
    # 13 labelled cases are under the minimum of 20 for a PPI++ interval (issue 47): none
    # logged, and a tag says why, as for a summary's point.
    assert row.ppi_ci is None and "estimate/critical_finding_concordance/ppi_ci95_high" \
        not in metrics
    tags = client((here / "mlruns").as_uri()).get_run(result.stdout.strip()).data.tags
    assert tags["evaluator.no_ci/estimate/critical_finding_concordance/ppi"].startswith(
        "no interval: 13 labelled, at least 20 needed")
    assert metrics["estimate/critical_finding_concordance/classical_ci95_high"] == \
        row.classical_ci[1]
    assert metrics[f"estimate/{rule}/ppi"] == by_criterion[gate.rule].ppi_estimate


def test_a_key_label_field_logs_agreement_for_that_criterion_only(here, finished):
    """`log --label-field KEY.label` without --criterion logged agreement of every
    criterion with KEY's labels (agreement/factual_accuracy/spearman from labels of
    critical_finding_concordance)."""
    field = "critical_finding_concordance.label"
    labels = write_jsonl(here / "labels.jsonl", [
        {"case_id": f"case-{i:02d}", field: 1 + (i + i // 5) % 4} for i in range(14)])
    result = invoke("log", finished, "--labels", labels, "--label-field", field,
                    "--resamples", "200")
    assert result.exit_code == 0, result.output
    metrics = client((here / "mlruns").as_uri()).get_run(result.stdout.strip()).data.metrics
    compared = {key.split("/")[1] for key in metrics
                if key.startswith("agreement/") and key.count("/") == 2}
    assert compared == {"critical_finding_concordance"}
    assert not any(key.startswith(f"agreement/{other}/") for other in CRITERIA[1:]
                   for key in metrics)
    assert "estimate/critical_finding_concordance/ppi" in metrics
    wrong = invoke("log", finished, "--labels", labels, "--label-field", field,
                   "--criterion", "factual_accuracy")
    assert wrong.exit_code == 2
    assert "--criterion 'factual_accuracy'" in one_error_line(wrong.stderr)


def test_library_call_without_labels_returns_what_it_logged(here, finished):
    logged = log_run(finished, TrackingOptions(tracking_uri=str(here / "elsewhere"),
                                               run_name="api"))
    assert not logged.default_store and logged.run_name == "api"
    assert logged.experiment == "pathology_report"  # the rubric's name
    assert logged.notes == []  # the summary file equals the one recomputed
    assert (here / "elsewhere").is_dir() and not (here / "mlruns").exists()
    run = client(str(here / "elsewhere")).get_run(logged.run_id)
    assert run.data.metrics == logged.metrics and run.data.params == logged.params


def fake_models(folder: Path) -> Path:
    path = folder / "models.yaml"
    path.write_text(yaml.safe_dump({"default": "fake", "judges": {
        "fake": {"backend": "fake"}, "other": {"backend": "fake"}}}))
    return path


def test_a_pairwise_run_logs_its_win_rates(here):
    out = here / "pairs.jsonl"
    ran = invoke("run", "-r", "pathology_report_pairwise", "-i",
                 EXAMPLES / "pathology_report_pairwise.jsonl", "-o", out,
                 "--models-file", fake_models(here), "--no-progress")
    assert ran.exit_code == 0, ran.output
    result = invoke("log", out)
    assert result.exit_code == 0, result.output
    run = client((here / "mlruns").as_uri()).get_run(result.stdout.strip())
    summary = json.loads(out.with_name("pairs.summary.json").read_text())
    for key, entry in summary["pairwise"]["criteria"].items():
        for name in ("win_rate", "position_consistency", "position_bias"):
            assert run.data.metrics[f"pairwise/{key}/{name}"] == entry[name]["value"]
            assert run.data.metrics[f"pairwise/{key}/{name}_ci95_low"] == entry[name]["ci95"][0]
        assert run.data.metrics[f"pairwise/{key}/inconsistent"] == entry["inconsistent"]
    assert run.data.params["pairwise.system_a"] == summary["pairwise"]["systems"]["A"]
    assert run.data.tags["evaluator.kind"] == "pairwise"
    assert "note: no report.html: the HTML report shows scores" in result.stderr


def test_a_jury_run_logs_its_members(here):
    out = here / "jury.jsonl"
    ran = invoke("run", "-r", "pathology_report", "-i", EXAMPLES / "pathology_report.jsonl",
                 "-o", out, "--models-file", fake_models(here), "--model", "fake",
                 "--model", "other", "--no-progress", "--mlflow", "--run-name", "jury")
    assert ran.exit_code == 0, ran.output
    mlflow_client = client((here / "mlruns").as_uri())
    [run] = mlflow_client.search_runs(
        [mlflow_client.get_experiment_by_name("pathology_report").experiment_id])
    manifest = json.loads(out.with_name("jury.manifest.json").read_text())
    params = run.data.params
    assert run.info.run_name == "jury" and run.data.tags["evaluator.kind"] == "jury"
    assert params["settings_hash"] == manifest["settings_hash"]
    assert params["judge"] == "jury(fake,other)"
    for member in manifest["members"]:
        assert params[f"jury.{member['judge']}.settings_hash"] == member["settings_hash"]
    assert "inter_judge/critical_finding_concordance/unanimous" in run.data.metrics


# ------------------------------------------------------------------------------ failures

def test_a_server_that_is_down_is_one_line_exit_2_files_untouched(here, finished):
    before = hashes(*companions(finished))
    uri = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    result = invoke("log", finished, "--tracking-uri", uri)
    took = time.monotonic() - started
    assert result.exit_code == 2
    line = one_error_line(result.stderr)
    assert line.startswith(f"error: cannot reach the MLflow tracking server at {uri}")
    assert "check that it is running" in line and MARK not in line
    assert took < 60, f"a down server took {took:.0f} s to report"
    assert hashes(*companions(finished)) == before
    assert not (here / "mlruns").exists()


class _Refuse(http.server.BaseHTTPRequestHandler):
    def _refuse(self):
        body = b'{"error_code": "PERMISSION_DENIED", "message": "no access"}'
        self.send_response(403)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _refuse

    def log_message(self, *args):
        pass


def test_a_server_that_refuses_is_one_line_without_the_password(here, finished):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Refuse)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        before = hashes(*companions(finished))
        port = server.server_address[1]
        result = invoke("log", finished, "--tracking-uri", f"http://alice:s3cret@127.0.0.1:{port}")
    finally:
        server.shutdown()
        server.server_close()
    assert result.exit_code == 2
    line = one_error_line(result.stderr)
    assert "refused the request (PERMISSION_DENIED)" in line and "credentials" in line
    assert f"http://***@127.0.0.1:{port}" in line and "s3cret" not in result.output
    assert hashes(*companions(finished)) == before


def test_run_mlflow_with_a_tracker_down_keeps_the_results_and_exits_1(tmp_path):
    models = tmp_path / "models.yaml"
    models.write_text(yaml.safe_dump({"default": "fake", "judges": {"fake": {"backend": "fake"}}}))
    out = tmp_path / "r.jsonl"
    uri = f"http://127.0.0.1:{free_port()}"
    result = invoke("run", "-r", "pathology_report", "-i", EXAMPLES / "pathology_report.jsonl",
                    "-o", out, "--models-file", models, "--no-progress", "--mlflow",
                    "--tracking-uri", uri)
    assert result.exit_code == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in result.stderr
    assert errors[0].startswith("error: --mlflow: the run finished and its results are "
                                "complete, but logging it failed: cannot reach")
    assert len(out.read_text().splitlines()) == 3
    manifest = json.loads(out.with_name("r.manifest.json").read_text())
    assert manifest["runs"][-1]["status"] == "finished"
    assert json.loads(out.with_name("r.summary.json").read_text())["status_counts"] == {"ok": 3}


def test_without_the_extra_log_and_run_mlflow_say_what_to_install(tmp_path, monkeypatch,
                                                                    finished):
    monkeypatch.setitem(sys.modules, "mlflow", None)
    result = invoke("log", finished, "--tracking-uri", tmp_path / "store")
    assert result.exit_code == 2
    assert "pip install 'evaluator[mlflow]'" in one_error_line(result.stderr)
    out = tmp_path / "r.jsonl"
    result = invoke("run", "-r", "pathology_report", "-i", EXAMPLES / "pathology_report.jsonl",
                    "-o", out, "--no-progress", "--mlflow")
    assert result.exit_code == 2 and not out.exists()  # refused before anything is judged
    assert "pip install 'evaluator[mlflow]'" in one_error_line(result.stderr)
    with pytest.raises(MlflowMissing):
        log_run(finished)


def test_a_run_that_did_not_finish_is_refused(here, finished):
    copy = here / "copy"
    copy.mkdir()
    for path in companions(finished):
        (copy / path.name).write_bytes(path.read_bytes())
    manifest_path = copy / "results.manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["runs"][-1]["status"] = "interrupted"
    manifest_path.write_text(json.dumps(manifest))
    result = invoke("log", copy / "results.jsonl")
    assert result.exit_code == 2
    assert "its last run is interrupted" in one_error_line(result.stderr)
    manifest_path.unlink()
    result = invoke("log", copy / "results.jsonl")
    assert result.exit_code == 2 and "no readable manifest" in one_error_line(result.stderr)
    assert not (here / "mlruns").exists()
    with pytest.raises(TrackingError, match="no readable manifest"):
        log_run(copy / "results.jsonl")


@pytest.mark.parametrize("args, message", [
    (["--labels", "x.jsonl"], "--labels and --label-field go together"),
    (["--criterion", "factual_accuracy"], "--criterion only apply with --labels"),
])
def test_option_mistakes_exit_2(here, finished, args, message):
    (here / "x.jsonl").write_text("")
    result = invoke("log", finished, *args)
    assert result.exit_code == 2 and message in result.output


def test_tracking_options_without_mlflow_are_a_usage_error(tmp_path):
    result = invoke("run", "-r", "pathology_report", "-i", EXAMPLES / "pathology_report.jsonl",
                    "-o", tmp_path / "r.jsonl", "--experiment", "x")
    assert result.exit_code == 2 and "--experiment only apply with --mlflow" in result.output


# ------------------------------------------------------------------------------ telemetry

TELEMETRY_PROBE = r"""
import ipaddress, json, socket, sys
attempts = []
real_connect, real_getaddrinfo = socket.socket.connect, socket.getaddrinfo

def local(host):
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host in ("localhost", "")

def connect(self, address):
    if isinstance(address, tuple) and not local(str(address[0])):
        attempts.append(str(address[0]))
        raise OSError("blocked by the test")
    return real_connect(self, address)

def getaddrinfo(host, *args, **kwargs):
    if host is not None and not local(str(host)):
        attempts.append(str(host))
        raise socket.gaierror("blocked by the test")
    return real_getaddrinfo(host, *args, **kwargs)

socket.socket.connect, socket.getaddrinfo = connect, getaddrinfo
if sys.argv[1] == "log":
    from evaluator.cli.main import cli
    code = cli(["log", sys.argv[2], "--tracking-uri", sys.argv[3]], standalone_mode=False)
import mlflow.telemetry
from mlflow.telemetry.utils import is_telemetry_disabled
print(json.dumps({"client": mlflow.telemetry.get_telemetry_client() is not None,
                  "disabled": is_telemetry_disabled(), "attempts": attempts}))
"""


def test_telemetry_is_off(finished, tmp_path):
    # A clean environment in which MLflow would send telemetry: not under pytest or CI, and
    # DO_NOT_TRACK=1 as our offline switches set it (MLflow only reads "true").
    ci = ("PYTEST_CURRENT_TEST", "CI", "GITHUB_ACTIONS", "GITLAB_CI", "JENKINS_URL",
          "BUILDKITE", "CIRCLECI", "TRAVIS", "TF_BUILD", "TEAMCITY_VERSION",
          "CODEBUILD_BUILD_ARN", "BITBUCKET_BUILD_NUMBER", "CLOUD_RUN_EXECUTION",
          "RUNBOT_HOST_URL", "RUNBOT_BUILD_NAME", "RUNBOT_WORKER_ID", "MLFLOW_DISABLE_TELEMETRY")
    env = {k: v for k, v in os.environ.items() if k not in ci}
    env.update(DO_NOT_TRACK="1", PYTHONPATH=str(ROOT))

    def probe(*args: str) -> dict:
        done = subprocess.run([sys.executable, "-c", TELEMETRY_PROBE, *args], env=env,
                              capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    # Without our switch MLflow starts its telemetry client: the probe can see it.
    control = probe("import")
    assert control["client"] and not control["disabled"]
    logged = probe("log", str(finished), str(tmp_path / "store"))
    assert logged == {"client": False, "disabled": True, "attempts": []}
    assert (tmp_path / "store").is_dir()


CLIENT_ONLY = r"""
import sys
# What the full mlflow package adds to mlflow-skinny (the mlflow extra): as if not installed.
for name in ("sqlalchemy", "alembic", "flask", "flask_cors", "graphene", "gunicorn", "huey",
             "docker", "skops", "aiohttp"):
    sys.modules[name] = None
from evaluator.cli.main import cli
cli(sys.argv[1:])
"""


def test_the_client_only_extra_logs_to_the_default_store(finished, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("MLFLOW_TRACKING_URI", None)

    def log(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-W", "error", "-c", CLIENT_ONLY, "log",
                               str(finished), *args], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=300, check=False)

    done = log()
    assert done.returncode == 0, done.stderr[-3000:]
    run_id = done.stdout.strip()
    assert [p.name for p in (tmp_path / "mlruns").glob("*/*") if p.is_dir()] == [run_id]
    database = log("--tracking-uri", "sqlite:///mlflow.db")
    assert database.returncode == 2
    assert "needs the full mlflow package" in one_error_line(database.stderr)


def test_import_evaluator_and_its_cli_never_import_mlflow():
    code = ("import sys, evaluator, evaluator.cli.main, evaluator.tracking.log_run; "
            "sys.exit(1 if 'mlflow' in sys.modules else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_server_fixture_started(mlflow_server):
    # How long the one server start of the session took (reported with -rP).
    print(f"mlflow server started in {mlflow_server['start_seconds']:.1f} s")
    assert mlflow_server["start_seconds"] < SERVER_START_LIMIT
