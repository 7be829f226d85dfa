"""How much of a run's wall time is spent outside the model's forward passes?

One ``evaluate()`` run of ``--cases`` cases (default 1,000: the dev data's cases cycled, each
repeat with its own id) on the tiny-random judge, loaded beforehand (its load time is
printed, not counted). Timed without a profiler, by wrapping:

- the model's forward calls (a forward pre-hook and hook): the forward passes;
- inside ``model.generate`` but outside them: the schema constraint's per-token masking
  (the logits processor) and the rest of transformers' decode loop;
- in the backend: the one-off schema compile, prompt tokenizing (chat template +
  tokenizer), padding and decoding;
- in the runner: reading and validating the input, rendering, prompt hashes, the resume
  plan and manifest, verdict validation, writing records, the summary.

The share outside forward passes is the target (<= 5%): with a tiny model whose forward
passes are cheap, every other cost shows. ``--profile`` runs the same thing under py-spy
(sampling, out of process) and prints the functions where the time went.

Re-run:

    PYTHONPATH=. .venv/bin/python benchmarks/overhead.py \\
        [--cases 1000] [--profile] [--quick]

Prints the breakdown (seconds, share of wall time) and a ``figures:`` JSON line. Counts and
timings only, never case text.
"""

from __future__ import annotations

import argparse
import collections
import inspect
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_common import (  # noqa: E402
    ForwardClock,
    TimedProcessor,
    cycle_rows,
    describe_source,
    load_rows,
    print_figures,
    print_machine,
    rerun_command,
    set_threads,
    write_jsonl,
)

from evaluator.judges.models_file import resolve_judge  # noqa: E402
from evaluator.rubrics.load import load_rubric  # noqa: E402

# Runner-level steps, timed by wrapping the names the run's modules (RUN_MODULES) call:
# label -> names (names a module does not use are skipped, so the list covers its versions).
# Score distributions' own work; its forward passes (paths off the verdict) are counted
# with the model's forward passes, so this row is what is left of it.
DISTRIBUTIONS = "score distributions (outside their forward passes)"
RUN_MODULES = ("evaluator.run.runner", "evaluator.run.judging", "evaluator.run.local_engine")
RUNNER_STEPS = {
    "reading + validating input": ("read_cases", "iter_cases"),
    "rendering prompts": ("render_messages",),
    "prompt hashes": ("prompt_hash",),
    "settings, model fingerprint, manifest": ("model_fingerprint", "build_settings",
                                              "settings_hash", "new_manifest", "read_manifest",
                                              "run_entry", "write_json_atomic"),
    "resume plan": ("plan_resume", "apply_plan"),
    "verdict validation + aggregates": ("judge_generation",),
    DISTRIBUTIONS: ("add_distributions",),
    "summary (reads the results back)": ("read_results", "iter_records", "summarize",
                                         "write_summary"),
}


class Timers:
    """Wraps callables to add up their time; ``restore`` undoes every wrap.

    ``exclusive`` wraps (the runner's steps) share a stack: time spent in one of them while
    another is running counts for the inner one only, so the labels never overlap (e.g.
    rendering done inside the resume plan). A generator a wrapped function returns is timed
    at each step it takes, wherever it is consumed."""

    def __init__(self):
        self.seconds: collections.Counter[str] = collections.Counter()
        self.calls: collections.Counter[str] = collections.Counter()
        self._undo: list[tuple[object, str, object]] = []
        self._stack: list[list[float]] = []  # [time in nested exclusive frames]
        self.processors: dict[int, TimedProcessor] = {}  # the logits processors, timed

    def _frame(self, label: str, step):
        started = time.perf_counter()
        self._stack.append([0.0])
        try:
            return step()
        finally:
            (nested,) = self._stack.pop()
            elapsed = time.perf_counter() - started
            self.seconds[label] += elapsed - nested
            if self._stack:
                self._stack[-1][0] += elapsed

    def _steps(self, label: str, generator):
        while True:
            try:
                item = self._frame(label, lambda: next(generator))
            except StopIteration:
                return
            yield item

    def wrap(self, owner, attr: str, label: str, *, exclusive: bool = False) -> None:
        original = getattr(owner, attr)

        def timed(*args, **kwargs):
            self.calls[label] += 1
            if exclusive:
                result = self._frame(label, lambda: original(*args, **kwargs))
                return self._steps(label, result) if inspect.isgenerator(result) else result
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds[label] += time.perf_counter() - started

        self._undo.append((owner, attr, original))
        setattr(owner, attr, timed)

    def restore(self) -> None:
        for owner, attr, original in reversed(self._undo):
            setattr(owner, attr, original)
        self._undo.clear()


