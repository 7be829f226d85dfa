"""transformers + outlines: batched, schema-constrained judging on CPU or CUDA.

The constraint is outlines' llguidance backend over the rubric's JSON schema (with the
compile options of :mod:`evaluator.judges.backends.grammar`), built once per schema in about
a millisecond and reused for every batch. We call ``model.generate`` ourselves with that
grammar rather than outlines' ``generate_batch`` for two reasons: outlines would re-apply the
chat template to an already rendered prompt and has no way to pass ``chat_template_kwargs``
(``enable_thinking``), and it returns only text, while a result record needs token counts
and the finish reason.

The logits processor is our :class:`~evaluator.judges.backends.constraint.BatchConstraint`:
outlines' own llguidance processor computes and applies each row's mask separately; ours
does the whole batch in two calls (``benchmarks/constrained_vs_unconstrained.py``), and on
a GPU (or on CPUs torch leaves free) fills the next step's masks while the model computes
it. The tokenizer llguidance needs is cached on disk
(:mod:`evaluator.judges.backends.llg_tokenizer`).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

# Whether torch was loaded before this module (by the program running the judge, which may
# have set its thread count): looked at before the imports below load it.
_TORCH_PRELOADED = "torch" in sys.modules

from evaluator.judges.backends.base import (
    BackendUnavailable,
    Chat,
    Generation,
    Sampling,
    ScoreAnchor,
    ValueDistribution,
    fitting_prompts,
)
from evaluator.judges.backends.chat_tokens import encode_chat
from evaluator.judges.backends.constraint import BatchConstraint, PrefetchMasks
from evaluator.judges.backends.cpu_heap import decode_heap
from evaluator.judges.backends.fill_threads import fill_during_forward, fill_thread_count
from evaluator.judges.backends.grammar import constraint_schema, score_watch
from evaluator.judges.backends.llg_tokenizer import from_hf
from evaluator.judges.backends.torch_threads import ThreadChoice, settle_torch_threads
from evaluator.judges.backends.value_walk import Context, NodeDist, normalise, score_distributions
from evaluator.judges.embedded_judge import prepare_embedded_judge
from evaluator.judges.offline import force_offline
from evaluator.judges.tiny_random import build_tiny_random

force_offline()

import numpy as np
import outlines
import torch
from llguidance import LLExecutor
from outlines.backends.llguidance import LLGuidanceBackend
from safetensors import SafetensorError
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    LogitsProcessorList,
    StoppingCriteriaList,
)

if TYPE_CHECKING:
    from evaluator.judges.backends.transformers_settings import TransformersSettings

log = logging.getLogger(__name__)

# torch's own thread count here, read as torch was first loaded (by this module: nothing
# can have set it yet); None when it was loaded before (torch_threads then works it out).
_TORCH_DEFAULT = None if _TORCH_PRELOADED else torch.get_num_threads()

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _pick_device(requested: str) -> str:
    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested.startswith("cuda") and not torch.cuda.is_available():
        raise BackendUnavailable(f"device {requested!r} is set in models.yaml, but torch sees "
                                 "no CUDA GPU here; use device: cpu (or auto)")
    return requested


def _pick_dtype(requested: str, device: str) -> Any:
    if requested != "auto":
        return _DTYPES[requested]
    # Half precision is slow (or unsupported) on most CPUs; on GPU the checkpoint's dtype.
    return torch.float32 if device == "cpu" else "auto"


class _Grammars(LLGuidanceBackend):
    """outlines' llguidance backend, given the tokenizer we built (with our slices, from
    the disk cache) instead of building its own on every start."""

    def __init__(self, model: Any, llg_tokenizer: Any):
        self._llg_tokenizer = llg_tokenizer
        super().__init__(model)

    def _create_llg_tokenizer(self, model: Any) -> Any:
        return self._llg_tokenizer


class TransformersBackend:
    """A local Hugging Face causal LM, constrained by outlines."""

    name = "transformers"

    def __init__(self, judge_name: str, spec: TransformersSettings, *,
                 model_path: Path | None = None):
        path = model_path or self._resolve_path(spec)
        if not (path / "config.json").is_file():
            raise BackendUnavailable(f"judge {judge_name!r}: {path} is not a model folder "
                                     "(no config.json); point 'path' in models.yaml at a local "
                                     "Hugging Face model folder")
        self.device = _pick_device(spec.device)
        device_type = torch.device(self.device).type
        # On the CPU, torch's thread count is chosen before the model loads: its default, a
        # thread per core, collapses when another process holds a core (torch_threads).
        self.threads: ThreadChoice | None = None
        if device_type == "cpu":
            self.threads = settle_torch_threads(torch, spec.threads, default=_TORCH_DEFAULT,
                                                from_run=spec.threads_from_run)
            log.info("%s", self.threads.describe())
        dtype = _pick_dtype(spec.dtype, self.device)
        log.info("loading judge %s from %s on %s", judge_name, path, self.device)
        # Never run code shipped with a model (trust_remote_code) nor unpickle its weights
        # (use_safetensors): a model folder is data. evaluator.run.preflight refuses such
        # folders before the run; this is the backstop.
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True,
                                                           trust_remote_code=False)
            self.model = AutoModelForCausalLM.from_pretrained(
                path, local_files_only=True, trust_remote_code=False, use_safetensors=True,
                dtype=dtype)
        except (OSError, ValueError, KeyError, RuntimeError, SafetensorError) as exc:
            # Messages about the folder's files (no case is read yet); first line only.
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            raise BackendUnavailable(f"judge {judge_name!r}: cannot load the model in {path} "
                                     f"({type(exc).__name__}: {first})") from None
        self.model.to(self.device)
        self.model.eval()
        if self.tokenizer.chat_template is None:
            raise BackendUnavailable(f"judge {judge_name!r}: the tokenizer in {path} has no chat "
                                     "template; use an instruction-tuned (chat) model")
        # Outlines' Transformers wrapper sets left padding, which batched decoding needs.
        self._outlines_model = outlines.from_transformers(self.model, self.tokenizer)
        self._grammars = _Grammars(self._outlines_model, from_hf(self.tokenizer, path))
        # Fill the next step's masks while the model runs only where that leaves the model
        # its CPUs: off the CPU, or on a free CPU torch's threads do not use. With torch on
        # every free core, a mask thread beside its OpenMP workers (or beside another
        # process) oversubscribes them (bench_common.set_threads measured what that costs
        # torch: 21 ms against 1.6 ms a step), so there the fill runs between forward
        # passes (fill_threads).
        free = self.threads.readings.free if self.threads is not None else None
        self.prefetch_masks = fill_during_forward(device_type, torch.get_num_threads(), free)
        # The fill's own thread pool, sized to the CPUs the model leaves free (fill_threads).
        self.fill_threads = fill_thread_count(device_type, torch.get_num_threads(),
                                              spec.fill_threads, free)
        log.info("mask fill: %d thread(s)", self.fill_threads)
        self._executor = LLExecutor(self.fill_threads)
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.eos_token_id = self.tokenizer.eos_token_id
        context = getattr(self.model.config, "max_position_embeddings", None)
        limits = [x for x in (spec.max_model_len, context) if x]
        self.max_model_len = min(limits) if limits else None
        self._processors: dict[str, Any] = {}

    @staticmethod
    def _resolve_path(spec: TransformersSettings) -> Path:
        if spec.path is not None:
            return Path(spec.path)
        return prepare_embedded_judge()

    def _processor(self, json_schema: str) -> BatchConstraint:
        processor = self._processors.get(json_schema)
        if processor is None:
            # outlines compiles the schema into an llguidance grammar (lazily: milliseconds);
            # the masking at each step is ours (BatchConstraint).
            outlines_processor = self._grammars.get_json_schema_logits_processor(
                constraint_schema(json_schema))
            processor = BatchConstraint(outlines_processor.grammar,
                                        outlines_processor.llg_tokenizer, self._executor,
                                        watch=score_watch(json_schema))
            self._processors[json_schema] = processor
        return processor

    def render(self, chat: Chat, chat_template_kwargs: Mapping[str, Any]) -> list[int]:
        """Token ids of a chat rendered with the judge's own chat template; special-token
        strings inside message content stay text (see :mod:`evaluator.judges.backends.chat_tokens`)."""
        return encode_chat(self.tokenizer, chat, chat_template_kwargs)

    def generate(self, chats: Sequence[Chat], json_schema: str, sampling: Sampling,
                 chat_template_kwargs: Mapping[str, Any] | None = None) -> list[Generation]:
        """One constrained ``generate`` call for the chats that fit the context."""
        kwargs = dict(chat_template_kwargs or {})
        results, prompts = fitting_prompts(chats, lambda chat: self.render(chat, kwargs),
                                           sampling.max_new_tokens, self.max_model_len)
        if prompts:
            for index, generation in zip(prompts, self._generate_ids(
                    list(prompts.values()), json_schema, sampling)):
                results[index] = generation
        return [r for r in results if r is not None]

    def _generate_ids(self, prompts: list[list[int]], json_schema: str,
                      sampling: Sampling) -> list[Generation]:
        processor = self._processor(json_schema)
        processor.reset()
        batch = self.tokenizer.pad({"input_ids": prompts}, padding=True, return_tensors="pt")
        batch = {k: v.to(self.device) for k, v in batch.items()}
        options: dict[str, Any] = {
            "max_new_tokens": sampling.max_new_tokens,
            # on an accelerator (or free CPUs) the next step's masks are filled while the
            # model runs
            "stopping_criteria": StoppingCriteriaList(
                [PrefetchMasks(processor)] if self.prefetch_masks else []),
            "eos_token_id": self.eos_token_id,
            "pad_token_id": self.tokenizer.pad_token_id,
        }
        if sampling.temperature > 0:
            torch.manual_seed(sampling.seed)
            options.update(do_sample=True, temperature=sampling.temperature,
                           top_p=sampling.top_p, top_k=0)
        else:
            options.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        # On CPU, a decode step's large buffers reuse the last step's pages (cpu_heap).
        try:
            with torch.inference_mode(), decode_heap(self.device) as heap:
                options["logits_processor"] = LogitsProcessorList([heap, processor])
                output = self.model.generate(**batch, **options)
        except BaseException:
            try:  # the error on its way up is the one to report
                processor.settle()
            except Exception as exc:  # noqa: BLE001
                log.warning("a prefetched mask also failed (%s)", type(exc).__name__)
            raise
        processor.settle()
        start = batch["input_ids"].shape[1]
        generations = []
        captured = processor.captured or [None] * len(prompts)
        for row, prompt, step_logits in zip(output[:, start:].tolist(), prompts, captured):
            if self.eos_token_id in row:
                end = row.index(self.eos_token_id)
                tokens, finish = row[:end], "stop"
                used = end + 1
            else:
                tokens, finish, used = row, "length", len(row)
            text = self.tokenizer.decode(tokens, skip_special_tokens=True)
            generations.append(Generation(text=text, finish_reason=finish,
                                          prompt_tokens=len(prompt), completion_tokens=used,
                                          prompt_ids=tuple(prompt), token_ids=tuple(tokens),
                                          step_logits=step_logits))
        return generations

    def score_distributions(self, json_schema: str, generations: Sequence[Generation],
                            anchors: Sequence[Sequence[ScoreAnchor]],
                            ) -> list[list[ValueDistribution | None]]:
        """Each anchor's exact value distribution (:mod:`evaluator.judges.backends.value_walk`),
        the next-token distributions from forward passes of this model."""
        processor = self._processor(json_schema)
        return score_distributions(processor.tokenizer, processor.grammar, generations,
                                   anchors, self._next_token_dists)

    _SCORING_BATCH = 8

    def _next_token_dists(self, contexts: Sequence[Context], bases: Sequence[Sequence[int]],
                          allowed: Sequence[np.ndarray]) -> list[NodeDist]:
        """The model's next-token distribution after each context, over its allowed tokens.
        Contexts that are prefixes of one verdict are read from a single forward pass of it
        (``logits_to_keep`` the positions wanted); the others (paths off the verdict) are
        batched, left-padded with their position ids."""
        out: list[NodeDist | None] = [None] * len(contexts)
        plain: dict[int, list[int]] = {}
        off: list[int] = []
        for i, context in enumerate(contexts):
            (plain.setdefault(context.base, []) if not context.extra else off).append(i)
        with torch.inference_mode():
            for base, wanted in plain.items():
                end = max(contexts[i].length for i in wanted)
                ids = torch.tensor([list(bases[base][:end])], device=self.device)
                keep = torch.tensor([contexts[i].length - 1 for i in wanted], device=self.device)
                logits = self.model(input_ids=ids, logits_to_keep=keep).logits[0]
                logprobs = torch.log_softmax(logits.float(), dim=-1).cpu().numpy()
                for row, i in enumerate(wanted):
                    out[i] = normalise(logprobs[row], allowed[i])
            for start in range(0, len(off), self._SCORING_BATCH):
                chunk = off[start:start + self._SCORING_BATCH]
                seqs = [list(bases[contexts[i].base][:contexts[i].length]) + list(contexts[i].extra)
                        for i in chunk]
                width = max(len(s) for s in seqs)
                pad = self.tokenizer.pad_token_id
                ids = torch.tensor([[pad] * (width - len(s)) + s for s in seqs], device=self.device)
                mask = torch.tensor([[0] * (width - len(s)) + [1] * len(s) for s in seqs],
                                    device=self.device)
                positions = (mask.cumsum(-1) - 1).clamp(min=0)
                logits = self.model(input_ids=ids, attention_mask=mask, position_ids=positions,
                                    logits_to_keep=1).logits[:, -1]
                logprobs = torch.log_softmax(logits.float(), dim=-1).cpu().numpy()
                for row, i in enumerate(chunk):
                    out[i] = normalise(logprobs[row], allowed[i])
        return [dist for dist in out if dist is not None]

    def close(self) -> None:
        """Drop the model and free accelerator memory."""
        self._processors.clear()
        self.model = None  # type: ignore[assignment]
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def tiny_random_backend(judge_name: str, spec: TransformersSettings) -> TransformersBackend:
    """The transformers backend on the random-weight test model, built on first use."""
    return TransformersBackend(judge_name, spec, model_path=build_tiny_random())
