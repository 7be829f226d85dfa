"""``--engine ray``: the same records as the local engine, exactly once, resumable.

The Ray tests share one local Ray cluster (2 CPUs, no dashboard) started by a fixture;
each run starts its own replicas on it. Scripted judges and marker files: tests/ray_judges.py.
"""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import string
import sys
import time
from collections import Counter
from functools import partial
from pathlib import Path

import pytest
from click.testing import CliRunner

from evaluator.cli.main import cli
from evaluator.data.results import read_results, scan_results
from evaluator.judges.models_file import JudgeSpec
from evaluator.judges.offline import OFFLINE_ENV
from evaluator.run.engines import RayOptions
from evaluator.run.runner import evaluate
from evaluator.run.task import Judge, RunOptions, Task
from tests import ray_judges
from tests.conftest import ROOT, run_options, write_jsonl

FAKE = JudgeSpec(backend="fake")
TINY = JudgeSpec(backend="tiny-random", device="cpu")

# Short verdicts keep the real model's part of the test to seconds.
RUBRIC = """\
format_version: 1
name: ray_check
title: Ray engine check (short verdicts)
inputs:
  answer: {description: generated text}
  reference: {description: reference text}
output:
  - {key: accuracy, type: integer, range: [1, 5]}
  - {key: clarity, type: integer, range: [1, 5]}
  - {key: completeness, type: integer, values: [0, 50, 100]}
  - {key: note, type: string, max_length: 8}
template: |
  Reference:
  {{ reference | fence }}
  Answer:
  {{ answer | fence }}
"""
def _cases(n):
    """Seeded random texts of different lengths: the random-weight judge's verdicts vary
    with them, and prompt token counts differ, so records swapped between cases would
    show."""
    rng = random.Random(0)

    def text(words):
        return " ".join("".join(rng.choice(string.ascii_lowercase + string.digits)
                                for _ in range(rng.randint(2, 9))) for _ in range(words))

    return [{"case_id": f"c{i:02d}", "reference": text(rng.randint(2, 30)),
             "answer": text(rng.randint(1, 30))} for i in range(n)]


def _reports(n):
    return [{"case_id": f"r{i:03d}", "reference_report": f"reference {i}",
             "generated_report": f"generated {i}"} for i in range(n)]


def _exactly_once(path, expected):
    """Every line parses, nothing torn, every case once."""
    scan = scan_results(path)
    assert scan.torn_bytes == 0
    counts = Counter(line.record.case_id for line in scan.lines)
    assert [cid for cid, n in counts.items() if n > 1] == []
    assert set(counts) == set(expected)
    return {line.record.case_id: line.record for line in scan.lines}


def _markers(folder, kind):
    return sorted(p.name for p in Path(folder).glob(f"{kind}-*"))


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray cluster for this module: 2 CPUs, no dashboard; workers import this
    checkout's evaluator (and tests/) and run with the offline switches."""
    ray = pytest.importorskip("ray", reason="needs the ray extra: pip install 'evaluator[ray]'")
    pytest.importorskip("ray.data", reason="needs the ray extra: pip install 'evaluator[ray]'")
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=256 * 2**20,
             logging_level=logging.ERROR,
             runtime_env={"env_vars": {**OFFLINE_ENV, "PYTHONPATH": str(ROOT)}})
    yield ray
    ray.shutdown()


