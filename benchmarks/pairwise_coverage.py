"""Coverage of `evaluator compare`'s 95% CIs (evaluator.analysis.pairwise.pairwise, bradley_terry),
by simulation: how often each interval holds the truth it estimates.

Each replicate draws n pairs: latent qualities q_A ~ N(edge, 1), q_B ~ N(0, 1), lengths
uniform on 200-1199 characters (independent of quality), and each order judged on
d = q_A - q_B + length_pull * tanh((len A - len B) / 200) + position_pull * (+1 when A is
shown first, -1 when B is) + N(0, 0.7), a tie when |d| < 0.15. Judges:
* honest - edge 0.3, no pulls: its position bias is 0.5 and its length slope 0 exactly.
* biased - edge 0.3, length_pull 1.5, position_pull 0.4: the truths (win rate, position
  bias, slope, length-controlled win rate) are the population values, computed once from
  400,000 pairs (the slope and intercept by the same logistic fit).
Bradley-Terry: four systems with strengths 0.8, 0.3, -0.2, -0.9 (mean 0), a round robin of
6 pairings, P(i beats j) = sigmoid(s_i - s_j), no ties; an interval covers when it holds
its system's strength.

Synthetic numbers only: no case and no case text. Re-run (about 11 minutes on 2 cores;
--quick: under a minute):
    PYTHONPATH=. .venv/bin/python benchmarks/pairwise_coverage.py [--replicates 200] [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_common import print_figures, rerun_command
from evaluator.analysis.logit import fit_logit
from evaluator.analysis.pairwise.bradley_terry import Battles, bradley_terry
from evaluator.analysis.pairwise.pairwise import (
    WIN_VALUE,
    length_bias,
    position_bias,
    reconcile,
    win_rate,
)

RESULTS = Path(__file__).resolve().parent / "results" / "pairwise_coverage.txt"
JUDGES = {"honest": (0.3, 0.0, 0.0), "biased": (0.3, 1.5, 0.4)}
STRENGTHS = {"w": 0.8, "x": 0.3, "y": -0.2, "z": -0.9}


def judge_pairs(judge: str, n: int, rng: np.random.Generator):
    """n pairs' choices (A first, B first; candidate terms) and lengths."""
    edge, length_pull, position_pull = JUDGES[judge]
    qa, qb = rng.normal(edge, 1, n), rng.normal(0, 1, n)
    la, lb = rng.integers(200, 1200, n), rng.integers(200, 1200, n)
    base = qa - qb + length_pull * np.tanh((la - lb) / 200)

    def choose(towards_a: float) -> np.ndarray:
        d = base + position_pull * towards_a + rng.normal(0, 0.7, n)
        return np.where(np.abs(d) < 0.15, "tie", np.where(d > 0, "A", "B"))

    return list(choose(1.0)), list(choose(-1.0)), la, lb


def truths(judge: str, seed: int) -> dict[str, float]:
    first, second, la, lb = judge_pairs(judge, 400_000, np.random.default_rng(seed))
    outcome = [reconcile(a, b) for a, b in zip(first, second, strict=True)]
    y = np.array([WIN_VALUE[o] for o in outcome])
    f, s = np.array(first), np.array(second)
    chose_first = (f == "A").sum() + (s == "B").sum()
    decisive = (f != "tie").sum() + (s != "tie").sum()
    diff = (la - lb).astype(float)
    x = np.column_stack([np.ones(len(y)), np.tanh(diff / diff.std(ddof=1))])
    beta, _ = fit_logit(x, y, np.ones(len(y)))
    if JUDGES[judge][1:] == (0.0, 0.0):
        # No pull: the outcome is independent of position and length, so these are exact.
        chose_first, decisive, beta[1] = 1, 2, 0.0
        beta[0] = np.log(y.mean() / (1 - y.mean()))
    return {"win rate": float(y.mean()), "position bias": float(chose_first / decisive),
            "length slope": float(beta[1]),
            "length-controlled win rate": float(1 / (1 + np.exp(-beta[0])))}


