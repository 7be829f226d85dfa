"""The transformers + outlines backend on CUDA (skipped without a GPU)."""

from __future__ import annotations

import json

import pytest

from evaluator.judges.backends import Sampling, load_backend
from evaluator.judges.models_file import JudgeSpec
from evaluator.rubrics.load import load_rubric
from evaluator.rubrics.render import render_messages
from evaluator.rubrics.schema import build_output_model, max_new_tokens, output_json_schema
from tests.conftest import BUILTIN, example_cases

torch = pytest.importorskip("torch", reason="needs the transformers extra: make install")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="no CUDA GPU on this machine (CPU path is tested "
                                       "in test_transformers_backend.py)")


@pytest.fixture(scope="module")
def cuda_backend():
    backend = load_backend("tiny-random", JudgeSpec(backend="tiny-random", device="cuda"))
    yield backend
    backend.close()


@pytest.mark.parametrize("name", BUILTIN)
def test_every_verdict_parses_on_cuda(cuda_backend, name):
    rubric = load_rubric(name)
    cases = example_cases(name)
    chats = [render_messages(rubric, cases[i % len(cases)]) for i in range(32)]
    schema = output_json_schema(rubric)
    model = build_output_model(rubric)
    for seed in range(3):
        sampling = Sampling(max_new_tokens=max_new_tokens(schema),
                            temperature=0.0 if seed == 0 else 1.0, seed=seed)
        for gen in cuda_backend.generate(chats, json.dumps(schema), sampling,
                                         rubric.chat_template_kwargs):
            assert gen.finish_reason == "stop"
            model.model_validate_json(gen.text)


def test_a_gpu_judge_leaves_torchs_cpu_threads_alone(monkeypatch):
    """Issue 45's choice is for a model on the CPU: a CUDA judge neither reads the host's
    CPUs nor sets torch's count, and says nothing of it (no ``threads``)."""
    from evaluator.judges.backends import torch_threads

    def no_reading():
        raise AssertionError("a GPU judge read the CPUs for torch's threads")

    monkeypatch.setattr(torch_threads, "read_cpus", no_reading)
    before = torch.get_num_threads()
    for threads in (None, 1):
        backend = load_backend("tiny-random", JudgeSpec(backend="tiny-random", device="cuda",
                                                        threads=threads))
        assert backend.threads is None and torch.get_num_threads() == before
        backend.close()
