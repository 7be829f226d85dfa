"""How often a study's decision rule errs, by simulation (issue 48): the share of simulated
studies whose verdict (evaluator.study.rule.decide) declares the claim when it is false at
the margin (type I error of non-inferiority), when it is true by a clear amount (power), and
the "too few labels" guard under the minimum.

Each replicate builds a fresh population of N = 300 cases judged by two systems, A (the
reference) and B, then a study as `evaluator estimate` and the study's rule read it:
* clinicians' labels on 1-5 for A, drawn from the scenario's label distribution
  (small_n_coverage.SCENARIOS); B's label on the same case is A's moved by -1, 0 or +1
  (probabilities 0.2, 0.6, 0.2, kept within 1-5: the two systems' labels go together case by
  case), then cases chosen at random are moved one step at a time until the population's
  B - A is **exactly** the setting's truth (a mean: sum(label B - label A) / N; a pass
  rate through "accuracy >= 4": cases moved across the gate, 3 <-> 4). The truth is the
  finite population's own difference, checked after it is built;
* the judge's scores on every case from the labels, by the scenario's error model
  (small_n_coverage.SCENARIOS: decent, confidently_wrong, lenient, constant), for each
  system independently; a gate's judge outcome is its score passing the gate;
* a random sheet of n cases labelled for both systems (one draw: paired), and the paired
  difference B - A from `evaluator.analysis.estimate.estimate.difference` itself, on two
  in-memory systems of the trial_eligibility rubric (its `accuracy` criterion, 1-5): PPI++
  on per-case differences clipped to the scale's span (a mean), or paired_rate's Tango
  interval (a pass rate);
* the verdict: `evaluator.study.rule.decide(Rule(...), estimate, ci, n_labelled, cases)`,
  "shown", "not shown" or "too few labels" (no interval, or under the minimum of 20 pairs).
The intervals are made for an infinite population (no finite-population correction): with
n of 300 cases labelled the verdict is, if anything, conservative about the finite truth.

Settings:
1. type I error of non-inferiority: true B - A = -margin (margins 0.25 and 0.5 points of the
   mean; 0.1 of the pass rate), n = 20, 30, 60 pairs; the declared one-sided level is 2.5%;
2. power: true B - A = +0.5 points (mean) or +0.15 (pass rate), superiority and
   non-inferiority (margin 0.25 points; 0.1 for the pass rate), n = 30 and 60;
3. the guard: n = 15 pairs, under the minimum, in the type I settings: every verdict should
   be "too few labels".
Each cell: the share of studies whose verdict is "shown", with its Monte Carlo standard
error sqrt(p (1 - p) / replicates).

Synthetic numbers only. Re-run (about 5 minutes on the shared 2-core machine; --quick: 3 s):
    PYTHONPATH=. .venv/bin/python benchmarks/study_decision.py [--reps 2000] [--seed 0]
        [--quick]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_common import print_figures, rerun_command
from benchmarks.small_n_coverage import SCENARIOS as JUDGE_SCENARIOS
from evaluator.analysis.designs import LabelDesign
from evaluator.analysis.estimate.estimate import difference
from evaluator.analysis.estimate.inputs import System
from evaluator.analysis.gates import Gate
from evaluator.analysis.minimum import MIN_LABELS_DIFFERENCE
from evaluator.rubrics.load import load_rubric
from evaluator.study.rule import Rule, decide

POPULATION = 300
RUBRIC = "trial_eligibility"
CRITERION = "accuracy"
GATE = Gate(CRITERION, ">=", 4.0)
ENDPOINTS = ("mean", "pass rate")
SCENARIOS = ("decent", "confidently_wrong", "lenient", "constant")
NULL_NS = (20, 30, 60)
POWER_NS = (30, 60)
GUARD_N = 15
LEVEL = 0.025  # the rule's one-sided level
CEILING = 0.05  # the most a type I error may be (issue 48)
# B's label on a case: A's moved by -1, 0, +1 with these probabilities, before the truth is set.
STEP_P = (0.2, 0.6, 0.2)


@dataclass(frozen=True)
class Setting:
    """One simulated study: the endpoint ("mean" or "pass rate"), the true B - A in the
    population, and the rules read from the same estimate (kind, margin)."""

    endpoint: str
    truth: float
    rules: tuple[tuple[str, float | None], ...]

    def label(self, kind: str, margin: float | None) -> str:
        what = "mean" if self.endpoint == "mean" else "pass rate"
        rule = "superiority" if kind == "superiority" else f"NI margin {margin:g}"
        return f"{what} {self.truth:+g}, {rule}"


NULL_SETTINGS = (Setting("mean", -0.25, (("non-inferiority", 0.25),)),
                 Setting("mean", -0.5, (("non-inferiority", 0.5),)),
                 Setting("pass rate", -0.1, (("non-inferiority", 0.1),)))
POWER_SETTINGS = (Setting("mean", 0.5, (("superiority", None), ("non-inferiority", 0.25))),
                  Setting("pass rate", 0.15, (("superiority", None),
                                              ("non-inferiority", 0.1))))


def _set_truth(la: np.ndarray, lb: np.ndarray, endpoint: str, truth: float,
               rng: np.random.Generator) -> np.ndarray:
    """``lb`` with cases chosen at random moved until the population's B - A is exactly
    ``truth`` (a mean: one point at a time within 1-5; a pass rate: across the gate)."""
    lb = lb.copy()
    target = round(truth * la.size)
    if abs(target - truth * la.size) > 1e-9:
        raise ValueError(f"a truth of {truth} is no whole number of cases of {la.size}")
    for _ in range(100):
        if endpoint == "mean":
            gap = target - int((lb - la).sum())
        else:
            gap = target - int(((lb >= GATE.threshold).astype(int)
                                - (la >= GATE.threshold).astype(int)).sum())
        if gap == 0:
            return lb
        up = gap > 0
        if endpoint == "mean":
            movable = np.flatnonzero(lb < 5 if up else lb > 1)
        else:
            movable = np.flatnonzero(lb < GATE.threshold if up else lb >= GATE.threshold)
        chosen = rng.choice(movable, min(abs(gap), movable.size), replace=False)
        if endpoint == "mean":
            lb[chosen] += 1.0 if up else -1.0
        else:
            lb[chosen] = GATE.threshold if up else GATE.threshold - 1
    raise RuntimeError("the population's difference could not be set")


def population(scenario: str, endpoint: str, truth: float, rng: np.random.Generator,
               size: int = POPULATION) -> dict[str, np.ndarray]:
    """Labels and judge scores of systems A and B on ``size`` cases, B - A exactly ``truth``
    (checked)."""
    draw_labels, judge_of, _, _ = JUDGE_SCENARIOS[scenario]
    la = draw_labels(rng, size)
    step = rng.choice([-1.0, 0.0, 1.0], size, p=STEP_P)
    lb = _set_truth(la, np.clip(la + step, 1.0, 5.0), endpoint, truth, rng)
    actual = (float((lb - la).mean()) if endpoint == "mean" else
              float(((lb >= GATE.threshold).astype(float)
                     - (la >= GATE.threshold).astype(float)).mean()))
    assert abs(actual - truth) < 1e-12, (actual, truth)
    ja, _ = judge_of(rng, la)
    jb, _ = judge_of(rng, lb)
    return {"la": la, "lb": lb, "ja": ja, "jb": jb}


_RUBRIC = None


def _system(name: str, labels: np.ndarray, judge: np.ndarray, drawn: np.ndarray,
            ids: list[str]) -> System:
    """One system as `estimate` holds it: its population, the labels of the drawn cases on a
    random sheet, the judge's value of the criterion and of the gate on every case."""
    global _RUBRIC
    if _RUBRIC is None:
        _RUBRIC = load_rubric(RUBRIC)
    chosen = [ids[i] for i in drawn]
    system = System(path=Path(f"{name}.jsonl"), name=name, labels_path=Path(f"{name}.csv"),
                    rubric=_RUBRIC, population=ids,
                    labels={c: float(labels[i]) for c, i in zip(chosen, drawn, strict=True)},
                    design=LabelDesign("random", dict.fromkeys(chosen, drawn.size / len(ids)),
                                       population=len(ids)),
                    unlabelled_rows=0)
    system.values[CRITERION] = [float(v) for v in judge]
    system.values[GATE.rule] = [float(GATE.passes(v)) for v in judge]
    return system


