"""Coverage and median width of every 95% CI `estimate` prints from labels, at 10-60 labels,
on random and active sheets (issue 47): the figures docs/statistics.md's "Small samples"
table and evaluator/analysis/minimum.py's minimum come from this script.

Each replicate draws a fresh population of N = 1,000 cases (clinicians' labels, a judge's
scores and its uncertainty) for two systems, A and B. B's label is A's + 1 on 25% of cases
(:data:`B_UP`) and A's - 1 on 12% (:data:`B_DOWN`), clipped to the scale, the same otherwise:
real systems differ both ways case by case, so the paired differences have discordant pairs
on both sides (until issue 47's review B was A + 1 on 30% and never worse on any case, which
left the paired pass-rate difference almost no discordant pairs and every interval of it at
99-100%). B's judge is the scenario's judge on B's labels. Then:
* a random sheet of n labels (one draw for both systems: the paired differences), as
  `estimate` computes a random sheet: labels only (ppi.classical_mean), PPI++ (ppi.ppi_mean),
  the judge's bias (judge - label, ppi.classical_mean; the gate's: paired_rate.rate_bias,
  Tango's score interval), the gate's pass rate (labels only:
  ppi.classical_rate, Wilson; PPI++: ppi.ppi_rate), and B - A paired (ppi.ppi_mean on the
  per-case differences; the gate's: paired_rate.paired_rate_difference, Tango's score
  interval);
* an active sheet of an expected n labels per system (Poisson, designs.inclusion_probabilities
  at the default floor, from each system's uncertainty): labels only and PPI++
  (ppi.ipw_mean, lambda 0 / tuned), the bias (ipw, lambda 0), the gate's pass rate
  (ppi.bounded_rate of them), and B - A independent (ppi.independent_difference: two active
  sheets are never paired).
A CI covers when it holds the truth: the quantity's mean in the population the cases come
from, computed once on 2,000,000 cases of the same scenario (for B - A: the mean of the
per-case B - A there, its pass-rate difference the share that passes B only less the share
that passes A only).

Scenarios (labels on 1-5 unless said; the gate is "label >= 4", on 0-10 ">= 6"):
* decent - the baseline: +0.5 biased, noise sd 1.5 on 30% of cases and 0.3 elsewhere
  (ppi_coverage.py's "issue" judge), its uncertainty tracking its noise;
* confidently_wrong - sure on 90% of cases yet 2 too high on 30% of those; unsure on the
  rest (ppi_coverage.py's): its uncertainty points the wrong way for an active sheet;
* lenient - right on good answers (label >= 3) but scores 70% of bad ones (1-2) 4 or 5,
  sure of itself; unsure (and right on average) on the other bad ones;
* scale_0_10 - labels 0-10 (binomial(10, 0.6)), the judge label + noise sd 1.5, rounded;
* edge - labels piled at the top: 1-5 with probabilities 0.02, 0.03, 0.05, 0.15, 0.75;
  the judge right on 80%, one point off (within 1-5) elsewhere;
* constant - the judge gives 3 to every case (uncertainty the same everywhere: an active
  sheet is a random one).

Each cell: coverage (among the replicates that gave an interval), median width, and the
share of replicates with no interval ("no CI": every label the same, one label, or an
active sheet below ppi.ACTIVE_MIN_LABELS labels) where it is not 0. A cell where every
replicate gave none reads "withheld"; one where at least 99.5% gave none reads
"- (99.8% no CI)", its few intervals no coverage figure (nor counted in the range of
coverage or the width ratios). Means on the
rubric's scale get ppi.bounded_mean's interval, as `estimate` gives them. The last
section: the median width of the active interval over the random one at the same n (PPI++ and labels only), and the minimum: the smallest n from which every cell
covers 93-97%.

Synthetic numbers only. Re-run (about 5-10 minutes on 2 cores; --quick: about 20 s):
    PYTHONPATH=. .venv/bin/python benchmarks/small_n_coverage.py [--replicates 500] [--quick]
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_common import rerun_command
from evaluator.analysis.designs import inclusion_probabilities
from evaluator.analysis.estimate import ppi
from evaluator.analysis.estimate.paired_rate import paired_rate_difference, rate_bias
from evaluator.analysis.intervals import tango_ci
from evaluator.analysis.minimum import MIN_LABELS_BIAS, MIN_LABELS_ESTIMATE

POPULATION = 1000
NS = (10, 15, 20, 30, 60)
BAND = (0.93, 0.97)
TRUTH_DRAWS = 2_000_000
# B's label against A's, case by case: + 1 on this share of cases, - 1 on the next share
# (then clipped to the scale), the same on the rest. One uniform per case decides both, as
# it decided the + 1 alone before issue 47's review, so A's figures are drawn as before.
B_UP = 0.25
B_DOWN = 0.12
# A cell where at least this share of replicates gave no interval shows no coverage figure.
NO_FIGURE = 0.995
Arrays = tuple[np.ndarray, np.ndarray]


def _labels(p: list[float], low: int = 1) -> Callable[[np.random.Generator, int], np.ndarray]:
    values = np.arange(low, low + len(p)).astype(float)
    return lambda rng, size: rng.choice(values, size, p=np.asarray(p) / sum(p))


def _decent(rng: np.random.Generator, labels: np.ndarray) -> Arrays:
    sd = np.where(rng.random(labels.size) < 0.3, 1.5, 0.3)
    judge = np.clip(np.round(labels + 0.5 + rng.normal(0, sd)), 1, 5)
    return judge, np.sqrt(sd ** 2 + 1 / 12)


def _confidently_wrong(rng: np.random.Generator, labels: np.ndarray) -> Arrays:
    unsure = rng.random(labels.size) < 0.1
    wrong = ~unsure & (rng.random(labels.size) < 0.3)
    judge = labels.copy()
    judge[wrong] = labels[wrong] + 2
    judge[unsure] = labels[unsure] + rng.normal(0, 1.5, int(unsure.sum()))
    return judge, np.where(unsure, 1.5, 0.02)


def _lenient(rng: np.random.Generator, labels: np.ndarray) -> Arrays:
    bad = labels <= 2
    fooled = bad & (rng.random(labels.size) < 0.7)
    judge = labels.copy()
    judge[fooled] = rng.choice([4.0, 5.0], int(fooled.sum()))
    unsure = bad & ~fooled
    judge[unsure] = np.clip(np.round(labels[unsure] + rng.normal(0, 1, int(unsure.sum()))), 1, 5)
    return judge, np.where(fooled, 0.1, np.where(unsure, 1.0, 0.3))


def _ten(rng: np.random.Generator, labels: np.ndarray) -> Arrays:
    judge = np.clip(np.round(labels + rng.normal(0, 1.5, labels.size)), 0, 10)
    return judge, np.full(labels.size, 1.5) + 0.2 * rng.random(labels.size)


def _edge(rng: np.random.Generator, labels: np.ndarray) -> Arrays:
    off = rng.random(labels.size) < 0.2
    step = np.where(labels >= 5, -1.0, np.where(labels <= 1, 1.0, rng.choice([-1.0, 1.0],
                                                                            labels.size)))
    judge = np.where(off, labels + step, labels)
    return judge, np.where(off, 0.8, 0.4) + 0.1 * rng.random(labels.size)


def _constant(rng: np.random.Generator, labels: np.ndarray) -> Arrays:
    return np.full(labels.size, 3.0), np.ones(labels.size)


# name: (labels, judge, the scale (bottom, top), gate threshold)
SCENARIOS: dict[str, tuple[Callable, Callable, tuple[float, float], float]] = {
    "decent": (_labels([0.10, 0.20, 0.30, 0.25, 0.15]), _decent, (1.0, 5.0), 4.0),
    "confidently_wrong": (_labels([0.10, 0.20, 0.30, 0.25, 0.15]), _confidently_wrong,
                          (1.0, 5.0), 4.0),
    "lenient": (_labels([0.15, 0.20, 0.25, 0.25, 0.15]), _lenient, (1.0, 5.0), 4.0),
    "scale_0_10": (lambda rng, size: rng.binomial(10, 0.6, size).astype(float), _ten,
                   (0.0, 10.0), 6.0),
    "edge": (_labels([0.02, 0.03, 0.05, 0.15, 0.75]), _edge, (1.0, 5.0), 4.0),
    "constant": (_labels([0.10, 0.20, 0.30, 0.25, 0.15]), _constant, (1.0, 5.0), 4.0),
}


def systems(name: str, rng: np.random.Generator, size: int) -> dict[str, np.ndarray]:
    """Systems A and B on ``size`` cases: labels, judge scores, uncertainty, and the gate's
    0/1 for labels and judge; B's labels are A's + 1 on :data:`B_UP` of cases and A's - 1
    on :data:`B_DOWN`, clipped to the scale."""
    draw_labels, judge_of, (bottom, top), gate = SCENARIOS[name]
    la = draw_labels(rng, size)
    u = rng.random(size)
    step = np.where(u < B_UP, 1.0, np.where(u < B_UP + B_DOWN, -1.0, 0.0))
    lb = np.clip(la + step, bottom, top)
    ja, ua = judge_of(rng, la)
    jb, ub = judge_of(rng, lb)
    return {"la": la, "lb": lb, "ja": ja, "jb": jb, "ua": ua, "ub": ub,
            "ga": (la >= gate).astype(float), "gb": (lb >= gate).astype(float),
            "gja": (ja >= gate).astype(float), "gjb": (jb >= gate).astype(float)}


def truths(name: str, seed: int = 12345) -> dict[str, float]:
    """Every quantity's mean in the scenario's population (2,000,000 cases)."""
    s = systems(name, np.random.default_rng(seed), TRUTH_DRAWS)
    return {"mean": float(s["la"].mean()), "bias": float((s["ja"] - s["la"]).mean()),
            "rate": float(s["ga"].mean()), "rate bias": float((s["gja"] - s["ga"]).mean()),
            "diff": float((s["lb"] - s["la"]).mean()),
            "rate diff": float((s["gb"] - s["ga"]).mean()),
            "B only": float((s["gb"] > s["ga"]).mean()),
            "A only": float((s["gb"] < s["ga"]).mean())}


@functools.cache
def _tango_table(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every (x, y) of n pairs with Tango's interval's ends: the labels' own interval."""
    xy = [(x, y) for x in range(n + 1) for y in range(n + 1 - x)]
    ends = np.array([tango_ci(x, y, n)["ci95"] for x, y in xy])
    x, y = (np.array(v, dtype=float) for v in zip(*xy, strict=True))
    return x, y, ends[:, 0], ends[:, 1]


