"""The GPU bundle's builder and install.sh's GPU branch, on a small wheel set that CI can
afford: the real wheels of the core dependencies (from locks/cpu.txt, for CPython 3.11 on
glibc 2.31 x86-64, as `make bundle BUNDLE_KIND=gpu` asks) plus stand-ins for torch and
vLLM (pure-Python wheels made here), built by scripts/build-bundle and installed by
install.sh with no network. The real GPU bundle (locks/gpu.txt, several GB of CUDA wheels)
is built and installed by hand: docs/airgapped.md records it."""

from __future__ import annotations

import base64
import hashlib
import importlib.machinery
import importlib.util
import json
import platform
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.test_bundle import PRINCIPAL, TOOLS, _env, _install, _keygen, _unshare_works

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform != "linux" or platform.machine() != "x86_64"
                       or sys.version_info[:2] != (3, 11),
                       reason="the GPU bundle's wheels are for CPython 3.11 on x86-64 Linux"),
]

# What `evaluator validate` and `models --verify` need: the package's own dependencies.
CORE = ("annotated-types", "click", "jinja2", "markupsafe", "packaging", "pydantic",
        "pydantic-core", "pyyaml", "tqdm", "typing-extensions", "typing-inspection")
TORCH = '__version__ = "2.13.0"\n\n\nclass version:\n    cuda = "13.0"\n'
VLLM = '__version__ = "0.32.0"\n'


def _builder():
    """scripts/build-bundle as a module (it has no .py suffix)."""
    loader = importlib.machinery.SourceFileLoader("build_bundle", str(ROOT / "scripts" /
                                                                      "build-bundle"))
    spec = importlib.util.spec_from_loader("build_bundle", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_a_glibc_2_31_host_is_offered_every_older_manylinux_wheel():
    """pip's --platform matches only the tags it is given: manylinux_2_31 alone missed
    wheels built for older glibc (apache-tvm-ffi's manylinux_2_28 one stopped the first real
    GPU build)."""
    tags = _builder().wheel_platforms("manylinux_2_31_x86_64")
    assert tags[0] == "manylinux_2_31_x86_64" and tags[-4] == "manylinux_2_5_x86_64"
    assert {"manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
            "manylinux2010_x86_64", "manylinux1_x86_64"} <= set(tags)
    assert "manylinux_2_32_x86_64" not in tags and len(tags) == len(set(tags)) == 27 + 3
    legacy = _builder().wheel_platforms("manylinux_2_12_aarch64")
    assert "manylinux2014_aarch64" not in legacy and "manylinux2010_aarch64" in legacy
    assert _builder().wheel_platforms("macosx_11_0_arm64") == ["macosx_11_0_arm64"]


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(
        b"=").decode()


def _wheel(folder: Path, name: str, version: str, source: str) -> Path:
    """A pure-Python wheel holding one module, ``name/__init__.py``."""
    dist = f"{name}-{version}.dist-info"
    files = {f"{name}/__init__.py": source.encode(),
             f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                                 .encode(),
             f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: evaluator-tests\n"
                              b"Root-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{path},{_record_hash(data)},{len(data)}\n" for path, data in files.items())
    files[f"{dist}/RECORD"] = (record + f"{dist}/RECORD,,\n").encode()
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for member, data in files.items():
            archive.writestr(member, data)
    return path


def _pins(names: tuple[str, ...]) -> str:
    """Each named package's pin with all its hashes, as locks/cpu.txt has them."""
    lines, out, taking = (ROOT / "locks" / "cpu.txt").read_text().splitlines(), [], False
    for line in lines:
        if not line.startswith(" "):
            taking = line.split("==")[0] in names
        elif not line.lstrip().startswith("--hash"):
            taking = False
        if taking:
            out.append(line)
    assert sum("==" in line for line in out) == len(names)
    return "\n".join(out) + "\n"


def _pin(wheel: Path) -> str:
    name, version = wheel.name.split("-")[:2]
    return f"{name}=={version} \\\n    --hash=sha256:{hashlib.sha256(wheel.read_bytes()).hexdigest()}\n"


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    folder = tmp_path_factory.mktemp("keys")
    site = _keygen(folder, "site")
    allowed = folder / "allowed_signers"
    public = (folder / "site.pub").read_text().split()
    allowed.write_text(f'{PRINCIPAL} namespaces="evaluator-bundle" {public[0]} {public[1]}\n')
    return {"site": site, "allowed": allowed}


@pytest.fixture(scope="module")
def gpu_bundle(tmp_path_factory, keys):
    """A signed bundle of a lock that pins vllm, for CPython 3.11 on manylinux_2_31."""
    if not (TOOLS / "cyclonedx-py").exists():
        pytest.skip("the build tools are not installed: make tools")
    folder = tmp_path_factory.mktemp("gpu-bundle")
    wheelhouse = folder / "wheelhouse"
    wheelhouse.mkdir()
    # A local version of their own: pip never takes the real torch or vLLM for them.
    stand_ins = [_wheel(wheelhouse, "torch", "2.13.0+standin", TORCH),
                 _wheel(wheelhouse, "vllm", "0.32.0+standin", VLLM)]
    lock = folder / "gpu.txt"
    lock.write_text(_pins(CORE) + "".join(_pin(w) for w in stand_ins))
    out = folder / "evaluator-bundle-gpu"
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "build-bundle"), "--out",
                           str(out), "--tools", str(TOOLS), "--sign-key", str(keys["site"]),
                           "--lock", str(lock), "--find-links", str(wheelhouse),
                           "--python-version", "3.11", "--platform", "manylinux_2_31_x86_64"],
                          capture_output=True, text=True, timeout=1800, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_the_gpu_bundle_holds_the_locks_wheels_and_says_it_brings_vllm(gpu_bundle):
    meta = json.loads((gpu_bundle / "BUNDLE.json").read_text())
    assert meta["engine"] == "vllm" and meta["lock"] == "gpu.txt"
    assert (meta["python"], meta["platform"]) == ("3.11", "manylinux_2_31_x86_64")
    names = {w.name.split("-")[0].lower().replace("_", "-") for w in
             (gpu_bundle / "wheels").glob("*.whl")}
    assert names == {*CORE, "torch", "vllm", "evaluator"}
    # Wheels for older glibc were taken (pydantic-core has no manylinux_2_31 wheel).
    assert any("manylinux_2_17" in w.name or "manylinux2014" in w.name
               for w in (gpu_bundle / "wheels").glob("pydantic_core-*.whl"))
    assert "vllm==0.32.0+standin" in (gpu_bundle / "requirements.txt").read_text()
    assert (gpu_bundle / "SHA256SUMS.sig").is_file()


