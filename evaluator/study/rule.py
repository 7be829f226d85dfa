"""The study's decision rule, applied (issue 48, item 3): from the primary endpoint's paired
difference (candidate B minus reference A, its 95% CI and how many cases it rests on) to
one verdict and the one sentence that states it. Pure arithmetic on figures already
computed (:func:`evaluator.analysis.estimate.estimate.difference`); the same function
decides in ``evaluator study report`` and in ``benchmarks/study_decision.py``.

The rule (``docs/study.md``): the threshold is 0 for superiority and the margin on the
worse side for non-inferiority (-margin when higher is better, +margin when lower is);
the claim is shown when the whole 95% CI lies beyond it on the better side (a one-sided
test at 2.5%). Under the minimum number of labelled pairs
(:data:`evaluator.analysis.minimum.MIN_LABELS_DIFFERENCE`) no verdict is stated.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from evaluator.analysis.minimum import MIN_LABELS_DIFFERENCE, more_needed, too_few

Verdict = Literal["shown", "not shown", "too few labels", "no interval"]


@dataclass(frozen=True)
class Rule:
    """What the plan declared: ``kind`` (superiority or non-inferiority), which way is
    better, the margin (non-inferiority only), what is compared (``what``: "mean
    accuracy") and the two systems' names (``b`` compared with the reference ``a``)."""

    kind: Literal["superiority", "non-inferiority"]
    better: Literal["higher", "lower"]
    margin: float | None
    what: str
    a: str
    b: str

    @property
    def threshold(self) -> float:
        """The value the CI must lie beyond: 0, or the margin on the worse side."""
        if self.kind == "superiority" or self.margin is None:
            return 0.0
        return -self.margin if self.better == "higher" else self.margin


@dataclass(frozen=True)
class Decision:
    """The rule applied: the ``verdict``, the ``sentence`` (first on the page), and when
    the claim is not shown, ``label_more`` (about how many labelled cases per system a new
    study would need to show it, None: no feasible number; ``more_text`` says so)."""

    verdict: Verdict
    sentence: str
    threshold: float
    estimate: float | None
    ci: tuple[float, float] | None
    n_labelled: int
    label_more: int | None = None
    more_text: str | None = None


def _signed(value: float, fmt: Callable[[float], str]) -> str:
    text = fmt(value)
    return text if text.startswith("-") else f"+{text}"


def shown(rule: Rule, ci: Sequence[float]) -> bool:
    """Whether the whole CI lies beyond the threshold on the better side."""
    return ci[0] > rule.threshold if rule.better == "higher" else ci[1] < rule.threshold


def _more(rule: Rule, n: int, estimate: float, ci: Sequence[float], cases: int,
          ) -> tuple[int | None, str]:
    """About how many labelled cases per system a new study would need to show the claim
    with 80% chance if the difference and spread were as seen here
    (:func:`evaluator.analysis.minimum.more_needed` with the threshold in place of 0), or
    None with the reason. A new study, not more labels on this one: labelling on until the
    interval clears the threshold would break the one-sided 2.5% level the rule declares."""
    t = rule.threshold
    beyond = estimate - t if rule.better == "higher" else t - estimate
    if beyond <= 0:
        return None, ("the estimate itself is not beyond it, so no study of this size or "
                      "larger would be expected to show it at the difference seen")
    total = max(n + 1, math.ceil(n + more_needed(n, beyond, [c - t for c in ci]) - 1e-9))
    if total > cases:
        return None, (f"a new study would need about {total} labelled cases per system to "
                      f"show it at the difference and spread seen, more than the {cases} "
                      "cases judged")
    return total, (f"a new study would need about {total} labelled cases per system to "
                   "show it (80% chance) at the difference and spread seen; this one is not "
                   "extended, since labelling on until the interval clears would break its "
                   "one-sided 2.5% level")


def _close(end: float, threshold: float, fmt: Callable[[float], str], which: str) -> str:
    """Where the CI's end prints as the threshold (0.000 for 0.0003): the end to six
    decimals, so the sentence never reads as contradicting its verdict."""
    if fmt(end) != fmt(threshold) or end == threshold:
        return ""
    return f" (its {which} end to six decimals: {end:.6f})"


def decide(rule: Rule, estimate: float | None, ci: Sequence[float] | None, n_labelled: int,
           cases: int, fmt: Callable[[float], str] = lambda v: f"{v:.3f}",
           minimum: int = MIN_LABELS_DIFFERENCE, why_no_ci: str | None = None) -> Decision:
    """Apply ``rule`` to the paired difference b - a (``estimate`` and its 95% ``ci``, from
    ``n_labelled`` cases labelled for both systems, of ``cases`` judged).
    ``fmt`` writes a number as the tables do, so the sentence's numbers are theirs;
    ``why_no_ci``: why the difference has no interval (its method), for the sentence."""
    b, a, what = rule.b, rule.a, rule.what
    few = too_few(n_labelled, minimum)
    figures = ""
    if estimate is not None and ci:
        figures = (f"{b} - {a} = {_signed(estimate, fmt)} (95% CI {fmt(ci[0])} to "
                   f"{fmt(ci[1])})")
    bound = _signed(rule.threshold, fmt) if rule.kind == "non-inferiority" else "0"
    pair = tuple(ci) if ci else None
    if few is not None:
        shown_as = f"; {figures}, a figure only" if figures else ""
        return Decision("too few labels", f"{few[0].upper()}{few[1:]}{shown_as}.",
                        rule.threshold, estimate, pair, n_labelled)  # type: ignore[arg-type]
    if estimate is None or not ci:
        why = f": {why_no_ci}" if why_no_ci else ""
        return Decision("no interval", f"No verdict: the difference {b} - {a} on {what} has "
                        f"no interval from its {n_labelled} labelled cases{why}; nothing is "
                        "decided.", rule.threshold, estimate, pair, n_labelled)
    target = f"the pre-declared margin {bound}" if rule.kind == "non-inferiority" else "0"
    side = "above" if rule.better == "higher" else "below"
    end = ci[0] if rule.better == "higher" else ci[1]
    which = "lower" if rule.better == "higher" else "upper"
    close = _close(end, rule.threshold, fmt, which)
    if shown(rule, ci):
        claim = ("non-inferior to" if rule.kind == "non-inferiority" else
                 "better than")
        sentence = f"{b} is {claim} {a} on {what}: {figures}, {side} {target}{close}."
        return Decision("shown", sentence, rule.threshold, estimate, pair,  # type: ignore[arg-type]
                        n_labelled)
    worse = "below" if rule.better == "higher" else "above"
    name = ("Non-inferiority" if rule.kind == "non-inferiority" else "Superiority")
    relation = "to" if rule.kind == "non-inferiority" else "over"
    more, more_text = _more(rule, n_labelled, estimate, ci, cases)
    where = "at" if end == rule.threshold else worse
    sentence = (f"{name} of {b} {relation} {a} on {what} is not shown: {figures}; the CI "
                f"reaches {fmt(end)}{close}, {where} {target}; {more_text}.")
    return Decision("not shown", sentence, rule.threshold, estimate, pair,  # type: ignore[arg-type]
                    n_labelled, more, more_text)