def instrument(backend, timers: Timers) -> None:
    """Wrap the backend's steps, the compile and the logits processor's calls."""
    import importlib

    from evaluator.data.results import ResultWriter

    original_processor = backend._processor

    def processor_for(json_schema):
        cached = json_schema in backend._processors
        started = time.perf_counter()
        processor = original_processor(json_schema)
        if not cached:
            timers.seconds["schema compile"] += time.perf_counter() - started
            timers.calls["schema compile"] += 1
        if id(processor) not in timers.processors:
            timers.processors[id(processor)] = TimedProcessor(processor)
        return timers.processors[id(processor)]

    backend._processor = processor_for
    timers.wrap(backend, "generate", "backend.generate")
    timers.wrap(backend, "_generate_ids", "backend._generate_ids")
    timers.wrap(backend.model, "generate", "model.generate")
    timers.wrap(backend, "_next_token_dists", "distributions: model")
    for module in map(importlib.import_module, RUN_MODULES):
        for label, names in RUNNER_STEPS.items():
            for name in names:
                if hasattr(module, name):
                    timers.wrap(module, name, label, exclusive=True)
    timers.wrap(ResultWriter, "write", "writing records", exclusive=True)


def breakdown(wall: float, forward: float, calls: int, timers: Timers) -> list[tuple[str, float]]:
    """(label, seconds) rows, nested by indentation, that add up to the wall time."""
    s = timers.seconds
    masking = sum(p.seconds for p in timers.processors.values())
    in_generate = s["model.generate"]
    compile_s = s["schema compile"]
    gen_ids = s["backend._generate_ids"]
    backend_total = s["backend.generate"]
    dist_model = s["distributions: model"]  # forward passes outside model.generate
    runner_rows = [(f"    {label}", s[label] - (dist_model if label == DISTRIBUTIONS else 0))
                   for label in RUNNER_STEPS]
    runner_rows.append(("    writing records", s["writing records"]))
    runner_known = sum(v for _, v in runner_rows)
    # judge_generation is outside backend.generate; everything else in the runner too.
    outside_backend = wall - backend_total - dist_model
    return [
        (f"model forward passes ({calls} calls)", forward),
        ("outside forward passes", wall - forward),
        ("  in model.generate: constraint masking (logits processor)", masking),
        ("  in model.generate: rest of transformers' decode loop",
         in_generate - (forward - dist_model) - masking),
        ("  schema compile (once per rubric)", compile_s),
        ("  padding, decoding the verdicts", gen_ids - in_generate - compile_s),
        ("  prompt tokenizing (chat template + tokenizer)", backend_total - gen_ids),
        ("  runner, outside the backend", outside_backend),
        *runner_rows,
        ("    other (batching, records, logging)", outside_backend - runner_known),
    ]