@pytest.mark.ray
@pytest.mark.slow
def test_two_replicas_give_the_local_engines_records(ray_cluster, tiny_backend, tmp_path):
    pytest.importorskip("torch", reason="needs the transformers extra: make install")
    rubrics = tmp_path / "rubrics"
    rubrics.mkdir()
    (rubrics / "ray_check.yaml").write_text(RUBRIC, encoding="utf-8")
    source = write_jsonl(tmp_path / "cases.jsonl", _cases(16))
    common = {"rubric": "ray_check", "rubrics_dirs": [rubrics], "input_path": source,
              "judge": "tiny-random", "judge_spec": TINY, "batch_size": 4}
    evaluate(*run_options(output_path=tmp_path / "local.jsonl", backend=tiny_backend, **common))
    folder = tmp_path / "markers"
    folder.mkdir()
    evaluate(*run_options(output_path=tmp_path / "ray.jsonl", engine="ray",
                          ray_options=RayOptions(replicas=2, backend_factory=partial(
                              ray_judges.marked, str(folder), 2)),
                          **common))

    local = _exactly_once(tmp_path / "local.jsonl", [f"c{i:02d}" for i in range(16)])
    remote = _exactly_once(tmp_path / "ray.jsonl", local)
    for cid, record in local.items():
        other = remote[cid]
        assert record.status == other.status == "ok", cid
        assert other.scores == record.scores, cid
        assert (other.prompt_tokens, other.completion_tokens, other.prompt_hash,
                other.settings_hash, other.batch_size) == (
                record.prompt_tokens, record.completion_tokens, record.prompt_hash,
                record.settings_hash, record.batch_size), cid
    # The comparison can tell cases apart: prompts differ in length, verdicts vary.
    assert len({r.prompt_tokens for r in local.values()}) >= 8
    assert len({json.dumps(r.scores, sort_keys=True) for r in local.values()}) >= 4
    # Two replica processes each loaded the judge and judged whole batches of 4.
    inits = _markers(folder, "init")
    batches = _markers(folder, "batch")
    assert len(inits) == 2
    assert {name.split("-")[1] for name in batches} == {i.split("-")[1] for i in inits}
    assert sorted(int(name.split("-")[3]) for name in batches) == [4, 4, 4, 4]


@pytest.mark.ray
def test_a_killed_replica_loses_only_its_batch_which_is_judged_again(ray_cluster, tmp_path):
    cases = 40
    source = write_jsonl(tmp_path / "cases.jsonl", _reports(cases))
    folder = tmp_path / "markers"
    folder.mkdir()
    killed: list[int] = []
    written = []

    def kill_one_replica_once(n):
        written.append(n)
        if killed:
            return
        # A replica in the middle of a batch (its busy marker is there), after the first
        # records came back: the run is under way and batches are in flight.
        deadline = time.monotonic() + 10
        while not (busy := _markers(folder, "busy")) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert busy, "no replica was judging"
        pid = int(busy[0].split("-")[1])
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)
        killed.append(sum(written))

    result = evaluate(Task("pathology_report", source), Judge("slow-fake", spec=FAKE),
                      RunOptions(tmp_path / "results.jsonl", batch_size=2, engine="ray",
                                 progress=kill_one_replica_once,
                                 ray=RayOptions(replicas=2, backend_factory=partial(
                                     ray_judges.slow_fake, str(folder), 0.4))))

    pid, records_before_kill = killed
    assert records_before_kill < cases  # killed mid-run
    assert not Path(f"/proc/{pid}").exists()  # the replica process is gone
    assert f"busy-{pid}" in _markers(folder, "busy")  # it died inside a batch
    # Ray started a replacement replica (the judge loaded a third time) ...
    inits = _markers(folder, "init")
    assert len(inits) == 3 and f"init-{pid}" in inits
    # ... and the lost batch was judged again: one batch more than the 20 needed.
    assert len(_markers(folder, "batch")) == cases // 2 + 1
    records = _exactly_once(result.results_path, [f"r{i:03d}" for i in range(cases)])
    assert {r.status for r in records.values()} == {"ok"}
    assert sum(written) == cases
    manifest = json.loads((tmp_path / "results.manifest.json").read_text())
    assert manifest["runs"][-1]["status"] == "finished"


