"""A chat, the rubric's schema and sampling -> an OpenAI-compatible chat request, and the
server's answer -> a :class:`Generation`: pure, no network (tested without a server).

The schema sent is :func:`evaluator.judges.backends.grammar.constraint_schema`'s: the
rubric's schema with llguidance's compile options (compact JSON, no free whitespace), which
a server whose structured-output backend is llguidance (vLLM's ``guidance``) honours, so
the longest verdict fits the rubric's token budget. Two ways to send it:

- ``vllm``: vLLM's own ``structured_outputs: {"json": schema, "disable_any_whitespace":
  true}`` (vLLM 0.32's ``ChatCompletionRequest``), with vLLM's sampling extras
  (``top_k: 0``, ``min_p: 0``, ``repetition_penalty: 1``: the model's generation_config
  defaults do not apply, as in the in-process vLLM backend) and ``chat_template_kwargs``;
- ``openai``: ``response_format: {"type": "json_schema", ...}`` only, which vLLM, SGLang,
  llama.cpp's server and TGI's OpenAI route also take (``chat_template_kwargs`` only when
  the judge sets some).

Whatever the server does with the schema, the verdict is validated by the rubric's model
afterwards: a server that ignores it gives an ``invalid_output`` record, never a score.
Details of failures name statuses and fields, never the answer's or the case's text.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any, Literal

from evaluator.judges.backends.base import Chat, Generation, Sampling
from evaluator.judges.backends.server_logprobs import parse_logprobs

StructuredOutput = Literal["vllm", "openai"]
_TOKEN = re.compile(r"^[a-z_]{1,32}$")
# How servers word a prompt longer than the model's context in a 400's error message
# (vLLM: "maximum context length", llama.cpp: "exceeds the available context size").
_CONTEXT_WORDS = re.compile(r"context (length|size|window)|maximum context|too many tokens",
                            re.IGNORECASE)


def request_seed(seed: int, chat: Chat) -> int:
    """The sampling seed of one request: the judge's seed mixed with the chat, so a case's
    verdict depends on its own prompt only while cases draw different streams (as the
    in-process backends do). 31 bits: every server takes it."""
    text = json.dumps([dict(m) for m in chat], sort_keys=True, ensure_ascii=False)
    digest = hashlib.sha256(f"{seed}:{text}".encode())
    return int.from_bytes(digest.digest()[:8], "big") & (2**31 - 1)


def chat_request(chat: Chat, schema: Mapping[str, Any], sampling: Sampling, *,
                 served_model: str, structured_output: StructuredOutput,
                 chat_template_kwargs: Mapping[str, Any] | None = None,
                 top_logprobs: int = 0) -> dict[str, Any]:
    """The JSON body of one ``POST .../chat/completions`` (``schema``: the constraint
    schema, parsed). ``top_logprobs`` > 0 asks for that many log-probabilities at every
    token (for score distributions); 0 asks for none."""
    body: dict[str, Any] = {
        "model": served_model,
        "messages": [{"role": m["role"], "content": m["content"]} for m in chat],
        "max_tokens": sampling.max_new_tokens,
        "n": 1,
        "stream": False,
    }
    if sampling.temperature > 0:
        body.update(temperature=sampling.temperature, top_p=sampling.top_p,
                    seed=request_seed(sampling.seed, chat))
    else:
        body.update(temperature=0.0, top_p=1.0)
    if structured_output == "vllm":
        body.update(structured_outputs={"json": dict(schema), "disable_any_whitespace": True},
                    top_k=0, min_p=0.0, repetition_penalty=1.0)
        if chat_template_kwargs:
            body["chat_template_kwargs"] = dict(chat_template_kwargs)
    else:
        body["response_format"] = {"type": "json_schema", "json_schema": {
            "name": "verdict", "schema": dict(schema), "strict": True}}
        if chat_template_kwargs:
            body["chat_template_kwargs"] = dict(chat_template_kwargs)
    if top_logprobs > 0:
        body.update(logprobs=True, top_logprobs=top_logprobs)
    return body


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 \
        else None


def _error(detail: str) -> Generation:
    return Generation(text=None, finish_reason="error", detail=detail)


def parse_answer(status: int, body: bytes, where: str) -> Generation:
    """The generation in a server's answer (``status``, raw ``body``); an ``error`` one with a
    one-line detail (``where``: the server's address) for anything else. The detail never
    quotes the body: it can echo the prompt."""
    if 300 <= status < 400:
        return _error(f"server {where} answered HTTP {status} (a redirect); redirects are "
                      "never followed: set base_url to the address that answers")
    if status != 200:
        if status == 400 and _context_refusal(body):
            return Generation(text=None, finish_reason="context_overflow",
                              detail=f"server {where} refused the prompt as longer than the "
                                     "served model's context (HTTP 400); case text is never "
                                     "truncated: use a judge with a longer context")
        return _error(f"server {where} answered HTTP {status}")
    try:
        answer = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return _error(f"server {where} answered with invalid JSON")
    choices = answer.get("choices") if isinstance(answer, dict) else None
    if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], dict):
        return _error(f"server {where}: the answer has no single choice")
    choice = choices[0]
    message = choice.get("message")
    text = message.get("content") if isinstance(message, dict) else None
    if not isinstance(text, str):
        return _error(f"server {where}: the answer's choice has no message content")
    usage = answer.get("usage") if isinstance(answer.get("usage"), dict) else {}
    details = usage.get("prompt_tokens_details")
    cached = _count(details.get("cached_tokens")) if isinstance(details, dict) else None
    counts = {"prompt_tokens": _count(usage.get("prompt_tokens")),
              "completion_tokens": _count(usage.get("completion_tokens")),
              "cached_tokens": cached}
    reason = choice.get("finish_reason")
    if reason in ("stop", "length"):
        return Generation(text=text, finish_reason=reason, **counts,
                          token_logprobs=parse_logprobs(choice))
    named = reason if isinstance(reason, str) and _TOKEN.match(reason) else "an unknown reason"
    return Generation(text=None, finish_reason="error", **counts,
                      detail=f"server {where} ended the answer with finish_reason {named}")


def _context_refusal(body: bytes) -> bool:
    """Whether a 400's error message says the prompt is longer than the context."""
    try:
        answer = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return False
    error = answer.get("error") if isinstance(answer, dict) else None
    message = error.get("message") if isinstance(error, dict) else (
        answer.get("message") if isinstance(answer, dict) else None)
    return isinstance(message, str) and bool(_CONTEXT_WORDS.search(message[:2000]))
