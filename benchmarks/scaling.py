"""Scaling: wall time and peak RSS of a whole run (read, judge, write, summarize) for 1k, 10k
and 100k cases with the fake backend (no model: what is left is the pipeline itself).

Targets (issue 7): time linear in the number of cases; peak RSS growth <= 50 MB from 1k to
100k cases (input and results streamed, never held whole).

Each size runs in a fresh process (peak RSS is per process); the cases are synthetic
pathology reports of ~1.2 KB each, with ids only in the output (no case text is printed).

``--stream``: the cases streamed through the fake's continuously batching engine (64
requests in flight, :mod:`evaluator.run.streaming`) instead of batches of 64: the streamed
path's memory must stay as flat (issue 27).

``--format parquet``: the cases in a Parquet file (written in row groups of
``--row-group-rows`` rows) instead of JSONL; the run reads it batch by batch. Target (issue
28): 1,000,000 rows within 100 MB of peak RSS of 1,000 rows. Each Parquet case ends with its
own number, so no two cells are equal and Parquet's dictionary encoding cannot shrink the
file to a few distinct values.

Re-run:

    python benchmarks/scaling.py                 # 1k, 10k, 100k
    python benchmarks/scaling.py --sizes 1000 10000 --resume
    python benchmarks/scaling.py --sizes 1000 10000 --stream
    python benchmarks/scaling.py --sizes 1000 1000000 --format parquet
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PARAGRAPH = ("Sections show a moderately differentiated adenocarcinoma infiltrating the "
             "muscularis propria, with lymphovascular invasion present and margins free of "
             "tumour at {d} mm. {n} of 14 lymph nodes contain metastatic carcinoma. ")


def write_cases(path: Path, n: int) -> None:
    """``n`` synthetic cases, written line by line."""
    with path.open("w", encoding="utf-8") as handle:
        for i in range(n):
            row = {"case_id": f"case-{i:06d}",
                   "reference_report": (PARAGRAPH * 3).format(d=i % 9 + 1, n=i % 5),
                   "generated_report": (PARAGRAPH * 3).format(d=i % 7 + 1, n=i % 4)}
            handle.write(json.dumps(row) + "\n")


def write_parquet_cases(path: Path, n: int, row_group_rows: int) -> None:
    """``n`` synthetic cases as Parquet, written one row group at a time (never held
    whole)."""
    import pyarrow as pa  # the parquet extra
    import pyarrow.parquet as pq

    schema = pa.schema([("case_id", pa.string()), ("reference_report", pa.string()),
                        ("generated_report", pa.string())])
    with pq.ParquetWriter(path, schema) as writer:
        for start in range(0, n, row_group_rows):
            ids = range(start, min(n, start + row_group_rows))
            writer.write_batch(pa.record_batch([
                [f"case-{i:07d}" for i in ids],
                [(PARAGRAPH * 3).format(d=i % 9 + 1, n=i % 5) + f"Case {i}." for i in ids],
                [(PARAGRAPH * 3).format(d=i % 7 + 1, n=i % 4) + f"Case {i}." for i in ids],
            ], schema=schema), row_group_size=row_group_rows)


def child(input_path: str, output_path: str, stream: bool) -> None:
    """One run in this process; print its wall time and peak RSS as JSON."""
    from evaluator import Judge, RunOptions, Task, evaluate
    from evaluator.judges.models_file import JudgeSpec

    judge = Judge("fake", spec=JudgeSpec(backend="fake", stream=True)) if stream else Judge("fake")
    started = time.perf_counter()
    result = evaluate(Task("pathology_report", Path(input_path)), judge,
                      RunOptions(Path(output_path), batch_size=64))
    elapsed = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": elapsed, "peak_rss_mb": peak_mb,
                      "ok": result.summary.status_counts.get("ok", 0)}))


def run_size(n: int, folder: Path, resume: bool, stream: bool, kind: str = "jsonl",
             row_group_rows: int = 100_000) -> dict:
    cases = folder / f"cases-{n}.{kind}"
    if kind == "parquet":
        # In a process of its own: a row group is built in memory, and Linux keeps a
        # process's peak RSS across exec, so the measured child would inherit this one's.
        subprocess.run([sys.executable, __file__, "--write-parquet", str(cases), str(n),
                        str(row_group_rows)], cwd=ROOT, check=True)
    else:
        write_cases(cases, n)
    output = folder / f"results-{n}.jsonl"
    figures = _child(cases, output, stream)
    assert figures["ok"] == n, figures
    if resume:  # a second run over the finished file: nothing left to judge
        figures["resume"] = _child(cases, output, stream)
    figures["input_mb"] = cases.stat().st_size / 1e6
    figures["results_mb"] = output.stat().st_size / 1e6
    return figures


def _child(cases: Path, output: Path, stream: bool) -> dict:
    process = subprocess.run([sys.executable, __file__, "--child", str(cases), str(output),
                              *(["--stream"] if stream else [])],
                             capture_output=True, text=True, cwd=ROOT, check=False)
    if process.returncode != 0:
        raise SystemExit(f"child run failed:\n{process.stderr[-3000:]}")
    return json.loads(process.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--resume", action="store_true", help="also time a resume of each")
    parser.add_argument("--stream", action="store_true",
                        help="stream the cases (continuous batching, 64 in flight)")
    parser.add_argument("--format", choices=("jsonl", "parquet"), default="jsonl",
                        help="the input file's format (parquet: needs pyarrow)")
    parser.add_argument("--row-group-rows", type=int, default=100_000,
                        help="--format parquet: rows per row group")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--write-parquet", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child, args.stream)
        return
    if args.write_parquet:
        path, n, rows = args.write_parquet
        write_parquet_cases(Path(path), int(n), int(rows))
        return
    command = "python benchmarks/scaling.py " + " ".join(sys.argv[1:])
    rows = []
    with tempfile.TemporaryDirectory(prefix="evaluator-scaling-") as tmp:
        for n in args.sizes:
            figures = run_size(n, Path(tmp), args.resume, args.stream, args.format,
                               args.row_group_rows)
            rows.append((n, figures))
            resumed = (f", resume {figures['resume']['seconds']:.1f} s / "
                       f"{figures['resume']['peak_rss_mb']:.0f} MB" if args.resume else "")
            print(f"{n:>7} cases: {figures['seconds']:7.1f} s "
                  f"({n / figures['seconds']:,.0f} cases/s), peak RSS "
                  f"{figures['peak_rss_mb']:.0f} MB; input {figures['input_mb']:.0f} MB, "
                  f"results {figures['results_mb']:.0f} MB{resumed}", flush=True)
    (n0, first), (n1, last) = rows[0], rows[-1]
    per_case = [f["seconds"] / n for n, f in rows]
    print(f"time per case: {', '.join(f'{p * 1e3:.2f} ms' for p in per_case)} "
          "(includes the fixed start-up: imports, rubric, schema)")
    marginal = [(b[1]["seconds"] - a[1]["seconds"]) / (b[0] - a[0])
                for a, b in zip(rows, rows[1:])]
    if marginal:
        print(f"marginal time per added case: "
              f"{', '.join(f'{m * 1e3:.2f} ms' for m in marginal)} between successive sizes "
              "(linear when these are about equal)")
    target = ("parquet input; target <= 100 MB at 1,000,000 rows" if args.format == "parquet"
              else "target <= 50 MB")
    print(f"peak RSS growth {n0:,} -> {n1:,} cases: "
          f"{last['peak_rss_mb'] - first['peak_rss_mb']:+.0f} MB ({target})")
    print(f"re-run: {command}")


if __name__ == "__main__":
    main()