def profile(argv: list[str], top: int) -> None:
    """Run this script (without --profile) under py-spy; print where the time went."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        raise SystemExit("--profile needs py-spy: pip install py-spy")
    with tempfile.TemporaryDirectory(prefix="bench-overhead-") as tmp:
        raw = Path(tmp) / "profile.txt"
        command = [spy, "record", "--idle", "--rate", "25", "--format", "raw", "-o", str(raw),
                   "--", sys.executable, __file__, *argv]
        done = subprocess.run(command, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False)
        if done.returncode != 0 or not raw.exists():
            raise SystemExit(f"py-spy failed (exit {done.returncode})")
        own: collections.Counter[str] = collections.Counter()
        inclusive: collections.Counter[str] = collections.Counter()
        total = 0
        for line in raw.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            # "function (path:line)" -> "function (path)": one row per function.
            frames = [re.sub(r":\d+\)$", ")", frame) for frame in stack.split(";")]
            # Only the samples inside evaluate(): the run itself, not imports, model loading
            # or idle helper threads.
            if not any(f.startswith("evaluate (") and "evaluator/run/runner.py" in f
                       for f in frames):
                continue
            n = int(count)
            total += n
            own[frames[-1]] += n
            for frame in set(frames):
                if "evaluator/" in frame and "benchmarks/" not in frame:
                    inclusive[frame] += n
    print(f"\nprofile (py-spy, {total} samples inside evaluate()):")
    print("  own time, top functions:")
    for frame, n in own.most_common(top):
        print(f"  {100 * n / total:5.1f}%  {frame[:120]}")
    print("  evaluator functions, time including callees:")
    for frame, n in inclusive.most_common(top):
        print(f"  {100 * n / total:5.1f}%  {frame[:120]}")


def main(argv: list[str] | None = None) -> dict | None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--judge", default="tiny-random")
    parser.add_argument("--rubric", default="trial_eligibility")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="override the judge's batch size (tiny-random: 16)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: default)")
    parser.add_argument("--data", type=Path, default=None, help="folder of the dev data")
    parser.add_argument("--profile", action="store_true",
                        help="also run it under py-spy and print the top functions")
    parser.add_argument("--top", type=int, default=15, help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: 4 cases of drug_monograph_similarity (synthetic "
                             "examples)")
    raw_argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(raw_argv)
    if args.profile:
        profile([a for a in raw_argv if a != "--profile"], args.top)
        return None
    if args.quick:
        args.cases, args.rubric = 4, "drug_monograph_similarity"

    threads = set_threads(args.threads or None)
    from evaluator import Judge, RunOptions, Task, evaluate
    from evaluator.judges.backends import load_backend

    print_machine(threads)
    name, spec = resolve_judge(args.judge)
    if args.batch_size:
        spec = spec.model_copy(update={"batch_size": args.batch_size})
    rubric = load_rubric(args.rubric)
    source, rows = load_rows(rubric.name, args.data)
    started = time.perf_counter()
    backend = load_backend(name, spec)
    load_s = time.perf_counter() - started
    print(f"judge {name}: loaded in {load_s:.1f} s (not counted); rubric {rubric.name}: "
          f"{args.cases} cases from {describe_source(rubric.name, source, rows, args.data)} (cycled), batch size {spec.batch_size}",
          flush=True)

    timers = Timers()
    instrument(backend, timers)
    clock = ForwardClock(backend.model)
    with tempfile.TemporaryDirectory(prefix="bench-overhead-") as tmp:
        folder = Path(tmp)
        cases_path = write_jsonl(folder / "cases.jsonl", cycle_rows(rows, args.cases))
        started = time.perf_counter()
        result = evaluate(Task(rubric, cases_path), Judge(name, spec=spec, backend=backend),
                          RunOptions(folder / "results.jsonl"))
        wall = time.perf_counter() - started
    calls, forward = clock.take()
    clock.remove()
    timers.restore()
    backend.close()

    rows_out = breakdown(wall, forward, calls, timers)
    print(f"{'':58} {'seconds':>9} {'share':>7}")
    print(f"{'wall time of evaluate()':58} {wall:9.2f} {100:6.1f}%")
    for label, seconds in rows_out:
        print(f"{label:58} {seconds:9.2f} {100 * seconds / wall:6.1f}%")
    shares = dict(rows_out)
    outside = shares["outside forward passes"]
    pipeline = (shares["  runner, outside the backend"]
                + shares["  prompt tokenizing (chat template + tokenizer)"]
                + shares["  schema compile (once per rubric)"]
                + shares["  padding, decoding the verdicts"])
    statuses = result.summary.status_counts
    figures = {
        "judge": name, "rubric": rubric.name, "cases": args.cases,
        "batch_size": spec.batch_size, "threads": threads, "statuses": statuses,
        "wall_s": round(wall, 2), "cases_per_s": round(args.cases / wall, 3),
        "forward_s": round(forward, 2), "forward_calls": calls,
        "outside_forward_share": round(outside / wall, 4),
        "decode_loop_share": round((shares["  in model.generate: constraint masking (logits processor)"]
                                    + shares["  in model.generate: rest of transformers' "
                                             "decode loop"]) / wall, 4),
        "pipeline_share": round(pipeline / wall, 4),
        "model_load_s": round(load_s, 2),
    }
    print(f"outside forward passes: {100 * figures['outside_forward_share']:.1f}% of wall time "
          f"(target <= 5%); of which transformers' decode loop + constraint masking "
          f"{100 * figures['decode_loop_share']:.1f}%, the evaluator's own pipeline "
          f"(input, rendering, tokenizing, compile, validation, writing, summary) "
          f"{100 * figures['pipeline_share']:.1f}%")
    print(f"statuses: {statuses}; {figures['cases_per_s']:.2f} cases/s")
    print(f"re-run: {rerun_command(None if argv is None else [__file__, *argv])}")
    print_figures(figures)
    return figures


if __name__ == "__main__":
    main()
