"""The locks (locks/*.txt, refreshed by `make lock`) pin everything pyproject.toml asks for.

A dependency added to pyproject.toml, or a range changed so that it excludes the pinned
version, fails here until the locks are refreshed. No network: the files are only parsed.
"""

from __future__ import annotations

import re

import pytest
import tomllib
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.conftest import ROOT

LOCKS = ROOT / "locks"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==(\S+)")


def _lock_python() -> str:
    match = re.search(r"LOCK_PYTHON:-([0-9.]+)", (ROOT / "scripts" / "lock").read_text())
    assert match, "scripts/lock names no LOCK_PYTHON default"
    return match.group(1)


def _extras(variable: str) -> list[str]:
    """An extras list from scripts/lock (CPU_EXTRAS=(a b c))."""
    match = re.search(rf"^{variable}=\(([^)]*)\)", (ROOT / "scripts" / "lock").read_text(), re.MULTILINE)
    assert match, f"scripts/lock defines no {variable}"
    return match.group(1).split()


def _pins(lock_name: str) -> dict[str, Version]:
    """name -> pinned version; every pin must carry at least one hash."""
    pins: dict[str, Version] = {}
    blocks = re.split(r"\n(?=[A-Za-z0-9])", (LOCKS / lock_name).read_text())
    for block in blocks:
        match = PIN.match(block)
        if match:
            assert "--hash=sha256:" in block, f"{lock_name}: {match.group(1)} has no hash"
            pins[canonicalize_name(match.group(1))] = Version(match.group(2))
    return pins


def _required(extras: list[str]) -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = project["optional-dependencies"]
    missing = [e for e in extras if e not in declared]
    assert not missing, f"scripts/lock names extras pyproject.toml lacks: {missing}"
    reqs = [Requirement(r) for r in project["dependencies"]]
    for extra in extras:
        reqs += [Requirement(r) for r in declared[extra]]
    return reqs


@pytest.mark.parametrize("lock_name, extras_var", [("cpu.txt", "CPU_EXTRAS"),
                                                   ("gpu.txt", "GPU_EXTRAS")])
def test_the_lock_pins_every_requirement_of_pyproject_within_its_range(lock_name, extras_var):
    pins = _pins(lock_name)
    env = default_environment() | {"python_version": _lock_python(),
                                   "python_full_version": _lock_python() + ".0",
                                   "sys_platform": "linux", "platform_system": "Linux"}
    stale = []
    for req in _required(_extras(extras_var)):
        if req.marker is not None and not req.marker.evaluate(env | {"extra": ""}):
            continue
        pinned = pins.get(canonicalize_name(req.name))
        if pinned is None or not req.specifier.contains(pinned, prereleases=True):
            stale.append(f"{req} (locked: {pinned or 'not at all'})")
    assert not stale, (f"locks/{lock_name} is stale; run `make lock` and commit it: "
                       + "; ".join(stale))


def test_the_cpu_lock_pins_torchs_cpu_build_and_the_gpu_lock_vllm():
    assert _pins("cpu.txt")["torch"] == Version("2.13.0+cpu")
    gpu = _pins("gpu.txt")
    assert "vllm" in gpu and gpu["torch"].local is None  # PyPI's CUDA build, brought by vLLM


def test_the_tools_lock_pins_what_locks_tools_in_names():
    pins = _pins("tools.txt")
    for line in (LOCKS / "tools.in").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            req = Requirement(line)
            assert req.specifier.contains(pins[canonicalize_name(req.name)])


def test_make_install_installs_from_the_cpu_lock_with_hashes():
    makefile = (ROOT / "Makefile").read_text()
    assert "pip install -q --require-hashes -r locks/cpu.txt" in makefile
    assert "pip install -q --no-deps -e ." in makefile
