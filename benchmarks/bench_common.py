"""Helpers shared by the benchmark scripts: cases, interleaved timing, the machine, re-run lines,
and the rule for how far repeats of the same work may differ in length.

Case text never leaves this module except into input files under a temporary folder; what
the scripts print is ids, counts and timings.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import statistics
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"
# The dev data (real, public-domain trial-eligibility cases) has one file per rubric it fits;
# the other rubrics fall back to the bundled (synthetic) examples.
DATA_FILES = {"trial_eligibility": "trial_eligibility_sigir2014.jsonl"}
FIGURES_PREFIX = "figures: "
# Repeats of the same greedy batch need not make the same number of decode steps: bf16 on
# CUDA is not bit-reproducible from run to run, and one flipped argmax changes a verdict
# from that token on (a random judge's near-flat logits flip easily). On an H200 (issue 35)
# repeats differed by 1 and 2 steps of ~235 (0.4-0.9%). A variant that does other work
# (stops at half, runs to the token budget, ends rows early) differs by tens of percent.
# So step counts may differ by 5% or 3 steps, whichever is more, and the scripts compare
# time per step; beyond that they refuse.
STEP_TOLERANCE = 0.05
STEP_SLACK = 3


def case_source(rubric_name: str, data_dir: Path | None = None) -> Path:
    """The JSONL file whose cases fit ``rubric_name``: the shared dev data when it has one,
    else ``examples/<rubric>.jsonl``."""
    name = DATA_FILES.get(rubric_name)
    folder = data_dir or SHARED_DATA
    if name and (folder / name).is_file():
        return folder / name
    return ROOT / "examples" / f"{rubric_name}.jsonl"


def load_rows(rubric_name: str, data_dir: Path | None = None) -> tuple[Path, list[dict]]:
    """(source file, its rows) for a rubric."""
    path = case_source(rubric_name, data_dir)
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return path, rows


def describe_source(rubric_name: str, path: Path, rows: list[dict],
                    data_dir: Path | None = None) -> str:
    """Where a benchmark's cases came from, for its first lines: the path (relative to the
    project where it can be), the number of cases, and, where the rubric has dev data that
    was not found, that the bundled examples stood in for it. A run in a copy of the project
    away from ``../shared`` (a git worktree elsewhere) once fell back to the 4 examples
    without a word, and its figures were read as the dev set's."""
    try:
        shown = str(path.relative_to(ROOT))
    except ValueError:
        shown = os.path.relpath(path, ROOT)
    text = f"{shown} ({len(rows)} cases)"
    name = DATA_FILES.get(rubric_name)
    if name and path.name != name:
        text += (f"; NOT the dev set: {(data_dir or SHARED_DATA) / name} was not found "
                 "(--data names its folder)")
    return text


def cycle_rows(rows: list[dict], count: int) -> list[dict]:
    """``count`` rows taken in order, cycling through ``rows``; repeats get a distinct id."""
    out = []
    for i in range(count):
        row = dict(rows[i % len(rows)])
        base = str(row.get("case_id", f"line-{i % len(rows) + 1}"))
        row["case_id"] = base if i < len(rows) else f"{base}#{i // len(rows)}"
        out.append(row)
    return out


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    """Write rows as JSON lines (mode 0600: they are case text) and return the path."""
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    path.chmod(0o600)
    return path


def set_threads(threads: int | None) -> int:
    """Set torch's intra-op threads (None: leave them to the evaluator, which chooses when a
    CPU judge loads: evaluator.judges.backends.torch_threads); return the count used.

    On a shared CPU, torch's OpenMP workers spin-wait for a core someone else holds: the
    tiny model's decode step measured 21 ms with 2 threads and 1.6 ms with 1 on this 2-core
    machine under load, so the scripts default to 1 and print what they used. The count is
    also put in ``OMP_NUM_THREADS``, which the evaluator's choice keeps (a count equal to
    torch's default, or to one the evaluator set, would otherwise be chosen again), as
    does any process the script starts."""
    import torch

    if threads:
        torch.set_num_threads(threads)
        os.environ["OMP_NUM_THREADS"] = str(threads)
    return torch.get_num_threads()


def tokenizer_folders(given: list[Path] | None, quick: bool) -> list[Path]:
    """The tokenizer folders a script measures: those given (``--tokenizer``), else the
    tiny-random model's for ``--quick``, else the embedded judge's."""
    if given:
        return given
    if quick:
        from evaluator.judges.tiny_random import build_tiny_random

        return [build_tiny_random()]
    from evaluator.judges.embedded_judge import prepare_embedded_judge

    return [prepare_embedded_judge()]


def steps_agree(steps: int, reference: int) -> bool:
    """Whether ``steps`` is within the tolerance of ``reference`` (:data:`STEP_TOLERANCE`
    of it, or :data:`STEP_SLACK` steps, whichever is more)."""
    return abs(steps - reference) <= max(STEP_SLACK, STEP_TOLERANCE * reference)


