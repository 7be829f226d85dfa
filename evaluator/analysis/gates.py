"""Pass/fail gates (``evaluator agree --pass CRITERION>=THRESHOLD``): the judge's pass/fail
against the clinicians' (the labels') pass/fail with the same threshold.

**Pass is the positive class.** Over the joined cases: TP (both pass), FP (the judge passes a
case the labels fail), FN (the judge fails a case the labels pass), TN (both fail);
sensitivity TP/(TP+FN), specificity TN/(TN+FP), PPV TP/(TP+FP), NPV TN/(TN+FN), each with a
Wilson 95% CI (``scipy.stats.binomtest``, through
:func:`evaluator.analysis.intervals.wilson_ci`) and its n. A rate whose denominator is 0 is
undefined and says why: never 0, never NaN.

**Design weights** (labels from an ``active`` worksheet, :mod:`evaluator.analysis.designs`):
each case counts 1/pi, so TP/FP/FN/TN are estimated counts in the run (sums of 1/pi), each
rate is a weighted share, and its Wilson CI is on Kish's effective sample size of the cases
in its denominator (:func:`evaluator.analysis.intervals.kish_wilson_ci`).
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from evaluator.analysis.intervals import (
    format_ci,
    format_number,
    kish_n_eff,
    kish_wilson_ci,
    wilson_ci,
)
from evaluator.common.columns import row, wrap
from evaluator.common.errors import UserError

OPERATORS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt}
_SPEC = re.compile(r"\s*([^<>=\s]+)\s*(>=|<=|>|<)\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+))\s*")
POSITIVE_CLASS = ("pass is the positive class: sensitivity is the share of the labels' "
                  "passes the judge passes, specificity the share of the labels' failures it "
                  "fails, PPV the share of the judge's passes the labels pass, NPV the share "
                  "of the judge's failures the labels fail")
# name, numerator, denominator, what a 0 denominator means
RATES = (("sensitivity", "tp", ("tp", "fn"), "no case passes by the labels (TP + FN = 0)"),
         ("specificity", "tn", ("tn", "fp"), "no case fails by the labels (TN + FP = 0)"),
         ("ppv", "tp", ("tp", "fp"), "the judge passes no case (TP + FP = 0)"),
         ("npv", "tn", ("tn", "fn"), "the judge fails no case (TN + FN = 0)"))


class GateError(UserError, ValueError):
    """A ``--pass`` spec that is not ``CRITERION<op>THRESHOLD``."""


@dataclass(frozen=True)
class Gate:
    """A pass rule: ``key`` ``op`` ``threshold`` (e.g. accuracy >= 4)."""

    key: str
    op: str
    threshold: float

    @property
    def rule(self) -> str:
        return f"{self.key} {self.op} {self.threshold:g}"

    def passes(self, value: float) -> bool:
        """Whether ``value`` passes the rule."""
        return OPERATORS[self.op](value, self.threshold)


def parse_gate(text: str) -> Gate:
    """``"accuracy>=4"`` -> :class:`Gate` (operators ``>=``, ``>``, ``<=``, ``<``; a
    finite number as threshold). Raises :class:`GateError` otherwise."""
    match = _SPEC.fullmatch(text)
    if not match:
        raise GateError(f"--pass {text!r}: expected CRITERION>=THRESHOLD (or >, <=, <), "
                        "e.g. accuracy>=4")
    return Gate(match.group(1), match.group(2), float(match.group(3)))


def _cell(gate: Gate, score: float, label: float) -> str:
    """"tp", "fp", "fn" or "tn": the pair's cell of the 2x2 table, pass positive."""
    judged, labelled = gate.passes(score), gate.passes(label)
    return ("t" if judged == labelled else "f") + ("p" if judged else "n")


def gate_table(gate: Gate, judge: Sequence[float], labels: Sequence[float],
               weights: Sequence[float] | None = None) -> dict[str, Any]:
    """The 2x2 table of ``gate`` over paired judge scores and labels, and the four rates
    with Wilson 95% CIs (``value``/``ci95`` None and ``undefined`` the reason when the
    denominator is 0). ``weights`` (1/pi per pair): the design-weighted table instead
    (:func:`weighted_gate_table`)."""
    if weights is not None:
        return weighted_gate_table(gate, judge, labels, weights)
    counts = {"tp": 0, "fp": 0, "fn": 0, "tn": 0}
    for score, label in zip(judge, labels, strict=True):
        counts[_cell(gate, score, label)] += 1
    out: dict[str, Any] = {"rule": gate.rule, "key": gate.key, "op": gate.op,
                           "threshold": gate.threshold, "n": len(judge), **counts,
                           "positive_class": "pass"}
    for name, numerator, denominator, reason in RATES:
        k, n = counts[numerator], sum(counts[d] for d in denominator)
        if n == 0:
            out[name] = {"value": None, "ci95": None, "ci_method": "-", "k": 0, "n": 0,
                         "undefined": reason}
            continue
        interval = wilson_ci(k, n)
        out[name] = {"value": k / n, "ci95": interval["ci95"], "ci_method": interval["method"],
                     "k": k, "n": n, "undefined": None}
    return out


