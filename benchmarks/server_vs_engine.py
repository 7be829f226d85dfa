"""Cases/s through vLLM's OpenAI server (the ``server`` backend) vs vLLM's in-process engine.

Same machine, same model (the tiny random one unless ``--model-path``), same cases, same
rubric (trial_eligibility), greedy, both measured in one run: the server
(tests/vllm_server.py: ``python -m vllm.entrypoints.openai.api_server`` on 127.0.0.1 with
the guidance structured-output backend) serves a ``backend: server`` judge with
``in_flight`` = N requests open; the in-process ``vllm`` judge runs with ``batch_size`` = N
(streamed, N requests in its engine). Each is warmed up on a few cases first (the server's
first request compiles and allocates for seconds). The order alternates (server, engine,
engine, server with ``--repeats 2``); the median per path is reported and the ratio printed.
Not like for like yet: the in-process engine also computes each score's distribution
(one-token requests in the same engine steps), which the server backend does not yet
(issue 49, item 3), and a run has no switch to turn them off; so the ratio flatters the
server by that work. Prints counts and timings only, never case text.

Re-run (the vLLM venv, which has the server extra: make .venv-vllm/.installed):
    PYTHONPATH=. .venv-vllm/bin/python benchmarks/server_vs_engine.py [--cases 16]
        [--in-flight 8] [--repeats 1]
Exits 0 with a message when the server backend is not registered.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
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
    rerun_command,
    write_jsonl,
)

RUBRIC = "trial_eligibility"
# As tests/test_vllm_backend.py and tests/vllm_server.py's server.
ENGINE = {"enforce_eager": True, "kv_cache_memory_bytes": 256 << 20,
          "distributed_executor_backend": "uni"}
WARM_UP_CASES = 2


def _run(name: str, spec, backend, source: Path, out: Path) -> tuple[float, dict]:
    """Seconds for one ``evaluate`` of ``source``, and its status counts."""
    from evaluator.run.runner import evaluate
    from evaluator.run.task import Judge, RunOptions, Task

    start = time.perf_counter()
    evaluate(Task(RUBRIC, source), Judge(name, spec=spec, backend=backend),
             RunOptions(out))
    seconds = time.perf_counter() - start
    counts: dict[str, int] = {}
    for line in out.read_text().splitlines():
        status = json.loads(line)["status"]
        counts[status] = counts.get(status, 0) + 1
    return seconds, counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=16)
    parser.add_argument("--in-flight", type=int, default=8,
                        help="requests open at once on both paths (default 8)")
    parser.add_argument("--repeats", type=int, default=1,
                        help="timed runs per path, alternating (default 1)")
    parser.add_argument("--model-path", type=Path, default=None,
                        help="a model folder (default: the tiny random model)")
    args = parser.parse_args(argv)

    from evaluator.judges.backends.registry import BACKENDS

    if "server" not in BACKENDS:
        print("the server backend is not built yet (no 'server' in the backend registry): "
              "nothing to measure")
        return 0
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        print("vLLM is not installed: run this in the vLLM venv (make .venv-vllm/.installed)")
        return 0

    from evaluator.judges.backends import load_backend
    from evaluator.judges.models_file import JudgeSpec
    from evaluator.judges.tiny_random import build_tiny_random
    from tests.vllm_server import MAX_MODEL_LEN, serve

    model_path = args.model_path or build_tiny_random()
    source_path, rows = load_rows(RUBRIC)
    print(f"cases: {describe_source(RUBRIC, source_path, rows)}; {args.cases} used, "
          f"{args.in_flight} in flight, greedy, model {model_path.name}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="server-vs-engine-"))
    cases = write_jsonl(work / "cases.jsonl", cycle_rows(rows, args.cases))
    warm = write_jsonl(work / "warm.jsonl", cycle_rows(rows, WARM_UP_CASES))

    engine_spec = JudgeSpec(backend="vllm", path=model_path, dtype="float32",
                            max_model_len=MAX_MODEL_LEN, batch_size=args.in_flight,
                            engine=dict(ENGINE, max_num_seqs=args.in_flight))
    timings: dict[str, list[float]] = {"server": [], "engine": []}
    statuses: dict[str, dict] = {}
    with serve(work / "server.log", model_path=model_path) as server:
        server_spec = BACKENDS["server"].settings_model()(
            backend="server", base_url=server.base_url, served_model=server.served_model,
            batch_size=args.in_flight, in_flight=args.in_flight, max_model_len=MAX_MODEL_LEN)
        paths = {"server": (server_spec, load_backend("served", server_spec)),
                 "engine": (engine_spec, load_backend("engine", engine_spec))}
        try:
            for name, (spec, backend) in paths.items():
                _run(name, spec, backend, warm, work / f"warm-{name}.jsonl")
            order = ["server", "engine"]
            for repeat in range(args.repeats):
                for name in order if repeat % 2 == 0 else order[::-1]:
                    spec, backend = paths[name]
                    seconds, counts = _run(name, spec, backend, cases,
                                           work / f"{name}-{repeat}.jsonl")
                    timings[name].append(seconds)
                    statuses[name] = counts
                    print(f"{name}: {args.cases} cases in {seconds:.1f} s "
                          f"({args.cases / seconds:.2f} cases/s), statuses {counts}",
                          flush=True)
        finally:
            for _, backend in paths.values():
                backend.close()
    rate = {name: args.cases / statistics.median(t) for name, t in timings.items()}
    ratio = rate["server"] / rate["engine"]
    print(f"server {rate['server']:.2f} cases/s, in-process engine {rate['engine']:.2f} "
          f"cases/s: the server runs at {ratio:.2f}x the engine's rate (both compute score "
          "distributions: the server's from its top log-probs)")
    print_figures({"cases": args.cases, "in_flight": args.in_flight, "repeats": args.repeats,
                   "server_cases_per_s": round(rate["server"], 3),
                   "engine_cases_per_s": round(rate["engine"], 3),
                   "server_over_engine": round(ratio, 3), "statuses": statuses})
    print(f"re-run: {rerun_command()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
