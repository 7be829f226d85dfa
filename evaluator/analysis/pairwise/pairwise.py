"""Statistics of a pairwise judge's verdicts on one A-vs-B pairing, per choice criterion
(``evaluator compare``; docs/pairwise.md, "Reading a comparison", has the formulas).

Each pair was judged in both orders: ``first`` is the choice with A shown first, ``second``
with B shown first, both in candidate terms ("A" is candidate A wherever it was shown);
``outcome`` is their reconciliation ("A", "B", "tie", or "inconsistent" when they differ).

* :func:`win_rate` - A's wins + half its ties, an inconsistent pair counted as a tie; a
  seeded percentile bootstrap CI over pairs.
* :func:`position_consistency` - the share of pairs whose choice survives the swap; Wilson.
* :func:`position_bias` - the share of decisive verdicts (both orders: up to two a pair)
  that chose the candidate shown first; a cluster bootstrap over pairs. Among consistent
  pairs the first position wins exactly half the decisive verdicts by construction (A once
  shown first, once second), so this uses every verdict.
* :func:`length_bias` - AlpacaEval 2.0's idea: a logistic regression of A's win on
  tanh((len A - len B) / sd): its slope (> 0: the longer answer is favoured) and the
  length-controlled win rate sigmoid(intercept), bootstrap CIs over pairs; and the longer
  answer's win rate among decisive pairs of different lengths (Wilson).
* :func:`label_agreement` - Cohen's kappa (scikit-learn) of the reconciled outcome
  (inconsistent read as tie) with clinicians' A/B/tie labels, BCa bootstrap CI, and the raw
  agreement (Wilson).

The heavy libraries (numpy, scipy, scikit-learn: the ``stats`` extra) are imported inside
the functions.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from evaluator.analysis.intervals import (
    NO_INTERVAL,
    UNDEFINED_SHARE_LIMIT,
    clean,
    interval_or_reason,
    paired_bootstrap,
    wilson_ci,
)
from evaluator.analysis.logit import fit_logit
from evaluator.analysis.stats import (
    BOOTSTRAP_BLOCK_VALUES,
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    mean_ci,
)
from evaluator.data.results import INCONSISTENT, ResultRecord, reconcile

CHOICES = ("A", "B", "tie")
# A win scores 1, a loss 0; a tie half, and an inconsistent pair (the verdict flipped with
# the order) is read as a tie: the judge could not tell them apart.
WIN_VALUE = {"A": 1.0, "B": 0.0, "tie": 0.5, INCONSISTENT: 0.5}
INCONSISTENT_NOTE = "inconsistent verdicts (changed by the swap) counted as ties"
MIN_LENGTH_PAIRS = 10
LABEL_RESAMPLES = 1000


@dataclass
class Pairs:
    """One criterion's verdicts on one pairing: per pair (in file order) the two orders'
    choices, the reconciled outcome, the candidates' lengths and the case id (to join
    labels; never printed). ``skipped``: ok records without this criterion's choices."""

    criterion: str
    systems: dict[str, str]
    first: list[str] = field(default_factory=list)
    second: list[str] = field(default_factory=list)
    outcome: list[str] = field(default_factory=list)
    length_a: list[int] = field(default_factory=list)
    length_b: list[int] = field(default_factory=list)
    case_ids: list[str] = field(default_factory=list)
    skipped: int = 0

    def __len__(self) -> int:
        return len(self.outcome)

    def add(self, record: ResultRecord) -> None:
        """Take one record's verdicts on the criterion, if it is ``ok`` and pairwise."""
        result = record.pairwise
        if record.status != "ok" or result is None:
            return
        self.systems = self.systems or dict(result.systems)
        by_first = {order.first: order.choices or {} for order in result.orders}
        choices = [by_first.get("A", {}), by_first.get("B", {})]
        if any(self.criterion not in c for c in choices):
            self.skipped += 1
            return
        first, second = choices[0][self.criterion], choices[1][self.criterion]
        self.first.append(first)
        self.second.append(second)
        self.outcome.append(reconcile(first, second))
        self.length_a.append(result.lengths["A"])
        self.length_b.append(result.lengths["B"])
        self.case_ids.append(record.case_id)


