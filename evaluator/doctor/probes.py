"""What the doctor asks of the system, one small function each, bundled in :class:`Probes`
so that a test replaces any of them (``dataclasses.replace(Probes(), torch=fake)``).

torch and vLLM are imported in a subprocess of this Python with a timeout: a broken CUDA
set-up can hang an import or abort the process, and the doctor must still print its
report. The NVIDIA driver is asked through ``nvidia-smi`` (GPUs, memory, driver version)
and libcuda's ``cuDriverGetVersion`` (the highest CUDA version the driver supports: what
torch itself compares its build against; it needs no GPU context), with the header of plain
``nvidia-smi`` as the fallback. Nothing here reaches the network but :func:`evaluator.doctor.server.probe_server`, for a server judge, after the PHI guard.
"""

from __future__ import annotations

import csv
import ctypes
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluator.doctor.server import ServerFindings, probe_server
from evaluator.judges.offline import inherited_offline_env

#: Seconds an import of torch or vLLM may take (vLLM's takes 10-30 s on a busy CPU).
IMPORT_TIMEOUT_S = 180.0
#: Seconds nvidia-smi may take (it can hang on a wedged driver).
SMI_TIMEOUT_S = 30.0
_MARK = "EVALUATOR-DOCTOR-PROBE "


@dataclass(frozen=True)
class Gpu:
    """One GPU: its name and memory in bytes."""

    name: str
    total: int
    free: int


@dataclass(frozen=True)
class SmiInfo:
    """What ``nvidia-smi`` said: ``found`` is False when it is not on the PATH; ``error`` is
    the first line it printed when it failed (no driver loaded, a version mismatch)."""

    found: bool
    gpus: tuple[Gpu, ...] = ()
    driver: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class ImportProbe:
    """An import in a subprocess: not ``installed`` (no module found, nothing run), or the
    facts it printed (``info``), or why it failed (``error``: the last line of its stderr,
    the signal that killed it, or the timeout)."""

    installed: bool
    info: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


# ------------------------------------------------------------------ the default probes

def installed_version(name: str) -> str | None:
    """The installed version of distribution ``name`` (any spelling), or None."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def evaluator_requires() -> list[str]:
    """The evaluator distribution's own requirements (extras included), as written in its
    metadata; empty when its metadata is not installed."""
    try:
        return list(importlib.metadata.requires("evaluator") or [])
    except importlib.metadata.PackageNotFoundError:
        return []


def _first_line(text: str) -> str | None:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0][:200] if lines else None


def _mib(value: str) -> int | None:
    try:
        return int(float(value)) << 20
    except ValueError:  # "[N/A]", "[Not Supported]"
        return None


def parse_smi_query(text: str) -> tuple[tuple[Gpu, ...], str | None]:
    """GPUs and the driver version from ``nvidia-smi --query-gpu=driver_version,name,
    memory.total,memory.free --format=csv,noheader,nounits`` (memory in MiB)."""
    gpus, driver = [], None
    for row in csv.reader(text.splitlines(), skipinitialspace=True):
        if len(row) != 4:
            continue
        driver = driver or row[0].strip()
        total, free = _mib(row[2]), _mib(row[3])
        gpus.append(Gpu(name=row[1].strip(), total=total or 0, free=free or 0))
    return tuple(gpus), driver


def _run(command: list[str], timeout: float) -> tuple[int, str]:
    """Run ``command``; (exit status, stdout + stderr). Timeouts and missing programs come
    back as status -1 with a line saying so."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, check=False, errors="replace")
    except subprocess.TimeoutExpired:
        return -1, f"{command[0]} did not answer in {timeout:.0f} s"
    except OSError as exc:
        return -1, f"{command[0]}: {exc.strerror}"
    return done.returncode, done.stdout + done.stderr


def probe_nvidia_smi() -> SmiInfo:
    """The GPUs ``nvidia-smi`` lists (all of them: it ignores CUDA_VISIBLE_DEVICES)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return SmiInfo(found=False)
    status, out = _run([smi, "--query-gpu=driver_version,name,memory.total,memory.free",
                        "--format=csv,noheader,nounits"], SMI_TIMEOUT_S)
    if status != 0:
        return SmiInfo(found=True, error=_first_line(out) or f"exit status {status}")
    gpus, driver = parse_smi_query(out)
    return SmiInfo(found=True, gpus=gpus, driver=driver)


def parse_smi_cuda_version(text: str) -> str | None:
    """The driver's CUDA version from plain ``nvidia-smi``'s header (``CUDA Version: 12.4``)."""
    match = re.search(r"CUDA Version\s*:\s*(\d+\.\d+)", text)
    return match.group(1) if match else None


def driver_cuda_version() -> str | None:
    """The highest CUDA version the NVIDIA driver supports (``12.4``), or None without a
    driver: libcuda's cuDriverGetVersion, else plain nvidia-smi's header."""
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
        version = ctypes.c_int(0)
        if libcuda.cuDriverGetVersion(ctypes.byref(version)) == 0 and version.value > 0:
            return f"{version.value // 1000}.{version.value % 1000 // 10}"
    except (OSError, AttributeError):
        pass
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    status, out = _run([smi], SMI_TIMEOUT_S)
    return parse_smi_cuda_version(out) if status == 0 else None


_TORCH_PROBE = """
import json, warnings
out = {}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import torch
    out["version"] = torch.__version__
    out["cuda"] = torch.version.cuda
    out["available"] = bool(torch.cuda.is_available())
    gpus = []
    if out["available"]:
        for i in range(torch.cuda.device_count()):
            free, total = torch.cuda.mem_get_info(i)
            gpus.append({"name": torch.cuda.get_device_name(i), "total": total, "free": free})
    out["gpus"] = gpus