def pair_table(judge: str, n: int, replicates: int, resamples: int, seed: int) -> dict:
    truth = truths(judge, seed + 99_999)
    hits = {key: 0 for key in truth}
    counted = {key: 0 for key in truth}
    widths: dict[str, list[float]] = {key: [] for key in truth}
    for r in range(replicates):
        rng = np.random.default_rng(seed + r)
        first, second, la, lb = judge_pairs(judge, n, rng)
        outcome = [reconcile(a, b) for a, b in zip(first, second, strict=True)]
        length = length_bias(outcome, la, lb, resamples=resamples, seed=r)
        cis = {"win rate": win_rate(outcome, resamples=resamples, seed=r)["ci95"],
               "position bias": position_bias(first, second, resamples=resamples,
                                              seed=r)["ci95"],
               "length slope": length["slope"]["ci95"],
               "length-controlled win rate": length["controlled_win_rate"]["ci95"]}
        for key, ci in cis.items():
            if ci is None:
                continue
            counted[key] += 1
            hits[key] += ci[0] <= truth[key] <= ci[1]
            widths[key].append(ci[1] - ci[0])
    return {key: {"truth": truth[key], "coverage": hits[key] / max(1, counted[key]),
                  "median_width": float(np.median(widths[key])) if widths[key] else None,
                  "intervals": counted[key]} for key in truth}


def bt_table(per_pairing: int, replicates: int, resamples: int, seed: int) -> dict:
    names = list(STRENGTHS)
    hits = counted = order = 0
    widths = []
    for r in range(replicates):
        rng = np.random.default_rng(seed + r)
        battles = []
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                p = 1 / (1 + np.exp(-(STRENGTHS[a] - STRENGTHS[b])))
                battles.append(Battles(a, b, list(np.where(rng.random(per_pairing) < p,
                                                            "A", "B"))))
        result = bradley_terry(battles, resamples=resamples, seed=r)
        order += [s["name"] for s in result["systems"]] == names
        for system in result["systems"]:
            if system["ci95"] is None:
                continue
            counted += 1
            low, high = system["ci95"]
            hits += low <= STRENGTHS[system["name"]] <= high
            widths.append(high - low)
    return {"coverage": hits / max(1, counted), "intervals": counted,
            "median_width": float(np.median(widths)) if widths else None,
            "true_order_share": order / replicates}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=200)
    parser.add_argument("--resamples", type=int, default=500)
    parser.add_argument("--pairs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true",
                        help="20 replicates of 200 resamples; results file not written")
    args = parser.parse_args(argv)
    replicates = 20 if args.quick else args.replicates
    resamples = 200 if args.quick else args.resamples
    started = time.perf_counter()
    lines = [f"re-run: {rerun_command(None if argv is None else [__file__, *argv])}",
             (f"coverage / median width of 95% CIs; {replicates} replicates, {resamples} "
              "bootstrap resamples each"), ""]
    figures: dict = {}
    for judge, (edge, length_pull, position_pull) in JUDGES.items():
        rows = pair_table(judge, args.pairs, replicates, resamples, args.seed)
        figures[judge] = rows
        lines.append(f"{judge} judge (edge {edge}, length pull {length_pull}, position pull "
                     f"{position_pull}), n = {args.pairs} pairs")
        for key, row in rows.items():
            width = "-" if row["median_width"] is None else f"{row['median_width']:.3f}"
            lines.append(f"  {key:<28} truth {row['truth']:+.3f}   coverage "
                         f"{100 * row['coverage']:5.1f}% / {width}   "
                         f"({row['intervals']} intervals)")
        lines.append("")
    for per_pairing in (80, 300):
        bt = bt_table(per_pairing, replicates, resamples, args.seed)
        figures[f"bradley_terry_{per_pairing}"] = bt
        lines.append(f"Bradley-Terry, 4 systems, round robin, {per_pairing} battles per "
                     "pairing")
        lines.append(f"  strengths                    coverage {100 * bt['coverage']:5.1f}% / "
                     f"{bt['median_width']:.3f}   ({bt['intervals']} intervals)")
        lines.append(f"  ranking                      the true order in "
                     f"{100 * bt['true_order_share']:.1f}% of replicates")
    lines.append(f"\n{time.perf_counter() - started:.1f} s")
    text = "\n".join(lines)
    print(text)
    print_figures(figures)
    if not args.quick:
        RESULTS.write_text(text + "\n", encoding="utf-8")
    return figures


if __name__ == "__main__":
    main()
