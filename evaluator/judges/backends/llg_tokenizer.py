"""The judge's tokenizer as llguidance sees it, cached on disk per tokenizer.

llguidance needs every token's bytes. Getting them from a Hugging Face tokenizer
(``llguidance.hf.from_tokenizer``) re-parses the whole tokenizer in Rust: 0.7 s for a 49k
vocabulary, 2.5 s for Qwen3's 151,669 tokens, in every process. The bytes themselves are
a plain list, so we keep them in ``<cache>/llguidance/<key>.json`` and build the
``LLTokenizer`` from that list (``benchmarks/schema_compile.py`` measures both).

The cache is safe to trust: the key is the SHA-256 of the tokenizer's files, the vocabulary
size, the end-of-sequence id and llguidance's version; the file is written 0600 through a
temporary file and an atomic rename; on load it must be a regular file of this user, and
its recorded digest of the token list must match. Anything else is ignored and rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
import tempfile
from importlib.metadata import version
from pathlib import Path
from typing import Any

from evaluator.judges.backends.grammar import tokenizer_slices
from evaluator.judges.paths import cache_dir

log = logging.getLogger(__name__)

FORMAT = 1
# Files of a Hugging Face model folder that define its tokenizer.
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                    "added_tokens.json", "vocab.json", "merges.txt", "tokenizer.model")
_MAX_CACHE_BYTES = 256 * 1024 * 1024


def cache_key(hf_tokenizer: Any, model_path: Path | None) -> str:
    """SHA-256 naming one tokenizer: its files (or, without a folder, its serialisation),
    vocabulary size, end-of-sequence id, and the llguidance version."""
    digest = hashlib.sha256()
    digest.update(f"format={FORMAT};llguidance={version('llguidance')};"
                  f"n={len(hf_tokenizer)};eos={hf_tokenizer.eos_token_id};".encode())
    files = [model_path / n for n in _TOKENIZER_FILES] if model_path is not None else []
    found = [f for f in files if f.is_file()]
    if found:
        for file in found:
            digest.update(f"{file.name}:".encode())
            digest.update(hashlib.sha256(file.read_bytes()).digest())
    else:
        digest.update(hf_tokenizer.backend_tokenizer.to_str().encode())
    return digest.hexdigest()


def _tokens_digest(tokens: list[str], special: list[int], eos: int) -> str:
    blob = json.dumps([tokens, special, eos], separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()


class _Encoder:
    """What ``llguidance.TokenizerWrapper`` needs from a tokenizer: ids, bytes, encode."""

    def __init__(self, hf_tokenizer: Any, tokens: list[bytes], special: list[int], eos: int):
        self._hf = hf_tokenizer
        self.tokens = tokens
        self.special_token_ids = special
        self.eos_token_id = eos
        self.bos_token_id = None

    def __call__(self, text: str) -> list[int]:
        if not isinstance(text, str):  # TokenizerWrapper probes for bytes support
            raise TypeError("text only")
        return list(self._hf.encode(text, add_special_tokens=False))


def _read_cache(path: Path, key: str, hf_tokenizer: Any
                ) -> tuple[list[bytes], list[int], int] | None:
    """The cached token list, or None unless it is a regular file of ours whose digest
    checks out and whose contents fit this tokenizer."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if (not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid()
                or info.st_size > _MAX_CACHE_BYTES):
            return None
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = json.loads(handle.read())
        tokens, special, eos = data["tokens"], data["special"], data["eos"]
        if data.get("format") != FORMAT or data.get("key") != key:
            return None
        if data.get("digest") != _tokens_digest(tokens, special, eos):
            return None
        n = len(tokens)
        if (n < len(hf_tokenizer) or not isinstance(eos, int) or eos != hf_tokenizer.eos_token_id
                or not all(isinstance(i, int) and 0 <= i < n for i in special)
                or not all(isinstance(t, str) for t in tokens)):
            return None
        return [bytes.fromhex(t) for t in tokens], list(special), eos
    except (OSError, ValueError, KeyError, TypeError, RecursionError, OverflowError):
        return None
    finally:
        os.close(fd)


def _write_cache(path: Path, key: str, tokens: list[bytes], special: list[int],
                 eos: int) -> None:
    hexed = [t.hex() for t in tokens]
    payload = {"format": FORMAT, "key": key, "eos": eos, "special": special, "tokens": hexed,
               "digest": _tokens_digest(hexed, special, eos)}
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tokens-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            json.dump(payload, handle, separators=(",", ":"))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def from_hf(hf_tokenizer: Any, model_path: Path | None = None, *,
            use_cache: bool = True) -> Any:
    """An ``llguidance.LLTokenizer`` for ``hf_tokenizer`` with our slices, from the disk
    cache when it holds this tokenizer (else built, then cached; a cache that cannot be
    written is only logged)."""
    import llguidance  # the judge extras bring llguidance
    import llguidance.hf

    path: Path | None = None
    cached = None
    if use_cache:
        try:
            key = cache_key(hf_tokenizer, model_path)
            path = cache_dir() / "llguidance" / f"{key}.json"
            cached = _read_cache(path, key, hf_tokenizer)
        except OSError as exc:
            log.warning("cannot use the llguidance tokenizer cache (%s); building it in "
                        "memory", exc.strerror or type(exc).__name__)
            path = None
    if cached is not None:
        try:
            return _build(hf_tokenizer, *cached)
        except (ValueError, OverflowError):  # a cache llguidance refuses: rebuilt below
            cached = None
    fresh = llguidance.hf.from_tokenizer(hf_tokenizer, slices=[])
    tokens = [fresh.decode_bytes([i]) for i in range(fresh.vocab_size)]
    special = [i for i in range(fresh.vocab_size) if fresh.is_special_token(i)]
    if path is not None:
        try:
            _write_cache(path, path.stem, tokens, special, fresh.eos_token)
        except OSError as exc:
            log.warning("cannot cache the judge's llguidance tokenizer in %s (%s); it is "
                        "rebuilt in each run", path.parent, exc.strerror or exc)
    return _build(hf_tokenizer, tokens, special, fresh.eos_token)


def _build(hf_tokenizer: Any, tokens: list[bytes], special: list[int], eos: int) -> Any:
    import llguidance  # the judge extras bring llguidance

    wrapper = llguidance.TokenizerWrapper(_Encoder(hf_tokenizer, tokens, special, eos))
    return llguidance.LLTokenizer(wrapper, n_vocab=len(tokens), eos_token=eos,
                                  slices=tokenizer_slices())
