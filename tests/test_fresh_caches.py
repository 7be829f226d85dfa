"""scripts/with-fresh-caches: `make test` runs the suites with every cache that could hide a
first-run path (vLLM, Hugging Face, torch, matplotlib, outlines) in a new, empty folder."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.conftest import ROOT

SCRIPT = ROOT / "scripts" / "with-fresh-caches"
CACHE_VARS = ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "VLLM_CACHE_ROOT", "VLLM_CONFIG_ROOT",
              "HF_HOME", "TORCH_HOME", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR",
              "MPLCONFIGDIR", "OUTLINES_CACHE_DIR")


def _run(*args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if k not in CACHE_VARS and k != "EVALUATOR_USER_CACHE_HOME"}
    env["TMPDIR"] = str(tmp_path)
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, env=env,
                          check=False)


def test_every_cache_points_into_one_new_folder_removed_afterwards(tmp_path):
    probe = ("import os, json; print(json.dumps({k: os.environ.get(k) for k in "
             f"{list(CACHE_VARS) + ['EVALUATOR_FRESH_CACHES']!r}}}))")
    done = _run("python3", "-c", probe, tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    fresh = Path(seen.pop("EVALUATOR_FRESH_CACHES"))
    assert fresh.parent == tmp_path
    for name, value in seen.items():
        assert value is not None, name
        assert Path(value).parent == fresh, name
    assert not fresh.exists()  # removed when the command ended
    assert list(tmp_path.iterdir()) == []


def test_the_users_cache_home_is_kept_for_tests_that_run_as_the_user(tmp_path):
    # tests/test_readme.py runs the README's commands with the XDG_CACHE_HOME the user had.
    probe = ("import os, json; print(json.dumps([os.environ[k] for k in "
             "('EVALUATOR_USER_CACHE_HOME', 'XDG_CACHE_HOME')]))")
    env = {k: v for k, v in os.environ.items()
           if k not in CACHE_VARS and k != "EVALUATOR_USER_CACHE_HOME"}
    seen = {}
    for case, extra in (("set", {"XDG_CACHE_HOME": str(tmp_path / "mine")}),
                        ("unset", {"HOME": str(tmp_path / "home")})):
        done = subprocess.run([str(SCRIPT), "python3", "-c", probe], capture_output=True,
                              text=True, env={**env, **extra, "TMPDIR": str(tmp_path)},
                              check=False)
        assert done.returncode == 0, done.stderr
        seen[case] = json.loads(done.stdout)
    assert seen["set"][0] == str(tmp_path / "mine") != seen["set"][1]
    # Unset: the folder that stands for, ~/.cache.
    assert seen["unset"][0] == str(tmp_path / "home" / ".cache")


def test_the_command_exit_code_passes_through_and_the_folder_goes_anyway(tmp_path):
    done = _run("sh", "-c", "exit 7", tmp_path=tmp_path)
    assert done.returncode == 7
    assert list(tmp_path.iterdir()) == []


def test_no_command_is_a_usage_error(tmp_path):
    done = _run(tmp_path=tmp_path)
    assert done.returncode == 2
    assert "usage" in done.stderr
