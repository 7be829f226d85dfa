"""The judge's estimated memory against what the host has free.

Estimate = weights + KV cache, from the model folder alone (no weight is read):

- weights: every tensor in the safetensors headers, element count × the bytes of the dtype
  it is loaded in (the judge's ``dtype``, or what the backend picks for ``auto``; quantized
  integer tensors keep their stored size);
- KV cache per token: 2 (K and V) × layers × KV heads × head dim × bytes of the KV dtype,
  from config.json (``text_config`` for multimodal checkpoints);
- per sequence: that × ``max_model_len``; ``sequences`` at once: vLLM's ``max_num_seqs``
  (capped by the judge's ``batch_size``, the requests it keeps in flight), or the batch.

It is an upper bound on the KV cache (every sequence at full length, no sliding window)
and leaves out activations and CUDA graphs (typically 1-4 GiB). Hence the thresholds: the
weights alone not fitting is a failure (certain); the weights plus one full-length sequence
not fitting is a warning (vLLM refuses to start when its KV cache cannot hold one
``max_model_len`` sequence, but a sliding-window model may need less); more sequences than
fit is fine for vLLM (it schedules what fits) and a warning for transformers, which holds
a whole batch at once.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluator.doctor.cuda import JudgeUse
from evaluator.doctor.probes import Gpu
from evaluator.doctor.report import Check, failed, gib, ok, warning
from evaluator.judges.backends.vllm_settings import VLLMEngineConfig, validate_engine_settings
from evaluator.judges.models_file import JudgeSpec

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}
#: Bytes per element of each safetensors dtype.
SAFETENSORS_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2,
                     "I8": 1, "U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1,
                     "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1}
_FLOATS = {"F64", "F32", "F16", "BF16"}
#: vLLM 0.32's default gpu_memory_utilization (vllm.config.CacheConfig), when the installed
#: vLLM cannot be asked.
VLLM_DEFAULT_UTILIZATION = 0.92
_MAX_HEADER = 100 << 20
_MAX_CONFIG = 16 << 20


@dataclass(frozen=True)
class ModelShape:
    """What the KV cache depends on, from config.json."""

    layers: int
    kv_heads: int
    head_dim: int
    max_positions: int | None = None
    dtype: str | None = None

    def kv_bytes_per_token(self, dtype_bytes: int) -> int:
        """K and V of one token over all layers."""
        return 2 * self.layers * self.kv_heads * self.head_dim * dtype_bytes


def model_shape(config: Mapping[str, Any]) -> ModelShape:
    """The shape of a Hugging Face ``config.json`` (its ``text_config`` when the top level
    has no layers); :class:`ValueError` naming the missing key."""
    text = config
    if "num_hidden_layers" not in config and isinstance(config.get("text_config"), Mapping):
        text = config["text_config"]
    try:
        heads = int(text["num_attention_heads"])
        head_dim = int(text.get("head_dim") or int(text["hidden_size"]) // heads)
        return ModelShape(layers=int(text["num_hidden_layers"]),
                          kv_heads=int(text.get("num_key_value_heads") or heads),
                          head_dim=head_dim,
                          max_positions=text.get("max_position_embeddings")
                          or config.get("max_position_embeddings"),
                          dtype=text.get("torch_dtype") or text.get("dtype")
                          or config.get("torch_dtype") or config.get("dtype"))
    except KeyError as exc:
        raise ValueError(f"config.json has no {exc.args[0]}") from None
    except (TypeError, ValueError, ZeroDivisionError):
        raise ValueError("config.json's layer and head counts are not numbers") from None


@dataclass(frozen=True)
class MemoryEstimate:
    """Weights and KV cache in bytes, over all the GPUs a judge is split across."""

    weights: int
    kv_per_token: int
    max_model_len: int
    sequences: int
    devices: int = 1

    @property
    def per_sequence(self) -> int:
        """KV cache of one ``max_model_len`` sequence."""
        return self.kv_per_token * self.max_model_len

    @property
    def total(self) -> int:
        """Weights + ``sequences`` full-length sequences."""
        return self.weights + self.sequences * self.per_sequence

    def fitting(self, budget: float) -> int:
        """How many full-length sequences fit beside the weights in ``budget`` bytes per
        device (negative when the weights alone do not fit)."""
        room = budget - self.weights / self.devices
        if room < 0:
            return -1
        return math.floor(room / (self.per_sequence / self.devices))


def read_config(folder: Path) -> dict[str, Any]:
    """``folder/config.json`` (bounded); :class:`ValueError` when unreadable."""
    path = Path(folder) / "config.json"
    try:
        if path.stat().st_size > _MAX_CONFIG:
            raise ValueError(f"{path} is larger than {_MAX_CONFIG >> 20} MiB")
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot read {path} ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} is not a JSON object")
    return data


def safetensors_header(path: Path) -> dict[str, Any]:
    """The JSON header of a safetensors file (tensor name -> dtype, shape, offsets)."""
    with Path(path).open("rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        if length > _MAX_HEADER:
            raise ValueError(f"{path}: safetensors header of {length} bytes")
        header = json.loads(handle.read(length))
    if not isinstance(header, dict):
        raise ValueError(f"{path}: not a safetensors header")
    return header


def weight_bytes(folder: Path, float_bytes: int | None) -> int:
    """Bytes the weights take once loaded: float tensors at ``float_bytes`` each element
    (None: as stored), other tensors as stored; a file whose header cannot be read counts
    at its size on disk."""
    total = 0
    for path in sorted(Path(folder).glob("*.safetensors")):
        try:
            tensors = [t for name, t in safetensors_header(path).items()
                       if name != "__metadata__"]
            for tensor in tensors:
                stored = SAFETENSORS_BYTES[tensor["dtype"]]
                size = float_bytes if float_bytes and tensor["dtype"] in _FLOATS else stored
                total += math.prod(tensor["shape"]) * size
        except (OSError, ValueError, KeyError, TypeError, struct.error):
            total += path.stat().st_size
    return total


def load_bytes(spec: JudgeSpec, on: str, config_dtype: str | None) -> int | None:
    """Bytes per float weight as the backend loads it (None: as stored): the judge's dtype;
    for ``auto``, transformers takes float32 on the CPU and the checkpoint's dtype on a GPU,
    vLLM on a GPU runs a float32 checkpoint in 16 bits."""
    if spec.dtype != "auto":
        return DTYPE_BYTES[spec.dtype]
    if not spec.backend_info.vllm_engine:
        return 4 if on == "cpu" else None
    if on == "cuda" and config_dtype == "float32":
        return 2
    return None


def kv_dtype_bytes(engine: VLLMEngineConfig | None, float_bytes: int | None,
                   config_dtype: str | None) -> int:
    """Bytes per KV-cache element: 1 for a vLLM engine's fp8 ``kv_cache_dtype``, else the
    model's."""
    kv_dtype = str(engine.kv_cache_dtype or "auto") if engine is not None else "auto"
    if kv_dtype.startswith("fp8"):
        return 1
    return float_bytes or DTYPE_BYTES.get(config_dtype or "", 2)


