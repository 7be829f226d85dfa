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

Verdict = Literal["shown", "not shown", "too few labels"]


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
    the claim is not shown, ``label_more`` (about how many more labelled cases per system
    would be expected to show it, None: no feasible number; ``more_text`` says so)."""

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


def _more(rule: Rule, n: int, estimate: float, ci: Sequence[float], left: int,
          ) -> tuple[int | None, str]:
    """About how many more labelled cases per system would show the claim with 80% chance
    if the difference and spread stay as seen (:func:`evaluator.analysis.minimum.
    more_needed` with the threshold in place of 0); None with the reason when no number
    would be expected to."""
    t = rule.threshold
    beyond = estimate - t if rule.better == "higher" else t - estimate
    if beyond <= 0:
        return None, ("the estimate itself is not beyond the threshold, so more labels would "
                      "not be expected to show it")
    need = more_needed(n, beyond, [c - t for c in ci])
    more = max(1, math.ceil(need - 1e-9))
    if left <= 0:
        return None, "every case is labelled: no more labels can be added"
    if more > left:
        return None, (f"labelling every case left ({left} more) would not be expected to "
                      f"show it (it would take about {more} more)")
    return more, (f"about {more} more labelled cases per system would be expected to settle "
                  "it (80% chance) at the difference and spread seen so far")


def decide(rule: Rule, estimate: float | None, ci: Sequence[float] | None, n_labelled: int,
           left: int, fmt: Callable[[float], str] = lambda v: f"{v:.3f}",
           minimum: int = MIN_LABELS_DIFFERENCE) -> Decision:
    """Apply ``rule`` to the paired difference b - a (``estimate`` and its 95% ``ci``, from
    ``n_labelled`` cases labelled for both systems; ``left``: cases not yet labelled).
    ``fmt`` writes a number as the tables do, so the sentence's numbers are theirs."""
    b, a, what = rule.b, rule.a, rule.what
    few = too_few(n_labelled, minimum)
    figures = ""
    if estimate is not None and ci:
        figures = (f"{b} - {a} = {_signed(estimate, fmt)} (95% CI {fmt(ci[0])} to "
                   f"{fmt(ci[1])})")
    bound = _signed(rule.threshold, fmt) if rule.kind == "non-inferiority" else "0"
    pair = tuple(ci) if ci else None
    if few is not None or estimate is None or not ci:
        why = few or f"no interval could be made from {n_labelled} labelled case(s)"
        shown_as = f"; {figures}, a figure only" if figures else ""
        return Decision("too few labels", f"{why[0].upper()}{why[1:]}{shown_as}.",
                        rule.threshold, estimate, pair, n_labelled)  # type: ignore[arg-type]
    target = f"the pre-declared margin {bound}" if rule.kind == "non-inferiority" else "0"
    side = "above" if rule.better == "higher" else "below"
    if shown(rule, ci):
        claim = ("non-inferior to" if rule.kind == "non-inferiority" else
                 "better than")
        sentence = f"{b} is {claim} {a} on {what}: {figures}, {side} {target}."
        return Decision("shown", sentence, rule.threshold, estimate, pair,  # type: ignore[arg-type]
                        n_labelled)
    end = ci[0] if rule.better == "higher" else ci[1]
    worse = "below" if rule.better == "higher" else "above"
    name = ("Non-inferiority" if rule.kind == "non-inferiority" else "Superiority")
    relation = "to" if rule.kind == "non-inferiority" else "over"
    more, more_text = _more(rule, n_labelled, estimate, ci, left)
    where = "at" if end == rule.threshold else worse
    sentence = (f"{name} of {b} {relation} {a} on {what} is not shown: {figures}; the CI "
                f"reaches {fmt(end)}, {where} {target}; {more_text}.")
    return Decision("not shown", sentence, rule.threshold, estimate, pair,  # type: ignore[arg-type]
                    n_labelled, more, more_text)