def tango_exact_coverage(n: int, b_only: float, a_only: float) -> float:
    """The exact coverage of the labels' own paired interval (Tango's,
    :func:`~evaluator.analysis.intervals.tango_ci`) at n pairs where a pair passes B only
    with probability ``b_only`` and A only with ``a_only``: the trinomial probability of
    every (x, y) whose interval holds b_only - a_only, summed (the exact computation by
    which Newcombe 1998 and Fagerland, Lydersen & Laake 2013 compared paired intervals)."""
    from scipy.stats import multinomial

    x, y, low, high = _tango_table(n)
    truth = b_only - a_only
    mass = multinomial.pmf(np.column_stack([x, y, n - x - y]), n,
                           [b_only, a_only, 1.0 - b_only - a_only])
    return float(mass[(low - 1e-12 <= truth) & (truth <= high + 1e-12)].sum())


def tango_exact_grid(n: int, step: float = 0.04) -> dict[str, float]:
    """:func:`tango_exact_coverage` over a grid of (B only, A only) shares (A only <= B only,
    both in steps of ``step``): the least coverage anywhere, and the mean where at least 6
    and where fewer than 3 discordant pairs are expected."""
    cells = [(a, b, (a + b) * n, tango_exact_coverage(n, a, b))
             for a in np.arange(step, 0.61, step) for b in np.arange(0.0, a + 1e-9, step)
             if a + b < 0.95]
    many = [c for *_, d, c in cells if d >= 6]
    few = [c for *_, d, c in cells if d < 3]
    return {"least": min(c for *_, c in cells),
            "many": float(np.mean(many)) if many else float("nan"),
            "few": float(np.mean(few)) if few else float("nan")}


