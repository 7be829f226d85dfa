"""The air-gapped bundle (issue 19): built from the CPU lock, carried, verified and installed
with no network, then used to judge one case; and refused whenever it was changed.

One bundle is built per session (module fixture, ~1 GB, 1-2 minutes with pip's cache warm)
and signed with a throwaway key; each tamper case works on a hard-linked copy in which only
the changed file is a new one, so the shared bundle is never altered.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.label_sheets import make_single_sheet

pytestmark = pytest.mark.slow

TOOLS = ROOT / ".venv-tools" / "bin"
PRINCIPAL = "hospital-it@example.org"
JUDGE = "smollm2-135m-instruct"
# The interpreter the venvs are made from: the one under this test's venv (same version
# as the bundle's wheels, since the bundle is built with it).
BASE_PYTHON = getattr(sys, "_base_executable", sys.executable)

# Imported by every Python process that install.sh starts (pip, evaluator): records each
# attempt to reach a non-local address, the way tests/test_offline.py patches socket.
SOCKET_AUDIT = textwrap.dedent("""\
    import ipaddress, os, sys

    _LOG = os.environ.get("BUNDLE_TEST_SOCKET_LOG")

    def _local(address):
        if not isinstance(address, tuple):
            return True  # AF_UNIX
        host = address[0]
        if host in (None, "localhost"):
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False

    def _hook(event, args):
        if event in ("socket.connect", "socket.sendto"):
            address = args[1]
        elif event in ("socket.getaddrinfo", "socket.gethostbyname"):
            address = (args[0],)
        else:
            return
        if not _local(address):
            with open(_LOG, "a") as handle:
                handle.write(f"{os.getpid()} {sys.argv[:2]} {event} {address!r}\\n")

    if _LOG:
        sys.addaudithook(_hook)
""")


def _unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-rn", "true"], capture_output=True,
                          check=False).returncode == 0


def _keygen(folder: Path, name: str) -> Path:
    key = folder / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)],
                   check=True)
    return key


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    """The site's signing key (in allowed_signers) and another key that is not."""
    if shutil.which("ssh-keygen") is None:
        pytest.skip("ssh-keygen is not installed")
    folder = tmp_path_factory.mktemp("keys")
    site, other = _keygen(folder, "site"), _keygen(folder, "other")
    allowed = folder / "allowed_signers"
    public = (folder / "site.pub").read_text().split()
    allowed.write_text(f'{PRINCIPAL} namespaces="evaluator-bundle" {public[0]} {public[1]}\n')
    return {"site": site, "other": other, "allowed": allowed}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory, keys):
    """A signed CPU bundle built by scripts/build-bundle, as `make bundle` does."""
    if not (TOOLS / "cyclonedx-py").exists():
        pytest.skip("the build tools are not installed: make tools")
    out = tmp_path_factory.mktemp("bundle") / "evaluator-bundle"
    started = time.monotonic()
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "build-bundle"), "--out",
                           str(out), "--tools", str(TOOLS), "--sign-key", str(keys["site"])],
                          capture_output=True, text=True, timeout=1800, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"\nbundle: {size / 1e6:.0f} MB, built in {time.monotonic() - started:.0f} s")
    return out


