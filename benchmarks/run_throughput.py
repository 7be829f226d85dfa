"""Cases/s and generated tokens/s of a finished ``evaluator run``, read from its records.

A batched run writes each batch's records together, in input order, and every record
carries its batch's size (``batch_size``) and generation seconds (``batch_seconds``), its
prompt and completion tokens (``completion_tokens`` counts the end-of-sequence token). From
them: the batches and their seconds, the cases' statuses, prompt and verdict lengths, and
the throughput over generation time (the sum of the batches' seconds: what the judge spent
generating) and, with ``--wall``, over the command's whole wall time (start-up, model
loading, the schema compile and writing included). ``benchmarks/gpu_run.sh e2e`` runs it
after each ``evaluator run``. A streamed run (vLLM) has no batches: refused.

Re-run:  PYTHONPATH=. python benchmarks/run_throughput.py RESULTS.jsonl [--wall SECONDS]

Prints counts and timings only (never case text), then a ``figures:`` JSON line.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_common import print_figures, rerun_command

from evaluator.data.results import ResultRecord, read_results


def batches(records: list[ResultRecord]) -> list[tuple[int, float]]:
    """(cases, generation seconds) of each batch, from records in file order; records
    without a batch (input errors) are skipped. Refuses (``SystemExit``) records that do not
    come in whole batches sharing one time, as a streamed run's do."""
    found = []
    index = 0
    while index < len(records):
        size, seconds = records[index].batch_size, records[index].batch_seconds
        if size is None or seconds is None:
            index += 1
            continue
        group = records[index:index + size]
        if len(group) != size or any((r.batch_size, r.batch_seconds) != (size, seconds)
                                     for r in group):
            raise SystemExit(f"record {index + 1}: the records are not in whole batches "
                             "of one generation time (a streamed run?): no batch figures")
        found.append((size, seconds))
        index += size
    return found


def throughput(records: list[ResultRecord], wall: float | None = None) -> dict:
    """The run's figures (see the module docstring)."""
    found = batches(records)
    if not found:
        raise SystemExit("no batch was generated in this results file")
    judged = [r for r in records if r.batch_size is not None]
    generation = sum(seconds for _, seconds in found)
    completion = [r.completion_tokens for r in judged if r.completion_tokens is not None]
    prompt = [r.prompt_tokens for r in judged if r.prompt_tokens is not None]
    figures = {
        "cases": len(records), "judged": len(judged),
        "statuses": dict(sorted(Counter(r.status for r in records).items())),
        "batches": [[size, round(seconds, 2)] for size, seconds in found],
        "generation_s": round(generation, 2),
        "cases_per_s": round(len(judged) / generation, 4),
        "completion_tokens": sum(completion),
        "tokens_per_s": round(sum(completion) / generation, 1),
        "prompt_tokens_mean": round(statistics.fmean(prompt), 1) if prompt else None,
        "completion_tokens_mean": round(statistics.fmean(completion), 1) if completion
        else None,
        "completion_tokens_range": [min(completion), max(completion)] if completion else None,
    }
    if wall is not None:
        figures["wall_s"] = round(wall, 1)
        figures["wall_cases_per_s"] = round(len(judged) / wall, 4)
    return figures


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="an evaluator run's results file")
    parser.add_argument("--wall", type=float, default=None,
                        help="the run command's wall-clock seconds (start-up included)")
    args = parser.parse_args(argv)
    if not args.results.is_file():
        raise SystemExit(f"{args.results}: no such results file (did the run fail?)")
    figures = throughput(read_results(args.results), args.wall)
    statuses = ", ".join(f"{count} {status}" for status, count in figures["statuses"].items())
    print(f"{figures['cases']} case(s): {statuses}; {len(figures['batches'])} batch(es): "
          + ", ".join(f"{size} in {seconds:.1f} s" for size, seconds in figures["batches"]))
    if figures["completion_tokens_mean"] is not None:
        low, high = figures["completion_tokens_range"]
        print(f"prompts {figures['prompt_tokens_mean']:.0f} tokens on average, verdicts "
              f"{figures['completion_tokens_mean']:.0f} ({low}-{high})")
    print(f"generation {figures['generation_s']:.1f} s: {figures['cases_per_s']:.3f} cases/s, "
          f"{figures['tokens_per_s']:.0f} generated tokens/s"
          + (f"; wall {figures['wall_s']:.1f} s with start-up: "
             f"{figures['wall_cases_per_s']:.3f} cases/s" if args.wall is not None else ""))
    print(f"re-run: {rerun_command(None if argv is None else [__file__, *argv])}")
    print_figures(figures)
    return figures


if __name__ == "__main__":
    main()
