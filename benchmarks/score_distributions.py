"""What do exact score distributions cost, next to the generation they describe?

For each rubric, one batch of cases is generated (greedy, constrained: what a run does), then
every score of every verdict gets its exact distribution over the rubric's allowed values
(``backend.score_distributions``: :mod:`evaluator.judges.backends.value_walk`). Both steps are
timed in the same run, on the same batch, so the ratio is what distributions add to a run.
Also counted: the scores; the next-token distributions the walk had to ask the model for
(``nodes``): the transformers path keeps the logits where a score is written while it
generates, so it asks only for paths off the verdict (after "1" on a 0-10 scale when the
verdict wrote another value); vLLM asks for every one (one per score, plus one per value
still open); the forward passes (vLLM: requests) they took (vLLM's one-token requests find
their prompt in the prefix cache); and the lowest ``coverage`` (1.0: exact). Every
distribution is checked to sum to 1. No case text is printed.

Re-run:  PYTHONPATH=. .venv/bin/python \\
             benchmarks/score_distributions.py [--judge tiny-random|smollm2-135m-instruct]
             [--rubric NAME ...] [--cases N] [--quick]
         vLLM (CPU build, test model):  PYTHONPATH=. \\
             .venv-vllm/bin/python benchmarks/score_distributions.py --engine vllm --cases 16
         (default: the embedded judge, all four rubrics, 4 cases each; a few minutes on a
         2-core CPU)

Prints one line per rubric, then a ``figures:`` JSON line.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
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
    set_threads,
)

from evaluator.judges.models_file import resolve_judge
from evaluator.rubrics.load import load_rubric
from evaluator.rubrics.render import render_messages
from evaluator.rubrics.schema import (
    build_output_model,
    max_new_tokens,
    output_json_schema,
)
from evaluator.rubrics.score_paths import score_slots, value_offsets

RUBRICS = ["trial_eligibility", "pathology_report", "drug_monograph_similarity",
           "ecg_interpretation"]


def _measure(backend, spec, rubric, rows, cases: int) -> dict:
    from evaluator.judges.backends import Sampling, ScoreAnchor

    schema = output_json_schema(rubric)
    schema_text = json.dumps(schema, separators=(",", ":"))
    template_kwargs = {**spec.chat_template_kwargs, **rubric.chat_template_kwargs}
    chats = [render_messages(rubric, {k: str(row.get(k) or "") for k in rubric.inputs},
                             system_role=spec.system_role) for row in cycle_rows(rows, cases)]
    backend._processor(schema_text) if hasattr(backend, "_processor") else None  # compiled
    started = time.perf_counter()
    gens = backend.generate(chats, schema_text, Sampling(max_new_tokens=max_new_tokens(schema)),
                            template_kwargs)
    generate_s = time.perf_counter() - started
    skipped = sum(1 for g in gens if g.finish_reason != "stop")  # e.g. too long for the judge
    gens = [g for g in gens if g.finish_reason == "stop"]
    if not gens:
        return {"rubric": rubric.name, "cases": 0, "skipped": skipped}
    model = build_output_model(rubric)
    anchors = []
    for gen in gens:
        scores = model.model_validate_json(gen.text or "").model_dump(mode="json")
        offsets = value_offsets(rubric, scores, gen.text or "")
        assert offsets is not None, "a verdict that is not the grammar's compact JSON"
        anchors.append([ScoreAnchor(s.path, offsets[s.path], s.allowed)
                        for s in score_slots(rubric, scores)])
    counts = {"nodes": 0, "passes": 0}
    inner = backend._next_token_dists

    def counting(contexts, bases, allowed):
        counts["nodes"] += len(contexts)
        if spec.backend == "vllm":  # one-token requests, up to 128 allowed tokens each
            counts["passes"] += sum(math.ceil(len(a) / 128) for a in allowed)
        else:  # one pass per verdict, padded batches of 8 off it
            counts["passes"] += (len({c.base for c in contexts if not c.extra})
                                 + math.ceil(sum(1 for c in contexts if c.extra) / 8))
        return inner(contexts, bases, allowed)

    backend._next_token_dists = counting
    try:
        started = time.perf_counter()
        dists = backend.score_distributions(schema_text, gens, anchors)
        distributions_s = time.perf_counter() - started
    finally:
        del backend._next_token_dists
    flat = [d for row in dists for d in row]
    assert all(d is not None for d in flat), "a score without a distribution"
    assert all(abs(sum(d.probabilities.values()) - 1) < 1e-9 for d in flat)
    return {"rubric": rubric.name, "cases": len(gens), "skipped": skipped, "scores": len(flat),
            "nodes": counts["nodes"], "forward_passes": counts["passes"],
            "generate_s": round(generate_s, 3), "distributions_s": round(distributions_s, 3),
            "ratio": round(distributions_s / generate_s, 4),
            "completion_tokens": sum(g.completion_tokens or 0 for g in gens),
            "min_coverage": min(d.coverage for d in flat)}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judge", default="smollm2-135m-instruct",
                        help="a transformers judge in models.yaml (default: the embedded one)")
    parser.add_argument("--rubric", action="append", choices=RUBRICS,
                        help="rubric(s) to measure (default: all four)")
    parser.add_argument("--cases", type=int, default=4, help="cases per rubric (one batch)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--data", type=Path, default=None, help="folder of the dev data")
    parser.add_argument("--engine", choices=["transformers", "vllm"], default="transformers",
                        help="vllm: the random-weight test model served by vLLM (run with the "
                             "vLLM venv: .venv-vllm/bin/python)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke mode: tiny-random, two rubrics, 2 cases")
    args = parser.parse_args(argv)
    if args.quick:
        args.judge, args.rubric, args.cases = ("tiny-random",
                                               ["trial_eligibility", "drug_monograph_similarity"], 2)
    threads = set_threads(args.threads or None)
    from evaluator.judges.backends import load_backend

    print_machine(threads)
    if args.engine == "vllm":
        from evaluator.judges.models_file import JudgeSpec
        from evaluator.judges.tiny_random import build_tiny_random

        # As tests/test_vllm_backend.py: no torch.compile on CPU, a small KV cache.
        name, spec = "tiny-random-vllm", JudgeSpec(
            backend="vllm", path=build_tiny_random(), dtype="float32", max_model_len=16384,
            engine={"enforce_eager": True, "kv_cache_memory_bytes": 256 << 20,
                    "distributed_executor_backend": "uni"})
    else:
        name, spec = resolve_judge(args.judge)
        if spec.backend not in ("transformers", "tiny-random"):
            parser.error(f"judge {name!r} is not a transformers judge")
    backend = load_backend(name, spec)
    rows_out = []
    try:
        print(f"{'rubric':28} {'cases':>5} {'scores':>6} {'nodes':>5} {'passes':>6} "
              f"{'generate s':>10} {'distrib. s':>10} {'ratio':>7} {'coverage':>8}", flush=True)
        for rubric_name in args.rubric or RUBRICS:
            rubric = load_rubric(rubric_name)
            source, rows = load_rows(rubric.name, args.data)
            print(f"{rubric.name}: cases from "
                  f"{describe_source(rubric.name, source, rows, args.data)}", flush=True)
            row = _measure(backend, spec, rubric, rows, args.cases)
            if not row["cases"]:
                print(f"{rubric.name:28} no verdict to measure: {row['skipped']} case(s) "
                      "did not finish (too long for the judge's context?)", flush=True)
                continue
            rows_out.append(row)
            print(f"{row['rubric']:28} {row['cases']:5d} {row['scores']:6d} {row['nodes']:5d} "
                  f"{row['forward_passes']:6d} {row['generate_s']:10.2f} "
                  f"{row['distributions_s']:10.2f} {row['ratio']:7.3f} "
                  f"{row['min_coverage']:8.4f}", flush=True)
    finally:
        backend.close()
    total_gen = sum(r["generate_s"] for r in rows_out)
    total_dist = sum(r["distributions_s"] for r in rows_out)
    figures = {"judge": name, "rubrics": rows_out, "generate_s": round(total_gen, 3),
               "distributions_s": round(total_dist, 3),
               "ratio": round(total_dist / total_gen, 4)}
    print(f"all rubrics: distributions took {total_dist:.2f} s next to {total_gen:.2f} s of "
          f"generation: {figures['ratio']:.3f}x")
    print(f"re-run: {rerun_command(None if argv is None else [__file__, *argv])}")
    print_figures(figures)
    return figures


if __name__ == "__main__":
    main()
