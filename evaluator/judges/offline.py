"""Offline and no-telemetry switches, set before any model library is imported; and
transformers' progress bars, switched off for a while.

Hospitals run this tool air-gapped: nothing may be downloaded or reported at run time.
Every library we load honours one of these variables. They are forced (not defaulted):
an inherited ``HF_HUB_OFFLINE=0`` must not turn a clinical run into a network client.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

# MLflow's own no-telemetry switch (mlflow/telemetry/utils.py: is_telemetry_disabled). Also
# set by evaluator.tracking right before it imports mlflow, for Python API callers.
MLFLOW_TELEMETRY_ENV = {"MLFLOW_DISABLE_TELEMETRY": "true"}

OFFLINE_ENV = {
    # Hugging Face hub, transformers, datasets: never reach the hub.
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1",
    "DISABLE_TELEMETRY": "1",
    "DO_NOT_TRACK": "1",
    # vLLM usage statistics.
    "VLLM_NO_USAGE_STATS": "1",
    "VLLM_DO_NOT_TRACK": "1",
    # Ray (the scale-out engine) and Gradio-style UIs some libraries pull in.
    "RAY_USAGE_STATS_ENABLED": "0",
    "GRADIO_ANALYTICS_ENABLED": "False",
    # MLflow (`evaluator log`, `run --mlflow`) sends usage telemetry from `import mlflow`
    # unless this is set; it reads DO_NOT_TRACK only when it is "true", not our "1".
    **MLFLOW_TELEMETRY_ENV,
    # llguidance's masking kernel (llguidance.torch) would otherwise torch.compile on first
    # use: seconds and a C++ compiler for no gain at these batch sizes.
    "TORCHDYNAMO_DISABLE": "1",
    # Tokenizers' Rust thread pool warns (to stderr) after fork otherwise.
    "TOKENIZERS_PARALLELISM": "false",
}


# What the environment held for each switch before the first force_offline() replaced it
# (None: unset). `evaluator doctor` reports a user's HF_HUB_OFFLINE=0 that was overridden.
_inherited: dict[str, str | None] | None = None


def force_offline() -> None:
    """Set the offline/no-telemetry switches in this process's environment."""
    global _inherited
    if _inherited is None:
        _inherited = {key: os.environ.get(key) for key in OFFLINE_ENV}
    for key, value in OFFLINE_ENV.items():
        os.environ[key] = value


def inherited_offline_env() -> dict[str, str | None]:
    """Each switch's value as this process inherited it, before :func:`force_offline` first
    ran (None: unset); the current values when it has not run yet."""
    if _inherited is not None:
        return dict(_inherited)
    return {key: os.environ.get(key) for key in OFFLINE_ENV}


@contextmanager
def progress_bars_off(hf_logging: ModuleType) -> Iterator[None]:
    """transformers' progress bars (``hf_logging``: its ``transformers.utils.logging``,
    imported) off while the block runs, then as they were."""
    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()
