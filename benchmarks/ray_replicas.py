"""Ray engine: 1 vs 2 judge replicas on the same cases (tiny-random judge, CPU).

Both runs share one local Ray cluster started here (``--cpus`` CPUs, no dashboard); each
replica reserves one CPU, so torch runs one thread per replica (Ray sets OMP_NUM_THREADS).
Reported per run: wall time of the whole run (replica start-up and model load included) and
the steady rate from the first record written to the last; then the ratio of the two rates
and whether both runs gave every case the same scores. ``--local`` adds the local engine
(one process, torch's own thread count) for reference. ``--judge sleep`` replaces the model
by verdicts that take ``--sleep`` seconds per batch without using the CPU: a judge whose
replicas share nothing (one GPU each), so what is measured is the engine itself. The load
average is printed: on a shared machine, other processes take the cores the replicas need.
Cases are synthetic; no case text is printed.

Re-run:

    python benchmarks/ray_replicas.py                     # 32 cases, batches of 4
    python benchmarks/ray_replicas.py --cases 64 --local
    python benchmarks/ray_replicas.py --judge sleep --cases 96
    python benchmarks/ray_replicas.py --driver-costs 20000 --case-kib 10   # no Ray
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

REPORT = ("Sections show a moderately differentiated adenocarcinoma infiltrating the muscularis "
          "propria; margins free of tumour at {d} mm. {n} of 14 lymph nodes contain metastatic "
          "carcinoma. ")


def write_cases(path: Path, n: int) -> None:
    """``n`` synthetic pathology cases of a few sizes."""
    with path.open("w", encoding="utf-8") as handle:
        for i in range(n):
            handle.write(json.dumps({
                "case_id": f"case-{i:04d}",
                "reference_report": REPORT.format(d=i % 9 + 1, n=i % 5) * (i % 3 + 1),
                "generated_report": REPORT.format(d=i % 7 + 1, n=i % 4) * (i % 2 + 1)}) + "\n")


def sleeping_judge(delay: float, judge_name: str, spec: object):
    """Minimal valid verdicts after ``delay`` seconds per batch, using no CPU meanwhile."""
    from evaluator.judges.backends.fake import FakeBackend

    class Sleeping(FakeBackend):
        def generate(self, chats, json_schema, sampling, chat_template_kwargs=None):
            time.sleep(delay)
            return super().generate(chats, json_schema, sampling, chat_template_kwargs)

    return Sleeping(record_calls=False)


def timed_run(source: Path, output: Path, batch_size: int, replicas: int | None,
              judge: str, delay: float) -> dict:
    """One run (``replicas`` None: the local engine); wall time and steady rate."""
    from evaluator import Judge, RunOptions, Task, evaluate
    from evaluator.data.results import read_results
    from evaluator.judges.models_file import resolve_judge
    from evaluator.run.engines import RayOptions

    stamps: list[tuple[float, int]] = []
    name, spec = resolve_judge("tiny-random" if judge == "tiny-random" else "fake")
    factory = None if judge == "tiny-random" else partial(sleeping_judge, delay)
    started = time.perf_counter()
    evaluate(Task("pathology_report", source),
             Judge(name, spec=spec,
                   backend=factory(name, spec) if factory and replicas is None else None),
             RunOptions(output, batch_size=batch_size,
                        engine="local" if replicas is None else "ray",
                        ray=None if replicas is None else RayOptions(
                            replicas=replicas, backend_factory=factory),
                        progress=lambda n: stamps.append((time.perf_counter(), n))))
    wall = time.perf_counter() - started
    # Steady rate: the cases after the first batch back, over the time since it came back.
    first_time = stamps[0][0]
    later = sum(n for _, n in stamps[1:])
    steady = later / (stamps[-1][0] - first_time) if later else float("nan")
    records = {r.case_id: r.scores for r in read_results(output)}
    cases = len(records)
    return {"wall_s": wall, "cases_per_s": cases / wall, "steady_cases_per_s": steady,
            "cases": cases, "first_batch_s": first_time - started, "scores": records,
            "statuses": sorted({r.status for r in read_results(output)})}


def write_big_cases(path: Path, n: int, kib: float) -> None:
    """``n`` synthetic cases of about ``kib`` KiB each."""
    repeat = max(1, round(kib * 1024 / 2 / len(REPORT)))
    with path.open("w", encoding="utf-8") as handle:
        for i in range(n):
            handle.write(json.dumps({
                "case_id": f"case-{i:04d}",
                "reference_report": REPORT.format(d=i % 9 + 1, n=i % 5) * repeat,
                "generated_report": REPORT.format(d=i % 7 + 1, n=i % 4) * repeat}) + "\n")


def driver_costs(folder: Path, n: int, kib: float) -> None:
    """What the driver's node does per case, without Ray: the read task's streaming
    (validate rows, form batches, encode them) and the driver's writing (parse a record
    that came back, append it, flush)."""
    from evaluator.data.cases import iter_cases
    from evaluator.data.results import ResultRecord, ResultWriter
    from evaluator.rubrics.load import load_rubric
    from evaluator.run.judging import todo_batches
    from evaluator.run.ray_engine import encode_batch

    source = folder / "driver-cases.jsonl"
    write_big_cases(source, n, kib)
    rubric = load_rubric("pathology_report")
    todo = {f"case-{i:04d}" for i in range(n)}
    started = time.perf_counter()
    size = sum(len(encode_batch(b)) for b in todo_batches(iter_cases(source, rubric), todo, 64))
    read = time.perf_counter() - started
    record = ResultRecord(case_id="case-0000", rubric="pathology_report", judge="j",
                          status="ok", scores={"critical_finding_concordance": 3,
                                               "factual_accuracy": 2, "reasoning": "r" * 400},
                          input_file=str(source), input_line=1, finish_reason="stop",
                          prompt_tokens=900, completion_tokens=140, max_new_tokens=600,
                          batch_size=64, batch_seconds=1.0, settings_hash="0" * 16,
                          prompt_hash="0" * 64).model_dump_json()
    started = time.perf_counter()
    with ResultWriter(folder / "driver-results.jsonl") as writer:
        for _ in range(n):
            writer.write(ResultRecord.model_validate_json(record))
    write = time.perf_counter() - started
    print(f"driver's node, {n} cases: read+batch+encode {n / read:,.0f} cases/s "
          f"({size / n / 1024:.1f} KiB per case, {size / read / 2**20:.0f} MiB/s); "
          f"parse+append+flush {n / write:,.0f} records/s ({len(record)} B records)")


def command(source: Path, output: Path, batch_size: int, replicas: int | None,
            judge: str) -> str:
    """The CLI command that does the same run (the sleeping judge has none: the fake one)."""
    engine = "" if replicas is None else f" --engine ray --replicas {replicas}"
    model = "tiny-random" if judge == "tiny-random" else "fake  # + a sleep per batch"
    return (f"evaluator run -r pathology_report -i {source} -o {output} --batch-size "
            f"{batch_size}{engine} -m {model}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--cpus", type=int, default=2, help="CPUs of the local Ray cluster")
    parser.add_argument("--local", action="store_true", help="also time the local engine")
    parser.add_argument("--judge", choices=("tiny-random", "sleep"), default="tiny-random")
    parser.add_argument("--sleep", type=float, default=0.5,
                        help="--judge sleep: seconds per batch")
    parser.add_argument("--driver-costs", type=int, metavar="N", default=0,
                        help="only time the driver node's per-case work over N cases")
    parser.add_argument("--case-kib", type=float, default=10.0,
                        help="--driver-costs: size of each case")
    args = parser.parse_args()
    if args.driver_costs:
        driver_costs(Path(tempfile.mkdtemp(prefix="ray-driver-")), args.driver_costs,
                     args.case_kib)
        return

    from evaluator.judges.offline import OFFLINE_ENV, force_offline

    force_offline()
    import ray

    folder = Path(tempfile.mkdtemp(prefix="ray-replicas-"))
    source = folder / "cases.jsonl"
    write_cases(source, args.cases)
    judge = "--judge tiny-random" if args.judge == "tiny-random" else (
        f"--judge sleep --sleep {args.sleep:g}")
    print(f"python benchmarks/ray_replicas.py {judge} --cases {args.cases} --batch-size "
          f"{args.batch_size} --cpus {args.cpus}{' --local' if args.local else ''}")
    print(f"{args.cases} cases, batches of {args.batch_size}, local Ray cluster of {args.cpus} "
          f"CPUs, {os.cpu_count()} cores on this machine; files under {folder}")
    print("load average before: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    ray.init(num_cpus=args.cpus, include_dashboard=False, logging_level=logging.ERROR,
             runtime_env={"env_vars": {**OFFLINE_ENV, "PYTHONPATH": str(ROOT)}})
    results = {}
    try:
        for replicas in (1, 2):
            output = folder / f"replicas-{replicas}.jsonl"
            print(f"\n$ {command(source, output, args.batch_size, replicas, args.judge)}",
                  flush=True)
            results[replicas] = timed_run(source, output, args.batch_size, replicas,
                                          args.judge, args.sleep)
    finally:
        ray.shutdown()
    if args.local:
        output = folder / "local.jsonl"
        print(f"\n$ {command(source, output, args.batch_size, None, args.judge)}", flush=True)
        results["local"] = timed_run(source, output, args.batch_size, None, args.judge,
                                     args.sleep)

    print(f"\n{'run':<12} {'wall s':>8} {'cases/s':>8} {'steady cases/s':>15} "
          f"{'first batch s':>14}  statuses")
    for key, r in results.items():
        label = "local" if key == "local" else f"{key} replica{'s' if key != 1 else ''}"
        print(f"{label:<12} {r['wall_s']:>8.1f} {r['cases_per_s']:>8.3f} "
              f"{r['steady_cases_per_s']:>15.3f} {r['first_batch_s']:>14.1f}  {r['statuses']}")
    one, two = results[1], results[2]
    print(f"\n2 vs 1 replica: {two['cases_per_s'] / one['cases_per_s']:.2f}x cases/s overall, "
          f"{two['steady_cases_per_s'] / one['steady_cases_per_s']:.2f}x steady")
    print("load average after: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    same = all(r["scores"] == one["scores"] for r in results.values())
    print(f"identical scores for every case in every run: {same}")


if __name__ == "__main__":
    main()
