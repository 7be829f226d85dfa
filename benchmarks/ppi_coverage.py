"""Coverage and width of the clinician-level 95% CIs (evaluator.analysis.estimate.ppi), by
simulation.

Every figure docs/statistics.md quotes for `evaluator estimate` comes from this script. Each
replicate draws a fresh population of cases with clinicians' labels and a judge's scores,
then a simple random sample of labels (PPI++ and labels only, as `estimate` computes them
for a random sheet) and an active Poisson sample with `designs.inclusion_probabilities`
(the inverse-probability-weighted forms, as for an active sheet), at the default floor
(0.6) and at 0.2 (the default before issue 34), from the same uniform draws. A CI covers
when it holds the truth: the clinicians' mean of the population the cases come from.

Judges (labels 1-5 with probabilities 0.10, 0.20, 0.30, 0.25, 0.15; truth 3.15):
* issue - the issue's scenario and the tests': biased by +0.5, noise sd 1.5 on 30% of cases
  (unsure) and 0.3 elsewhere, rounded into 1-5; its uncertainty (the sd of its score
  distribution) is sqrt(sd^2 + 1/12).
* confidently_wrong - sure (uncertainty 0.02) on 90% of cases yet 2 too high on 30% of
  those; unsure (1.5) on the rest: its uncertainty points the wrong way for an active draw.
* wrong_on_20 - issue 34's: confidently wrong on 20% of cases (a narrow distribution,
  uncertainty 0.1, around a value 2 from the label: +2 for labels 1-3, -2 for 4-5) and
  compressed towards the middle elsewhere (expected score 3 + 0.5 (label - 3) + noise sd
  0.3, a wide distribution: uncertainty 0.8-1.2); N = 1,500, 60 labels.

Pass rates (0/1 outcomes, a `--pass` gate; truth: the pass rate p of the population):
* pass_good - sure and right on 85% of cases (P(pass) 0.9 or 0.1), unsure elsewhere (0.35 to
  0.65, so its pass/fail there is a coin toss);
* pass_wrong - sure and wrong on 20% (P(pass) 0.98 for a failing case, 0.02 for a passing
  one), and leaning the right way but unsure elsewhere (0.4 + 0.2 label + noise sd 0.1);
the judge's argmax pass/fail is the prediction and sqrt(q (1 - q)) its uncertainty. Each CI
twice: before (the normal interval `estimate` gave until issue 34) and after (what it gives
now: ppi.classical_rate, ppi.ppi_rate, ppi.bounded_rate).

Synthetic numbers only: no case and no case text. Re-run:
    PYTHONPATH=. .venv/bin/python benchmarks/ppi_coverage.py [--replicates 1000] [--quick]
        [--only pass-rates]
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
from evaluator.analysis.agreement.agreement import agreement_share
from evaluator.analysis.designs import DEFAULT_FLOOR, active_draw, inclusion_probabilities
from evaluator.analysis.estimate import ppi
from evaluator.analysis.intervals import kish_n_eff, wilson_ci

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


def wrong_on_20(rng: np.random.Generator,
                size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    labels = rng.choice(np.arange(1, 6), size, p=LABEL_P).astype(float)
    wrong = rng.random(size) < 0.2
    judge = 3 + 0.5 * (labels - 3) + rng.normal(0, 0.3, size)
    judge[wrong] = np.where(labels[wrong] <= 3, labels[wrong] + 2, labels[wrong] - 2)
    return labels, judge, np.where(wrong, 0.1, 0.8 + 0.4 * rng.random(size))


JUDGES: dict[str, Callable[..., tuple[np.ndarray, np.ndarray, np.ndarray]]] = {
    "issue": issue, "confidently_wrong": confidently_wrong, "wrong_on_20": wrong_on_20}
OLD_FLOOR = 0.2  # the default floor before issue 34
ESTIMATORS = ("random PPI++", "random labels only", "active PPI++", "active labels only",
              "judge only")
OLD_ACTIVE = ("active PPI++, floor 0.2", "active labels only, floor 0.2")


def _active(judge: np.ndarray, labels: np.ndarray, uncertainty: np.ndarray, n: int,
            uniforms: np.ndarray, floor: float) -> dict[str, ppi.Estimate]:
    pi = np.asarray(inclusion_probabilities(uncertainty, n, floor))
    taken = uniforms < pi
    if not taken.any():
        return {}
    partial = [v if t else None for v, t in zip(labels, taken, strict=True)]
    weights = np.where(taken, pi, 1.0)
    return {"active PPI++": ppi.ipw_mean(judge, partial, weights),
            "active labels only": ppi.ipw_mean(judge, partial, weights, lam=0.0),
            "kish": kish_n_eff(1 / pi[taken]) / int(taken.sum())}


def replicate(judge_name: str, size: int, n: int, seed: int,
              floors: tuple[float, ...] = (DEFAULT_FLOOR, OLD_FLOOR)) -> dict:
    """One population and both designs' estimates, the active one at each of ``floors``
    from the same uniform draws (an active draw of no case: none); "kish": Kish's n_eff
    over the number drawn, at the first floor."""
    rng = np.random.default_rng(seed)
    labels, judge, uncertainty = JUDGES[judge_name](rng, size)
    drawn = rng.choice(size, n, replace=False)
    rest = np.setdiff1d(np.arange(size), drawn)
    out = {"random PPI++": ppi.ppi_mean(labels[drawn], judge[drawn], judge[rest]),
           "random labels only": ppi.classical_mean(labels[drawn]),
           "judge only": ppi.judge_mean(judge)}
    uniforms = rng.random(size)
    for k, floor in enumerate(floors):
        for name, value in _active(judge, labels, uncertainty, n, uniforms, floor).items():
            out[name if k == 0 else f"{name}, floor {floor:g}"] = value
    return out


def _coverage_ci(hits: list[bool]) -> list[float] | None:
    return wilson_ci(int(sum(hits)), len(hits))["ci95"] if hits else None


def table(judge_name: str, size: int, n: int, replicates: int, seed: int,
          floors: tuple[float, ...] = (DEFAULT_FLOOR, OLD_FLOOR)) -> dict[str, dict]:
    """Coverage (share of CIs holding the truth; a missing CI counts as a miss), its Wilson
    95% CI over the replicates, and median width per estimator; "kish": the median of
    Kish's n_eff / n of the active draws at the first floor."""
    names = ESTIMATORS + tuple(f"{e}, floor {f:g}" for f in floors[1:]
                               for e in ("active PPI++", "active labels only"))
    hits: dict[str, list[bool]] = {name: [] for name in names}
    widths: dict[str, list[float]] = {name: [] for name in names}
    kish: list[float] = []
    for r in range(replicates):
        result = replicate(judge_name, size, n, seed + r, floors)
        if "kish" in result:
            kish.append(result.pop("kish"))
        for name in names:
            ci = result[name].ci95 if name in result else None
            hits[name].append(ci is not None and ci[0] <= TRUTH <= ci[1])
            if ci is not None:
                widths[name].append(ci[1] - ci[0])
    out = {name: {"coverage": float(np.mean(hits[name])) if hits[name] else None,
                  "coverage_ci": _coverage_ci(hits[name]),
                  "width": float(np.median(widths[name])) if widths[name] else None,
                  "replicates": len(hits[name])} for name in names}
    out["kish"] = float(np.median(kish)) if kish else None
    return out


