"""torch's thread count for a CPU judge beside a busy process: the automatic choice against
each fixed count (issue 45).

A CPU-bound busy loop (``--busy`` other Python processes, ``while True: pass``) runs from
before the judge loads to the end. The judge (default: the embedded SmolLM2-135M, from the
cache, through the evaluator's transformers backend, one case per generate call as
models.yaml runs it) is loaded once for each way of setting torch's threads: ``auto`` (the
backend's own choice, :mod:`evaluator.judges.backends.torch_threads`, made at its load with
the busy loop running) and every fixed count from 1 to the CPUs the process may use. The
loads share one torch, so the count each load set is set again before each of its cases.
Each case generates ``--tokens`` tokens at most (greedy; the verdict is cut there, so every
way does the same work: the token counts are checked). Every case is judged by each way in
turn, in an order that rotates from case to case, so that load from other processes hits
each alike; each way's cases/s per round, then the median over rounds. Target: auto within
1.3x of the best fixed count. The load average before and after is printed (other work on
the machine competes too), and whether auto chose the best fixed count in every round (then
the two ran the same configuration, and what separates their figures is noise). No case
text is printed.

Re-run:  PYTHONPATH=. .venv/bin/python benchmarks/threads_under_load.py
             [--judge NAME] [--cases N] [--tokens N] [--rounds N] [--busy N] [--quick]
         (default: the embedded judge, 2 cases of 24 tokens, 2 rounds, 1 busy process:
         about 5 minutes on the shared 2-core machine at load average 4, most of it
         torch on 2 threads)

Prints one line per load and per round, a table, then a ``figures:`` JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_common import (
    check_steps,
    cycle_rows,
    describe_source,
    load_rows,
    median,
    print_figures,
    print_machine,
    rerun_command,
)

from evaluator.judges.backends import Sampling, load_backend
from evaluator.judges.backends.fill_threads import usable_cpus
from evaluator.judges.backends.torch_threads import ENV_SETTINGS
from evaluator.judges.models_file import resolve_judge
from evaluator.rubrics.load import load_rubric
from evaluator.rubrics.render import render_messages
from evaluator.rubrics.schema import output_json_schema

TARGET = 1.3  # auto's cases/s within this factor of the best fixed count's
BUSY_LOOP = "while True: pass"


def _load_average() -> str:
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "-"


def _start_busy(count: int) -> list[subprocess.Popen]:
    """``count`` CPU-bound processes, given a second to be seen on their CPUs."""
    busy = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) for _ in range(count)]
    time.sleep(1.0)
    return busy


def _load(name: str, spec, threads, schema_text: str):
    """The judge loaded with ``threads`` (a count or "auto"), and warmed up on a one-word
    chat (a first generate pays one-off costs: the grammar, first kernels)."""
    backend = load_backend(name, spec.model_copy(update={"threads": threads, "batch_size": 1}))
    backend.generate([[{"role": "user", "content": "Hello."}]], schema_text,
                     Sampling(max_new_tokens=2), {})
    return backend


def _judge(backend, chat, schema_text: str, tokens: int) -> tuple[float, int]:
    """One case with ``backend`` at the torch count its load chose: seconds, tokens."""
    import torch  # the benchmark runs the transformers backend: torch is loaded already

    torch.set_num_threads(backend.threads.threads)
    started = time.perf_counter()
    (generation,) = backend.generate([chat], schema_text, Sampling(max_new_tokens=tokens), {})
    return time.perf_counter() - started, generation.completion_tokens or 0


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judge", default="smollm2-135m-instruct",
                        help="a transformers judge in models.yaml (default: the embedded one)")
    parser.add_argument("--cases", type=int, default=2, help="cases judged by each way")
    parser.add_argument("--tokens", type=int, default=24, help="tokens generated per case")
    parser.add_argument("--rounds", type=int, default=2, help="turns of every way")
    parser.add_argument("--busy", type=int, default=1, help="busy-loop processes beside it")
    parser.add_argument("--data", type=Path, default=None, help="folder of the dev data")
    parser.add_argument("--quick", action="store_true",
                        help="smoke mode: tiny-random, 1 case of 8 tokens, 1 round")
    args = parser.parse_args(argv)
    if args.quick:
        args.judge, args.cases, args.tokens, args.rounds = "tiny-random", 1, 8, 1
    preset = [var for var in ENV_SETTINGS if os.environ.get(var)]
    if preset:  # it would win over every way measured here
        raise SystemExit(f"{preset[0]} is set: the evaluator would take it for every way "
                         "measured here; unset it and re-run")
    name, spec = resolve_judge(args.judge)
    if spec.backend not in ("transformers", "tiny-random"):
        parser.error(f"judge {name!r} is not a transformers judge")
    fixed = list(range(1, usable_cpus() + 1))
    ways: list[int | str] = ["auto", *fixed]

    print_machine()
    rubric = load_rubric("trial_eligibility")
    source, rows = load_rows(rubric.name, args.data)
    print(f"cases: {describe_source(rubric.name, source, rows, args.data)}; the first "
          f"{args.cases}, {args.tokens} tokens each; judge {name}", flush=True)
    chats = [render_messages(rubric, row, system_role=spec.system_role)
             for row in cycle_rows(rows, args.cases)]
    schema_text = json.dumps(output_json_schema(rubric), separators=(",", ":"))
    load_before = _load_average()
    print(f"load average before the busy loop: {load_before}", flush=True)
    busy = _start_busy(args.busy)
    backends: dict[str, object] = {}
    seconds = {str(way): [0.0] * args.rounds for way in ways}
    tokens = {str(way): [0] * args.rounds for way in ways}
    try:
        print(f"busy: {args.busy} process(es) running `{BUSY_LOOP}`; load average "
              f"{_load_average()}", flush=True)
        for way in ways:
            backends[str(way)] = _load(name, spec, way, schema_text)
            print(f"threads {way}: {backends[str(way)].threads.describe()}", flush=True)
        turn = 0
        for round_ in range(args.rounds):
            for chat in chats:
                order = ways[turn % len(ways):] + ways[:turn % len(ways)]
                turn += 1
                for way in order:
                    took, made = _judge(backends[str(way)], chat, schema_text, args.tokens)
                    seconds[str(way)][round_] += took
                    tokens[str(way)][round_] += made
            print(f"round {round_ + 1}: " + ", ".join(
                f"threads {way} {seconds[str(way)][round_]:.1f} s" for way in ways)
                + f"; load average {_load_average()}", flush=True)
    finally:
        for process in busy:
            process.kill()
            process.wait()
        for backend in backends.values():
            backend.close()
    load_after = _load_average()
    check_steps({f"{way} round {i + 1}": made for way, per in tokens.items()
                 for i, made in enumerate(per)}, tokens["1"][0], "tokens")
    rates = {way: median([args.cases / s_ for s_ in per]) for way, per in seconds.items()}
    auto = backends["auto"].threads.threads
    best = max((str(n) for n in fixed), key=lambda way: rates[way])
    ratio = rates[best] / rates["auto"]
    print(f"\n{'torch threads':16} {'cases/s (median)':>17} {'per round':>24}")
    for way, per in seconds.items():
        label = f"auto (chose {auto})" if way == "auto" else way
        print(f"{label:16} {rates[way]:17.4f} "
              f"{', '.join(f'{args.cases / s_:.4f}' for s_ in per):>24}")
    same = (f"auto chose {auto}, the best fixed count: the same configuration, so what "
            "separates the two figures is noise" if str(auto) == best else
            f"auto chose {auto}, not the best fixed count")
    print(f"best fixed count: {best} thread(s); it judged {ratio:.2f}x as many cases/s as "
          f"auto (target: at most {TARGET}x: {'met' if ratio <= TARGET else 'NOT met'}); "
          f"{same}; load average after: {load_after}")
    figures = {"judge": name, "cases": args.cases, "tokens": args.tokens,
               "rounds": args.rounds, "busy_processes": args.busy, "cpus": len(fixed),
               "auto_threads": auto, "auto_is_best_fixed": str(auto) == best,
               "cases_per_s": {way: round(rate, 5) for way, rate in rates.items()},
               "best_fixed": int(best), "best_fixed_over_auto": round(ratio, 3),
               "target_met": ratio <= TARGET,
               "load_average": {"before": load_before, "after": load_after}}
    print(f"re-run: {rerun_command(None if argv is None else [__file__, *argv])}")
    print_figures(figures)
    return figures


if __name__ == "__main__":
    main()