def pairs_from_records(records: Sequence[ResultRecord], criterion: str) -> Pairs:
    """The ``ok`` pairwise records' verdicts on ``criterion``. The outcome is reconciled
    from the two orders (it is what the record's ``scores`` holds)."""
    pairs = Pairs(criterion, {})
    for record in records:
        pairs.add(record)
    return pairs


def outcome_counts(outcome: Sequence[str]) -> dict[str, int]:
    """A's wins, B's wins, ties, inconsistent pairs and n."""
    return {"a_wins": outcome.count("A"), "b_wins": outcome.count("B"),
            "ties": outcome.count("tie"), "inconsistent": outcome.count(INCONSISTENT),
            "n": len(outcome)}


def win_rate(outcome: Sequence[str], *, resamples: int = BOOTSTRAP_RESAMPLES,
             seed: int = BOOTSTRAP_SEED) -> dict[str, Any]:
    """A's win rate over B: (A wins + ties / 2) / n, an inconsistent pair counted as a tie,
    with the seeded percentile bootstrap CI over pairs of :func:`stats.mean_ci`."""
    values = [WIN_VALUE[o] for o in outcome]
    out = {"value": clean(sum(values) / len(values)) if values else None,
           "ci95": mean_ci(values, resamples=resamples, seed=seed),
           "method": f"percentile bootstrap over pairs, {resamples} resamples",
           **outcome_counts(outcome)}
    if values and min(values) == max(values):
        out.update(ci95=constant_share_ci(values[0], len(values)), method=CONSTANT_METHOD)
    return out


CONSTANT_METHOD = ("Wilson, n pairs: every pair gave the same outcome, so a bootstrap has "
                   "no spread")


def constant_share_ci(value: float, n: int) -> list[float] | None:
    """The 95% CI of a share when all ``n`` pairs gave the same ``value`` (where resampling
    them can only return ``value``, a zero-width interval that claims certainty): the
    Wilson interval of ``value * n`` successes in ``n`` (for a half, as with all ties and
    an odd n, the union of the two whole counts around it)."""
    whole = {math.floor(value * n), math.ceil(value * n)}
    intervals = [wilson_ci(k, n)["ci95"] for k in sorted(whole)]
    if any(ci is None for ci in intervals):
        return None
    return [min(ci[0] for ci in intervals), max(ci[1] for ci in intervals)]


def position_consistency(first: Sequence[str], second: Sequence[str]) -> dict[str, Any]:
    """The share of pairs whose choice is the same in both orders (a tie in both counts as
    consistent), with its Wilson CI."""
    consistent = sum(a == b for a, b in zip(first, second, strict=True))
    n = len(first)
    interval = wilson_ci(consistent, n)
    return {"value": clean(consistent / n) if n else None, "ci95": interval["ci95"],
            "method": interval["method"], "consistent": consistent, "n": n}


