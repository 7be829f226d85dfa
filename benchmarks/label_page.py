"""How fast the labelling page answers on a large sheet: ``evaluator label`` started as a
real server (uvicorn, a subprocess) on a sheet of 10,000 trial-eligibility cases (the shared
dev data's 109 cycled, each with its own id), then timed over HTTP from this process: case
pages at random positions (GET), saves of both criteria (POST, each fsynced to the journal
before the answer), and the labeller's link (the redirect to her first unlabelled case).
Each request is timed from sending to the last byte of the answer, on one kept-alive
connection, the three kinds taking turns. The server's start (reading the sheet, the
rubric and the 10,000 cases) is timed from the command's start to its printed URL.

Re-run:  PYTHONPATH=. .venv/bin/python benchmarks/label_page.py [--cases 10000]
             [--requests 300] [--quick]
         (about a minute; --quick: 200 cases, 30 requests)

Prints timings only (never case text), then a ``figures:`` JSON line.
"""

from __future__ import annotations

import argparse
import http.client
import random
import socket
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_common import (
    print_figures,
    print_machine,
    rerun_command,
)
from tests.label_browser import Server
from tests.label_sheets import make_single_sheet


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=300,
                        help="requests of each kind (GET, POST, link)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    if args.quick:
        args.cases, args.requests = 200, 30
    print_machine()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="label-bench-") as tmp:
        sheet = Path(tmp) / "sheet"
        made = time.perf_counter()
        make_single_sheet(sheet, args.cases)
        print(f"sheet: {args.cases} cases, 2 criteria, built in "
              f"{time.perf_counter() - made:.1f} s", flush=True)
        started = time.perf_counter()
        server = Server(sheet, ["ana"], timeout=600)
        start_s = time.perf_counter() - started
        try:
            url = urlsplit(server.url)
            base = url.path.rstrip("/")
            origin = f"{url.scheme}://{url.netloc}"
            connection = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
            connection.connect()
            # As browsers do: without it, the client's small request writes wait on the
            # server's delayed ACK (a 40 ms stall that is TCP's, not the page's).
            connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            times: dict[str, list[float]] = {"get": [], "post": [], "link": []}

            def timed(kind: str, method: str, path: str, body: str | None = None) -> int:
                headers = {"Host": url.netloc}
                if body is not None:
                    headers |= {"Origin": origin,
                                "Content-Type": "application/x-www-form-urlencoded"}
                t0 = time.perf_counter()
                connection.request(method, path, body=body, headers=headers)
                answer = connection.getresponse()
                answer.read()
                times[kind].append(time.perf_counter() - t0)
                return answer.status

            for _ in range(args.requests):
                index = rng.randint(1, args.cases)
                assert timed("get", "GET", f"{base}/case/{index}") == 200
                value = rng.randint(1, 5)
                assert timed("post", "POST", f"{base}/case/{index}",
                             f"v.accuracy={value}&v.clarity={6 - value}") == 303
                assert timed("link", "GET", f"{base}/") == 303
            connection.close()
        finally:
            server.stop()
    figures = {"cases": args.cases, "requests_each": args.requests,
               "start_s": round(start_s, 2)}
    for kind, values in times.items():
        ms = [v * 1000 for v in values]
        figures[f"{kind}_median_ms"] = round(sorted(ms)[len(ms) // 2], 1)
        figures[f"{kind}_p95_ms"] = round(_percentile(ms, 0.95), 1)
        print(f"{kind:5} median {figures[f'{kind}_median_ms']:7.1f} ms   "
              f"p95 {figures[f'{kind}_p95_ms']:7.1f} ms   (n={len(ms)})", flush=True)
    print(f"server start (sheet + rubric + {args.cases} cases read): {start_s:.2f} s")
    print(f"re-run: {rerun_command(None if argv is None else [__file__, *argv])}")
    print_figures(figures)
    return figures


if __name__ == "__main__":
    main()
