"""How often does a constrained verdict fail to parse? Random-weight judge, all rubrics.

Re-run:  .venv/bin/python benchmarks/parse_rate.py [--batches N]
             [--batch-size N] [--first-batch K]
         (--first-batch continues a stopped run with new seeds: batch K's seed is K, and only
         batch 0 is greedy, so runs over disjoint batch ranges add up to one larger run)

Prints, per built-in rubric: generations, invalid verdicts, stops on the token limit,
mean completion tokens and generation wall time. Case text is never printed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evaluator.judges.backends import Sampling, load_backend  # noqa: E402
from evaluator.judges.models_file import JudgeSpec  # noqa: E402
from evaluator.rubrics.load import load_rubric  # noqa: E402
from evaluator.rubrics.render import render_messages  # noqa: E402
from evaluator.rubrics.schema import build_output_model, max_new_tokens, output_json_schema  # noqa: E402

RUBRICS = ("trial_eligibility", "drug_monograph_similarity", "pathology_report",
           "ecg_interpretation")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=5,
                        help="batches per rubric (the first greedy, the rest sampled)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--first-batch", type=int, default=0,
                        help="index of the first batch (its seed); 0 is the greedy one")
    args = parser.parse_args()
    backend = load_backend("tiny-random", JudgeSpec(backend="tiny-random", device="cpu"))
    setups = {}
    for name in RUBRICS:
        rubric = load_rubric(name)
        rows = [json.loads(x) for x in
                (ROOT / "examples" / f"{name}.jsonl").read_text().splitlines()]
        schema = output_json_schema(rubric)
        setups[name] = (rubric, [render_messages(rubric, rows[i % len(rows)])
                                 for i in range(args.batch_size)],
                        schema, json.dumps(schema, separators=(",", ":")),
                        build_output_model(rubric))
    totals = {name: [0, 0, 0, 0, 0.0] for name in RUBRICS}  # gens invalid length tokens s
    print(f"{'batch':>5} {'rubric':28} {'gens':>5} {'invalid':>7} {'length':>6} "
          f"{'tokens':>7} {'seconds':>8}", flush=True)
    # Rubrics take turns batch by batch, so a run stopped early still covers all four.
    for batch in range(args.first_batch, args.first_batch + args.batches):
        for name in RUBRICS:
            rubric, chats, schema, text, model = setups[name]
            sampling = Sampling(max_new_tokens=max_new_tokens(schema),
                                temperature=0.0 if batch == 0 else 1.0, seed=batch)
            started = time.perf_counter()
            outputs = backend.generate(chats, text, sampling, rubric.chat_template_kwargs)
            seconds = time.perf_counter() - started
            gens = invalid = length = tokens = 0
            for out in outputs:
                gens += 1
                tokens += out.completion_tokens or 0
                length += out.finish_reason == "length"
                try:
                    model.model_validate_json(out.text or "")
                except ValueError:
                    invalid += 1
            for i, value in enumerate((gens, invalid, length, tokens, seconds)):
                totals[name][i] += value
            print(f"{batch:5d} {name:28} {gens:5d} {invalid:7d} {length:6d} "
                  f"{tokens / gens:7.0f} {seconds:8.1f}", flush=True)
    print("totals:")
    for name, (gens, invalid, length, tokens, seconds) in totals.items():
        print(f"      {name:28} {gens:5d} {invalid:7d} {length:6d} {tokens / gens:7.0f} "
              f"{seconds:8.1f}")
    print(f"total: {sum(t[0] for t in totals.values())} generations, "
          f"{sum(t[1] for t in totals.values())} invalid, "
          f"{sum(t[2] for t in totals.values())} stopped on the token limit")


if __name__ == "__main__":
    main()
