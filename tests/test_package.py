"""Package-level promises: no heavy imports, offline switches."""

from __future__ import annotations

import os
import subprocess
import sys

from evaluator.judges.offline import OFFLINE_ENV, force_offline


def test_import_evaluator_imports_no_torch_transformers_vllm_ray_or_matplotlib():
    # Parsing a vllm judge (its engine settings included) must not import vLLM either.
    # Nor Ray: the engine options and the run command are importable without it.
    code = ("import sys, evaluator, evaluator.cli.main, evaluator.judges.backends.vllm_args, "
            "evaluator.analysis.summary.summary, evaluator.analysis.stats, evaluator.analysis.agreement.agreement, evaluator.cli.agree_cmd, "
            "evaluator.run.engines, evaluator.cli.run_cmd, "
            "evaluator.report.build, evaluator.report.html, evaluator.report.plots, "
            "evaluator.report.text, evaluator.cli.report_cmd; "
            "from evaluator.judges.models_file import JudgeSpec; "
            "JudgeSpec(backend='vllm', path='/m', engine={'tensor_parallel_size': 2}); "
            "heavy = [m for m in ('torch', 'transformers', 'vllm', 'outlines', 'outlines_core', "
            "'scipy', 'sklearn', 'pandas', 'pingouin', 'krippendorff', 'statsmodels', "
            "'ray', 'pyarrow', 'matplotlib', 'PIL') "
            "if m in sys.modules]; print(heavy); sys.exit(1 if heavy else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_offline_switches_are_forced(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    force_offline()
    for key, value in OFFLINE_ENV.items():
        assert os.environ[key] == value
