"""Offline and quiet by construction: no network socket, no case text in logs or errors.

Runs the real CLI on the real transformers + outlines path (random-weight judge), with
distinctive marker strings in every case field and every kind of failure in the batch.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import socket
import stat
import subprocess
import sys

import pytest
import yaml
from click.testing import CliRunner

from evaluator.cli.main import cli
from tests.conftest import ROOT

pytest.importorskip("torch", reason="needs the transformers extra: make install")

MARKER = "PHIMARKER"


def _cases(tmp_path):
    """Good cases, bad rows and a too-long case, every field carrying a marker."""
    def mark(kind, i):
        return f"{MARKER}-{kind}-{i} patient Jane Doe MRN 0042"

    rows = [json.dumps({"case_id": f"ok-{i}", "reference_report": mark("ref", i),
                        "generated_report": mark("gen", i)}) for i in range(3)]
    rows.append(json.dumps({"case_id": "empty", "reference_report": mark("ref", 9),
                            "generated_report": " "}))
    rows.append(json.dumps({"case_id": "typed", "reference_report": [mark("list", 1)],
                            "generated_report": mark("gen", 10)}))
    rows.append('{"case_id": "cut", "reference_report": "' + mark("torn", 1))
    rows.append(json.dumps({"case_id": "long", "reference_report": mark("long", 1) * 400,
                            "generated_report": mark("gen", 11)}))
    path = tmp_path / "cases.jsonl"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def _models_file(tmp_path):
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump({"default": "tiny", "judges": {"tiny": {
        "backend": "tiny-random", "device": "cpu", "max_model_len": 4096, "batch_size": 4}}}))
    return path


def _args(tmp_path, out):
    return ["-vv", "run", "--rubric", "pathology_report", "--input", str(_cases(tmp_path)),
            "--output", str(out), "--models-file", str(_models_file(tmp_path))]


def _check_outputs(out, text):
    assert MARKER not in text
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["case_id"]: r["status"] for r in records} == {
        "ok-0": "ok", "ok-1": "ok", "ok-2": "ok", "empty": "input_error",
        "typed": "input_error", "line-6": "input_error", "long": "too_long"}
    assert not any(MARKER in (r["reason"] or "") for r in records)
    for path in out.parent.iterdir():
        if path.name.startswith("results"):
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
            if path.suffix == ".json":
                assert MARKER not in path.read_text()


def _is_local(address) -> bool:
    if not isinstance(address, tuple):  # AF_UNIX path
        return True
    try:
        return ipaddress.ip_address(address[0]).is_loopback
    except ValueError:
        return address[0] == "localhost"


@pytest.mark.slow
def test_a_run_opens_no_network_socket_and_logs_no_case_text(tmp_path, monkeypatch, caplog):
    attempts = []
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex
    real_getaddrinfo = socket.getaddrinfo

    def connect(self, address):
        if not _is_local(address):
            attempts.append(address)
            raise OSError("network access attempted during an offline run")
        return real_connect(self, address)

    def connect_ex(self, address):
        if not _is_local(address):
            attempts.append(address)
            return 101
        return real_connect_ex(self, address)

    def getaddrinfo(host, *args, **kwargs):
        if host not in (None, "localhost", "127.0.0.1", "::1"):
            attempts.append(host)
            raise socket.gaierror("name lookup attempted during an offline run")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    caplog.set_level("DEBUG")
    out = tmp_path / "results.jsonl"
    result = CliRunner().invoke(cli, _args(tmp_path, out), catch_exceptions=False)
    assert result.exit_code == 1, result.output  # some cases failed, by design
    assert attempts == []
    logged = "\n".join(f"{r.getMessage()} {r.exc_text or ''}" for r in caplog.records)
    assert "input problem" in logged  # the log does describe the bad rows, without text
    _check_outputs(out, result.output + logged)


def _unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-rn", "true"], capture_output=True).returncode == 0


@pytest.mark.slow
@pytest.mark.skipif(not _unshare_works(), reason="unshare -rn (user + network namespaces) is "
                    "not available here")
def test_a_run_works_in_a_network_less_namespace(tmp_path):
    out = tmp_path / "results.jsonl"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    # Inherited settings that would send a normal process to the hub must not matter.
    env.update(HF_HUB_OFFLINE="0", TRANSFORMERS_OFFLINE="0")
    proc = subprocess.run(["unshare", "-rn", sys.executable, "-m", "evaluator",
                           *_args(tmp_path, out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stderr[-3000:]
    probe = subprocess.run(["unshare", "-rn", sys.executable, "-c",
                            "import socket; socket.create_connection(('1.1.1.1', 443), 3)"],
                           capture_output=True, text=True)
    assert probe.returncode != 0  # the namespace really has no network
    _check_outputs(out, proc.stdout + proc.stderr)
