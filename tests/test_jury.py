"""Juries: every case judged by several judges, one model loaded at a time; each member's
file resumes; the combined file keeps every verdict and a reduced one."""

from __future__ import annotations

import json
import stat

import pytest
from click.testing import CliRunner

from evaluator.cli.main import cli
from evaluator.data.results import read_results
from evaluator.judges.backends.fake import FakeBackend
from evaluator.judges.models_file import JudgeConfigError, load_models_file, resolve_jury
from evaluator.run.jury import evaluate_jury, member_path
from evaluator.run.resume import ResumeConflict
from tests.conftest import run_options, write_jsonl

MODELS = """
default: a
judges:
  a: {backend: fake, batch_size: 2}
  b: {backend: fake, batch_size: 2}
  c: {backend: fake, batch_size: 2}
juries:
  panel: {judges: [a, b, c], reduce: median, description: three fakes}
"""


def _verdict(c, a, comp, o):
    return json.dumps({"critical_finding_concordance": c, "factual_accuracy": a,
                       "factual_completeness": comp, "overall_equivalence": o,
                       "reasoning": "r"}, separators=(",", ":"))


SCRIPTS = {"a": [_verdict(1, 1, 1, 1), _verdict(4, 3, 3, 4), _verdict(2, 2, 2, 2)],
           "b": [_verdict(2, 1, 1, 1), _verdict(4, 3, 3, 4), _verdict(2, 2, 2, 2)],
           "c": [_verdict(2, 2, 1, 2), _verdict(3, 3, 3, 4), "{broken"]}


@pytest.fixture
def setup(tmp_path, monkeypatch):
    """A models file with three fake judges, each scripted, and a log of loads/closes."""
    models = tmp_path / "models.yaml"
    models.write_text(MODELS)
    rows = [{"case_id": f"c{i}", "reference_report": "ref", "generated_report": f"gen {i}"}
            for i in range(3)]
    cases = write_jsonl(tmp_path / "cases.jsonl", rows)
    events: list[str] = []

    class Tracked(FakeBackend):
        def __init__(self, name):
            super().__init__(SCRIPTS[name])
            self.judge = name
            events.append(f"load {name}")

        def close(self):
            events.append(f"close {self.judge}")

    monkeypatch.setattr("evaluator.run.local_engine.load_backend", lambda name, spec: Tracked(name))
    return models, cases, events


def _jury(models, cases, output, names=("panel",), **kwargs):
    name, jury = resolve_jury(list(names), models)
    task, judge, run = run_options(rubric="pathology_report", input_path=cases,
                                   models_path=models, output_path=output, **kwargs)
    return evaluate_jury(task, name, jury, judge, run)


def test_every_judge_scores_every_case_one_model_at_a_time(setup, tmp_path):
    models, cases, events = setup
    output = tmp_path / "out" / "jury.jsonl"
    result = _jury(models, cases, output)
    assert events == ["load a", "close a", "load b", "close b", "load c", "close c"]
    c0, c1, c2 = read_results(output)
    assert [v.judge for v in c0.jury] == ["a", "b", "c"] and c0.judge == "panel"
    assert c0.scores["critical_finding_concordance"] == 2   # median of 1, 2, 2
    assert c0.scores["overall_equivalence"] == 1            # median of 1, 1, 2
    assert c1.scores["critical_finding_concordance"] == 4
    assert c2.status == "invalid_output" and c2.reason.startswith("judge c: ")
    assert [v.status for v in c2.jury] == ["ok", "ok", "invalid_output"]
    # the jury's distribution is the mean of its members' (fake: 0.7 on the value written,
    # 0.1 on each other one of 1-4): judges wrote 1, 2, 2
    dist = c0.distributions["critical_finding_concordance"]
    assert dist.probabilities == pytest.approx({"1": 0.3, "2": 0.5, "3": 0.1, "4": 0.1})
    assert dist.confidence == pytest.approx(0.5)  # of the reduced score, 2
    assert [v.distributions["critical_finding_concordance"].confidence for v in c0.jury] \
        == pytest.approx([0.7] * 3)
    assert c2.distributions is None  # no verdict, no distribution
    # each member keeps its own resumable file, manifest and summary
    for judge in "abc":
        path = member_path(output, judge)
        assert len(read_results(path)) == 3
        assert path.with_name(f"{judge}.manifest.json").is_file()
    manifest = json.loads((tmp_path / "out" / "jury.manifest.json").read_text())
    assert manifest["kind"] == "jury" and [m["judge"] for m in manifest["members"]] == list("abc")
    assert {r.settings_hash for r in (c0, c1, c2)} == {manifest["settings_hash"]}
    block = result.summary.inter_judge
    assert block.raters == ["a", "b", "c"] and block.complete_cases == 2
    assert block.unanimous["factual_completeness"] == 1.0
    assert block.unanimous["critical_finding_concordance"] == 0.0
    assert result.summary.failed_case_ids == ["c2"]