def pass_good(rng: np.random.Generator, size: int,
              rate: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    labels = (rng.random(size) < rate).astype(float)
    q = np.where(labels == 1, 0.9, 0.1)
    unsure = rng.random(size) < 0.15
    q[unsure] = rng.uniform(0.35, 0.65, int(unsure.sum()))
    return labels, (q >= 0.5).astype(float), np.sqrt(q * (1 - q))


def pass_wrong(rng: np.random.Generator, size: int,
               rate: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    labels = (rng.random(size) < rate).astype(float)
    q = np.clip(0.4 + 0.2 * labels + rng.normal(0, 0.1, size), 0.01, 0.99)
    wrong = rng.random(size) < 0.2
    q[wrong] = np.where(labels[wrong] == 1, 0.02, 0.98)
    return labels, (q >= 0.5).astype(float), np.sqrt(q * (1 - q))


PASS_JUDGES = {"good": pass_good, "confidently wrong": pass_wrong}
RATE_ESTIMATORS = ("random labels only", "random PPI++", "active labels only", "active PPI++")


def rate_replicate(judge_name: str, rate: float, size: int, n: int,
                   seed: int) -> dict[str, tuple[ppi.Estimate, ppi.Estimate]]:
    """One population's pass-rate estimates, each as (before, after): the normal interval
    and the bounded one, as `estimate` computes them for a random and an active sheet."""
    rng = np.random.default_rng(seed)
    labels, judge, uncertainty = PASS_JUDGES[judge_name](rng, size, rate)
    drawn = rng.choice(size, n, replace=False)
    rest = np.setdiff1d(np.arange(size), drawn)
    out = {"random labels only": (ppi.classical_mean(labels[drawn]),
                                  ppi.classical_rate(labels[drawn])),
           "random PPI++": (ppi.ppi_mean(labels[drawn], judge[drawn], judge[rest]),
                            ppi.ppi_rate(labels[drawn], judge[drawn], judge[rest]))}
    pi = np.asarray(inclusion_probabilities(uncertainty, n))
    taken = rng.random(size) < pi
    if taken.any():
        partial = [v if t else None for v, t in zip(labels, taken, strict=True)]
        weights = np.where(taken, pi, 1.0)
        kish = kish_n_eff(1 / pi[taken])
        variance = ppi.labelled_variance(labels[taken], 1 / pi[taken])
        for name, lam in (("active labels only", 0.0), ("active PPI++", None)):
            before = ppi.ipw_mean(judge, partial, weights, lam=lam)
            out[name] = (before, ppi.bounded_rate(before, kish, variance))
    return out


def rate_table(judge_name: str, rate: float, size: int, n: int, replicates: int,
               seed: int) -> dict[str, dict]:
    """Per estimator, before and after: coverage of the population's pass rate (a missing
    CI counts as a miss), median width, and (before) the share of CIs reaching outside
    [0, 1]."""
    figures: dict[str, dict[str, list]] = {
        name: {"before": [], "after": [], "w_before": [], "w_after": [], "outside": []}
        for name in RATE_ESTIMATORS}
    for r in range(replicates):
        for name, pair in rate_replicate(judge_name, rate, size, n, seed + r).items():
            for when, estimate in zip(("before", "after"), pair, strict=True):
                ci = estimate.ci95
                figures[name][when].append(ci is not None and ci[0] <= rate <= ci[1])
                if ci is not None:
                    figures[name][f"w_{when}"].append(ci[1] - ci[0])
                    if when == "before":
                        figures[name]["outside"].append(ci[0] < 0 or ci[1] > 1)
        for name in RATE_ESTIMATORS:  # an active draw of no case: a miss
            for when in ("before", "after"):
                figures[name][when] += [False] * (r + 1 - len(figures[name][when]))
    return {name: {"before": float(np.mean(f["before"])), "after": float(np.mean(f["after"])),
                   "after_ci": _coverage_ci(f["after"]),
                   "width_before": float(np.median(f["w_before"])) if f["w_before"] else None,
                   "width_after": float(np.median(f["w_after"])) if f["w_after"] else None,
                   "outside": float(np.mean(f["outside"])) if f["outside"] else 0.0}
            for name, f in figures.items()}


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
    widths = [max(22, len(c) + 2) for c in columns]
    print(f"\n{title}")
    print(f"  {'':<24}" + "".join(f"{c:>{w}}" for c, w in zip(columns, widths, strict=True)))
    for label, figures in rows.items():
        cells = [f"{_figure(figures[c]['coverage'], True)} / {_figure(figures[c]['width'], False)}"
                 if c in figures else "-" for c in columns]
        print(f"  {label:<24}" + "".join(f"{cell:>{w}}"
                                         for cell, w in zip(cells, widths, strict=True)))


def _with_ci(figures: dict) -> str:
    low, high = figures["coverage_ci"]
    return (f"{_figure(figures['coverage'], True)} [{100 * low:.1f}, {100 * high:.1f}] / "
            f"{_figure(figures['width'], False)}")


def _print_ci(title: str, columns: dict[str, dict[str, dict]],
              names: tuple[str, ...]) -> None:
    """Estimators as rows, each column a table: coverage [its 95% CI] / median width."""
    print(f"\n{title}")
    print(f"  {'':<32}" + "".join(f"{c:>34}" for c in columns))
    for name in names:
        print(f"  {name:<32}" + "".join(f"{_with_ci(t[name]):>34}" for t in columns.values()))
    print(f"  {'Kish n_eff / n (active draws)':<32}"
          + "".join(f"{_figure(t['kish'], False):>34}" for t in columns.values()))


def _print_rates(title: str, rows: dict[str, dict[str, dict]]) -> None:
    print(f"\n{title}")
    print("  each cell: coverage before -> after (median width before -> after); "
          "before: normal CIs, [share reaching outside [0, 1]]")
    for label, figures in rows.items():
        print(f"  {label}")
        for name in RATE_ESTIMATORS:
            f = figures[name]
            low, high = f["after_ci"]
            print(f"    {name:<20} {_figure(f['before'], True):>6} -> "
                  f"{_figure(f['after'], True):>6} [{100 * low:.1f}, {100 * high:.1f}]   "
                  f"({_figure(f['width_before'], False)} -> "
                  f"{_figure(f['width_after'], False)})   [{_figure(f['outside'], True)}]")


def _rates(args: argparse.Namespace, replicates: int) -> dict[str, dict]:
    rate_rows = ({"good judge, pass rate 0.05, N 1000, n 20":
                  rate_table("good", 0.05, 1000, 20, replicates, args.seed)}
                 if args.quick else
                 {f"{judge} judge, pass rate {rate:g}, N 1000, n {n}":
                  rate_table(judge, rate, 1000, n, replicates, args.seed)
                  for judge in PASS_JUDGES for rate in (0.05, 0.1, 0.5) for n in (10, 20, 30)})
    _print_rates("pass rates (a --pass gate), before and after issue 34 "
                 "(after: coverage [its Wilson 95% CI])", rate_rows)
    return rate_rows


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true",
                        help="40 replicates; the main table, issue 34's scenario, one pass rate")
    parser.add_argument("--only", choices=("pass-rates",),
                        help="only this section (pass-rates: the pass-rate table)")
    args = parser.parse_args(argv)
    replicates = 40 if args.quick else args.replicates
    # Issue 34's scenario: twice the replicates, so that its coverage's own CI is narrow.
    wrong_replicates = replicates if args.quick else 2 * replicates
    started = time.perf_counter()
    print(f"re-run: {rerun_command(None if argv is None else [__file__, *argv])}")
    print(f"coverage / median width of 95% CIs; {replicates} replicates each (issue 34's "
          f"scenario: {wrong_replicates}); truth {TRUTH:g}; active draws at the default floor "
          f"{DEFAULT_FLOOR:g} and, from the same uniforms, at {OLD_FLOOR:g} (the default "
          "before issue 34)")
    figures: dict[str, dict] = {}
    if args.only == "pass-rates":
        figures["pass_rates"] = _rates(args, replicates)
        print(f"\n{time.perf_counter() - started:.1f} s")
        return figures
    main_rows = {"issue, N 2000, n 100": table("issue", 2000, 100, replicates, args.seed)}
    figures["main"] = main_rows
    _print("the issue's judge, N = 2,000 cases, n = 100 labels", main_rows,
           ESTIMATORS + OLD_ACTIVE)
    wrong_ns = (60,) if args.quick else (25, 60)
    wrong20 = {f"n {n}": table("wrong_on_20", 1500, n, wrong_replicates, args.seed)
               for n in wrong_ns}
    figures["wrong_on_20"] = wrong20
    _print_ci("issue 34: the judge confidently wrong on 20% of cases, compressed towards "
              "the middle elsewhere; N = 1,500; coverage [its Wilson 95% CI] / median width",
              wrong20, ESTIMATORS[:4] + OLD_ACTIVE)
    figures["pass_rates"] = _rates(args, replicates)
    if not args.quick:
        few = {f"issue, N 2000, n {n}": table("issue", 2000, n, replicates, args.seed)
               for n in (10, 20, 30)}
        figures["few_labels"] = few
        _print("few labels", few, ESTIMATORS[:4] + OLD_ACTIVE)
        wrong = {f"confidently wrong, n {n}": table("confidently_wrong", 2000, n, replicates,
                                                      args.seed) for n in (30, 100)}
        figures["confidently_wrong"] = wrong
        _print("a judge whose uncertainty points the wrong way, N = 2,000", wrong,
               ESTIMATORS[:4] + OLD_ACTIVE)
        sweep = {f"{name}, n {n}, floor {floor:g}": table(name, size, n, replicates, args.seed,
                                                           floors=(floor,))
                 for name, size, n in (("confidently_wrong", 2000, 100),
                                       ("wrong_on_20", 1500, 60))
                 for floor in (0.05, 0.2, 0.4, 0.6)}
        figures["floors"] = sweep
        print("\nactive draws by --floor: coverage / median width, and the median of Kish's "
              "n_eff / n")
        for label, t in sweep.items():
            print(f"  {label:<38}" + "".join(
                f"{name}: {_figure(t[name]['coverage'], True)} / "
                f"{_figure(t[name]['width'], False)}   "
                for name in ("active PPI++", "active labels only"))
                  + f"n_eff/n {_figure(t['kish'], False)}")
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
        print("\nagree, active sheet (floor 0.2): exact-agreement share, mean over draws (run "
              f"share {share['run share']:.3f})\n  weighted - run "
              f"{share['weighted - run']:+.3f}; drawn cases' plain share - run "
              f"{share['plain - run']:+.3f}; Wilson on Kish n_eff covers "
              f"{100 * share['coverage']:.1f}%")
    print(f"\n{time.perf_counter() - started:.1f} s")
    return figures


if __name__ == "__main__":
    main()