@pytest.mark.skipif(not _unshare_works(), reason="unshare -rn (user + network namespaces) is "
                    "not available here")
def test_install_checks_that_torch_and_vllm_import_with_no_network(gpu_bundle, keys, tmp_path):
    prefix = tmp_path / "opt" / "evaluator"
    done = _install(gpu_bundle, prefix, keys["allowed"], "--no-self-test", unshare=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "imports: torch 2.13.0 (CUDA 13.0), vllm 0.32.0" in done.stdout
    assert "[install] evaluator doctor: " in done.stdout
    assert "evaluator validate: all rubrics and models.yaml are valid" in done.stdout


@pytest.mark.skipif(not _unshare_works(), reason="unshare -rn (user + network namespaces) is "
                    "not available here")
def test_a_vllm_that_cannot_import_fails_the_install_and_leaves_nothing(gpu_bundle, keys,
                                                                         tmp_path):
    """The import a GPU host needs is checked at install, not at the first run: a vLLM
    that cannot import (here: a stand-in that raises as a missing CUDA library does) stops
    the install, which removes what it made."""
    broken = tmp_path / "bundle"
    shutil.copytree(gpu_bundle, broken)
    [wheel] = (broken / "wheels").glob("vllm-*.whl")
    old = hashlib.sha256(wheel.read_bytes()).hexdigest()
    wheel.unlink()
    new = _wheel(broken / "wheels", "vllm", "0.32.0+standin",
                 'raise ImportError("libcuda.so.1: cannot open shared object file")\n')
    requirements = broken / "requirements.txt"
    requirements.write_text(requirements.read_text().replace(
        old, hashlib.sha256(new.read_bytes()).hexdigest()))
    (broken / "SHA256SUMS.sig").unlink()  # re-listed below, not signed again
    listed = sorted(p.relative_to(broken).as_posix() for p in broken.rglob("*")
                    if p.is_file() and p.name != "SHA256SUMS")
    (broken / "SHA256SUMS").write_text("".join(
        f"{hashlib.sha256((broken / p).read_bytes()).hexdigest()}  {p}\n" for p in listed))
    prefix = tmp_path / "opt" / "evaluator"
    done = _install(broken, prefix, keys["allowed"], "--no-self-test",
                    "--insecure-allow-unsigned", env=_env(tmp_path / "home"), unshare=True)
    assert done.returncode == 4, done.stdout[-3000:] + done.stderr[-3000:]
    assert "import torch, vllm failed (see the log)" in done.stdout
    assert not prefix.exists()