def vllm_default_max_num_seqs(gpu: Gpu | None) -> int:
    """vLLM 0.32's default ``max_num_seqs`` for the ``LLM`` class: 1024 on GPUs of 70 GiB
    and more (A100 excepted), else 256."""
    if gpu is not None and gpu.total >= 70 * 2**30 and "a100" not in gpu.name.lower():
        return 1024
    return 256


def estimate(spec: JudgeSpec, folder: Path, on: str, gpu: Gpu | None) -> MemoryEstimate:
    """The judge's memory estimate on ``on`` (cpu or cuda; ``gpu`` the first it uses);
    :class:`ValueError` when config.json lacks what it needs."""
    config = read_config(folder)
    shape = model_shape(config)
    float_bytes = load_bytes(spec, on, shape.dtype)
    max_model_len = spec.max_model_len or shape.max_positions
    if not max_model_len:
        raise ValueError("no max_model_len in models.yaml or config.json")
    sequences, devices, engine = spec.batch_size, 1, None
    if spec.backend_info.vllm_engine:
        engine = validate_engine_settings(spec.engine)  # type: ignore[attr-defined]
        default = 256 if on == "cpu" else vllm_default_max_num_seqs(gpu)
        sequences = min(spec.batch_size, engine.max_num_seqs or default)
        devices = engine.tensor_parallel_size * engine.pipeline_parallel_size
    return MemoryEstimate(weights=weight_bytes(folder, float_bytes),
                          kv_per_token=shape.kv_bytes_per_token(
                              kv_dtype_bytes(engine, float_bytes, shape.dtype)),
                          max_model_len=int(max_model_len), sequences=sequences,
                          devices=devices)


def _describe(est: MemoryEstimate) -> str:
    return (f"weights {gib(est.weights)} + KV {gib(est.per_sequence)} per "
            f"{est.max_model_len}-token sequence; {est.sequences} at once: {gib(est.total)}")


def _cpu(est: MemoryEstimate, available: int | None, data: dict[str, Any]) -> Check:
    said = f"runs on the CPU: {_describe(est)}"
    if available is None:
        return ok("memory", f"{said} (available RAM unknown)", **data)
    data["available"] = available
    if est.weights > available:
        return failed("memory", f"{said}, but only {gib(available)} of RAM is available: "
                      "the weights alone do not fit; free memory or use a smaller judge",
                      **data)
    if est.total > available:
        return warning("memory", f"{said} (upper bound), {gib(available)} of RAM available: "
                       "lower batch_size or max_model_len if the run runs out of memory",
                       **data)
    return ok("memory", f"{said}; {gib(available)} of RAM available", **data)


