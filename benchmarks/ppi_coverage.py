"""Coverage and width of the clinician-level 95% CIs (evaluator.analysis.ppi), by simulation.

Every figure docs/statistics.md quotes for `evaluator estimate` comes from this script. Each
replicate draws a fresh population of cases with clinicians' labels and a judge's scores,
then a simple random sample of labels (PPI++ and labels only, as `estimate` computes them
for a random sheet) and an active Poisson sample with `designs.inclusion_probabilities`
(the inverse-probability-weighted forms, as for an active sheet). A CI covers when it holds
the truth: the clinicians' mean of the population the cases come from.

Judges (labels 1-5 with probabilities 0.10, 0.20, 0.30, 0.25, 0.15; truth 3.15):
* issue - the issue's scenario and the tests': biased by +0.5, noise sd 1.5 on 30% of cases
  (unsure) and 0.3 elsewhere, rounded into 1-5; its uncertainty (the sd of its score
  distribution) is sqrt(sd^2 + 1/12).
* confidently_wrong - sure (uncertainty 0.02) on 90% of cases yet 2 too high on 30% of
  those; unsure (1.5) on the rest: its uncertainty points the wrong way for an active draw.

Synthetic numbers only: no case and no case text. Re-run:
    PYTHONPATH=. .venv/bin/python benchmarks/ppi_coverage.py [--replicates 1000] [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_common import rerun_command
from evaluator.analysis import ppi
from evaluator.analysis.agreement import agreement_share
from evaluator.analysis.designs import active_draw, inclusion_probabilities

LABEL_P = np.array([0.10, 0.20, 0.30, 0.25, 0.15])
TRUTH = float((np.arange(1, 6) * LABEL_P).sum())


def issue(rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    labels = rng.choice(np.arange(1, 6), size, p=LABEL_P).astype(float)
    sd = np.where(rng.random(size) < 0.3, 1.5, 0.3)
    judge = np.clip(np.round(labels + 0.5 + rng.normal(0, sd)), 1, 5)
    return labels, judge, np.sqrt(sd ** 2 + 1 / 12)


def confidently_wrong(rng: np.random.Generator,
                      size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    labels = rng.choice(np.arange(1, 6), size, p=LABEL_P).astype(float)
    unsure = rng.random(size) < 0.1
    wrong = ~unsure & (rng.random(size) < 0.3)
    judge = labels.copy()
    judge[wrong] = np.clip(labels[wrong] + 2, 1, 7)
    judge[unsure] = labels[unsure] + rng.normal(0, 1.5, int(unsure.sum()))
    return labels, judge, np.where(unsure, 1.5, 0.02)


JUDGES: dict[str, Callable[..., tuple[np.ndarray, np.ndarray, np.ndarray]]] = {
    "issue": issue, "confidently_wrong": confidently_wrong}
ESTIMATORS = ("random PPI++", "random labels only", "active PPI++", "active labels only",
              "judge only")


def replicate(judge_name: str, size: int, n: int, seed: int) -> dict[str, ppi.Estimate]:
    """One population and both designs' estimates (an active draw of no case: none)."""
    rng = np.random.default_rng(seed)
    labels, judge, uncertainty = JUDGES[judge_name](rng, size)
    drawn = rng.choice(size, n, replace=False)
    rest = np.setdiff1d(np.arange(size), drawn)
    out = {"random PPI++": ppi.ppi_mean(labels[drawn], judge[drawn], judge[rest]),
           "random labels only": ppi.classical_mean(labels[drawn]),
           "judge only": ppi.judge_mean(judge)}
    pi = np.asarray(inclusion_probabilities(uncertainty, n))
    taken = rng.random(size) < pi
    if taken.any():
        partial = [v if t else None for v, t in zip(labels, taken, strict=True)]
        weights = np.where(taken, pi, 1.0)
        out["active PPI++"] = ppi.ipw_mean(judge, partial, weights)
        out["active labels only"] = ppi.ipw_mean(judge, partial, weights, lam=0.0)
    return out


def table(judge_name: str, size: int, n: int, replicates: int, seed: int) -> dict[str, dict]:
    """Coverage (share of CIs holding the truth; a missing CI counts as a miss) and median
    width per estimator."""
    hits: dict[str, list[bool]] = {name: [] for name in ESTIMATORS}
    widths: dict[str, list[float]] = {name: [] for name in ESTIMATORS}
    for r in range(replicates):
        for name, estimate in replicate(judge_name, size, n, seed + r).items():
            ci = estimate.ci95
            hits[name].append(ci is not None and ci[0] <= TRUTH <= ci[1])
            if ci is not None:
                widths[name].append(ci[1] - ci[0])
    return {name: {"coverage": float(np.mean(hits[name])) if hits[name] else None,
                   "width": float(np.median(widths[name])) if widths[name] else None,
                   "replicates": len(hits[name])} for name in ESTIMATORS}