def weighted_gate_table(gate: Gate, judge: Sequence[float], labels: Sequence[float],
                        weights: Sequence[float]) -> dict[str, Any]:
    """:func:`gate_table` with design weights w = 1/pi: TP/FP/FN/TN are sums of w (the
    estimated counts in the run; ``drawn`` has the drawn cases' counts), each rate the
    weighted share k/n of the cases in its denominator (Hajek), with a Wilson CI on their
    Kish n_eff (``n_drawn``: how many drawn cases the denominator has)."""
    cells = [_cell(gate, s, lab) for s, lab in zip(judge, labels, strict=True)]
    pairs = list(zip(cells, (float(w) for w in weights), strict=True))
    drawn = {key: cells.count(key) for key in ("tp", "fp", "fn", "tn")}
    counts = {key: math.fsum(w for c, w in pairs if c == key) for key in drawn}
    out: dict[str, Any] = {"rule": gate.rule, "key": gate.key, "op": gate.op,
                           "threshold": gate.threshold, "n": len(judge), **counts,
                           "positive_class": "pass", "weighted": True, "drawn": drawn}
    for name, numerator, denominator, reason in RATES:
        inside = [w for c, w in pairs if c in denominator]
        if not inside:
            out[name] = {"value": None, "ci95": None, "ci_method": "-", "k": 0.0, "n": 0.0,
                         "n_drawn": 0, "n_eff": None, "undefined": reason}
            continue
        k, n = counts[numerator], sum(counts[d] for d in denominator)
        interval = kish_wilson_ci(k / n, kish_n_eff(inside))
        out[name] = {"value": k / n, "ci95": interval["ci95"], "ci_method": interval["method"],
                     "k": k, "n": n, "n_drawn": len(inside), "n_eff": interval["n_eff"],
                     "undefined": None}
    return out


def format_gates(gates: Sequence[dict[str, Any]], score_mode: str) -> list[str]:
    """Text lines for ``evaluator agree``: per gate the 2x2 table and the four rates (a
    design-weighted table: estimated counts, each CI's Kish n_eff and drawn cases)."""
    if not gates:
        return []
    lines = ["", *wrap(f"gates ({score_mode} scores; the labels with the same threshold). "
                       f"{POSITIVE_CLASS}")]
    for gate in gates:
        weighted = gate.get("weighted", False)
        if weighted:
            lines += wrap(f"{gate['rule']}  (n = {gate['n']} drawn; design-weighted, "
                          "estimated counts in the run, sums of 1/pi; each CI Wilson on "
                          "Kish's effective n, n_eff):", "  ")
            lines.append("    " + "  ".join(f"{key.upper()} {gate[key]:.1f}"
                                            for key in ("tp", "fp", "fn", "tn")))
        else:
            lines += wrap(f"{gate['rule']}  (n = {gate['n']}): TP {gate['tp']}  "
                          f"FP {gate['fp']}  FN {gate['fn']}  TN {gate['tn']}", "  ")
        for name, *_ in RATES:
            entry = gate[name]
            if entry["undefined"]:
                lines += wrap(f"{name:<12} undefined: {entry['undefined']}", "    ", "    ")
            elif weighted:
                # The method ("Wilson, Kish n_eff 4.6") is said above; its n_eff is here.
                lines += row(f"    {name:<12}{format_number(entry['value']):>7}  "
                             f"{format_ci(entry['ci95']):<16}{entry['k']:>6.1f} of "
                             f"{entry['n']:<6.1f} ", f"n_eff {entry['n_eff']:.1f}, "
                             f"{entry['n_drawn']} drawn")
            else:
                lines += row(f"    {name:<12}{format_number(entry['value']):>7}  "
                             f"{format_ci(entry['ci95']):<18}{entry['k']:>5} of {entry['n']:<5}"
                             " ", entry["ci_method"])
    return lines