def bootstrap_counts(sizes: Sequence[int], resamples: int, seed: int) -> Iterator[Any]:
    """Blocks of bootstrap resamples as counts: arrays (block, sum(sizes)) where row r
    says how many times resample r drew each unit. ``sizes``: strata resampled separately
    (one per results file for Bradley-Terry; one for a single pairing), each keeping its
    size. A block holds at most about :data:`stats.BOOTSTRAP_BLOCK_VALUES` numbers."""
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np

    rng = np.random.default_rng(seed)
    total = max(1, sum(sizes))
    block = max(1, min(resamples, BOOTSTRAP_BLOCK_VALUES // total))
    done = 0
    while done < resamples:
        size = min(block, resamples - done)
        parts = [rng.multinomial(n, np.full(n, 1.0 / n), size=size) for n in sizes if n]
        yield np.concatenate(parts, axis=1).astype(float)
        done += size


def _percentile(values: Any, resamples: int, same: str | None = None) -> dict[str, Any]:
    """The 95% percentile interval of bootstrap ``values`` (NaN: undefined resamples,
    counted; above :data:`intervals.UNDEFINED_SHARE_LIMIT` of them, no interval). When every
    resample gave the same value, no interval (a point): the method says why (``same``, or
    that every resample gave the same value)."""
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np

    values = np.asarray(values, dtype=float)
    finite = values[np.isfinite(values)]
    undefined = int(len(values) - len(finite))
    method = f"cluster bootstrap over pairs, percentile, {resamples} resamples"
    if undefined / max(1, len(values)) > UNDEFINED_SHARE_LIMIT:
        return {"ci95": None, "undefined": undefined,
                "method": f"{method}: unreliable, {undefined} undefined"}
    low, high = np.percentile(finite, [2.5, 97.5])
    if undefined:
        method += f" ({undefined} undefined, left out)"
    ci, why = interval_or_reason([clean(low), clean(high)],
                                 same or "every resample gave the same value")
    return {"ci95": ci, "undefined": undefined, "method": f"{method}; {why}" if why else method}


def position_bias(first: Sequence[str], second: Sequence[str], *,
                  resamples: int = BOOTSTRAP_RESAMPLES,
                  seed: int = BOOTSTRAP_SEED) -> dict[str, Any]:
    """The share of decisive verdicts (not ties; both orders, so up to two a pair) that
    chose the candidate shown first: A in the first order, B in the second. 0.5 is a judge
    the position does not sway, 1 one that always picks the first. Its CI resamples pairs
    (a cluster bootstrap: a pair's two verdicts are correlated). Among the inconsistent
    pairs, how many chose the first position both times and how many the second.

    Among consistent pairs the first position wins exactly half the decisive verdicts by
    construction, so the statistic uses all of them; the inconsistent pairs carry the bias.
    """
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np

    chose_first = np.array([(a == "A") + (b == "B") for a, b in zip(first, second, strict=True)],
                           dtype=float)
    decisive = np.array([(a != "tie") + (b != "tie") for a, b in zip(first, second)],
                        dtype=float)
    out: dict[str, Any] = {
        "value": None, "ci95": None, "method": "-", "first_chosen": int(chose_first.sum()),
        "decisive": int(decisive.sum()), "n": len(first),
        "inconsistent_first_both": sum(a == "A" and b == "B" for a, b in zip(first, second)),
        "inconsistent_second_both": sum(a == "B" and b == "A" for a, b in zip(first, second)),
    }
    out["inconsistent_with_tie"] = sum(a != b and "tie" in (a, b) for a, b in zip(first, second))
    if not decisive.sum():
        out["method"] = "undefined: no decisive verdict (every verdict a tie)"
        return out
    out["value"] = clean(chose_first.sum() / decisive.sum())
    draws = []
    for counts in bootstrap_counts([len(first)], resamples, seed):
        with np.errstate(invalid="ignore", divide="ignore"):
            draws.append((counts @ chose_first) / (counts @ decisive))
    interval = _percentile(np.concatenate(draws), resamples)
    out.update(ci95=interval["ci95"], method=interval["method"])
    share = chose_first[decisive > 0] / decisive[decisive > 0]
    if share.min() == share.max():  # every pair with a decisive verdict: the same share
        out.update(ci95=constant_share_ci(float(share[0]), len(share)),
                   method=CONSTANT_METHOD.replace("outcome", "share"))
    return out


def order_figures(pairs: Pairs, *, resamples: int = BOOTSTRAP_RESAMPLES,
                  seed: int = BOOTSTRAP_SEED) -> dict[str, Any]:
    """The figures of one criterion's pairs that the run's summary and ``compare`` both
    show: A's win rate, the position consistency and the position bias."""
    return {"win_rate": win_rate(pairs.outcome, resamples=resamples, seed=seed),
            "position_consistency": position_consistency(pairs.first, pairs.second),
            "position_bias": position_bias(pairs.first, pairs.second, resamples=resamples,
                                           seed=seed)}


def _sigmoid(value: float) -> float:
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np

    return float(0.5 * (1.0 + np.tanh(0.5 * value)))


def longer_wins(outcome: Sequence[str], length_a: Sequence[int],
                length_b: Sequence[int]) -> dict[str, Any]:
    """Among decisive pairs (A or B won in both orders) whose answers differ in length, the
    share won by the longer answer, with its Wilson CI."""
    won = n = 0
    for o, la, lb in zip(outcome, length_a, length_b, strict=True):
        if o in ("A", "B") and la != lb:
            n += 1
            won += int((o == "A") == (la > lb))
    interval = wilson_ci(won, n)
    method = (interval["method"] if n else
              "undefined: no decisive pair (won in both orders) with answers of different "
              "lengths")
    return {"value": clean(won / n) if n else None, "ci95": interval["ci95"],
            "method": method, "longer_won": won, "n": n}


def _no_length_model(out: dict[str, Any], note: str) -> dict[str, Any]:
    """``out`` with no length model: ``note`` says why, and the two figures' method too."""
    out["note"] = note
    for key in ("slope", "controlled_win_rate"):
        out[key]["method"] = "undefined: no length model (see the note)"
    return out


def length_bias(outcome: Sequence[str], length_a: Sequence[int], length_b: Sequence[int], *,
                resamples: int = BOOTSTRAP_RESAMPLES,
                seed: int = BOOTSTRAP_SEED) -> dict[str, Any]:
    """The length model: P(A wins) = sigmoid(b0 + b1 * tanh((len A - len B) / sd)), sd the
    standard deviation of the length differences, a tie or inconsistent pair counted as half
    a win (two half-weight rows), fitted by maximum likelihood (:func:`logit.fit_logit`).
    ``slope`` b1: the length bias (> 0: the longer answer is favoured); ``controlled`` the
    length-controlled win rate sigmoid(b0), A's win rate at equal lengths; both with
    percentile bootstrap CIs over pairs. Also :func:`longer_wins`. With fewer than
    :data:`MIN_LENGTH_PAIRS` pairs, one length difference for all, or separable data (one
    side always wins on one side of a length difference), no model: ``note`` says why."""
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np

    out: dict[str, Any] = {
        "slope": {"value": None, "ci95": None, "method": "-"},
        "controlled_win_rate": {"value": None, "ci95": None, "method": "-"},
        "longer_wins": longer_wins(outcome, length_a, length_b), "sd_difference": None,
        "note": None, "n": len(outcome)}
    if len(outcome) < MIN_LENGTH_PAIRS:
        return _no_length_model(out, f"{len(outcome)} pairs: the length model needs at least "
                                     f"{MIN_LENGTH_PAIRS}")
    difference = np.asarray(length_a, dtype=float) - np.asarray(length_b, dtype=float)
    sd = float(difference.std(ddof=1))
    if not sd > 0:
        return _no_length_model(out, "every pair has the same length difference: no length "
                                     "model")
    out["sd_difference"] = sd
    x = np.column_stack([np.ones(len(difference)), np.tanh(difference / sd)])
    y = np.array([WIN_VALUE[o] for o in outcome])
    beta, fitted = fit_logit(x, y, np.ones(len(y)))
    if not fitted:
        return _no_length_model(out, "the wins are separable by length (or one side always "
                                     "wins): the length model has no finite estimate")
    slopes, intercepts = [], []
    for counts in bootstrap_counts([len(y)], resamples, seed):
        betas, ok = fit_logit(x, y, counts, start=beta)
        betas[~ok] = np.nan
        slopes.append(betas[:, 1])
        intercepts.append(0.5 * (1.0 + np.tanh(0.5 * betas[:, 0])))
    # All ties (or inconsistent): every resample fits slope 0 and 0.5 (to rounding), a point.
    same = y.min() == y.max()
    for key, value, draws in (("slope", beta[1], slopes),
                              ("controlled_win_rate", _sigmoid(beta[0]), intercepts)):
        interval = _percentile(np.full(resamples, value) if same else np.concatenate(draws),
                               resamples, "every pair has the same outcome, so every "
                               "resample gives the same fit" if same else None)
        out[key] = {"value": clean(value), "ci95": interval["ci95"],
                    "method": interval["method"].replace("cluster bootstrap", "bootstrap")}
    return out


LABEL_CODES = {"A": 0, "B": 1, "tie": 2}


def _kappa(x: Any, y: Any) -> float | None:
    # Imported here: the stats extra, which `import evaluator` never loads.
    from sklearn.metrics import cohen_kappa_score

    if len(set(x.tolist()) | set(y.tolist())) < 2:
        return None  # one value in both: kappa is 0/0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return clean(cohen_kappa_score(x.astype(int), y.astype(int), labels=[0, 1, 2]))


def label_agreement(outcome: Sequence[str], labels: Sequence[str], *,
                    resamples: int = LABEL_RESAMPLES,
                    seed: int = BOOTSTRAP_SEED) -> dict[str, Any]:
    """Agreement of the judge's reconciled outcome (``inconsistent`` read as ``tie``) with
    clinicians' labels ("A", "B" or "tie", in candidate terms), pair by pair: Cohen's kappa
    (unweighted, scikit-learn) with a BCa bootstrap CI over pairs
    (:func:`intervals.paired_bootstrap`), and the raw agreement with its Wilson CI."""
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np

    judge = np.array([LABEL_CODES["tie" if o == INCONSISTENT else o] for o in outcome], float)
    label = np.array([LABEL_CODES[v] for v in labels], float)
    n = len(judge)
    agreed = int((judge == label).sum())
    raw = wilson_ci(agreed, n)
    kappa = _kappa(judge, label) if n else None
    entry: dict[str, Any] = {"n": n, "kappa": {"value": kappa, "ci95": None,
                                               "method": _no_kappa_interval(judge, label)},
                             "agreement": {"value": clean(agreed / n) if n else None,
                                           "ci95": raw["ci95"], "method": raw["method"],
                                           "agreed": agreed}}
    if kappa is not None and n >= 2 and len(set(judge.tolist())) > 1 \
            and len(set(label.tolist())) > 1:
        boot = paired_bootstrap(judge, label, _kappa, resamples=resamples, seed=seed)
        entry["kappa"].update(ci95=boot["ci95"], method=boot["method"])
    return entry


def _no_kappa_interval(judge: Any, label: Any) -> str:
    """Why kappa has no CI before any bootstrap: one side with a single value (kappa is 0
    whatever the other side says, in every resample: the bootstrap could only return the
    point [0, 0], which :func:`intervals.interval_or_reason` would refuse, so it is not run
    and the reason is the specific one) or fewer than two pairs; "" when a bootstrap is
    due."""
    if len(judge) < 2:
        return f"{NO_INTERVAL}: {len(judge)} labelled pair(s)"
    judge_values, label_values = set(judge.tolist()), set(label.tolist())
    if len(judge_values | label_values) == 1:
        return (f"{NO_INTERVAL}: the judge and every label gave each pair the same outcome, "
                "so kappa is 0/0, undefined")
    if len(judge_values) == 1:
        return (f"{NO_INTERVAL}: the judge gave every pair the same outcome (inconsistent "
                "read as tie), so kappa is 0 whatever the labels")
    if len(label_values) == 1:
        return (f"{NO_INTERVAL}: every label is the same, so kappa is 0 whatever the "
                "judge says")
    return ""
