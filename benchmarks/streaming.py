"""Streamed vs batched: cases/s and decode-slot utilisation on vLLM, same cases, same slots.

Each variant is a whole ``evaluate()`` run of the same cases (greedy, score distributions
on) through one vLLM engine:

- ``batched``: ``batch_size`` = S cases per generate call; a batch waits for its longest
  verdict before the next starts (the run before issue 27; ``stream: false`` today);
- ``streamed``: S requests in flight, each replaced the moment it ends (continuous batching,
  :mod:`evaluator.run.streaming`); score distributions by one-token requests issued as each
  verdict ends, inside the same engine steps (the default);
- ``streamed-verdict-logprobs`` (``--with-verdict-logprobs``): streamed, with the nodes of
  the distributions on each verdict's path read from the log-probabilities vLLM returns
  while it writes the verdict (exact; what they save or cost against the requests).

Slot utilisation = sum of completion tokens / (S x engine steps): the share of the S decode
slots that wrote a verdict token, over every step the engine took (prefill steps and the
distributions' one-token steps included, so it is a lower bound). The batched runs' figure
is cross-checked against the issue's arithmetic: completion tokens / (S x the sum over
batches of the longest verdict). The prefix cache is emptied before each run, so no run
finds another's prompts cached; the variants alternate (ABBA over the slot counts).
Prints counts and timings only, never case text.

Re-run (the vLLM venv: make .venv-vllm/.installed):
    PYTHONPATH=. .venv-vllm/bin/python \\
        benchmarks/streaming.py [--judge smollm2-135m-instruct|tiny-random] [--cases 64] \\
        [--slots 8 16] [--with-verdict-logprobs] [--quick]
The default judge runs from its converted folder (``make judge`` prepares it); on a 2-core
CPU one batch of 16 of its rambling verdicts takes minutes. --quick: tiny-random, 12 cases,
4 slots. ``--models FILE --judge NAME``: a vllm judge of that models.yaml (on a GPU host:
``benchmarks/gpu_run.sh streaming``), its engine settings kept, max_num_seqs set to the
largest slot count.
"""

from __future__ import annotations

import argparse
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
    print_figures,
    print_machine,
    rerun_command,
    write_jsonl,
)

from evaluator.judges.models_file import JudgeSpec

RUBRIC = "trial_eligibility"
# As tests/test_vllm_backend.py: no torch.compile on CPU, one process. The KV cache holds
# every slot's prompt and verdict (--kv-cache-gib): the default judge's dev-set prompts and
# verdicts run to ~2,500 tokens at ~46 KB a token (float32), so 16 slots need ~2 GB; a cache
# too small for the slots makes vLLM preempt and recompute requests, which measures the
# cache, not the batching (1 GiB at 16 slots stalled a run for minutes).
ENGINE = {"enforce_eager": True, "distributed_executor_backend": "uni"}


def _spec(judge: str, slots: int, models: Path | None, kv_gib: float,
          ) -> tuple[str, JudgeSpec]:
    if models is not None:
        from evaluator.judges.models_file import resolve_judge

        name, spec = resolve_judge(judge, models)
        if spec.backend != "vllm":
            sys.exit(f"judge {name!r} in {models} is not a vllm judge")
        return name, spec.model_copy(update={"batch_size": slots,
                                             "engine": dict(spec.engine, max_num_seqs=slots)})
    if judge == "tiny-random":
        from evaluator.judges.tiny_random import build_tiny_random

        path = build_tiny_random()
    else:
        from evaluator.judges.embedded_judge import embedded_judge_dir, embedded_judge_ready

        path = embedded_judge_dir()
        if not embedded_judge_ready(path):
            sys.exit(f"the default judge is not prepared in {path}: run `make judge` first")
    return f"{judge}-vllm", JudgeSpec(backend="vllm", path=path, dtype="float32",
                                      max_model_len=8192, batch_size=slots,
                                      engine=dict(ENGINE, max_num_seqs=slots,
                                                  kv_cache_memory_bytes=int(kv_gib * (1 << 30))))


