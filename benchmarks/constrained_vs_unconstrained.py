"""What does guaranteed parsing cost? The same engine, model, cases and number of generated
tokens, with and without the outlines schema constraint.

transformers backend (CPU): each batch (the judge's batch size) of the cases' prompts, as the
backend tokenizes them, is generated greedily twice:

- constrained: the backend's compiled outlines logits processor for the rubric's schema,
  ``max_new_tokens`` the schema's budget; the batch runs until its last verdict ends, T steps;
- unconstrained: no processor, ``min_new_tokens == max_new_tokens == T`` (end-of-sequence
  suppressed), so both make exactly T forward passes over the same batch (checked by
  counting the model's forward calls).

The two are interleaved batch by batch and repeated; the figure is the median over repeats
of unconstrained seconds / constrained seconds (1.0: the constraint is free). The one-off
schema compile is done before timing (``schema_compile.py`` measures it).

Re-run:

    EVALUATOR_CACHE=.cache/evaluator PYTHONPATH=. .venv/bin/python \\
        benchmarks/constrained_vs_unconstrained.py [--judge tiny-random|smollm2-135m-instruct] \\
        [--cases N] [--repeats R] [--quick]

Prints per repeat the seconds of each and the ratio, the steps and forward time, then a
``figures:`` JSON line. Counts and timings only, never case text.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_common import (  # noqa: E402
    ForwardClock,
    cycle_rows,
    load_rows,
    median,
    print_figures,
    print_machine,
    rerun_command,
    set_threads,
)

from evaluator.judges import resolve_judge  # noqa: E402
from evaluator.render import render_messages  # noqa: E402
from evaluator.rubric import load_rubric  # noqa: E402
from evaluator.schema import build_output_model, max_new_tokens, output_json_schema  # noqa: E402

DEFAULT_CASES = {"tiny-random": 16, "smollm2-135m-instruct": 2}


def generate(backend, prompts: list[list[int]], max_new: int, *, min_new: int = 0,
             processor=None):
    """One greedy ``model.generate`` over a left-padded batch, as the backend calls it;
    returns (seconds, new-token rows)."""
    import torch
    from transformers import LogitsProcessorList

    batch = backend.tokenizer.pad({"input_ids": prompts}, padding=True, return_tensors="pt")
    options = {"max_new_tokens": max_new, "eos_token_id": backend.eos_token_id,
               "pad_token_id": backend.tokenizer.pad_token_id, "do_sample": False,
               "temperature": None, "top_p": None, "top_k": None}
    if processor is not None:
        processor.reset()
        options["logits_processor"] = LogitsProcessorList([processor])
    if min_new:
        options["min_new_tokens"] = min_new
    started = time.perf_counter()
    with torch.inference_mode():
        output = backend.model.generate(**batch, **options)
    seconds = time.perf_counter() - started
    return seconds, output[:, batch["input_ids"].shape[1]:].tolist()


def count_valid(backend, rows: list[list[int]], output_model) -> int:
    """Rows whose text up to end-of-sequence validates against the output model."""
    valid = 0
    for row in rows:
        if backend.eos_token_id in row:
            row = row[:row.index(backend.eos_token_id)]
        try:
            output_model.model_validate_json(backend.tokenizer.decode(row,
                                                                      skip_special_tokens=True))
        except ValueError:
            continue
        valid += 1
    return valid


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judge", default="tiny-random",
                        help="a transformers judge in models.yaml (tiny-random, "
                             "smollm2-135m-instruct)")
    parser.add_argument("--rubric", default="trial_eligibility")
    parser.add_argument("--cases", type=int, default=None,
                        help="cases (default: 16 for tiny-random, 2 for the default judge)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=None,
                        help="override the judge's batch size")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: default)")
    parser.add_argument("--data", type=Path, default=None, help="folder of the dev data")
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: tiny-random, drug_monograph_similarity (synthetic "
                             "examples), 2 cases, 1 repeat")
    args = parser.parse_args(argv)
    if args.quick:
        args.judge, args.rubric, args.cases, args.repeats = ("tiny-random",
                                                             "drug_monograph_similarity", 2, 1)
    threads = set_threads(args.threads or None)
    from evaluator.backends import load_backend

    print_machine(threads)
    name, spec = resolve_judge(args.judge)
    if spec.backend not in ("transformers", "tiny-random"):
        parser.error(f"judge {name!r} is not a transformers judge")
    size = args.batch_size or spec.batch_size
    cases = args.cases or DEFAULT_CASES.get(name, size)
    rubric = load_rubric(args.rubric)
    schema = output_json_schema(rubric)
    schema_text = json.dumps(schema, separators=(",", ":"))
    budget = max_new_tokens(schema)
    output_model = build_output_model(rubric)
    template_kwargs = {**spec.chat_template_kwargs, **rubric.chat_template_kwargs}
    source, rows = load_rows(rubric.name, args.data)

    backend = load_backend(name, spec)
    prompts = [backend.render(render_messages(rubric, {k: str(row.get(k) or "")
                                                       for k in rubric.inputs},
                                              system_role=spec.system_role), template_kwargs)
               for row in cycle_rows(rows, cases)]
    batches = [prompts[i:i + size] for i in range(0, len(prompts), size)]
    started = time.perf_counter()
    processor = backend._processor(schema_text)  # compiled once, as in a run
    compile_s = time.perf_counter() - started
    print(f"judge {name}: rubric {rubric.name}, {cases} case(s) from {source.name} in "
          f"{len(batches)} batch(es) of up to {size}; prompt tokens "
          f"{min(map(len, prompts))}-{max(map(len, prompts))}; schema compiled in "
          f"{compile_s:.1f} s (not timed below)", flush=True)
    generate(backend, batches[0][:1], 2)  # torch's first-call cost, outside the timings

    clock = ForwardClock(backend.model)
    print(f"{'repeat':>6} {'steps':>6} {'constrained s':>13} {'unconstrained s':>15} "
          f"{'ratio':>6} {'fwd share c/u':>13}", flush=True)
    ratios, con_rates, unc_rates = [], [], []
    valid_con = valid_unc = generated = 0
    con_fwd_total = unc_fwd_total = con_total = unc_total = 0.0
    for repeat in range(args.repeats):
        con_s = unc_s = con_fwd = unc_fwd = 0.0
        steps = 0
        for batch in batches:
            clock.take()
            seconds, out = generate(backend, batch, budget, processor=processor)
            con_calls, fwd = clock.take()
            con_s += seconds
            con_fwd += fwd
            width = len(out[0])
            valid_con += count_valid(backend, out, output_model)
            seconds, out_u = generate(backend, batch, width, min_new=width)
            unc_calls, fwd = clock.take()
            unc_s += seconds
            unc_fwd += fwd
            valid_unc += count_valid(backend, out_u, output_model)
            if len(out_u[0]) != width or unc_calls != con_calls:
                raise SystemExit(f"lengths differ: constrained {width} steps / {con_calls} "
                                 f"forward calls, unconstrained {len(out_u[0])} / {unc_calls}")
            steps += width
            generated += len(batch)
        ratios.append(unc_s / con_s)
        con_rates.append(cases / con_s)
        unc_rates.append(cases / unc_s)
        con_fwd_total += con_fwd
        unc_fwd_total += unc_fwd
        con_total += con_s
        unc_total += unc_s
        print(f"{repeat + 1:>6} {steps:>6} {con_s:13.2f} {unc_s:15.2f} {unc_s / con_s:6.2f} "
              f"{100 * con_fwd / con_s:5.0f}%/{100 * unc_fwd / unc_s:.0f}%", flush=True)
    clock.remove()
    backend.close()

    figures = {
        "engine": "transformers", "judge": name, "rubric": rubric.name, "cases": cases,
        "batch_size": size, "repeats": args.repeats, "threads": threads,
        "steps_per_repeat": steps,
        "constrained_cases_per_s": round(median(con_rates), 4),
        "unconstrained_cases_per_s": round(median(unc_rates), 4),
        "ratio": round(median(ratios), 3),
        "constrained_valid_rate": round(valid_con / generated, 4),
        "unconstrained_valid_rate": round(valid_unc / generated, 4),
        "constrained_forward_share": round(con_fwd_total / con_total, 3),
        "unconstrained_forward_share": round(unc_fwd_total / unc_total, 3),
        "schema_compile_s": round(compile_s, 2),
    }
    print(f"median: constrained {figures['constrained_cases_per_s']:.3f} cases/s, unconstrained "
          f"{figures['unconstrained_cases_per_s']:.3f} cases/s, same {steps} steps per repeat: "
          f"constrained runs at {figures['ratio']:.2f}x the unconstrained speed "
          "(target >= 0.9x)")
    print(f"verdicts that parse: constrained {valid_con}/{generated}, unconstrained "
          f"{valid_unc}/{generated} (its length is forced, so it is not expected to)")
    print(f"re-run: {rerun_command(None if argv is None else [__file__, *argv])}")
    print_figures(figures)
    return figures


if __name__ == "__main__":
    main()