# The intervals: (design, what) -> the truth it is checked against.
INTERVALS = {
    ("random", "labels only"): "mean", ("random", "PPI++"): "mean",
    ("random", "bias"): "bias", ("random", "rate labels only"): "rate",
    ("random", "rate PPI++"): "rate", ("random", "rate bias"): "rate bias",
    ("random", "B - A paired"): "diff",
    ("random", "rate B - A paired"): "rate diff",
    ("active", "labels only"): "mean", ("active", "PPI++"): "mean",
    ("active", "bias"): "bias", ("active", "rate labels only"): "rate",
    ("active", "rate PPI++"): "rate", ("active", "B - A independent"): "diff",
}


# The random-sheet intervals of PPI++ and the judge's bias (t), which `estimate` withholds
# under a minimum of labels (ppi.withhold): their cells there read "withheld", with the
# coverage the interval would have had in brackets (the evidence the minimum is read from).
WITHHELD_UNDER_MINIMUM = {("random", "PPI++"): MIN_LABELS_ESTIMATE,
                          ("random", "bias"): MIN_LABELS_BIAS,
                          ("random", "rate PPI++"): MIN_LABELS_ESTIMATE}


def shown(key: tuple, n: int) -> bool:
    """``estimate`` prints the interval ``key`` at ``n`` labels (see
    :data:`WITHHELD_UNDER_MINIMUM`)."""
    return n >= WITHHELD_UNDER_MINIMUM.get(key, 0)