def test_a_crash_in_one_member_loses_nothing_and_resumes_there(setup, tmp_path, monkeypatch):
    models, cases, events = setup
    output = tmp_path / "jury.jsonl"
    real = FakeBackend.generate

    def dies_in_b(self, chats, *args, **kwargs):
        if self.judge == "b" and len(self.calls) == 1:
            raise KeyboardInterrupt  # after b's first batch (2 of 3 cases)
        return real(self, chats, *args, **kwargs)

    monkeypatch.setattr(FakeBackend, "generate", dies_in_b)
    with pytest.raises(KeyboardInterrupt):
        _jury(models, cases, output)
    assert not output.exists()
    assert len(read_results(member_path(output, "a"))) == 3
    assert len(read_results(member_path(output, "b"))) == 2

    monkeypatch.setattr(FakeBackend, "generate", real)
    events.clear()
    monkeypatch.setitem(SCRIPTS, "b", SCRIPTS["b"][2:])  # b resumes with its third case only
    _jury(models, cases, output)
    assert events == ["load b", "close b", "load c", "close c"]  # a was not loaded again
    records = read_results(output)
    assert [r.case_id for r in records] == ["c0", "c1", "c2"]
    assert [len(read_results(member_path(output, j))) for j in "abc"] == [3, 3, 3]
    assert records[2].jury[1].scores["critical_finding_concordance"] == 2


def test_other_results_in_the_output_are_never_overwritten(setup, tmp_path):
    models, cases, _ = setup
    output = tmp_path / "jury.jsonl"
    _jury(models, cases, output)
    with pytest.raises(ResumeConflict, match="not from this jury"):
        _jury(models, cases, output, names=("a", "b"))
    with pytest.raises(ResumeConflict, match="not from this jury"):
        _jury(models, cases, output, reduce="mean")
    result = _jury(models, cases, output, names=("a", "b"), force_new=True)
    assert result.summary.judge == "jury(a,b)"
    assert len(list(tmp_path.glob("jury.superseded-*.jsonl"))) == 1
    assert len(list(tmp_path.glob("jury.superseded-*.jury"))) == 1


def test_jury_names_are_checked(tmp_path):
    models = tmp_path / "models.yaml"
    models.write_text(MODELS)
    assert resolve_jury(["a"], models) is None
    assert resolve_jury([], models) is None
    assert resolve_jury(["panel"], models)[1].judges == ["a", "b", "c"]
    with pytest.raises(JudgeConfigError, match="unknown judge 'zz'"):
        resolve_jury(["a", "zz"], models)
    with pytest.raises(JudgeConfigError, match="named twice"):
        resolve_jury(["a", "a"], models)
    with pytest.raises(JudgeConfigError, match="'panel' is a jury"):
        resolve_jury(["panel", "a"], models)
    bad = tmp_path / "bad.yaml"
    bad.write_text(MODELS + "  other: {judges: [a, nope]}\n")
    with pytest.raises(JudgeConfigError, match="jury 'other' names unknown judge"):
        load_models_file(bad)


def test_cli_runs_a_jury_from_repeated_models(setup, tmp_path):
    models, cases, _ = setup
    output = tmp_path / "cli.jsonl"
    result = CliRunner().invoke(cli, ["run", "-r", "pathology_report", "-i", str(cases),
                                      "-o", str(output), "--models-file", str(models),
                                      "-m", "a", "-m", "c", "--reduce", "mean",
                                      "--no-progress", "--json"])
    assert result.exit_code == 1, result.output  # c2 has no verdict from c
    assert "jury member 2/2: c" in result.output
    summary = json.loads(result.stdout)
    assert summary["judge"] == "jury(a,c)" and "inter_judge" in summary
    # The table shows the jury's agreement too (the stats extra: alpha per key).
    table = CliRunner().invoke(cli, ["summary", str(output)]).output
    assert "jury: 2 raters (a, c); one score from their mean, aggregates from" in table
    assert all(f"  {key}" in table for key in summary["inter_judge"]["alpha"])
    assert read_results(output)[0].scores["critical_finding_concordance"] == 1.5


def test_a_symlinked_member_folder_is_refused(setup, tmp_path):
    from evaluator.data.files import OutputRefused

    models, cases, events = setup
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "jury.jury").symlink_to(elsewhere)
    for force_new in (False, True):
        with pytest.raises(OutputRefused, match="symbolic link"):
            _jury(models, cases, tmp_path / "jury.jsonl", force_new=force_new)
    assert list(elsewhere.iterdir()) == [] and events == []
    assert (tmp_path / "jury.jury").is_symlink()


def test_two_outputs_with_one_stem_never_share_a_member_folder(setup, tmp_path, monkeypatch):
    from evaluator.data.files import OutputRefused

    models, cases, events = setup
    real = FakeBackend.generate

    def dies_in_c(self, chats, *args, **kwargs):
        if self.judge == "c":
            raise KeyboardInterrupt  # t.jsonl's jury never finishes: no combined manifest
        return real(self, chats, *args, **kwargs)

    monkeypatch.setattr(FakeBackend, "generate", dies_in_c)
    with pytest.raises(KeyboardInterrupt):
        _jury(models, cases, tmp_path / "t.jsonl")
    folder = tmp_path / "t.jury"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    events.clear()
    with pytest.raises(OutputRefused, match=r"t\.jury belongs to the jury results file t\.jsonl"
                                            r", not t\.json"):
        _jury(models, cases, tmp_path / "t.json")
    assert events == []