out["warnings"] = [str(w.message).splitlines()[0][:300] for w in caught
                   if "cuda" in str(w.message).lower() or "driver" in str(w.message).lower()][:3]
print(MARK + json.dumps(out), flush=True)
"""

_VLLM_PROBE = """
import json
import vllm
from vllm.platforms import current_platform
out = {"version": vllm.__version__, "device_type": current_platform.device_type,
       "platform": type(current_platform).__name__}
try:
    from vllm.config import CacheConfig
    out["gpu_memory_utilization"] = CacheConfig().gpu_memory_utilization
except Exception:
    pass
print(MARK + json.dumps(out), flush=True)
"""


def run_python_probe(code: str, timeout: float = IMPORT_TIMEOUT_S,
                     env: Mapping[str, str] | None = None) -> ImportProbe:
    """Run ``code`` in a new process of this Python, from ``/`` (so that no folder of the
    current directory shadows the import), in its own process group (killed whole at the
    timeout); the probe prints one JSON line after :data:`_MARK`."""
    environment = {**os.environ, **(env or {})}
    try:
        child = subprocess.Popen([sys.executable, "-c", f"MARK = {_MARK!r}\n{code}"],
                                 cwd=os.path.abspath(os.sep), env=environment,
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, errors="replace",
                                 start_new_session=True)
    except OSError as exc:
        return ImportProbe(installed=True, error=f"cannot start {sys.executable}: {exc.strerror}")
    try:
        out, err = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.communicate()
        return ImportProbe(installed=True, error=f"the import did not finish in {timeout:.0f} s")
    for line in reversed(out.splitlines()):
        if line.startswith(_MARK):
            return ImportProbe(installed=True, info=json.loads(line[len(_MARK):]))
    if child.returncode < 0:
        killer = signal.Signals(-child.returncode).name
        return ImportProbe(installed=True, error=f"the process was killed by {killer}")
    lines = [line.strip() for line in err.splitlines() if line.strip()]
    return ImportProbe(installed=True,
                       error=(lines[-1][:300] if lines else f"exit status {child.returncode}"))


def probe_torch() -> ImportProbe:
    """torch's version, CUDA build and the GPUs it sees (with free memory), imported in a
    subprocess; not installed when no ``torch`` module is found."""
    if importlib.util.find_spec("torch") is None:
        return ImportProbe(installed=False)
    return run_python_probe(_TORCH_PROBE)


def probe_vllm() -> ImportProbe:
    """vLLM's version, its platform's device type and its default
    ``gpu_memory_utilization``, imported in a subprocess (quietly)."""
    if importlib.util.find_spec("vllm") is None:
        return ImportProbe(installed=False)
    return run_python_probe(_VLLM_PROBE, env={"VLLM_LOGGING_LEVEL": "ERROR"})


def disk_free(path: Path) -> int:
    """Free bytes on the file system holding ``path`` (for this user)."""
    return shutil.disk_usage(path).free


def writable(path: Path) -> bool:
    """Whether this user may create files in folder ``path``."""
    return os.access(path, os.W_OK | os.X_OK)


def memory_available() -> int | None:
    """``MemAvailable`` of /proc/meminfo in bytes (RAM a new process can use), or None."""
    try:
        text = Path("/proc/meminfo").read_text(encoding="ascii")
    except OSError:
        return None
    match = re.search(r"^MemAvailable:\s+(\d+) kB", text, re.MULTILINE)
    return int(match.group(1)) * 1024 if match else None


def hub_offline_in_process() -> bool | None:
    """huggingface_hub reads HF_HUB_OFFLINE once, when it is imported: its value in this
    process if it is loaded, None if not (it will then read the environment as it is)."""
    constants = sys.modules.get("huggingface_hub.constants")
    return None if constants is None else bool(getattr(constants, "HF_HUB_OFFLINE", False))


def _environ() -> dict[str, str]:
    return dict(os.environ)


def _prefix() -> Path:
    return Path(sys.prefix)


@dataclass(frozen=True)
class Probes:
    """Every probe the doctor uses; replace any in tests."""

    python_version: Callable[[], str] = platform.python_version
    prefix: Callable[[], Path] = _prefix
    installed_version: Callable[[str], str | None] = installed_version
    evaluator_requires: Callable[[], list[str]] = evaluator_requires
    nvidia_smi: Callable[[], SmiInfo] = probe_nvidia_smi
    driver_cuda: Callable[[], str | None] = driver_cuda_version
    torch: Callable[[], ImportProbe] = probe_torch
    vllm: Callable[[], ImportProbe] = probe_vllm
    disk_free: Callable[[Path], int] = disk_free
    writable: Callable[[Path], bool] = writable
    memory_available: Callable[[], int | None] = memory_available
    environ: Callable[[], Mapping[str, str]] = _environ
    inherited_env: Callable[[], Mapping[str, str | None]] = inherited_offline_env
    hub_offline: Callable[[], bool | None] = hub_offline_in_process
    # A server judge's replicas, asked over HTTP (the only probe that reaches the network,
    # and only addresses the PHI guard takes).
    server: Callable[[str, Any], ServerFindings] = probe_server
