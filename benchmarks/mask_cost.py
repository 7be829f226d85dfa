"""What does the constraint cost per decode step: the batch's mask filled and applied?

``BatchConstraint`` (``evaluator/judges/backends/constraint.py``) is the transformers
backend's logits processor: one llguidance ``LLMatcher`` per row; at each step all rows'
bitmasks are filled in one call (``fill_next_token_bitmask_par``) and applied to the logits
in one more. This script drives it without a model, so nothing else is timed:

- one valid verdict per row, built from the rubric's schema (enum values and ASCII filler
  explanations that differ from row to row: never case text), tokenized with the judge's
  tokenizer as a model would write it, then the end-of-sequence token;
- every row's matcher consumes its row's tokens step by step (not timed); at each step the
  batch's mask is filled and applied to a ``(batch, vocabulary)`` float32 logits tensor with
  ``constraint.apply_on_cpu`` (timed: exactly what the processor adds to a decode step on
  CPU). Rows that end early stay in the batch, as in ``model.generate``;
- for comparison, llguidance's own CPU kernel (``apply_token_bitmask_inplace``, which
  expands the bits with ``repeat_interleave``: what the processor ran before) on a copy of
  the logits, checked equal; not timed in the total;
- every token is checked against the mask before it is consumed (a token the mask forbids
  stops the script), and every row must end accepted.

Reported per tokenizer and batch size: the median and mean milliseconds per step for the
batch (fill + apply; and the mean of each, and of llguidance's apply), and per row (the batch's mean divided by the
batch size: the figure the target is about). The whole sequence is
repeated ``--repeats`` times with fresh matchers.

Re-run:  PYTHONPATH=. .venv/bin/python \\
             benchmarks/mask_cost.py [--tokenizer DIR ...] [--rubric NAME] [--batch 1,16]
             [--repeats N] [--fill-threads 1,2] [--quick]
         (default: the embedded judge's tokenizer, ecg_interpretation, batches 1 and 16;
         seconds)

Prints one line per tokenizer, batch size and fill-thread count, then a ``figures:`` JSON
line (``worst_ms_per_row_at_largest_batch`` maps each fill-thread count to its worst row
cost; ``batches`` is keyed ``"16"``, or ``"16/fill2"`` when several counts are compared).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_common import print_figures, print_machine, rerun_command, set_threads, tokenizer_folders

from evaluator.judges.offline import force_offline
from evaluator.rubrics.load import load_rubric
from evaluator.rubrics.schema import output_json_schema

TARGET_MS_PER_ROW = 0.1
# Filler for explanations: generic ASCII prose, no case text.
FILLER = ("Sinus rhythm at a normal rate; the axis and the PR, QRS and QT intervals are within "
          "normal limits. No ST elevation or depression; T waves upright in most leads. The "
          "answer names the key findings but omits the comparison with a prior tracing. ")
_PATTERN = re.compile(r"\{(\d+),(\d+)\}\$$")


def _resolve(node: dict, root: dict) -> dict:
    ref = node.get("$ref")
    if ref:
        return _resolve(root["$defs"][ref.rsplit("/", 1)[1]], root)
    return node


def verdict(node: dict, root: dict, seed: int) -> object:
    """A valid value for a schema node (the rubric schemas' subset: objects, enums, bounded
    strings and lists); ``seed`` varies the choices and the text length."""
    node = _resolve(node, root)
    if "enum" in node:
        return node["enum"][seed % len(node["enum"])]
    kind = node.get("type")
    if kind == "object":
        return {key: verdict(sub, root, seed + i)
                for i, (key, sub) in enumerate(node["properties"].items())}
    if kind == "array":
        low, high = node.get("minItems", 0), node["maxItems"]
        count = min(high, max(low, 1 + seed % 2))
        return [verdict(node["items"], root, seed + i) for i in range(count)]
    if kind == "string":
        match = _PATTERN.search(node.get("pattern", ""))
        low, high = (int(match.group(1)), int(match.group(2))) if match else (0, 80)
        length = max(low, min(high, 40 + 23 * (seed % 7)))
        start = (17 * seed) % len(FILLER)
        return ((FILLER[start:] + FILLER) * 4)[:length].strip() or "x" * max(low, 1)
    if kind == "integer":
        return node.get("minimum", 0)
    if kind == "boolean":
        return bool(seed % 2)
    raise SystemExit(f"mask_cost.py cannot build a value for schema node {node}")


def row_tokens(hf_tokenizer, schema: dict, seed: int, eos: int) -> list[int]:
    """One valid verdict for the rubric, compact JSON, as token ids, then end of sequence."""
    text = json.dumps(verdict(schema, schema, seed), separators=(",", ":"),
                      ensure_ascii=False)
    return list(hf_tokenizer.encode(text, add_special_tokens=False)) + [eos]


def run_batch(constraint, rows: list[list[int]],
              vocabulary: int) -> list[tuple[float, float, float]]:
    """Seconds of (fill, our apply, llguidance's apply) at each step of one pass over
    ``rows`` (fresh matchers)."""
    import torch
    from llguidance.torch import apply_token_bitmask_inplace

    from evaluator.judges.backends.constraint import apply_on_cpu, mask_allows

    batch = len(rows)
    steps = max(map(len, rows))
    scores = torch.zeros(batch, vocabulary, dtype=torch.float32)
    eos = constraint.tokenizer.eos_token
    constraint.reset()
    constraint.start(batch)
    times = []
    for step in range(steps):
        if step:
            constraint.advance([row[step - 1] if step - 1 < len(row) else eos for row in rows])
        scores.normal_()
        other = scores.clone()
        started = time.perf_counter()
        mask = constraint.fill()
        filled = time.perf_counter()
        apply_on_cpu(scores, mask)
        applied = time.perf_counter()
        apply_token_bitmask_inplace(other, mask)
        times.append((filled - started, applied - filled, time.perf_counter() - applied))
        if not torch.equal(scores, other):
            raise SystemExit("our apply differs from llguidance's")
        for number, row in enumerate(rows):
            if step < len(row) and not mask_allows(mask[number], row[step]):
                raise SystemExit(f"row {number}: the mask forbids the verdict's token at step "
                                 f"{step}")
    constraint.advance([row[steps - 1] if steps - 1 < len(row) else eos for row in rows])
    for number, matcher in enumerate(constraint.matchers):
        if not matcher.is_stopped() or matcher.is_error():
            raise SystemExit(f"row {number} did not end accepted")
    return times


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer", type=Path, action="append", default=None,
                        metavar="DIR", help="a folder with a Hugging Face tokenizer; "
                        "repeatable (default: the embedded judge's)")
    parser.add_argument("--rubric", default="ecg_interpretation")
    parser.add_argument("--batch", default="1,16", help="batch sizes, comma-separated")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: default)")
    parser.add_argument("--fill-threads", default="0",
                        help="llguidance fill threads, comma-separated to compare in one run "
                        "(0, the default: llguidance's own, 80%% of the cores up to 32; the "
                        "transformers backend uses the CPUs its model leaves free: "
                        "evaluator/judges/backends/fill_threads.py)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: the tiny-random model's tokenizer, one repeat")
    args = parser.parse_args(argv)
    force_offline()
    if args.quick:
        args.repeats = 1
    threads = set_threads(args.threads or None)
    folders = tokenizer_folders(args.tokenizer, args.quick)
    batches = [int(b) for b in args.batch.split(",")]
    fill_counts = [int(t) for t in args.fill_threads.split(",")]

    from llguidance import LLExecutor
    from transformers import AutoTokenizer

    from evaluator.judges.backends.constraint import BatchConstraint
    from evaluator.judges.backends.grammar import build_grammar
    from evaluator.judges.backends.llg_tokenizer import from_hf

    print_machine(threads)
    schema = output_json_schema(load_rubric(args.rubric))
    grammar = build_grammar(schema)
    figures: dict = {"rubric": args.rubric, "repeats": args.repeats, "threads": threads,
                     "target_ms_per_row": TARGET_MS_PER_ROW, "tokenizers": {}}
    print(f"rubric {args.rubric}; {'tokenizer':24} {'vocab':>7} {'batch':>5} {'fill thr':>8} {'steps':>5} "
          f"{'median ms/step':>14} {'mean ms/step':>12} {'ms/row':>7} {'fill ms':>7} "
          f"{'apply ms':>8} {'llg apply':>9}", flush=True)
    for folder in folders:
        hf_tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True,
                                                     trust_remote_code=False)
        llg_tokenizer = from_hf(hf_tokenizer, folder)
        label = folder.name if folder.name != "models" else folder.parent.parent.name
        result = {"vocabulary": llg_tokenizer.vocab_size, "batches": {}}
        for batch, fill_threads in ((b, t) for b in batches for t in fill_counts):
            constraint = BatchConstraint(grammar, llg_tokenizer,
                                         LLExecutor(fill_threads) if fill_threads else None)
            key = str(batch) if len(fill_counts) == 1 else f"{batch}/fill{fill_threads}"
            rows = [row_tokens(hf_tokenizer, schema, seed, llg_tokenizer.eos_token)
                    for seed in range(batch)]
            parts = []
            for _ in range(args.repeats):
                parts += run_batch(constraint, rows, llg_tokenizer.vocab_size)
            times = [fill + apply for fill, apply, _ in parts]
            steps = max(map(len, rows))
            med, mean = 1000 * statistics.median(times), 1000 * statistics.fmean(times)
            fill_ms = 1000 * statistics.fmean(p[0] for p in parts)
            apply_ms = 1000 * statistics.fmean(p[1] for p in parts)
            llg_apply_ms = 1000 * statistics.fmean(p[2] for p in parts)
            result["batches"][key] = {
                "batch": batch, "fill_threads": fill_threads,
                "steps": steps, "tokens": sum(map(len, rows)),
                "median_ms_per_step": round(med, 4), "mean_ms_per_step": round(mean, 4),
                "fill_ms_per_step": round(fill_ms, 4), "apply_ms_per_step": round(apply_ms, 4),
                "llguidance_apply_ms_per_step": round(llg_apply_ms, 4),
                "ms_per_row_with_llguidance_apply": round((fill_ms + llg_apply_ms) / batch, 4),
                "ms_per_row": round(mean / batch, 4),
                "median_ms_per_row": round(med / batch, 4)}
            print(f"{'':{len(args.rubric) + 9}}{label:24} {llg_tokenizer.vocab_size:>7} "
                  f"{batch:>5} {fill_threads or 'default':>8} {steps:>5} {med:14.4f} {mean:12.4f} {mean / batch:7.4f} "
                  f"{fill_ms:7.4f} {apply_ms:8.4f} {llg_apply_ms:9.4f}", flush=True)
        figures["tokenizers"][label] = result
    for fill_threads in fill_counts:
        worst = max(b["ms_per_row"] for t in figures["tokenizers"].values()
                    for b in t["batches"].values()
                    if b["batch"] == max(batches) and b["fill_threads"] == fill_threads)
        figures.setdefault("worst_ms_per_row_at_largest_batch", {})[
            str(fill_threads or "default")] = worst
        print(f"worst mean per row at batch {max(batches)}, fill threads "
              f"{fill_threads or 'default'}: {worst:.4f} ms (target <= {TARGET_MS_PER_ROW} ms "
              f"at batch 16: {'met' if worst <= TARGET_MS_PER_ROW else 'NOT met'})")
    print(f"re-run: {rerun_command(None if argv is None else [__file__, *argv])}")
    print_figures(figures)
    return figures


if __name__ == "__main__":
    main()