def differences(replicates: int, seed: int, size: int = 1000, n: int = 80) -> dict[str, dict]:
    """System B's labels are A's + 1 on 30% of cases (truth B - A = 0.3); both judged by a
    judge like the issue's. Paired: one random draw for both (PPI++ on the per-case
    differences); independent: separate draws."""
    hits: dict[str, list[bool]] = {"paired": [], "independent": []}
    widths: dict[str, list[float]] = {"paired": [], "independent": []}
    for r in range(replicates):
        rng = np.random.default_rng(seed + r)
        la, ja, _ = issue(rng, size)
        lb = la + rng.choice([0, 1], size, p=[0.7, 0.3])
        jb = np.clip(np.round(lb + 0.5 + rng.normal(0, 0.6, size)), 1, 6)
        drawn, other = (rng.choice(size, n, replace=False) for _ in range(2))
        rest, rest_other = (np.setdiff1d(np.arange(size), d) for d in (drawn, other))
        results = {
            "paired": ppi.ppi_mean(lb[drawn] - la[drawn], (jb - ja)[drawn], (jb - ja)[rest]),
            "independent": ppi.independent_difference(
                ppi.ppi_mean(la[drawn], ja[drawn], ja[rest]),
                ppi.ppi_mean(lb[other], jb[other], jb[rest_other]))}
        for name, result in results.items():
            hits[name].append(result.ci95[0] <= 0.3 <= result.ci95[1])
            widths[name].append(result.ci95[1] - result.ci95[0])
    return {name: {"coverage": float(np.mean(hits[name])),
                   "width": float(np.median(widths[name]))} for name in hits}


def weighted_share(draws: int, seed: int) -> dict[str, float]:
    """`agree` on an active sheet: 2,000 cases where the judge agrees with the clinicians on
    90% of the cases it is sure of and 30% of the others (30% unsure); each active draw of an
    expected 100 over-represents the unsure ones. The weighted exact-agreement share (Hajek,
    Wilson on Kish's n_eff) against the drawn cases' plain share."""
    rng = np.random.default_rng(25)
    ids = [f"p{i:04d}" for i in range(2000)]
    unsure = rng.random(2000) < 0.3
    uncertainty = dict(zip(ids, np.where(unsure, 1.5, 0.3).tolist(), strict=True))
    agrees = np.where(unsure, rng.random(2000) < 0.3, rng.random(2000) < 0.9)
    truth = float(agrees.mean())
    position = {c: i for i, c in enumerate(ids)}
    weighted, plain, covered = [], [], []
    for r in range(draws):
        # Floor 0.2 (the default before issue 34): the figures docs/statistics.md quotes.
        draw = active_draw(uncertainty, 100, seed + r, criterion="accuracy", floor=0.2)
        hits = agrees[[position[c] for c in draw.chosen]]
        share = agreement_share(hits, [1 / draw.probabilities[c] for c in draw.chosen])
        weighted.append(share["value"])
        plain.append(float(np.mean(hits)))
        covered.append(share["ci95"][0] <= truth <= share["ci95"][1])
    return {"run share": truth, "weighted - run": float(np.mean(weighted)) - truth,
            "plain - run": float(np.mean(plain)) - truth, "coverage": float(np.mean(covered))}


def _figure(value: float | None, percent: bool) -> str:
    if value is None:
        return "-"
    return f"{100 * value:.1f}%" if percent else f"{value:.3f}"


def _print(title: str, rows: dict[str, dict[str, dict]], columns: tuple[str, ...]) -> None:
    print(f"\n{title}")
    print(f"  {'':<24}" + "".join(f"{c:>22}" for c in columns))
    for label, figures in rows.items():
        cells = [f"{_figure(figures[c]['coverage'], True)} / {_figure(figures[c]['width'], False)}"
                 if c in figures else "-" for c in columns]
        print(f"  {label:<24}" + "".join(f"{cell:>22}" for cell in cells))


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="40 replicates, one table")
    args = parser.parse_args(argv)
    replicates = 40 if args.quick else args.replicates
    started = time.perf_counter()
    print(f"coverage / median width of 95% CIs; {replicates} replicates each; truth {TRUTH:g}")
    figures: dict[str, dict] = {}
    main_rows = {"issue, N 2000, n 100": table("issue", 2000, 100, replicates, args.seed)}
    figures["main"] = main_rows
    _print("the issue's judge, N = 2,000 cases, n = 100 labels", main_rows, ESTIMATORS)
    if not args.quick:
        few = {f"issue, N 2000, n {n}": table("issue", 2000, n, replicates, args.seed)
               for n in (10, 20, 30)}
        figures["few_labels"] = few
        _print("few labels", few, ESTIMATORS[:4])
        wrong = {f"confidently wrong, n {n}": table("confidently_wrong", 2000, n, replicates,
                                                      args.seed) for n in (30, 100)}
        figures["confidently_wrong"] = wrong
        _print("a judge whose uncertainty points the wrong way, N = 2,000", wrong,
               ESTIMATORS[:4])
        most = {f"issue, N {size}, n {n}": table("issue", size, n, replicates, args.seed)
                for size, n in ((50, 45), (100, 80))}
        figures["most_labelled"] = most
        _print("most cases labelled", most, ESTIMATORS[:2])
        diff = differences(replicates, args.seed)
        figures["differences"] = diff
        _print("B - A, N = 1,000, n = 80 per system (truth 0.3)", {"difference": diff},
               ("paired", "independent"))
        share = weighted_share(replicates, args.seed)
        figures["agree_weighted_share"] = share
        print("\nagree, active sheet: exact-agreement share, mean over draws (run share "
              f"{share['run share']:.3f})\n  weighted - run {share['weighted - run']:+.3f}; "
              f"drawn cases' plain share - run {share['plain - run']:+.3f}; "
              f"Wilson on Kish n_eff covers {100 * share['coverage']:.1f}%")
    print(f"\n{time.perf_counter() - started:.1f} s")
    print(f"re-run: {rerun_command(None if argv is None else [__file__, *argv])}")
    return figures


if __name__ == "__main__":
    main()
