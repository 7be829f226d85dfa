"""Where a decode step's time goes on the transformers path: the model's forward pass
against everything else (generate's own loop, our logits processor, the score watch), per
batch size.

Each batch size's first cases (cycled when there are fewer) are generated greedily in each
variant, one after the other, rotating which goes first:

- backend: the backend's own generate call (``TransformersBackend._generate_ids``: its
  logits processor with the masks and the score watch, its stopping criteria),
  ``max_new_tokens`` the schema's budget; the batch runs until its last verdict ends, T steps;
- unconstrained: ``model.generate`` with ``min_new_tokens == max_new_tokens == T``, as
  ``constrained_vs_unconstrained.py`` runs it (transformers' min-length processors copy
  the whole logits tensor each step);
- loop-only: ``model.generate`` for T steps with one processor that only sets the
  end-of-sequence logit to -inf in place: transformers' loop with next to nothing added;
- prefetch and inline (only when asked, ``--variants``): the backend's call with the next
  step's masks filled on a worker thread during the forward pass (as the backend does on a
  GPU, or on CPUs torch leaves free), or between forward passes in the logits processor
  (as it does with torch on every CPU), whatever the backend would choose here.

All make the same T forward passes over the same batch (checked). Hooks on the model
record every forward call. The prefill (the first call) is left out: the decode window runs
from the end of the prefill to ``generate``'s return and holds T - 1 forward passes and T
token choices. Per step: the forward ms (per decode pass), the ms outside them and the
forward share of the window, by the wall clock and in the process's CPU time (all threads,
user and system: steadier than the wall clock on a shared machine); for the backend also
its logits processor's ms per step and, of that, its score watch's. A small model's forward
pass is cheap, so the absolute ms matter as much as the share.

Where the masks are filled during the forward pass, the process's CPU time counts the fill
inside the forward calls, so it overstates the forward share. So each variant also gets
the critical path's figures (``path_`` keys): the main thread's CPU time (with torch on
one thread, ``--threads 1``, it computes the whole forward pass and runs the loop), plus,
outside the forward calls, the process's CPU time while the main thread waited for masks
(an inline fill, or a prefetched one not finished yet; ``fill_wait_ms`` per step). Inline,
that is the process's CPU time again; prefetched, it leaves out the part of the fill the
forward pass hid.

``--profile FILE`` runs the same under py-spy (``--spy``: its executable; 50 samples a
second) and writes the decode windows' samples as collapsed stacks to FILE (from
generate's ``_sample`` down, each under its variant; ``function (file)`` frames, the leaf
with its line: small and diffable), and prints per variant the share of samples in the
model's forward, the top leaf lines by own time and the top functions including callees.

Re-run (a random judge of Qwen3's shape and real 151k vocabulary, see random_judge.py):

    PYTHONPATH=. .venv/bin/python benchmarks/random_judge.py --shape qwen3-small \\
        --tokenizer DIR --out /tmp/judges --device cpu --dtype float32
    EVALUATOR_CACHE=.cache/evaluator PYTHONPATH=. .venv/bin/python benchmarks/step_profile.py \\
        --models /tmp/judges/models.yaml --judge random-qwen3-small --batches 16 64 128

Prints one line per batch size and variant, then a ``figures:`` JSON line. Counts and
timings only, never case text.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_common import (
    cycle_rows,
    describe_source,
    load_rows,
    machine,
    median,
    print_figures,
    print_machine,
    rerun_command,
    set_threads,
)

from evaluator.judges.models_file import resolve_judge
from evaluator.rubrics.load import load_rubric
from evaluator.rubrics.render import render_messages
from evaluator.rubrics.schema import max_new_tokens, output_json_schema


def _now() -> tuple[float, float, float]:
    """(wall seconds, this process's CPU seconds: all its threads, user and system, the
    calling thread's CPU seconds)."""
    return time.perf_counter(), time.process_time(), time.thread_time()


class StepClock:
    """Records each forward call of a model: (start, end), each a :func:`_now` pair. On
    CUDA both hooks wait for the device first, so a forward pass's kernels count as forward
    time rather than landing in the loop's next read of the device (generate reads one
    every step anyway)."""

    def __init__(self, model):
        import torch

        self.calls: list[tuple[tuple[float, float], tuple[float, float]]] = []
        self._started = (0.0, 0.0)
        self._sync = (torch.cuda.synchronize if next(model.parameters()).device.type == "cuda"
                      else (lambda: None))
        self._handles = [model.register_forward_pre_hook(self._pre),
                         model.register_forward_hook(self._post)]

    def _pre(self, *_):
        self._sync()
        self._started = _now()

    def _post(self, *_):
        self._sync()
        self.calls.append((self._started, _now()))

    def take(self) -> list:
        calls, self.calls = self.calls, []
        return calls

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()


class Timed:
    """Wraps a callable (a logits processor, the watch's capture) and adds up its wall
    and CPU seconds; everything else is the wrapped object's."""

    def __init__(self, inner):
        self.inner = inner
        self.seconds = [0.0, 0.0, 0.0]

    def __call__(self, *args, **kwargs):
        started = _now()
        try:
            return self.inner(*args, **kwargs)
        finally:
            ended = _now()
            self.seconds = [self.seconds[i] + ended[i] - started[i] for i in range(3)]

    def __getattr__(self, name: str):
        return getattr(self.inner, name)


def decode_window(calls: list, ended: tuple[float, float, float], waited: float = 0.0) -> dict:
    """The decode window's figures from the forward calls of one generate (prefill first)
    and the time it returned, by the wall clock, in the process's CPU time (``cpu_`` keys)
    and on the critical path (``path_`` keys: the main thread's CPU time, plus ``waited``,
    the process's CPU seconds while the main thread waited for masks outside the forward
    calls)."""
    if len(calls) < 2:
        raise SystemExit("fewer than two forward calls: no decode step to measure")
    steps = len(calls)  # T token choices: one after the prefill, one after each decode pass
    figures: dict = {"steps": steps}
    for i, prefix in ((0, ""), (1, "cpu_"), (2, "path_")):
        window = ended[i] - calls[0][1][i] + (waited if i == 2 else 0.0)
        forward = sum(end[i] - start[i] for start, end in calls[1:])
        figures.update({f"{prefix}forward_ms": 1000 * forward / (steps - 1),
                        f"{prefix}outside_ms": 1000 * (window - forward) / steps,
                        f"{prefix}share": forward / window})
    return figures


def _suppress_eos(eos: int):
    """The cheapest logits processor that keeps a row from ending: its end-of-sequence
    logit set to -inf in place."""
    def processor(input_ids, scores):
        scores[:, eos] = float("-inf")
        return scores
    return processor


def _prefetched(backend, prompts, schema_text: str, sampling, prefetch: bool = True) -> None:
    """The backend's generate call with the next step's masks filled during the forward
    pass (``prefetch``), or inline, between forward passes, whatever the backend chose."""
    before, backend.prefetch_masks = backend.prefetch_masks, prefetch
    try:
        backend._generate_ids(prompts, schema_text, sampling)
    finally:
        backend.prefetch_masks = before


def _inline(backend, prompts, schema_text: str, sampling) -> None:
    """The backend's generate call with the masks filled between forward passes (its own
    frame, so that a profile tells it from the prefetching one)."""
    _prefetched(backend, prompts, schema_text, sampling, prefetch=False)


OURS = ("backend", "prefetch", "inline")  # the variants that run the backend's processor


def run_variant(backend, variant: str, prompts, schema_text: str, budget: int, steps: int,
                clock: StepClock, processor: Timed) -> dict:
    """One generate of ``variant`` over ``prompts``; its decode-window figures."""
    from evaluator.judges.backends import Sampling

    clock.take()
    inner = processor.inner
    for timed in (processor, inner.capture, inner.fill, inner._wait):
        timed.seconds = [0.0, 0.0, 0.0]
    if variant == "backend":
        backend._generate_ids(prompts, schema_text, Sampling(max_new_tokens=budget))
    elif variant == "prefetch":
        _prefetched(backend, prompts, schema_text, Sampling(max_new_tokens=budget))
    elif variant == "inline":
        _inline(backend, prompts, schema_text, Sampling(max_new_tokens=budget))
    elif variant == "unconstrained":
        from constrained_vs_unconstrained import generate

        generate(backend, prompts, steps, min_new=steps)
    else:  # loop-only
        import torch
        from transformers import LogitsProcessorList

        from evaluator.judges.backends.cpu_heap import decode_heap

        batch = backend.tokenizer.pad({"input_ids": prompts}, padding=True,
                                      return_tensors="pt")
        with torch.inference_mode(), decode_heap(backend.device) as heap:
            backend.model.generate(
                **{k: v.to(backend.device) for k, v in batch.items()}, max_new_tokens=steps,
                eos_token_id=backend.eos_token_id, pad_token_id=backend.tokenizer.pad_token_id,
                do_sample=False, temperature=None, top_p=None, top_k=None,
                logits_processor=LogitsProcessorList(
                    [heap, _suppress_eos(backend.eos_token_id)]))
    ended = _now()
    # The process's CPU while the main thread waited for masks (an inline fill; the wait for
    # a prefetched one): the fill's work on the critical path.
    waited = inner.fill.seconds[1] + inner._wait.seconds[1] if variant in OURS else 0.0
    figures = decode_window(clock.take(), ended, waited)
    if variant in OURS:
        steps = figures["steps"]
        for i, prefix in ((0, ""), (1, "cpu_")):
            figures[f"{prefix}processor_ms"] = 1000 * processor.seconds[i] / steps
            figures[f"{prefix}watch_ms"] = 1000 * inner.capture.seconds[i] / steps
        figures["fill_wait_ms"] = 1000 * waited / steps
    return figures


def measure(args) -> dict:
    threads = set_threads(args.threads or None)
    from evaluator.judges.backends import Sampling, load_backend

    print_machine(threads)
    name, spec = resolve_judge(args.judge, args.models)
    if spec.backend not in ("transformers", "tiny-random"):
        raise SystemExit(f"judge {name!r} is not a transformers judge")
    rubric = load_rubric(args.rubric)
    schema_text = json.dumps(output_json_schema(rubric), separators=(",", ":"))
    budget = args.max_new_tokens or max_new_tokens(output_json_schema(rubric))
    template_kwargs = {**spec.chat_template_kwargs, **rubric.chat_template_kwargs}
    source, rows = load_rows(rubric.name, args.data)
    backend = load_backend(name, spec)
    prompts = [backend.render(render_messages(rubric, {k: str(row.get(k) or "")
                                                       for k in rubric.inputs},
                                              system_role=spec.system_role), template_kwargs)
               for row in cycle_rows(rows, max(args.batches))]
    inner = backend._processor(schema_text)
    # The processor, its watch and its waits for masks timed where the backend calls them.
    inner.capture = Timed(inner.capture)
    inner.fill = Timed(inner.fill)
    inner._wait = Timed(inner._wait)
    processor = Timed(inner)
    backend._processors[schema_text] = processor
    clock = StepClock(backend.model)
    print(f"judge {name}: rubric {rubric.name}, cases from {describe_source(rubric.name, source, rows, args.data)}; token budget "
          f"{budget}; {args.repeats} repeat(s); vocabulary "
          f"{backend.model.config.vocab_size}", flush=True)
    print("per decode step, wall clock | CPU time of the process (all threads):")
    print(f"{'batch':>5} {'variant':>13} {'steps':>5} {'forward ms':>10} {'outside ms':>10} "
          f"{'share':>6} {'processor':>9} {'watch':>5} | {'forward':>7} {'outside':>7} "
          f"{'share':>6} {'proc':>5}", flush=True)
    results = {}
    for batch in args.batches:
        chosen = prompts[:batch]
        # Untimed: the constrained batch's length T, and torch's first-call costs.
        backend._generate_ids(chosen, schema_text, Sampling(max_new_tokens=budget))
        steps = len(clock.take())
        runs: dict[str, list[dict]] = {v: [] for v in args.variants}
        for repeat in range(args.repeats):
            shift = repeat % len(args.variants)  # rotate which goes first
            for variant in args.variants[shift:] + args.variants[:shift]:
                figures = run_variant(backend, variant, chosen, schema_text, budget, steps,
                                      clock, processor)
                if figures["steps"] != steps:
                    raise SystemExit(f"batch {batch}: {variant} made {figures['steps']} steps, "
                                     f"expected {steps}")
                runs[variant].append(figures)
        for variant in args.variants:
            row = {key: round(median([r[key] for r in runs[variant]]), 4)
                   for key in runs[variant][0] if key != "steps"}
            row["steps"] = steps
            results[f"{variant}_{batch}"] = row
            ours = variant in OURS
            extra = (f" {row['processor_ms']:9.1f} {row['watch_ms']:5.1f}"
                     if ours else f" {'':9} {'':5}")
            cpu_extra = f" {row['cpu_processor_ms']:5.1f}" if ours else ""
            print(f"{batch:>5} {variant:>13} {steps:>5} {row['forward_ms']:10.1f} "
                  f"{row['outside_ms']:10.1f} {100 * row['share']:5.1f}%{extra} | "
                  f"{row['cpu_forward_ms']:7.1f} {row['cpu_outside_ms']:7.1f} "
                  f"{100 * row['cpu_share']:5.1f}%{cpu_extra}", flush=True)
    print("critical path per decode step: the main thread's CPU time, plus the process's "
          "CPU\ntime while it waited for masks (wait):")
    print(f"{'batch':>5} {'variant':>13} {'forward ms':>10} {'outside ms':>10} {'share':>6} "
          f"{'wait ms':>7}")
    for batch in args.batches:
        for variant in args.variants:
            row = results[f"{variant}_{batch}"]
            wait = f" {row['fill_wait_ms']:7.1f}" if variant in OURS else ""
            print(f"{batch:>5} {variant:>13} {row['path_forward_ms']:10.1f} "
                  f"{row['path_outside_ms']:10.1f} {100 * row['path_share']:5.1f}%{wait}",
                  flush=True)
    clock.remove()
    backend.close()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(f"peak RSS of this process: {peak:.0f} MiB", flush=True)
    return {"judge": name, "rubric": rubric.name, "batches": args.batches,
            "repeats": args.repeats, "threads": threads, "budget": budget,
            "peak_rss_mib": round(peak), **results}


def profile(argv: list[str], spy: str, out: Path, top: int) -> None:
    """Run this script (without --profile) under py-spy; keep the decode loops' samples as
    collapsed stacks in ``out`` and print the top functions by own time."""
    if not Path(spy).exists():
        raise SystemExit(f"--profile needs py-spy: {spy} not found (--spy PATH)")
    with tempfile.TemporaryDirectory(prefix="bench-step-") as tmp:
        raw = Path(tmp) / "profile.txt"
        command = [spy, "record", "--rate", "50", "--format", "raw", "-o", str(raw),
                   "--", sys.executable, __file__, *argv]
        done = subprocess.run(command, env={**os.environ, "PYTHONPATH": str(ROOT)},
                              check=False)
        if done.returncode != 0 or not raw.exists():
            raise SystemExit(f"py-spy failed (exit {done.returncode})")
        stacks: collections.Counter[str] = collections.Counter()
        for line in raw.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            # "Class.function (path:line)" -> "Class.function (path)", but for the leaf frame,
            # whose line says which statement the time went to.
            frames = stack.split(";")
            frames = [re.sub(r":\d+\)$", ")", frame) for frame in frames[:-1]] + frames[-1:]
            names = [_function(frame) for frame in frames]
            # Only the decode loops: samples inside generate's sampling loop, each under the
            # variant it ran for (the untimed first run of each batch apart).
            if "_sample" not in names or "_prefill" in names:  # the decode window only
                continue
            first = names.index("_sample")
            variant = ("warm-up" if "run_variant" not in names else "inline"
                       if "_inline" in names else "prefetch"
                       if "_prefetched" in names else "backend"
                       if "_generate_ids" in names else "unconstrained"
                       if any("constrained_vs_unconstrained" in f for f in frames)
                       else "loop-only")
            stacks[";".join([variant, *frames[first:]])] += int(count)
    out.write_text("".join(f"{stack} {n}\n" for stack, n in sorted(stacks.items())))
    for variant in ("backend", "prefetch", "inline", "unconstrained", "loop-only"):
        own: collections.Counter[str] = collections.Counter()
        inclusive: collections.Counter[str] = collections.Counter()
        for stack, n in stacks.items():
            frames = stack.split(";")
            if frames[0] != variant:
                continue
            own[frames[-1]] += n
            for frame in {re.sub(r":\d+\)$", ")", frame) for frame in frames[1:]}:
                inclusive[frame] += n
        total = sum(own.values())
        if not total:
            continue
        forward = sum(n for frame, n in inclusive.items() if _function(frame) == "forward"
                      and "ForCausalLM." in frame)
        print(f"\nprofile of {variant} (py-spy, {total} samples in generate's decode loop, "
              f"{100 * forward / total:.1f}% of them in the model's forward; collapsed "
              f"stacks in {out}):")
        print("  own time, top lines:")
        for frame, n in own.most_common(top):
            print(f"  {100 * n / total:5.1f}%  {frame[:100]}")
        print("  time including callees, top functions:")
        for frame, n in inclusive.most_common(top):
            print(f"  {100 * n / total:5.1f}%  {frame[:100]}")


def _function(frame: str) -> str:
    """The bare function name of a py-spy frame ("Class.name (path)" -> "name")."""
    return frame.split(" (", 1)[0].rsplit(".", 1)[-1]


def main(argv: list[str] | None = None) -> dict | None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=Path, default=None,
                        help="models.yaml that defines --judge (random_judge.py writes one)")
    parser.add_argument("--judge", default="tiny-random")
    parser.add_argument("--rubric", default="trial_eligibility")
    parser.add_argument("--batches", type=int, nargs="+", default=[16, 64, 128])
    parser.add_argument("--variants", nargs="+",
                        default=["backend", "unconstrained", "loop-only"],
                        choices=("backend", "prefetch", "inline", "unconstrained",
                                 "loop-only"),
                        help="prefetch / inline: the backend's call with the masks filled "
                        "during the forward pass / between forward passes, whatever the "
                        "backend would choose (default: the other three)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=None,
                        help="cap the token budget (default: the schema's)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: default)")
    parser.add_argument("--data", type=Path, default=None, help="folder of the dev data")
    parser.add_argument("--profile", type=Path, default=None, metavar="FILE",
                        help="also run it under py-spy; collapsed stacks of the decode loops "
                             "into FILE")
    parser.add_argument("--spy", default=str(Path(sys.executable).parent / "py-spy"),
                        help="py-spy's executable (for --profile)")
    parser.add_argument("--top", type=int, default=25, help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: tiny-random, drug_monograph_similarity (synthetic "
                             "examples), batch 2, 1 repeat")
    raw_argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(raw_argv)
    if args.quick:
        args.judge, args.rubric, args.batches, args.repeats = ("tiny-random",
                                                               "drug_monograph_similarity",
                                                               [2], 1)
    if args.profile is not None:
        rest, skip = [], False
        for arg in raw_argv:  # the same run without --profile FILE / --spy PATH
            if skip:
                skip = False
            elif arg in ("--profile", "--spy"):
                skip = True
            elif not arg.startswith(("--profile=", "--spy=")):
                rest.append(arg)
        print(f"load before: {machine()['load']}", flush=True)
        profile(rest, args.spy, args.profile, args.top)
        print(f"load after: {machine()['load']}")
        return None
    figures = measure(args)
    print(f"load after: {machine()['load']}")
    print(f"re-run: {rerun_command(None if argv is None else [__file__, *argv])}")
    print_figures(figures)
    return figures


if __name__ == "__main__":
    main()