def study(setting: Setting, scenario: str, n: int, seed: int) -> list[str]:
    """One simulated study: the verdict of each of ``setting``'s rules."""
    rng = np.random.default_rng(seed)
    pop = population(scenario, setting.endpoint, setting.truth, rng)
    ids = [f"case{i:04d}" for i in range(POPULATION)]
    drawn = np.sort(rng.choice(POPULATION, n, replace=False))
    a = _system("A", pop["la"], pop["ja"], drawn, ids)
    b = _system("B", pop["lb"], pop["jb"], drawn, ids)
    gate = GATE if setting.endpoint == "pass rate" else None
    row = difference(a, b, CRITERION, gate, {})
    assert row.mode == "paired", row.note
    what = f"mean {CRITERION}" if gate is None else f"pass rate of {GATE.rule}"
    return [decide(Rule(kind, "higher", margin, what, "A", "B"), row.estimate, row.ci,
                   row.n_labelled or 0, row.n_cases or 0).verdict  # type: ignore[arg-type]
            for kind, margin in setting.rules]


def cell(setting: Setting, scenario: str, n: int, reps: int, seed: int) -> list[dict]:
    """Per rule of ``setting``: the share of ``reps`` studies with each verdict."""
    # Each cell its own stream, named by what it simulates (not by its place in a list).
    key = [seed, ENDPOINTS.index(setting.endpoint), round(1000 * setting.truth) + 10_000,
           tuple(JUDGE_SCENARIOS).index(scenario), n]
    verdicts = [study(setting, scenario, n, int(np.random.SeedSequence(key + [r])
                                                 .generate_state(1)[0]))
                for r in range(reps)]
    out = []
    for i in range(len(setting.rules)):
        column = [v[i] for v in verdicts]
        out.append({"reps": reps,
                    **{name: column.count(name) / reps
                       for name in ("shown", "not shown", "too few labels")}})
    return out


