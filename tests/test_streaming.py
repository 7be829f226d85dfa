"""The input and the results are streamed: read twice (a validating pass, then a judging
pass), never held whole; the scaling benchmark's quick mode runs."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from evaluator.data.cases import Case
from evaluator.data.results import read_results
from evaluator.judges.backends.fake import FakeBackend
from evaluator.judges.models_file import JudgeSpec
from evaluator.run.judging import todo_batches
from evaluator.run.runner import evaluate
from evaluator.run.task import Judge, RunOptions, Task
from tests.conftest import ROOT, write_jsonl


def test_a_case_is_batched_once_even_if_the_input_repeats_it_between_passes():
    cases = [Case("a", 1, {}), Case("b", 2, {}), Case("a", 3, {}), Case("c", 4, {})]
    todo = {"a", "b", "c"}
    batches = list(todo_batches(iter(cases), todo, 2))
    assert [[c.case_id for c in batch] for batch in batches] == [["a", "b"], ["c"]]
    assert todo == set()


def test_the_input_is_read_lazily_in_two_passes(tmp_path, monkeypatch):
    """Rows are pulled one at a time: the judging pass has judged the first batch before
    it reads the rows after it."""
    rows = [{"case_id": f"c{i}", "reference_report": "r", "generated_report": f"g{i}"}
            for i in range(6)]
    source = write_jsonl(tmp_path / "in.jsonl", rows)
    events: list[str] = []
    import evaluator.data.cases as cases_module

    real = cases_module._validate_row

    def spy(row, *args, **kwargs):
        events.append(f"row {row.line}")
        return real(row, *args, **kwargs)

    class Counting(FakeBackend):
        def generate(self, chats, *args, **kwargs):
            events.append(f"judge {len(chats)}")
            return super().generate(chats, *args, **kwargs)

    monkeypatch.setattr(cases_module, "_validate_row", spy)
    evaluate(Task("pathology_report", source),
             Judge("fake", spec=JudgeSpec(backend="fake"), backend=Counting()),
             RunOptions(tmp_path / "o.jsonl", batch_size=2))
    first_pass = [f"row {n}" for n in range(1, 7)]
    assert events[:6] == first_pass
    assert events[6:] == ["row 1", "row 2", "judge 2", "row 3", "row 4", "judge 2",
                          "row 5", "row 6", "judge 2"]
    assert len(read_results(tmp_path / "o.jsonl")) == 6


@pytest.mark.parametrize("extra", [[], ["--stream"], ["--format", "parquet"]],
                         ids=["batched", "streamed", "parquet"])
def test_scaling_benchmark_quick_mode_prints_its_figures(extra):
    if "parquet" in extra:
        pytest.importorskip("pyarrow", reason="needs the parquet extra (pyarrow)")
    process = subprocess.run([sys.executable, "benchmarks/scaling.py", "--sizes", "30", "60",
                              "--resume", *extra], capture_output=True, text=True, cwd=ROOT,
                             timeout=300, check=False)
    assert process.returncode == 0, process.stderr[-2000:]
    out = process.stdout
    assert re.search(r"^\s+30 cases: .* peak RSS \d+ MB.*resume", out, re.MULTILINE)
    assert re.search(r"^\s+60 cases: ", out, re.MULTILINE)
    assert re.search(r"peak RSS growth 30 -> 60 cases: [+-]\d+ MB", out)
    assert f"re-run: python benchmarks/scaling.py --sizes 30 60 --resume {' '.join(extra)}" \
        .rstrip() in out
    assert "PARAGRAPH" not in out and "adenocarcinoma" not in out  # no case text