def _active(s: dict[str, np.ndarray], system: str, n: int, rng: np.random.Generator,
            scale: tuple[float, float]) -> dict[str, ppi.Estimate]:
    label, judge, gate, gjudge = (s[f"l{system}"], s[f"j{system}"], s[f"g{system}"],
                                  s[f"gj{system}"])
    pi = np.asarray(inclusion_probabilities(s[f"u{system}"], n))
    taken = rng.random(label.size) < pi
    if not taken.any():
        return {}
    weights = np.where(taken, pi, 1.0)
    none = [None] * label.size

    def listed(values: np.ndarray) -> list:
        out = list(none)
        for i in np.flatnonzero(taken):
            out[i] = float(values[i])
        return out

    w = 1 / pi[taken]
    kish = float(w.sum() ** 2 / (w * w).sum())
    rate_variance = ppi.labelled_variance(gate[taken], w)
    gaps = listed(judge - label)
    rate_alone = ppi.ipw_mean(gjudge, listed(gate), weights, lam=0.0)
    rate_ppi = ppi.ipw_mean(gjudge, listed(gate), weights)
    low, high = scale
    return {"labels only": ppi.bounded_mean(ppi.ipw_mean(judge, listed(label), weights,
                                                         lam=0.0), low, high, kish),
            "PPI++": ppi.bounded_mean(ppi.ipw_mean(judge, listed(label), weights), low, high,
                                      kish),
            "bias": ppi.ipw_mean(np.zeros(label.size), gaps, weights, lam=0.0),
            "rate labels only": ppi.bounded_rate(rate_alone, kish, rate_variance),
            "rate PPI++": ppi.bounded_rate(rate_ppi, kish, rate_variance)}


