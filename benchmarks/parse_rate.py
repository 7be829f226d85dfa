"""How often does a constrained verdict fail to parse? Random-weight judge, all rubrics.

Re-run:  EVALUATOR_CACHE=.cache/evaluator .venv/bin/python benchmarks/parse_rate.py [--batches N]

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
    parser.add_argument("--batches", type=int, default=5, help="batches per rubric (first greedy)")
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()
    backend = load_backend("tiny-random", JudgeSpec(backend="tiny-random", device="cpu"))
    total = bad = 0
    print(f"{'rubric':28} {'gens':>5} {'invalid':>7} {'length':>6} {'tokens':>7} {'seconds':>8}")
    for name in RUBRICS:
        rubric = load_rubric(name)
        rows = [json.loads(x) for x in (ROOT / "examples" / f"{name}.jsonl").read_text().splitlines()]
        chats = [render_messages(rubric, rows[i % len(rows)]) for i in range(args.batch_size)]
        schema = output_json_schema(rubric)
        text = json.dumps(schema, separators=(",", ":"))
        model = build_output_model(rubric)
        gens, invalid, length, tokens, seconds = 0, 0, 0, 0, 0.0
        for batch in range(args.batches):
            sampling = Sampling(max_new_tokens=max_new_tokens(schema),
                                temperature=0.0 if batch == 0 else 1.0, seed=batch)
            started = time.perf_counter()
            outputs = backend.generate(chats, text, sampling, rubric.chat_template_kwargs)
            seconds += time.perf_counter() - started
            for out in outputs:
                gens += 1
                tokens += out.completion_tokens or 0
                length += out.finish_reason == "length"
                try:
                    model.model_validate_json(out.text or "")
                except ValueError:
                    invalid += 1
        total += gens
        bad += invalid
        print(f"{name:28} {gens:5d} {invalid:7d} {length:6d} {tokens / gens:7.0f} {seconds:8.1f}")
    print(f"total: {total} generations, {bad} invalid")


if __name__ == "__main__":
    main()