def mc_se(share: float, reps: int) -> float:
    """The Monte Carlo standard error of a share from ``reps`` replicates."""
    return (share * (1 - share) / reps) ** 0.5


def _shown(figures: dict, flag: float | None = None) -> str:
    share, reps = figures["shown"], figures["reps"]
    text = f"{100 * share:.1f} ({100 * mc_se(share, reps):.1f})"
    if figures["too few labels"]:
        text += f" [{100 * figures['too few labels']:.0f}% no CI]"
    return text + (" *" if flag is not None and share > flag else "")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=2000, help="replicates per cell")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true",
                        help="30 replicates, two scenarios, n 20 and 60 (power: 60)")
    args = parser.parse_args(argv)
    reps = 30 if args.quick else args.reps
    scenarios = ("decent", "lenient") if args.quick else SCENARIOS
    null_ns = (20, 60) if args.quick else NULL_NS
    power_ns = (60,) if args.quick else POWER_NS
    started = time.perf_counter()
    print(f"re-run: {rerun_command(None if argv is None else [__file__, *argv])}")
    print(f"seed {args.seed}; {reps} replicates per cell; N = {POPULATION} cases per "
          f"population, B - A set exactly in each; paired random sheet of n cases; verdicts "
          f"by evaluator.study.rule.decide (minimum {MIN_LABELS_DIFFERENCE} pairs)")
    print(f"{time.strftime('%Y-%m-%d')}; load average {os.getloadavg()[0]:.1f}")
    print("cells: % of studies declaring the claim (Monte Carlo SE); [k% no CI]: verdict "
          "'too few labels' for want of an interval, counted as not shown")

    figures: dict = {"null": {}, "power": {}, "guard": {}}
    print(f"\n1. type I error of non-inferiority: true B - A = -margin; declared one-sided "
          f"level {100 * LEVEL:.1f}%; * above {100 * CEILING:.0f}%")
    print(f"  {'setting':<32}{'scenario':<20}" + "".join(f"{'n ' + str(n):>20}"
                                                          for n in null_ns))
    over = []
    for setting in NULL_SETTINGS:
        kind, margin = setting.rules[0]
        for scenario in scenarios:
            row = {n: cell(setting, scenario, n, reps, args.seed)[0] for n in null_ns}
            name = setting.label(kind, margin)
            figures["null"][f"{name} | {scenario}"] = {n: f["shown"] for n, f in row.items()}
            over += [(name, scenario, n, f["shown"]) for n, f in row.items()
                     if f["shown"] > CEILING]
            print(f"  {name:<32}{scenario:<20}"
                  + "".join(f"{_shown(row[n], CEILING):>20}" for n in null_ns))
    print("  (the intervals ignore the finite population: with n of 300 labelled they are "
          "wider than the finite truth needs, by ~12% at 60, so n 60 errs less than 2.5%)")
    worst = max((s for v in figures["null"].values() for s in v.values()), default=0.0)
    print(f"  highest: {100 * worst:.1f}%; cells above {100 * CEILING:.0f}%: "
          + ("none" if not over else
             "; ".join(f"{name}, {sc}, n {n}: {100 * s:.1f}%" for name, sc, n, s in over)))

    print("\n2. power: B truly better; % of studies declaring the claim (superiority and "
          "non-inferiority read from the same studies)")
    print(f"  {'setting':<32}{'scenario':<20}" + "".join(f"{'n ' + str(n):>20}"
                                                          for n in power_ns))
    for setting in POWER_SETTINGS:
        per = {(scenario, n): cell(setting, scenario, n, reps, args.seed)
               for scenario in scenarios for n in power_ns}
        for i, (kind, margin) in enumerate(setting.rules):
            name = setting.label(kind, margin)
            for scenario in scenarios:
                figures["power"][f"{name} | {scenario}"] = {
                    n: per[(scenario, n)][i]["shown"] for n in power_ns}
                print(f"  {name:<32}{scenario:<20}"
                      + "".join(f"{_shown(per[(scenario, n)][i]):>20}" for n in power_ns))

    print(f"\n3. the guard: n = {GUARD_N} pairs (minimum {MIN_LABELS_DIFFERENCE}), the "
          "type I settings; % of verdicts 'too few labels'")
    for setting in NULL_SETTINGS:
        kind, margin = setting.rules[0]
        name = setting.label(kind, margin)
        shares = {scenario: cell(setting, scenario, GUARD_N, reps, args.seed)[0]
                  ["too few labels"] for scenario in scenarios}
        figures["guard"][name] = shares
        print(f"  {name:<32}" + ", ".join(f"{sc} {100 * s:.0f}%" for sc, s in shares.items()))

    seconds = time.perf_counter() - started
    print(f"\n{seconds:.1f} s")
    figures["seconds"] = round(seconds, 1)
    figures["worst_type_i"] = worst
    print_figures({"worst_type_i": worst, "cells_over_5pct": len(over),
                   "guard_min": min(s for v in figures["guard"].values() for s in v.values())})
    return figures


if __name__ == "__main__":
    main()