def check_memory(use: JudgeUse, spec: JudgeSpec, folder: Path | None, on: str | None,
                 gpus: tuple[Gpu, ...], available: int | None,
                 vllm_utilization: float | None) -> Check:
    """Estimate the judge's memory and compare it with the GPU (vLLM: its
    ``gpu_memory_utilization`` share of the total, which must also be free at start) or,
    on the CPU, the RAM available."""
    if on is None:
        return ok("memory", f"no model (the {use.backend} judge)")
    if folder is None:
        return warning("memory", "no model folder to estimate from (see weights)")
    index = int(spec.device.split(":")[1]) if spec.device.startswith("cuda:") else 0
    gpu = gpus[index] if on == "cuda" and index < len(gpus) else None
    try:
        est = estimate(spec, folder, on, gpu)
    except ValueError as exc:
        return warning("memory", f"cannot estimate: {exc}")
    data: dict[str, Any] = {"weights": est.weights, "kv_per_token": est.kv_per_token,
                            "max_model_len": est.max_model_len, "sequences": est.sequences,
                            "per_sequence": est.per_sequence, "total": est.total,
                            "devices": est.devices,
                            "note": "estimate: weights + KV cache of full-length sequences "
                                    "(upper bound); activations and CUDA graphs not counted"}
    if on == "cpu":
        return _cpu(est, available, data)
    needed = est.devices + index
    if len(gpus) < needed:
        if not gpus:
            return warning("memory", f"needs {gib(est.weights)} of weights + "
                           f"{gib(est.per_sequence)} per full-length sequence on a GPU; no "
                           "GPU to compare with (see gpu)", **data)
        return failed("memory", f"the judge needs {needed} GPU(s) (device {spec.device}, "
                      f"{est.devices} for tensor/pipeline parallelism), {len(gpus)} visible: "
                      "lower tensor_parallel_size or set CUDA_VISIBLE_DEVICES", **data)
    used = gpus[index:needed]
    if spec.backend_info.vllm_engine:
        return _vllm(est, used, index, vllm_utilization or VLLM_DEFAULT_UTILIZATION, spec,
                     data)
    return _transformers(est, used[0], data)


def _vllm(est: MemoryEstimate, used: tuple[Gpu, ...], first: int, utilization: float,
          spec: JudgeSpec, data: dict[str, Any]) -> Check:
    explicit = spec.engine.get("gpu_memory_utilization")  # type: ignore[attr-defined]
    for number, gpu in enumerate(used):
        if gpu.free < utilization * gpu.total:
            lower = math.floor(gpu.free / gpu.total * 100) / 100 - 0.02
            hint = (f", or set engine: {{gpu_memory_utilization: {lower:.2f}}}"
                    if lower >= 0.1 else "")
            return failed("memory", f"GPU {first + number} has {gib(gpu.free)} free of "
                          f"{gib(gpu.total)}; vLLM starts only when gpu_memory_utilization "
                          f"({utilization}) x {gib(gpu.total)} = "
                          f"{gib(utilization * gpu.total)} is free: stop what else uses the "
                          f"GPU (nvidia-smi lists it){hint}", **data)
    total = min(g.total for g in used)
    budget = utilization * total
    data.update(budget=budget, gpu_memory_utilization=utilization)
    where = (f"vLLM's budget ({utilization}{'' if explicit else ', its default'}) x "
             f"{gib(total)} = {gib(budget)}" + (f" per GPU over {est.devices}"
                                                if est.devices > 1 else ""))
    fit = est.fitting(budget)
    data["full_length_sequences_fitting"] = max(fit, 0)
    if fit < 0:
        return failed("memory", f"the weights ({gib(est.weights)}) do not fit in {where}: use "
                      "a quantized checkpoint (quantization), tensor_parallel_size 2 or a "
                      "bigger GPU", **data)
    if fit < 1:
        return warning("memory", f"{_describe(est)} (estimate, upper bound); {where} holds the "
                       f"weights but not one full-length sequence beside them, and vLLM "
                       "will not start then: lower max_model_len, set kv_cache_dtype: fp8, "
                       "or use a bigger GPU", **data)
    fits = ("all of them" if fit >= est.sequences
            else f"{fit} (vLLM schedules what fits; real cases are shorter)")
    return ok("memory", f"{_describe(est)} (estimate, upper bound); {where} holds the weights "
              f"and {fits}", **data)


def _transformers(est: MemoryEstimate, gpu: Gpu, data: dict[str, Any]) -> Check:
    where = f"the GPU has {gib(gpu.free)} free of {gib(gpu.total)}"
    data["budget"] = gpu.free
    if est.weights > gpu.free:
        return failed("memory", f"the weights ({gib(est.weights)}) do not fit: {where}; use a "
                      "smaller or quantized judge, or a bigger GPU", **data)
    if est.total > gpu.free:
        return warning("memory", f"{_describe(est)} (estimate, upper bound); {where}: a "
                       "batch of long cases may run out of memory; lower batch_size or "
                       "max_model_len, or use backend vllm", **data)
    return ok("memory", f"{_describe(est)} (estimate, upper bound); {where}", **data)