def replicate(name: str, n: int, seed: int, size: int = POPULATION) -> dict[tuple, ppi.Estimate]:
    """One population of systems A and B; every interval of both designs at ``n`` labels."""
    rng = np.random.default_rng(seed)
    s = systems(name, rng, size)
    drawn = rng.choice(size, n, replace=False)
    rest = np.setdiff1d(np.arange(size), drawn)
    la, ja, ga, gja = s["la"], s["ja"], s["ga"], s["gja"]
    d, g = s["lb"] - la, s["jb"] - ja
    gd, gg = s["gb"] - ga, s["gjb"] - gja
    scale = SCENARIOS[name][2]
    out = {("random", "labels only"): ppi.bounded_mean(ppi.classical_mean(la[drawn]), *scale,
                                                       n),
           ("random", "PPI++"): ppi.bounded_mean(ppi.ppi_mean(la[drawn], ja[drawn], ja[rest]),
                                                 *scale, n),
           ("random", "bias"): ppi.classical_mean(ja[drawn] - la[drawn]),
           ("random", "rate labels only"): ppi.classical_rate(ga[drawn]),
           ("random", "rate PPI++"): ppi.ppi_rate(ga[drawn], gja[drawn], gja[rest]),
           ("random", "rate bias"): rate_bias(gja[drawn], ga[drawn]),
           ("random", "B - A paired"): ppi.ppi_mean(d[drawn], g[drawn], g[rest]),
           ("random", "rate B - A paired"): ppi.rate_difference(
               paired_rate_difference(gd[drawn], gg[drawn], gg[rest]))}
    active_a = _active(s, "a", n, rng, scale)
    active_b = _active(s, "b", n, rng, scale)
    for what, value in active_a.items():
        out[("active", what)] = value
    if active_a and active_b:
        out[("active", "B - A independent")] = ppi.independent_difference(
            active_a["PPI++"], active_b["PPI++"])
    return out


def cell_figures(name: str, n: int, replicates: int, seed: int,
                 truth: dict[str, float] | None = None) -> dict[tuple, dict]:
    """Per interval: coverage among the replicates with an interval (None: none had one),
    the share with none, the median width, and the normal interval's coverage (the same
    estimate and SE, 1.96 in place of t: what the quantile alone changes)."""
    truth = truth or truths(name)
    hits: dict[tuple, list[bool]] = {k: [] for k in INTERVALS}
    normal: dict[tuple, list[bool]] = {k: [] for k in INTERVALS}
    widths: dict[tuple, list[float]] = {k: [] for k in INTERVALS}
    missing = dict.fromkeys(INTERVALS, 0)
    for r in range(replicates):
        result = replicate(name, n, seed + 7919 * r + n)
        for key, quantity in INTERVALS.items():
            estimate = result.get(key)
            ci = None if estimate is None else estimate.ci95
            if ci is None:
                missing[key] += 1
                continue
            value = truth[quantity]
            hits[key].append(ci[0] - 1e-12 <= value <= ci[1] + 1e-12)
            widths[key].append(ci[1] - ci[0])
            if estimate.se is not None and estimate.estimate is not None:
                half = ppi.Z95 * estimate.se
                normal[key].append(abs(estimate.estimate - value) <= half)
    return {key: {"coverage": float(np.mean(hits[key])) if hits[key] else None,
                  "normal": float(np.mean(normal[key])) if normal[key] else None,
                  "width": float(np.median(widths[key])) if widths[key] else None,
                  "missing": missing[key] / replicates, "replicates": replicates}
            for key in INTERVALS}


def in_band(figures: dict) -> bool:
    """A cell keeps its promise: coverage within :data:`BAND` (no interval at all: it is
    withheld, which keeps it)."""
    c = figures["coverage"]
    return c is None or BAND[0] <= c <= BAND[1]


# The minimum is read over every scenario and every random-sheet interval (an active sheet
# has its own floor, ppi.ACTIVE_MIN_LABELS): the smallest n at and above which none covers
# less than the band's lower end, up to the Monte Carlo error. It guards against stating a
# direction from an interval that misses too often; a cell above the band (too wide, never
# misleading) is reported in the table as a width cost, not counted against the minimum.


def monte_carlo_slack(replicates: int) -> float:
    """The half-width of a coverage's 95% Monte Carlo interval at 95% coverage:
    1.96 sqrt(0.95 * 0.05 / replicates) (1.9 points at 500 replicates)."""
    return 1.96 * (0.95 * 0.05 / replicates) ** 0.5


