"""How long does building the decoding constraint take, per built-in rubric: cold and cached?

The constraint is the regex outlines-core compiles from a rubric's JSON schema into an index
over the judge's vocabulary (the CPU path builds it through ``outlines.Generator`` in
``TransformersBackend._processor``; vLLM's outlines backend builds the same index from the same
regex). It grows with the vocabulary. The issue asks for a Gemma tokenizer; there are no Gemma
weights offline here, so the default is the embedded judge's (SmolLM2, 49k tokens).

Per rubric:

- cold: the backend's first build in the process (vocabulary + regex + index);
- cached: the backend's second build in the same process (``TransformersBackend`` keeps one
  processor per schema for its lifetime: a run compiles each rubric once);
- rebuilt: ``outlines.Generator`` again in the same process: outlines 1.3.3 keeps no cache of
  its own, in memory or on disk, on this path, so it compiles again;
- new process: the first build in a fresh process (a second run); cold again, since nothing
  is cached on disk;
- from bytes: unpickling the compiled ``outlines_core.Index`` (it is picklable), i.e. what
  an on-disk cache of the index would cost instead of a cold build (not implemented).

Re-run:  EVALUATOR_CACHE=.cache/evaluator PYTHONPATH=. .venv/bin/python \\
             benchmarks/schema_compile.py [--model-path DIR] [--rubrics a,b] [--quick]
             [--no-new-process]
         (default: the embedded judge, SmolLM2, 49k vocabulary; about 5 minutes on 2 cores)

Prints, per rubric, the seconds of each, then a ``figures:`` JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_common import print_figures, print_machine, rerun_command, set_threads  # noqa: E402

from evaluator.judges.offline import force_offline  # noqa: E402
from evaluator.rubrics.load import load_rubric  # noqa: E402
from evaluator.rubrics.schema import output_json_schema  # noqa: E402

RUBRICS = ("drug_monograph_similarity", "pathology_report", "trial_eligibility",
           "ecg_interpretation")
CHILD_PREFIX = "CHILD "


def _schema_text(name: str) -> str:
    return json.dumps(output_json_schema(load_rubric(name)), separators=(",", ":"))


def _backend(model_path: Path):
    from evaluator.judges.backends.transformers_backend import TransformersBackend
    from evaluator.judges.models_file import JudgeSpec

    spec = JudgeSpec(backend="transformers", path=model_path, device="cpu", dtype="float32")
    return TransformersBackend("schema-compile", spec, model_path=model_path)


def _timed(fn) -> tuple[float, object]:
    started = time.perf_counter()
    value = fn()
    return time.perf_counter() - started, value


def child(model_path: Path, rubrics: list[str]) -> None:
    """In a fresh process: the first build of each rubric's constraint, one line each."""
    backend = _backend(model_path)
    for name in rubrics:
        schema = _schema_text(name)
        seconds, _ = _timed(lambda schema=schema: backend._processor(schema))
        print(CHILD_PREFIX + json.dumps({"rubric": name, "seconds": seconds}), flush=True)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-path", type=Path, default=None,
                        help="local Hugging Face model folder (default: the embedded judge)")
    parser.add_argument("--rubrics", default=",".join(RUBRICS))
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: default)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: the tiny-random model's 1.5k vocabulary, one rubric")
    parser.add_argument("--no-new-process", action="store_true",
                        help="skip the new-process column (it starts a second Python)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    force_offline()
    if args.quick:
        args.rubrics = "drug_monograph_similarity"
    rubrics = args.rubrics.split(",")
    unknown = sorted(set(rubrics) - set(RUBRICS))
    if unknown:
        parser.error(f"unknown rubric(s) {unknown}; built-in: {', '.join(RUBRICS)}")
    threads = set_threads(args.threads or None)
    if args.model_path is not None:
        path = args.model_path
    elif args.quick:
        from evaluator.judges.tiny_random import build_tiny_random

        path = build_tiny_random()
    else:
        from evaluator.judges.embedded_judge import prepare_embedded_judge

        path = prepare_embedded_judge()
    if args.child:
        child(path, rubrics)
        return {}

    import outlines

    print_machine(threads)
    backend = _backend(path)
    vocabulary = len(backend.tokenizer)
    print(f"judge {path.name}: {vocabulary} tokens in the vocabulary", flush=True)
    print(f"{'rubric':28} {'cold s':>8} {'cached s':>9} {'rebuilt s':>9} {'new proc s':>10} "
          f"{'from bytes s':>12} {'index MB':>8}", flush=True)
    rows = {}
    for name in rubrics:
        schema = _schema_text(name)
        cold, processor = _timed(lambda schema=schema: backend._processor(schema))
        cached, again = _timed(lambda schema=schema: backend._processor(schema))
        assert again is processor
        # What TransformersBackend._processor does on a miss, with nothing kept.
        rebuilt, _ = _timed(lambda schema=schema: outlines.Generator(
            backend._outlines_model, outlines.types.JsonSchema(schema, whitespace_pattern="")))
        data = pickle.dumps(processor.index)
        from_bytes, _ = _timed(lambda data=data: pickle.loads(data))
        rows[name] = {"cold_s": round(cold, 3), "cached_s": round(cached, 6),
                      "rebuilt_s": round(rebuilt, 3), "from_bytes_s": round(from_bytes, 4),
                      "index_mb": round(len(data) / 2**20, 2)}
    backend.close()

    if not args.no_new_process:
        # A second run: a fresh process, nothing shared with this one but the disk.
        command = [sys.executable, __file__, "--child", "--rubrics", ",".join(rubrics),
                   "--threads", str(args.threads), "--model-path", str(path)]
        done = subprocess.run(command, capture_output=True, text=True, check=False,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        for line in done.stdout.splitlines():
            if line.startswith(CHILD_PREFIX):
                item = json.loads(line[len(CHILD_PREFIX):])
                rows[item["rubric"]]["new_process_s"] = round(item["seconds"], 3)
        if done.returncode != 0:
            print(f"new process failed (exit {done.returncode})", flush=True)
    for name, row in rows.items():
        new = row.get("new_process_s")
        print(f"{name:28} {row['cold_s']:8.2f} {row['cached_s']:9.6f} {row['rebuilt_s']:9.2f} "
              f"{'-' if new is None else f'{new:.2f}':>10} {row['from_bytes_s']:12.4f} "
              f"{row['index_mb']:8.2f}")
    worst_cached = max(row["cached_s"] for row in rows.values())
    news = [row["new_process_s"] for row in rows.values() if "new_process_s" in row]
    print(f"cached (same process, the backend's per-run cache): at most {worst_cached:.6f} s "
          "(target < 1 s)" + (f"; a new process compiles again: up to {max(news):.1f} s, since "
                              "outlines 1.3.3 caches nothing on disk on this path"
                              if news else ""))
    print(f"re-run: {rerun_command(None if argv is None else [__file__, *argv])}")
    figures = {"judge": path.name, "vocabulary": vocabulary, "threads": threads,
               "rubrics": rows}
    print_figures(figures)
    return figures


if __name__ == "__main__":
    main()