def _env(home: Path, **extra: str) -> dict[str, str]:
    """A bare environment: a fresh HOME, no pip or Hugging Face settings, no caches."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8",
           "TMPDIR": str(home)}
    home.mkdir(parents=True, exist_ok=True)
    env.update(extra)
    return env


def _install(bundle: Path, prefix: Path, allowed: Path, *options: str, env=None,
             unshare: bool = False) -> subprocess.CompletedProcess:
    cmd = ["bash", str(bundle / "install.sh"), "--prefix", str(prefix), "--allowed-signers",
           str(allowed), "--python", BASE_PYTHON, *options]
    if unshare:
        cmd = ["unshare", "-rn", *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False,
                          env=env or _env(prefix.parent / "home"))


# ------------------------------------------------------------------------ the whole path

@pytest.mark.skipif(not _unshare_works(), reason="unshare -rn (user + network namespaces) is "
                    "not available here")
def test_the_bundle_installs_and_judges_a_case_in_a_namespace_with_no_network(
        bundle, keys, tmp_path):
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(SOCKET_AUDIT)
    attempts = tmp_path / "socket-attempts.log"
    attempts.touch()
    prefix = tmp_path / "opt" / "evaluator"
    env = _env(tmp_path / "home", PYTHONPATH=str(hooks), BUNDLE_TEST_SOCKET_LOG=str(attempts),
               HF_HUB_OFFLINE="0", TRANSFORMERS_OFFLINE="0")
    started = time.monotonic()
    done = _install(bundle, prefix, keys["allowed"], env=env, unshare=True)
    took = time.monotonic() - started
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    print(f"\noffline install + validate + one case: {took:.0f} s\n{done.stdout}")
    assert f'signature for {PRINCIPAL} with ED25519 key SHA256:' in done.stdout
    assert "self-test: one trial_eligibility case, default judge: status ok" in done.stdout
    record = json.loads((prefix / "self-test" / "results.jsonl").read_text().splitlines()[0])
    assert record["status"] == "ok"
    assert attempts.read_text() == ""  # no process tried to reach another host
    probe = subprocess.run(["unshare", "-rn", BASE_PYTHON, "-c",
                            "import socket; socket.create_connection(('1.1.1.1', 443), 3)"],
                           capture_output=True, text=True, check=False)
    assert probe.returncode != 0  # the namespace really has no network
    # The installed judge verifies against the bundle's weight list, and a run says which.
    verify = subprocess.run([str(prefix / "evaluator"), "models", "--verify", JUDGE],
                            capture_output=True, text=True, env=env, check=False)
    assert verify.returncode == 0, verify.stderr
    manifest = json.loads((prefix / "self-test" / "results.manifest.json").read_text())
    assert manifest["model"]["weight_list"]["sha256"]
    assert (prefix / "install.log").read_text().count("signature: Good") == 1
    _label_page_starts(prefix, tmp_path, env, attempts)


# Run inside the namespace: start the installed `evaluator label` on loopback, read the URL
# it prints, fetch the page once, stop it.
LABEL_CHECK = textwrap.dedent("""\
    import re, signal, subprocess, sys, urllib.request
    server = subprocess.Popen([sys.argv[1], "label", sys.argv[2], "--labeller", "ana"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = None
    for line in server.stdout:
        found = re.match(r"^\\s+(http://127\\.0\\.0\\.1:\\d+/l/\\S+/)$", line.rstrip())
        if found:
            url = found.group(1)
            break
    try:
        assert url, server.stderr.read()
        with urllib.request.urlopen(url, timeout=60) as answer:
            page = answer.read().decode()
        assert answer.status == 200 and "Case 1 of 2" in page, page[:200]
        print("label page: ok")
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=60)
""")


def _label_page_starts(prefix: Path, tmp_path: Path, env: dict[str, str],
                       attempts: Path) -> None:
    """The installed `evaluator label` (the label extra is in the bundle) serves a sheet's
    page on loopback in a namespace with no network."""
    sheet = tmp_path / "sheet"
    make_single_sheet(sheet, 2)
    script = tmp_path / "label_check.py"
    script.write_text(LABEL_CHECK)
    lo_up = "ip link set lo up 2>/dev/null; " if shutil.which("ip") else ""
    done = subprocess.run(["unshare", "-rn", "sh", "-c",
                           f'{lo_up}exec "$0" "$1" "$2" "$3"', BASE_PYTHON, str(script),
                           str(prefix / "evaluator"), str(sheet)],
                          capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0 and "label page: ok" in done.stdout, done.stderr[-3000:]
    assert attempts.read_text() == ""


def test_the_bundle_holds_an_sbom_a_weight_list_and_a_models_file_for_its_judges(bundle):
    import yaml

    bom = json.loads((bundle / "sbom.cdx.json").read_text())
    assert bom["bomFormat"] == "CycloneDX"
    names = {c["name"] for c in bom["components"]}
    assert {"torch", "transformers", "outlines", JUDGE} <= names
    listed = json.loads((bundle / "judges" / JUDGE / "evaluator-weights.json").read_text())
    assert "model.safetensors" in {f["path"] for f in listed["files"]}
    models = yaml.safe_load((bundle / "models.yaml").read_text())
    assert models["judges"][JUDGE]["path"] == f"judges/{JUDGE}"
    sums = (bundle / "SHA256SUMS").read_text()
    assert f"judges/{JUDGE}/model.safetensors" in sums and "install.sh" in sums


# ------------------------------------------------------------------------ tampering

def _copy(bundle: Path, tmp_path: Path) -> Path:
    """A hard-linked copy: cheap, and safe as long as a changed file is a new file."""
    copy = tmp_path / "carried"
    subprocess.run(["cp", "-al", str(bundle), str(copy)], check=True)
    return copy


def _flip_a_byte(path: Path) -> None:
    """Replace ``path`` by a new file with one byte changed (the hard link is broken)."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.unlink()
    path.write_bytes(bytes(data))


def _resum(bundle: Path) -> None:
    """Rewrite SHA256SUMS to match the files as they are now (what an attacker would do)."""
    sums = bundle / "SHA256SUMS"
    lines = []
    for line in sums.read_text().splitlines():
        name = line[66:]
        digest = subprocess.run(["sha256sum", str(bundle / name)], capture_output=True,
                                text=True, check=True).stdout.split()[0]
        lines.append(f"{digest}  {name}\n")
    sums.unlink()
    sums.write_text("".join(lines))


def _refused(done, prefix: Path, *words: str) -> None:
    assert done.returncode == 3, done.stdout + done.stderr
    assert "REFUSED" in done.stderr
    for word in words:
        assert word in done.stderr, done.stderr
    assert not prefix.exists()  # nothing was installed


@pytest.mark.parametrize("changed", ["wheels/tqdm-4.70.1-py3-none-any.whl",
                                     f"judges/{JUDGE}/model.safetensors",
                                     "prompts/trial_eligibility.yaml"])
def test_one_changed_byte_is_refused_naming_the_file(bundle, keys, tmp_path, changed):
    copy = _copy(bundle, tmp_path)
    _flip_a_byte(copy / changed)
    prefix = tmp_path / "prefix"
    _refused(_install(copy, prefix, keys["allowed"]), prefix, changed, "FAILED")


def test_sums_rewritten_to_match_but_not_signed_again_are_refused(bundle, keys, tmp_path):
    copy = _copy(bundle, tmp_path)
    _flip_a_byte(copy / "prompts" / "trial_eligibility.yaml")
    _resum(copy)
    prefix = tmp_path / "prefix"
    _refused(_install(copy, prefix, keys["allowed"]), prefix,
             "does not match its signature", PRINCIPAL)


def test_sums_signed_by_another_key_are_refused(bundle, keys, tmp_path):
    copy = _copy(bundle, tmp_path)
    _flip_a_byte(copy / "prompts" / "trial_eligibility.yaml")
    _resum(copy)
    (copy / "SHA256SUMS.sig").unlink()
    subprocess.run(["ssh-keygen", "-Y", "sign", "-q", "-f", str(keys["other"]), "-n",
                    "evaluator-bundle", str(copy / "SHA256SUMS")], check=True)
    prefix = tmp_path / "prefix"
    _refused(_install(copy, prefix, keys["allowed"]), prefix, "not in")


def test_an_unsigned_bundle_is_refused_unless_the_operator_says_so(bundle, keys, tmp_path):
    copy = _copy(bundle, tmp_path)
    (copy / "SHA256SUMS.sig").unlink()
    prefix = tmp_path / "prefix"
    _refused(_install(copy, prefix, keys["allowed"]), prefix, "not signed",
             "--insecure-allow-unsigned")
    allowed = _install(copy, prefix, keys["allowed"], "--insecure-allow-unsigned",
                       "--verify-only")
    assert allowed.returncode == 0, allowed.stderr
    assert "WITHOUT A VALID SIGNATURE" in allowed.stdout
    assert "all" in allowed.stdout and "files match SHA256SUMS" in allowed.stdout


def test_a_file_added_to_the_bundle_is_refused(bundle, keys, tmp_path):
    copy = _copy(bundle, tmp_path)
    (copy / "judges" / JUDGE / "modeling_evil.py").write_text("import os\n")
    prefix = tmp_path / "prefix"
    _refused(_install(copy, prefix, keys["allowed"]), prefix,
             f"not listed in SHA256SUMS: judges/{JUDGE}/modeling_evil.py")