def _run(backend, name: str, spec: JudgeSpec, source: Path, out: Path, variant: str,
         slots: int) -> dict:
    from evaluator.data.results import iter_records
    from evaluator.judges.backends.vllm_backend import GENERATION_LOGPROBS
    from evaluator.run.runner import evaluate
    from evaluator.run.task import Judge, RunOptions, Task

    backend.llm.reset_prefix_cache()
    backend.generation_logprobs = GENERATION_LOGPROBS if variant.endswith("logprobs") else 0
    spec = spec.model_copy(update={"stream": variant != "batched", "batch_size": slots})
    steps = backend.loop.steps
    started = time.perf_counter()
    evaluate(Task(RUBRIC, source), Judge(name, spec=spec, backend=backend),
             RunOptions(out, force_new=True))
    seconds = time.perf_counter() - started
    steps = backend.loop.steps - steps
    records = list(iter_records(out))
    tokens = [r.completion_tokens or 0 for r in records]
    row = {"variant": variant, "slots": slots, "cases": len(records), "seconds": round(seconds, 2),
           "cases_per_s": round(len(records) / seconds, 4), "completion_tokens": sum(tokens),
           "engine_steps": steps, "utilisation": round(sum(tokens) / (slots * steps), 4),
           # On a CPU a step's cost grows with the sequences in it, so the time per token
           # shows whether idle slots cost anything (a GPU's step costs about the same at
           # any occupancy: there, idle slots are lost time).
           "ms_per_token": round(1000 * seconds / max(sum(tokens), 1), 2),
           "ms_per_step": round(1000 * seconds / max(steps, 1), 1),
           "ok": sum(r.status == "ok" for r in records),
           "with_distributions": sum(bool(r.distributions) for r in records)}
    if variant == "batched":  # records are in input order, one batch after another
        longest = sum(max(tokens[i:i + slots]) for i in range(0, len(tokens), slots))
        row["utilisation_by_longest"] = round(sum(tokens) / (slots * longest), 4)
    return row


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judge", default="smollm2-135m-instruct",
                        help="smollm2-135m-instruct or tiny-random; with --models, a vllm judge "
                             "of that file")
    parser.add_argument("--models", type=Path, default=None, help="a models.yaml")
    parser.add_argument("--cases", type=int, default=64)
    parser.add_argument("--slots", type=int, nargs="+", default=[8, 16])
    parser.add_argument("--with-verdict-logprobs", action="store_true",
                        help="also a streamed run reading distributions from the verdicts' "
                             "log-probabilities")
    parser.add_argument("--kv-cache-gib", type=float, default=4.0,
                        help="vLLM's KV cache on CPU (default 4: room for 16 slots of the "
                             "default judge's prompts and verdicts)")
    parser.add_argument("--data", type=Path, default=None, help="folder of the dev data")
    parser.add_argument("--quick", action="store_true", help="tiny-random, 12 cases, 4 slots")
    args = parser.parse_args(argv)
    if args.quick:
        args.judge, args.cases, args.slots = "tiny-random", 12, [4]
    print_machine()
    from evaluator.judges.backends import load_backend

    path, rows = load_rows(RUBRIC, args.data)
    source = describe_source(RUBRIC, path, rows, args.data)
    # Without the shared dev data the 4 example cases stand in, taken again (new ids) up to
    # --cases; the dev set's 109 cases are taken once each up to there.
    rows = cycle_rows(rows, args.cases)
    print(f"{len(rows)} cases of {source}; judge {args.judge} on vLLM; slots {args.slots}",
          flush=True)
    if args.models is None and args.judge not in ("smollm2-135m-instruct", "tiny-random"):
        parser.error("--judge takes smollm2-135m-instruct or tiny-random without --models")
    name, spec = _spec(args.judge, max(args.slots), args.models, args.kv_cache_gib)
    backend = load_backend(name, spec)
    results = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            source = write_jsonl(Path(tmp) / "cases.jsonl", rows)
            for n, slots in enumerate(args.slots):
                variants = ["batched", "streamed"]
                if args.with_verdict_logprobs:
                    variants.append("streamed-verdict-logprobs")
                for variant in (variants if n % 2 == 0 else variants[::-1]):
                    row = _run(backend, name, spec, source, Path(tmp) / f"{variant}.jsonl",
                               variant, slots)
                    results.append(row)
                    print(f"{variant:22} slots {slots:3d}: {row['cases']} cases in "
                          f"{row['seconds']:8.2f} s = {row['cases_per_s']:.3f} cases/s; "
                          f"{row['completion_tokens']} tokens in {row['engine_steps']} steps: "
                          f"utilisation {row['utilisation']:.3f}, {row['ms_per_step']} ms/step, "
                          f"{row['ms_per_token']} ms/token"
                          + (f" (by longest verdict per batch: "
                             f"{row['utilisation_by_longest']:.3f})"
                             if "utilisation_by_longest" in row else "")
                          + f"; ok {row['ok']}, with distributions {row['with_distributions']}",
                          flush=True)
    finally:
        backend.close()
    ratios = {}
    for slots in args.slots:
        by = {r["variant"]: r for r in results if r["slots"] == slots}
        ratios[str(slots)] = {v: round(r["cases_per_s"] / by["batched"]["cases_per_s"], 3)
                              for v, r in by.items() if v != "batched"}
        print(f"slots {slots}: cases/s ratio to batched: {ratios[str(slots)]}")
    print(f"re-run: {rerun_command(None if argv is None else [__file__, *argv])}")
    figures = {"judge": args.judge, "cases": len(rows), "runs": results, "ratios": ratios}
    print_figures(figures)
    return figures


if __name__ == "__main__":
    main()
