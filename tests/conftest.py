"""Shared fixtures: rubrics, example cases, and the real tiny-random backend."""

from __future__ import annotations

import json
import socket
from dataclasses import fields
from pathlib import Path

import pytest

from evaluator.data.sources import LabelSource
from evaluator.rubrics.load import load_rubric
from evaluator.run.task import Judge, RunOptions, Task

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
SHARED_DATA = ROOT.parent / "shared" / "data" / "trial_eligibility_sigir2014.jsonl"
BUILTIN = ("ecg_interpretation", "trial_eligibility", "drug_monograph_similarity",
           "pathology_report")
# The pairwise version of each (prompts/<name>_pairwise.yaml, examples/<name>_pairwise.jsonl).
PAIRWISE_BUILTIN = tuple(f"{name}_pairwise" for name in BUILTIN)


def example_cases(rubric_name: str) -> list[dict]:
    """The bundled example cases for a built-in rubric."""
    path = EXAMPLES / f"{rubric_name}.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


@pytest.fixture(autouse=True)
def _torch_threads_as_they_were():
    """torch's thread count and the count the evaluator last set (``torch_threads._applied``)
    put back after each test, together: a test that loads a CPU judge sets both, and one
    that puts back only torch's count (a benchmark's) would leave a later judge reading "the
    program set torch's count" (torch_threads.preset_threads). Only where torch was loaded
    before the test: one that loads it first leaves the pair as a judge set it."""
    import sys

    from evaluator.judges.backends import torch_threads

    torch = sys.modules.get("torch")
    before = (torch.get_num_threads(), torch_threads._applied) if torch is not None else None
    yield
    if before is not None:
        torch.set_num_threads(before[0])
        torch_threads._applied = before[1]


@pytest.fixture(params=BUILTIN)
def builtin_rubric(request):
    """Each built-in rubric in turn."""
    return load_rubric(request.param)


@pytest.fixture(scope="session")
def trial_rows() -> list[dict]:
    """Real trial-eligibility cases: shared dev data when present, else the examples."""
    path = SHARED_DATA if SHARED_DATA.is_file() else EXAMPLES / "trial_eligibility.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    """Write rows as JSON lines and return the path."""
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def tiny_backend():
    """The real transformers + outlines backend on the random-weight model (CPU)."""
    pytest.importorskip("torch", reason="needs the transformers extra: make install")
    from evaluator.judges.backends import load_backend
    from evaluator.judges.models_file import JudgeSpec

    backend = load_backend("tiny-random", JudgeSpec(backend="tiny-random", device="cpu"))
    yield backend
    backend.close()


def label_source(labels, field: str | None, id_column: str = "case_id",
                 scale=None) -> LabelSource:
    """The :class:`LabelSource` a command builds from ``--labels`` (one path, or a list),
    ``--label-field``, ``--label-id-column`` and ``--label-scale`` (values)."""
    paths = labels if isinstance(labels, (list, tuple)) else [labels]
    return LabelSource(tuple(Path(p) for p in paths), field, id_column,
                       None if scale is None else tuple(scale))


def run_options(**options) -> tuple[Task, Judge, RunOptions]:
    """A test's loose keywords as :func:`evaluator.evaluate`'s three objects: each keyword
    goes to the :class:`Task`, :class:`Judge` or :class:`RunOptions` field of its name
    (``judge`` is the judge's name, ``judge_spec`` its spec, ``ray_options`` the Ray options).
    """
    renamed = {"judge": "name", "judge_spec": "spec", "ray_options": "ray"}
    parts: list[dict] = [{}, {}, {}]
    for key, value in options.items():
        key = renamed.get(key, key)
        index = next(i for i, kind in enumerate((Task, Judge, RunOptions))
                     if key in {f.name for f in fields(kind)})
        parts[index][key] = value
    return Task(**parts[0]), Judge(**parts[1]), RunOptions(**parts[2])


def refused_in_one_line(result, secret: str, *needles: str) -> str:
    """A CLI user error: exit code 2, one line on stderr starting ``error: `` and naming
    ``needles``, no traceback, and not ``secret`` (the test's case text)."""
    assert result.exit_code == 2, result.output
    message = result.stderr.strip()
    assert "\n" not in message and "Traceback" not in result.output, result.output
    assert message.startswith("error: ") and secret not in message, message
    for needle in needles:
        assert needle in message, (needle, message)
    return message


@pytest.fixture
def connects(monkeypatch):
    """Every socket connect attempted, by address; any but loopback raises instead of
    connecting (so a test that opened one would fail even if it caught the error)."""
    seen: list[str] = []
    original = socket.socket.connect

    def connect(self, address):
        host = address[0] if isinstance(address, tuple) else str(address)
        seen.append(host)
        if host not in ("127.0.0.1", "::1"):
            raise AssertionError(f"a socket to {host} was opened")
        return original(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: (_ for _ in ()).throw(
        AssertionError(f"create_connection{a}")))
    return seen
