"""Which interval for the judge's bias (judge - label on a random sheet's labelled cases) keeps
93-97% with few labels (issue 47): Student t (what `estimate` computes, ppi.classical_mean),
Johnson's (1978) skewness-corrected t, and the studentized bootstrap (bootstrap-t), on
small_n_coverage.py's populations. The reason evaluator/analysis/minimum.py's
MIN_LABELS_BIAS is 30 and the t interval is kept.

Per replicate: a fresh population of N = 1,000 cases of the scenario
(small_n_coverage.systems: system A's labels and judge), a random sheet of n, and the three
intervals of mean(judge - label) on it; a CI covers when it holds the population's bias
(small_n_coverage.truths, 2,000,000 cases). A sheet whose differences are all the same
(no spread) is left out, as `estimate` gives no interval there.

* t: mean +- t(0.975, n - 1) sd / sqrt(n).
* Johnson: centred on mean + mu3 / (6 sd^2 n) (mu3 the third central moment, ddof 0), the same
  half-width: Johnson, N. J. (1978), Modified t tests and confidence intervals for
  asymmetrical populations, JASA 73, 536-544 (the first-order term).
* bootstrap-t: the 2.5% and 97.5% quantiles of (mean* - mean) / (sd* / sqrt(n)) over 999
  resamples (Efron & Tibshirani 1993, ch. 12; Hall 1988); a resample with no spread is
  dropped.

Synthetic numbers only. Re-run (about 3 minutes on 2 cores):
    PYTHONPATH=. .venv/bin/python benchmarks/bias_interval.py [--replicates 1500]
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_common import rerun_command
from evaluator.analysis.intervals import t_quantile

RESAMPLES = 999
NS = (15, 20, 30)
SCENARIOS = ("lenient", "decent", "confidently_wrong", "edge")


def _coverage_module():
    path = Path(__file__).resolve().parent / "small_n_coverage.py"
    spec = importlib.util.spec_from_file_location("small_n_coverage", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def intervals(d: np.ndarray, rng: np.random.Generator) -> dict[str, tuple[float, float]]:
    """The three 95% intervals of mean(d)."""
    n, mean, sd = len(d), float(d.mean()), float(d.std(ddof=1))
    half = t_quantile(n - 1) * sd / np.sqrt(n)
    shift = float(((d - mean) ** 3).mean()) / (6 * sd ** 2 * n)
    resampled = d[rng.integers(0, n, (RESAMPLES, n))]
    spread = resampled.std(axis=1, ddof=1)
    keep = spread > 0
    t_star = (resampled.mean(axis=1)[keep] - mean) / (spread[keep] / np.sqrt(n))
    upper, lower = np.quantile(t_star, [0.975, 0.025])
    return {"t": (mean - half, mean + half),
            "Johnson": (mean + shift - half, mean + shift + half),
            "bootstrap-t": (mean - upper * sd / np.sqrt(n), mean - lower * sd / np.sqrt(n))}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=1500)
    parser.add_argument("--seed", type=int, default=99)
    args = parser.parse_args(argv)
    bench = _coverage_module()
    started = time.perf_counter()
    print(f"re-run: {rerun_command(None if argv is None else [__file__, *argv])}")
    print(f"coverage % / median width of the judge's bias's 95% CI; {args.replicates} "
          f"replicates per cell; N = {bench.POPULATION} cases; Monte Carlo error +-"
          f"{100 * 1.96 * (0.95 * 0.05 / args.replicates) ** 0.5:.1f} points")
    out = {}
    for name in SCENARIOS:
        truth = bench.truths(name)["bias"]
        for n in NS:
            hits: dict[str, list[bool]] = {}
            widths: dict[str, list[float]] = {}
            for r in range(args.replicates):
                rng = np.random.default_rng(args.seed + 7919 * r + n)
                s = bench.systems(name, rng, bench.POPULATION)
                drawn = rng.choice(bench.POPULATION, n, replace=False)
                d = s["ja"][drawn] - s["la"][drawn]
                if not d.std() > 0:
                    continue
                for method, (low, high) in intervals(d, rng).items():
                    hits.setdefault(method, []).append(low <= truth <= high)
                    widths.setdefault(method, []).append(high - low)
            out[(name, n)] = {m: (float(np.mean(h)), float(np.median(widths[m])))
                              for m, h in hits.items()}
            print(f"  {name:<18} n {n:>2}  " + "  ".join(
                f"{m} {100 * c:.1f} / {w:.3f}" for m, (c, w) in out[(name, n)].items()),
                flush=True)
    print(f"\n{time.perf_counter() - started:.1f} s")
    return out


if __name__ == "__main__":
    main()