@pytest.mark.ray
def test_an_interrupted_ray_run_resumes_with_only_the_rest(ray_cluster, tmp_path):
    cases = 30
    source = write_jsonl(tmp_path / "cases.jsonl", _reports(cases))
    output = tmp_path / "results.jsonl"
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()

    def run(folder, **kwargs):
        return evaluate(*run_options(
            rubric="pathology_report", input_path=source, output_path=output,
            judge="slow-fake", judge_spec=FAKE, batch_size=3, engine="ray",
            ray_options=RayOptions(replicas=2, backend_factory=partial(
                ray_judges.slow_fake, str(folder), 0.2)), **kwargs))

    seen = []

    def interrupt(n):
        seen.append(n)
        if sum(seen) >= 9:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(first, progress=interrupt)
    kept = output.read_bytes()
    done = len(read_results(output))
    assert 9 <= done < cases
    manifest = json.loads((tmp_path / "results.manifest.json").read_text())
    assert manifest["runs"][-1]["status"] == "interrupted"

    starts, judged = [], []
    run(second, on_start=starts.append, progress=judged.append)
    assert starts[0].already_done == done and starts[0].to_judge == cases - done
    assert sum(judged) == cases - done
    # Only the rest was judged (counted by the judges themselves), after the kept lines.
    assert sum(int(name.split("-")[3]) for name in _markers(second, "batch")) == cases - done
    assert output.read_bytes().startswith(kept)
    _exactly_once(output, [f"r{i:03d}" for i in range(cases)])
    assert json.loads((tmp_path / "results.manifest.json").read_text())["runs"][-1][
        "status"] == "finished"


@pytest.mark.ray
def test_more_replicas_than_the_cluster_holds_is_refused(ray_cluster, tmp_path):
    source = write_jsonl(tmp_path / "cases.jsonl", _reports(2))
    result = CliRunner().invoke(cli, ["run", "-r", "pathology_report", "-i", str(source),
                                      "-o", str(tmp_path / "out.jsonl"), "-m", "fake",
                                      "--engine", "ray", "--replicas", "3"])
    assert result.exit_code == 2, result.output
    assert "--replicas 3 with 1 CPU(s) each needs 3 CPU(s); the Ray cluster has 2" in (
        result.output)


def test_engine_ray_without_ray_says_what_to_install(tmp_path, monkeypatch):
    # As if Ray were not installed: importing it fails.
    monkeypatch.setitem(sys.modules, "ray", None)
    monkeypatch.delitem(sys.modules, "evaluator.run.ray_engine", raising=False)
    source = write_jsonl(tmp_path / "cases.jsonl", _reports(2))
    output = tmp_path / "out.jsonl"
    result = CliRunner().invoke(cli, ["run", "-r", "pathology_report", "-i", str(source),
                                      "-o", str(output), "-m", "fake", "--engine", "ray"])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert lines == [("error: --engine ray needs Ray, which is not installed (no module "
                      "'ray'); install it with: pip install 'evaluator[ray]'")]
    assert not output.exists()


def test_ray_options_need_engine_ray(tmp_path):
    source = write_jsonl(tmp_path / "cases.jsonl", _reports(2))
    result = CliRunner().invoke(cli, ["run", "-r", "pathology_report", "-i", str(source),
                                      "-o", str(tmp_path / "out.jsonl"), "-m", "fake",
                                      "--replicas", "2"])
    assert result.exit_code == 2
    assert "--replicas only apply to --engine ray" in result.output


