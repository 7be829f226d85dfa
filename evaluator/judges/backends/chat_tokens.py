"""Chat -> token ids with the judge's chat template, so that case text is only ever text.

Why not ``tokenizer(apply_chat_template(chat, tokenize=False))``: a Hugging Face tokenizer
turns every special-token *string* it finds into the control token itself, wherever the
string came from. A case report containing ``<|im_end|>\\n<|im_start|>assistant\\n``
(ChatML, the embedded judge's and the test model's format) would then close the user turn
and open a forged assistant turn, ``<|eot_id|>`` would do the same to a Llama 3 judge,
``<end_of_turn>`` to Gemma. Rendering with ``tokenize=True`` does exactly the same thing.

So :func:`encode_chat` renders the template to text, finds each message's content in it (in
order; as given, else stripped, since templates may ``trim`` it) and tokenizes the pieces
separately: the template's own text with special tokens parsed, each message content with
``split_special_tokens=True``, which makes a special-token string ordinary text tokens
(``<``, ``|``, ``im``, ...). The pieces are joined at points where the template already
separates them (a control token or a newline), so for the usual templates (ChatML, Llama 3)
a chat without such strings gets exactly the ids of the whole-string tokenization.

When a content cannot be found (a template that rewrites it), or cannot be found
unambiguously, or the tokenizer adds a prefix space to every string it encodes (SentencePiece
``add_dummy_prefix``, which would put a space at every join), the whole rendered text is
tokenized as before, but only if no message content contains a special-token string;
otherwise :class:`ValueError` is raised (it names no case text), since there is then no
safe way to tell the template's control tokens from the case's.

Pure and independent of any backend: it takes a Hugging Face tokenizer, so the transformers
backend and a vLLM backend share it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evaluator.judges.backends.base import Chat


def special_token_strings(tokenizer: Any) -> list[str]:
    """Every string the tokenizer would turn into a special (control) token: its
    ``all_special_tokens`` plus the added tokens marked special."""
    strings = set(getattr(tokenizer, "all_special_tokens", None) or [])
    for token in (getattr(tokenizer, "added_tokens_decoder", None) or {}).values():
        if getattr(token, "special", False):
            strings.add(str(token))
    return sorted(s for s in strings if s)


def render_chat_text(tokenizer: Any, chat: Chat,
                     chat_template_kwargs: Mapping[str, Any] | None = None) -> str:
    """The chat rendered with the tokenizer's chat template, generation prompt included."""
    return tokenizer.apply_chat_template([dict(m) for m in chat], tokenize=False,
                                         add_generation_prompt=True,
                                         **dict(chat_template_kwargs or {}))


def _encode(tokenizer: Any, text: str, *, split_special_tokens: bool) -> list[int]:
    if not text:
        return []
    return list(tokenizer(text, add_special_tokens=False,
                          split_special_tokens=split_special_tokens)["input_ids"])


def _content_spans(text: str, contents: Sequence[str],
                   specials: Sequence[str]) -> list[tuple[int, int]] | None:
    """Where each content lies in the rendered text, in order; None if one is not found, or
    if a content holding a special-token string also occurs elsewhere in the text (a
    template that repeats a message would otherwise expose the copy)."""
    spans: list[tuple[int, int]] = []
    position = 0
    for content in contents:
        for form in dict.fromkeys((content, content.strip())):
            start = text.find(form, position)
            if start >= 0:
                break
        else:
            return None
        end = start + len(form)
        if form and any(s in form for s in specials) and text.count(form) != 1:
            return None
        spans.append((start, end))
        position = end
    return spans


def _adds_prefix_space(tokenizer: Any) -> bool:
    """True for tokenizers that start every encoded string with a space marker, so that
    encoding pieces separately would insert spaces at the joins."""
    joined = _encode(tokenizer, "x", split_special_tokens=False) + _encode(
        tokenizer, "y", split_special_tokens=False)
    return tokenizer.decode(joined, skip_special_tokens=False,
                            clean_up_tokenization_spaces=False) != "xy"


def encode_chat(tokenizer: Any, chat: Chat,
                chat_template_kwargs: Mapping[str, Any] | None = None) -> list[int]:
    """Token ids of ``chat`` rendered with the tokenizer's chat template (generation prompt
    added), in which no message content can produce a special token.

    Raises :class:`ValueError` when the contents cannot be separated from the template's
    text and some content contains a special-token string (see the module docstring).
    """
    text = render_chat_text(tokenizer, chat, chat_template_kwargs)
    contents = [str(message.get("content") or "") for message in chat]
    specials = special_token_strings(tokenizer)
    spans = _content_spans(text, contents, specials)
    if spans is None or _adds_prefix_space(tokenizer):
        if any(s in content for content in contents for s in specials):
            raise ValueError("a message contains a special-token string of the judge's "
                             "tokenizer and its text cannot be separated from the chat "
                             "template's (the template rewrites or repeats message content, "
                             "or the tokenizer adds a prefix space to every piece); refusing "
                             "to tokenize it as control tokens")
        return _encode(tokenizer, text, split_special_tokens=False)
    special_ids = set(tokenizer.convert_tokens_to_ids(specials)) if specials else set()
    ids: list[int] = []
    position = 0
    for start, end in spans:
        ids += _encode(tokenizer, text[position:start], split_special_tokens=False)
        content_ids = _encode(tokenizer, text[start:end], split_special_tokens=True)
        # Fail closed should a tokenizer ignore split_special_tokens (older versions, or a
        # concurrent call flipping the shared Rust tokenizer's flag).
        if special_ids.intersection(content_ids):
            raise ValueError("the tokenizer turned special-token text inside a message into "
                             "control tokens despite split_special_tokens=True; refusing it")
        ids += content_ids
        position = end
    ids += _encode(tokenizer, text[position:], split_special_tokens=False)
    return ids
