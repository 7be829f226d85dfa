"""Batched, constrained judging vs the common hand-written per-case loop, on the same cases.

(a) evaluator: ``evaluate()`` on a JSONL file, with the judge's batch size from models.yaml
    (tiny-random 16, the default judge 1) and one compiled schema per rubric; it reads and
    validates the input, writes every record, the manifest and the summary.
(b) the loop people write by hand: for each case, ``model.generate`` unconstrained with
    transformers (the same model object, the same chat prompt, greedy, the same
    ``max_new_tokens``), the first ``{...}`` span pulled out with a regex and validated against
    the rubric's pydantic output model (``evaluator.rubrics.schema.build_output_model``); on failure
    up to ``--retries`` more attempts, sampled (temperature 0.7, seeded per case and attempt).

Both use one loaded model; model loading and the one-off schema compile (a warm-up run, its
time printed) are outside the timings. They are interleaved in rounds: (a) on all the cases,
(b) on the next ``--loop-chunk`` of them, (a) again, ... ending with (a); each round's ratio
compares (b)'s cases/s with the mean of the (a) runs on either side, and the median over
rounds is reported, so load from other processes on the machine hits both.

Re-run (cases from ../shared/data/ for trial_eligibility, else examples/):

    PYTHONPATH=. .venv/bin/python benchmarks/batched_vs_loop.py \\
        [--judge tiny-random|smollm2-135m-instruct] [--cases N] [--loop-chunk K] [--quick]

Prints per round the seconds and cases/s of each, then the medians, the ratio and the loop's
parse-failure rate (first try, after retries), and a ``figures:`` JSON line. Case ids and
counts only, never case text.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_common import (  # noqa: E402
    cycle_rows,
    describe_source,
    load_rows,
    median,
    print_figures,
    print_machine,
    rerun_command,
    set_threads,
    write_jsonl,
)

from evaluator.data.results import read_results  # noqa: E402
from evaluator.judges.models_file import resolve_judge  # noqa: E402
from evaluator.rubrics.load import load_rubric  # noqa: E402
from evaluator.rubrics.render import render_messages  # noqa: E402
from evaluator.rubrics.schema import build_output_model, max_new_tokens, output_json_schema  # noqa: E402

# What hand-written judge loops do: the outermost braces, across lines.
JSON_SPAN = re.compile(r"\{.*\}", re.DOTALL)
RETRY_TEMPERATURE = 0.7
DEFAULT_CASES = {"tiny-random": 16, "smollm2-135m-instruct": 1}


def parses(text: str, output_model: type) -> bool:
    """True when the text holds a ``{...}`` span that validates against the output model."""
    match = JSON_SPAN.search(text)
    if match is None:
        return False
    try:
        output_model.model_validate_json(match.group(0))
    except ValueError:  # pydantic's ValidationError is a ValueError
        return False
    return True


def loop_case(model, tokenizer, chat, template_kwargs, output_model, budget: int,
              retries: int, seed: int) -> tuple[bool, bool, int, int]:
    """Judge one case the hand-written way: (first try parsed, parsed in the end, attempts,
    tokens generated)."""
    import torch

    encoded = tokenizer.apply_chat_template([dict(m) for m in chat], add_generation_prompt=True,
                                            return_tensors="pt", return_dict=True,
                                            **template_kwargs)
    encoded = {key: value.to(model.device) for key, value in encoded.items()}
    start = encoded["input_ids"].shape[1]
    tokens = 0
    first = False
    for attempt in range(retries + 1):
        options = {"max_new_tokens": budget, "eos_token_id": tokenizer.eos_token_id,
                   "pad_token_id": tokenizer.pad_token_id}
        if attempt == 0:
            options.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        else:
            torch.manual_seed(seed * 100 + attempt)
            options.update(do_sample=True, temperature=RETRY_TEMPERATURE, top_p=1.0, top_k=0)
        with torch.inference_mode():
            output = model.generate(**encoded, **options)
        new = output[0, start:]
        tokens += int(new.numel())
        ok = parses(tokenizer.decode(new, skip_special_tokens=True), output_model)
        if attempt == 0:
            first = ok
        if ok:
            return first, True, attempt + 1, tokens
    return first, False, retries + 1, tokens


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=Path, default=None,
                        help="models.yaml that defines --judge (default: the project's; "
                        "random_judge.py writes one for a random judge of a real shape)")
    parser.add_argument("--judge", default="tiny-random",
                        help="a judge in models.yaml (tiny-random, smollm2-135m-instruct)")
    parser.add_argument("--rubric", default="trial_eligibility")
    parser.add_argument("--cases", type=int, default=None,
                        help="cases (default: 16 for tiny-random, 1 for the default judge, "
                             "whose loop takes minutes per case)")
    parser.add_argument("--loop-chunk", type=int, default=4,
                        help="cases of (b) per round, between two (a) runs")
    parser.add_argument("--repeats", type=int, default=1, help="passes of (b) over the cases")
    parser.add_argument("--retries", type=int, default=3, help="loop retries after a failure")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="override the judge's batch size for (a)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: default)")
    parser.add_argument("--data", type=Path, default=None, help="folder of the dev data")
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: tiny-random, drug_monograph_similarity (synthetic "
                             "examples), 1 case, 1 retry")
    args = parser.parse_args(argv)
    if args.quick:
        args.judge, args.rubric = "tiny-random", "drug_monograph_similarity"
        args.cases, args.loop_chunk, args.repeats, args.retries = 1, 1, 1, 1
    cases = args.cases or DEFAULT_CASES.get(args.judge, 4)

    threads = set_threads(args.threads or None)
    import torch  # noqa: F401  (after the thread setting)

    from evaluator import Judge, RunOptions, Task, evaluate
    from evaluator.judges.backends import load_backend

    print_machine(threads)
    name, spec = resolve_judge(args.judge, args.models)
    if args.batch_size:
        spec = spec.model_copy(update={"batch_size": args.batch_size})
    rubric = load_rubric(args.rubric)
    schema = output_json_schema(rubric)
    budget = max_new_tokens(schema)
    output_model = build_output_model(rubric)
    template_kwargs = {**spec.chat_template_kwargs, **rubric.chat_template_kwargs}
    source, rows = load_rows(rubric.name, args.data)
    selected = cycle_rows(rows, cases)

    started = time.perf_counter()
    backend = load_backend(name, spec)
    load_s = time.perf_counter() - started
    model, tokenizer = backend.model, backend.tokenizer
    print(f"judge {name}: loaded in {load_s:.1f} s; rubric {rubric.name}: {cases} case(s) from "
          f"{describe_source(rubric.name, source, rows, args.data)}, max_new_tokens {budget}; (a) batch size {spec.batch_size}; "
          f"(b) retries {args.retries}", flush=True)

    with tempfile.TemporaryDirectory(prefix="bench-batched-") as tmp:
        folder = Path(tmp)
        cases_path = write_jsonl(folder / "cases.jsonl", selected)
        warm_path = write_jsonl(folder / "warm.jsonl", selected[:1])
        chats = [render_messages(rubric, {k: str(row.get(k) or "") for k in rubric.inputs},
                                 system_role=spec.system_role) for row in selected]

        # Warm-up: (a) compiles the rubric's schema once (kept by the backend for the run,
        # as in a real run); (b) one short generate so torch's first-call cost is paid.
        started = time.perf_counter()
        evaluate(Task(rubric, warm_path), Judge(name, spec=spec, backend=backend),
                 RunOptions(folder / "warm-out.jsonl"))
        warm_s = time.perf_counter() - started
        loop_case(model, tokenizer, chats[0], template_kwargs, output_model, 4, 0, 0)
        print(f"warm-up: (a) one case incl. the schema compile {warm_s:.1f} s", flush=True)

        a_runs: list[float] = []
        batched_ok = batched_tokens = batched_n = 0

        def run_batched() -> None:
            nonlocal batched_ok, batched_tokens, batched_n
            started = time.perf_counter()
            result = evaluate(Task(rubric, cases_path), Judge(name, spec=spec, backend=backend),
                              RunOptions(folder / f"batched-{len(a_runs)}.jsonl"))
            a_runs.append(time.perf_counter() - started)
            batched_ok += result.summary.status_counts.get("ok", 0)
            batched_n += cases
            batched_tokens += sum(r.completion_tokens or 0
                                  for r in read_results(result.results_path))

        # Rounds: (a) on all the cases, then (b) on the next chunk of them, ... ending with
        # (a); each chunk of the slow loop is compared with the (a) runs on either side.
        chunks = [list(range(i, min(i + args.loop_chunk, cases)))
                  for _ in range(args.repeats) for i in range(0, cases, args.loop_chunk)]
        print(f"{'round':>5} {'(a) s':>7} {'(b) cases':>9} {'(b) s':>8} {'(a) cases/s':>11} "
              f"{'(b) cases/s':>11} {'ratio':>7}", flush=True)
        run_batched()
        a_rates, b_rates, ratios = [], [], []
        first_fail = final_fail = attempts = loop_tokens = loop_n = 0
        for number, chunk in enumerate(chunks, 1):
            started = time.perf_counter()
            for index in chunk:
                first, final, used, tokens = loop_case(model, tokenizer, chats[index],
                                                       template_kwargs, output_model, budget,
                                                       args.retries, seed=index)
                first_fail += not first
                final_fail += not final
                attempts += used
                loop_tokens += tokens
                loop_n += 1
            b_s = time.perf_counter() - started
            run_batched()
            a_rate = cases / ((a_runs[-2] + a_runs[-1]) / 2)
            b_rate = len(chunk) / b_s
            a_rates.append(a_rate)
            b_rates.append(b_rate)
            ratios.append(a_rate / b_rate)
            print(f"{number:>5} {a_runs[-2]:7.1f} {len(chunk):>9} {b_s:8.1f} {a_rate:11.3f} "
                  f"{b_rate:11.3f} {a_rate / b_rate:6.1f}x", flush=True)
        print(f"{'':>5} {a_runs[-1]:7.1f}", flush=True)
    backend.close()

    figures = {
        "judge": name, "rubric": rubric.name, "cases": cases, "repeats": args.repeats,
        "rounds": len(chunks),
        "batch_size": spec.batch_size, "max_new_tokens": budget, "retries": args.retries,
        "threads": threads,
        "batched_cases_per_s": round(median(a_rates), 4),
        "loop_cases_per_s": round(median(b_rates), 4),
        "ratio": round(median(ratios), 2),
        "batched_ok_rate": round(batched_ok / batched_n, 4),
        "loop_first_try_failure_rate": round(first_fail / loop_n, 4),
        "loop_failure_rate_after_retries": round(final_fail / loop_n, 4),
        "loop_mean_attempts": round(attempts / loop_n, 2),
        "batched_mean_tokens": round(batched_tokens / batched_n, 1),
        "loop_mean_tokens": round(loop_tokens / loop_n, 1),
        "warmup_with_compile_s": round(warm_s, 2),
    }
    print(f"median: (a) evaluator {figures['batched_cases_per_s']:.3f} cases/s, "
          f"(b) loop {figures['loop_cases_per_s']:.3f} cases/s: batched is "
          f"{figures['ratio']:.1f}x the loop (target >= 5x on CPU)")
    print(f"(a) verdicts ok: {batched_ok}/{batched_n}; mean completion tokens "
          f"{figures['batched_mean_tokens']:.0f}")
    print(f"(b) parse failures: first try {first_fail}/{loop_n} "
          f"({100 * first_fail / loop_n:.0f}%), after up to {args.retries} retries "
          f"{final_fail}/{loop_n} ({100 * final_fail / loop_n:.0f}%); mean attempts "
          f"{figures['loop_mean_attempts']}, mean tokens generated per case "
          f"{figures['loop_mean_tokens']:.0f}")
    print(f"re-run: {rerun_command(None if argv is None else [__file__, *argv])}")
    print_figures(figures)
    return figures


if __name__ == "__main__":
    main()