def minimum(table: dict[tuple[str, int], dict[tuple, dict]], keys: list[tuple],
            slack: float = 0.0) -> int | None:
    """The smallest n of the grid at and above which no random-sheet cell of ``keys``, in
    any scenario, covers less than the band's lower end less ``slack`` (the Monte Carlo
    error)."""
    ns = sorted({n for _, n in table})
    keys = [k for k in keys if k[0] == "random"]
    for n in ns:
        if all(_not_under(table[(name, m)][key], slack) for (name, m) in table if m >= n
               for key in keys):
            return n
    return None


def _not_under(figures: dict, slack: float) -> bool:
    c = figures["coverage"]
    return c is None or c >= BAND[0] - slack


def has_figure(figures: dict) -> bool:
    """A cell's coverage and width mean something: some replicate gave an interval, and
    fewer than :data:`NO_FIGURE` of them gave none."""
    return figures["coverage"] is not None and figures["missing"] < NO_FIGURE


def _cell(f: dict) -> str:
    if f["coverage"] is None:
        return "withheld"
    if not has_figure(f):
        share = 100 * f["missing"]  # under 100: some replicate gave an interval
        return f"\u2014 ({share:.1f}% no CI)" if share < 99.95 else "\u2014 (>99.9% no CI)"
    text = f"{100 * f['coverage']:.1f} / {f['width']:.3f}"
    if f["missing"]:
        share = 100 * f["missing"]
        text += f" ({share:.0f}% no CI)" if share >= 0.5 else " (<1% no CI)"
    return text + ("" if in_band(f) else " *")


def _withheld_cell(f: dict) -> str:
    """A cell `estimate` withholds under the minimum: "withheld", and in brackets the
    coverage the interval would have had."""
    return f"withheld ({100 * f['coverage']:.1f})" if has_figure(f) else "withheld"