def test_ray_client_addresses_are_refused_with_what_to_do(tmp_path):
    source = write_jsonl(tmp_path / "cases.jsonl", _reports(2))
    result = CliRunner().invoke(cli, ["run", "-r", "pathology_report", "-i", str(source),
                                      "-o", str(tmp_path / "out.jsonl"), "-m", "fake",
                                      "--engine", "ray", "--address", "ray://head:10001"])
    assert result.exit_code == 2
    assert "Run the command on a node of the cluster with --address auto" in result.output
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.ray
@pytest.mark.slow
def test_a_pairwise_rubric_gets_the_same_records_on_ray_as_locally(ray_cluster, tmp_path):
    """Pairs (issue 26) go through the judging step both engines share: on Ray each pair is
    judged in both orders and gets the local engine's record."""
    from evaluator.judges.backends.fake import FakeBackend

    rows = [{"case_id": f"p{i}", "patient_profile": f"patient {i}", "trial_id": "NCT1",
             "trial_title": "t", "eligibility_criteria": "c", "ground_truth_label": "g",
             "gpt": f"answer {i}", "llama": f"other answer {i}"} for i in range(5)]
    source = write_jsonl(tmp_path / "pairs.jsonl", rows)
    mapping = {"answer_a": "gpt", "answer_b": "llama"}
    folder = tmp_path / "markers"
    folder.mkdir()
    evaluate(*run_options(rubric="trial_eligibility_pairwise", input_path=source,
                          mapping=mapping, output_path=tmp_path / "local.jsonl",
                          judge="slow-fake", judge_spec=FAKE, backend=FakeBackend(),
                          batch_size=2))
    evaluate(*run_options(rubric="trial_eligibility_pairwise", input_path=source,
                          mapping=mapping, output_path=tmp_path / "ray.jsonl",
                          judge="slow-fake", judge_spec=FAKE, batch_size=2, engine="ray",
                          ray_options=RayOptions(replicas=1, backend_factory=partial(
                              ray_judges.slow_fake, str(folder), 0.0))))
    timing = {"batch_seconds"}
    local = {r.case_id: r.model_dump(exclude=timing) for r in read_results(tmp_path / "local.jsonl")}
    remote = _exactly_once(tmp_path / "ray.jsonl", [f"p{i}" for i in range(5)])
    assert {cid: r.model_dump(exclude=timing) for cid, r in remote.items()} == local
    assert all(r.pairwise.outcome["accuracy"] == "inconsistent" for r in remote.values())


@pytest.mark.ray
def test_a_server_judge_on_ray_records_what_its_servers_report(ray_cluster, tmp_path):
    """A judge served over HTTP (tests/server_fake.py) on --engine ray: the manifest records
    what its server reports, as --engine local does (probed once from the driver before Ray
    starts; the counts kept while judging are the replicas' own, so unknown, not zero), and
    a resume whose server now serves another model under the same name is refused before
    any case is sent."""
    from evaluator.run.resume import ResumeConflict
    from tests.server_fake import FakeJudgeServer

    source = write_jsonl(tmp_path / "cases.jsonl", _reports(6))
    output = tmp_path / "results.jsonl"
    with FakeJudgeServer() as server:
        spec = JudgeSpec(backend="server", base_url=server.url, served_model="judge",
                         retries=0, timeout_s=10.0, connect_timeout_s=2.0)

        def run():
            return evaluate(*run_options(rubric="pathology_report", input_path=source,
                                         output_path=output, judge="site-judge",
                                         judge_spec=spec, batch_size=2, engine="ray",
                                         ray_options=RayOptions(replicas=1)))

        server.down_after = 4  # two batches judged, then the server is gone
        run()
        records = _exactly_once(output, [f"r{i:03d}" for i in range(6)])
        assert sorted(r.status for r in records.values()) == ["backend_error"] * 2 + ["ok"] * 4
        manifest = json.loads((tmp_path / "results.manifest.json").read_text())
        assert manifest["runs"][-1]["backend"] == {
            "replicas": [{"address": server.url, "model_id": "judge", "max_model_len": 4096,
                          "owned_by": "vllm", "root": "/models/judge-7b", "version": "0.32.0"}],
            "top_logprobs": 20, "min_coverage": 0.99, "distributions": None, "requests": None}

        server.down_after = None
        server.root = "/models/another-13b"  # another model behind the same name
        sent = len(server.bodies)
        with pytest.raises(ResumeConflict, match="another-13b"):
            run()
        # nothing judged by the new model; the first model's verdicts kept (the failed cases
        # are left to a resume against the first model, or a --force-new run)
        assert len(server.bodies) == sent
        assert [r.status for r in read_results(output)] == ["ok"] * 4
        manifest = json.loads((tmp_path / "results.manifest.json").read_text())
        assert manifest["runs"][-1]["status"] == "failed"