def check_steps(counts: dict[str, int], reference: int, what: str = "steps") -> None:
    """Stop the script (``SystemExit``, one line) when a variant's count of ``what`` is
    outside the tolerance of ``reference``: the variants did different work, and time per
    step would compare unlike things."""
    far = {name: count for name, count in counts.items() if not steps_agree(count, reference)}
    if far:
        made = ", ".join(f"{name} made {count}" for name, count in far.items())
        raise SystemExit(f"{what} differ beyond the tolerance ({STEP_TOLERANCE:.0%} or "
                         f"{STEP_SLACK}): {made}, expected {reference}; the variants did "
                         "different work")


def median(values: list[float]) -> float:
    """The median (the figure every script reports for repeated, interleaved timings)."""
    return statistics.median(values)


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "-"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict[str, Any]:
    """Where the figures come from: CPU, cores, memory, load, Python and library versions."""
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        ram = f"{pages / 2**30:.1f} GiB"
    except (ValueError, OSError):
        ram = "-"
    try:
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        load = "-"
    return {"cpu": _cpu_model(), "cores": os.cpu_count(), "ram": ram, "load": load,
            "python": platform.python_version(),
            **{p: _version(p) for p in ("torch", "transformers", "outlines", "outlines-core",
                                        "llguidance")}}


def print_machine(threads: int | None = None) -> None:
    """One line naming the machine and versions (and torch threads when given)."""
    info = machine()
    extra = f", torch threads {threads}" if threads is not None else ""
    print(f"machine: {info['cpu']}, {info['cores']} cores, {info['ram']} RAM, load average "
          f"{info['load']}; Python {info['python']}, torch {info['torch']}, transformers "
          f"{info['transformers']}, outlines {info['outlines']}, outlines-core "
          f"{info['outlines-core']}, llguidance {info['llguidance']}{extra}", flush=True)


def rerun_command(argv: list[str] | None = None) -> str:
    """The exact command that re-runs this script with the same arguments."""
    argv = sys.argv if argv is None else argv
    script = Path(argv[0]).resolve()
    try:
        script_text = str(script.relative_to(ROOT))
    except ValueError:
        script_text = str(script)
    env = [f"{key}={shlex.quote(os.environ[key])}" for key in ("EVALUATOR_CACHE",)
           if key in os.environ]
    return " ".join([*env, "PYTHONPATH=.", shlex.quote(sys.executable), script_text,
                     *map(shlex.quote, argv[1:])])


def print_figures(figures: dict[str, Any]) -> None:
    """The figures as one JSON line (what tests/test_benchmarks.py parses)."""
    print(FIGURES_PREFIX + json.dumps(figures, sort_keys=True), flush=True)


class ForwardClock:
    """Counts and times the model's forward calls (one per generated token, plus prefill)."""

    def __init__(self, model):
        self.calls = 0
        self.seconds = 0.0
        self._started = 0.0
        self._handles = [model.register_forward_pre_hook(self._pre),
                         model.register_forward_hook(self._post)]

    def _pre(self, *_):
        self._started = time.perf_counter()

    def _post(self, *_):
        self.seconds += time.perf_counter() - self._started
        self.calls += 1

    def take(self) -> tuple[int, float]:
        """(calls, seconds) since the last take."""
        calls, seconds = self.calls, self.seconds
        self.calls, self.seconds = 0, 0.0
        return calls, seconds

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()


class TimedProcessor:
    """Stands in for a logits processor and adds up the time of its calls (``seconds``)."""

    def __init__(self, inner):
        self.inner = inner
        self.seconds = 0.0
        self.calls = 0

    def __call__(self, input_ids, scores):
        started = time.perf_counter()
        try:
            return self.inner(input_ids, scores)
        finally:
            self.seconds += time.perf_counter() - started
            self.calls += 1

    def __getattr__(self, name: str):
        # Everything else (the grammar, tokenizer, the logits kept at score positions) is
        # the processor's own.
        return getattr(self.inner, name)

    def reset(self) -> None:
        self.inner.reset()


class FillClock:
    """Adds up the time of the constraint's mask fills (llguidance's parallel fill for the
    whole batch), wherever they run: on the mask worker when prefetched, in the processor
    when inline. The processor's own time on CUDA also holds waits for the GPU (reading the
    new tokens back waits for the step's kernels), so this is the fill alone."""

    def __init__(self):
        from evaluator.judges.backends import constraint

        self._module = constraint
        self._inner = constraint._fill
        self.seconds = 0.0
        self.calls = 0

        def timed(*args, **kwargs):
            started = time.perf_counter()
            try:
                return self._inner(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - started
                self.calls += 1

        constraint._fill = timed

    def take(self) -> tuple[int, float]:
        """(calls, seconds) since the last take."""
        calls, seconds = self.calls, self.seconds
        self.calls, self.seconds = 0, 0.0
        return calls, seconds

    def remove(self) -> None:
        self._module._fill = self._inner