def _print_rows(heads: list[str], rows: list[tuple[str, list[str]]], label: int = 32) -> None:
    """A scenario's block: every column as wide as the widest cell, two spaces more, so no
    cell runs into the next."""
    width = max(len(c) for c in [*heads, *(c for _, cells in rows for c in cells)]) + 2
    print(f"  {'':<{label}}" + "".join(f"{h:>{width}}" for h in heads))
    for name, cells in rows:
        print(f"  {name:<{label}}" + "".join(f"{c:>{width}}" for c in cells))


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true",
                        help="60 replicates, n 10 and 30, three scenarios")
    parser.add_argument("--scenarios", nargs="+", choices=tuple(SCENARIOS),
                        help="only these scenarios (the minimum is then over them alone)")
    parser.add_argument("--ns", nargs="+", type=int,
                        help="only these label counts (e.g. a recheck of some cells with "
                             "more replicates)")
    args = parser.parse_args(argv)
    replicates = 60 if args.quick else args.replicates
    ns = tuple(args.ns) if args.ns else (10, 30) if args.quick else NS
    names = (("decent", "confidently_wrong", "edge") if args.quick else tuple(SCENARIOS))
    if args.scenarios:
        names = tuple(args.scenarios)
    started = time.perf_counter()
    print(f"re-run: {rerun_command(None if argv is None else [__file__, *argv])}")
    print(f"coverage % / median width of each 95% CI; {replicates} replicates per cell; "
          f"N = {POPULATION} cases; * outside {100 * BAND[0]:.0f}-{100 * BAND[1]:.0f}%; "
          "(k% no CI): replicates with no interval (every label the same), left out of the "
          "coverage")
    table: dict[tuple[str, int], dict[tuple, dict]] = {}
    for name in names:
        truth = truths(name)
        print(f"\n{name}: truth " + ", ".join(f"{k} {v:.3f}" for k, v in truth.items()))
        for n in ns:
            table[(name, n)] = cell_figures(name, n, replicates, args.seed, truth)
        rows = [(f"{key[0]} {key[1]}", [_cell(table[(name, n)][key]) if shown(key, n)
                                         else _withheld_cell(table[(name, n)][key])
                                         for n in ns])
                for key in INTERVALS]
        rows.append(("(rate B - A: labels alone, exact)", [
            f"{100 * tango_exact_coverage(n, truth['B only'], truth['A only']):.1f} / "
            f"{n * (truth['B only'] + truth['A only']):.1f} disc." for n in ns]))
        rows.append(("(normal quantile: coverage)", [
            f"PPI++ {100 * (table[(name, n)][('random', 'PPI++')]['normal'] or 0):.1f}"
            for n in ns]))
        _print_rows([f"n {n}" for n in ns], rows)
    print("\nactive / random median width at the same n (< 1: active narrower)")
    ratios: dict[tuple[str, int, str], float] = {}
    for name in names:
        cells = []
        for n in ns:
            parts = []
            for what in ("PPI++", "labels only"):
                pair = [table[(name, n)][(d, what)] for d in ("active", "random")]
                a, r = (f["width"] if has_figure(f) else None for f in pair)
                ratio = a / r if a and r else float("nan")
                ratios[(name, n, what)] = ratio
                parts.append(f"{ratio:.2f}")
            cells.append(" / ".join(parts))
        print(f"  {name:<20} (PPI++ / labels only)" + "".join(f"{c:>16}" for c in cells))
    bias_keys = [k for k in INTERVALS if "bias" in k[1]]
    estimate_keys = [k for k in INTERVALS if "B - A" not in k[1] and k not in bias_keys]
    difference_keys = [k for k in INTERVALS if "B - A" in k[1]]
    slack = monte_carlo_slack(replicates)
    low_est = minimum(table, estimate_keys, slack)
    low_bias = minimum(table, bias_keys, slack)
    low_diff = minimum(table, difference_keys, slack)
    print(f"\nminimum labelled cases with no random-sheet cell under {100 * BAND[0]:.0f}% "
          f"beyond the Monte Carlo error (-{100 * slack:.1f} points) at and above it, in "
          f"any scenario (grid {', '.join(map(str, ns))}): estimate {low_est}, "
          f"the judge's bias {low_bias}, difference {low_diff}")
    print(f"the tool's minimum (evaluator/analysis/minimum.py): {MIN_LABELS_ESTIMATE} per "
          "system; under it " + ", ".join(f"{k[0]} {k[1]} (under {m})" for k, m in
                                          WITHHELD_UNDER_MINIMUM.items())
          + " are withheld (\"withheld (c)\": c the coverage they would have had)")
    worst = {}
    for key in INTERVALS:
        values = [table[c][key]["coverage"] for c in table
                  if has_figure(table[c][key]) and shown(key, c[1])]
        worst[key] = (min(values), max(values)) if values else (None, None)
    print("\nrange of coverage per interval printed by estimate, over every scenario and n:")
    for key, (lo, hi) in worst.items():
        span = "withheld" if lo is None else f"{100 * lo:.1f} - {100 * hi:.1f}%"
        print(f"  {key[0] + ' ' + key[1]:<32} {span}")
    print("\nthe labels' own paired pass-rate interval (Tango's) by exact enumeration over "
          "(B only, A only) shares 0.04-0.60 in steps of 0.04: least coverage anywhere / mean "
          "where >= 6 discordant pairs are expected / mean where < 3 are")
    exact = {n: tango_exact_grid(n) for n in ns}
    print("  " + "".join(f"{'n ' + str(n) + ': ' + format(100 * e['least'], '.1f') + ' / ' + format(100 * e['many'], '.1f') + ' / ' + format(100 * e['few'], '.1f'):>26}"
                         for n, e in exact.items()))
    print(f"\n{time.perf_counter() - started:.1f} s")
    return {"table": table, "ratios": ratios, "minimum": (low_est, low_diff),
            "bias_minimum": low_bias, "range": worst,
            "exact": exact}


if __name__ == "__main__":
    main()
