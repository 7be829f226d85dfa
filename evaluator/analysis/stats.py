"""Uncertainty for summaries: bootstrap confidence intervals of a mean and pass rates with a
Wilson interval. The statistics come from scipy; this module only handles the edge cases
(no data, one value, constant data) where a resampling interval means nothing.

scipy is imported inside the functions (the ``stats`` extra), so ``import evaluator`` stays
light; :func:`stats_available` tells whether it is installed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evaluator.analysis.intervals import CONFIDENCE
from evaluator.common.errors import UserError

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20141
# scipy resamples in blocks of ``batch`` x n values; this caps a block at ~16 MB of floats so
# a 100k-case summary stays small (unbatched it allocates resamples x n: 1.6 GB at 100k).
BOOTSTRAP_BLOCK_VALUES = 2_000_000
STATS_EXTRA_HINT = "pip install 'evaluator[stats]'"


class StatsUnavailable(UserError, ImportError):
    """The ``stats`` extra (scipy, scikit-learn, krippendorff, pingouin) is not installed."""


def require_stats() -> None:
    """Raise :class:`StatsUnavailable` naming the install command if scipy is missing."""
    try:
        import scipy.stats  # noqa: F401
    except ImportError as exc:
        raise StatsUnavailable(f"statistics need the 'stats' extra: {STATS_EXTRA_HINT} "
                               f"({exc})") from None


def stats_available() -> bool:
    """Whether the ``stats`` extra is importable."""
    try:
        require_stats()
    except StatsUnavailable:
        return False
    return True


def mean_ci(values: Sequence[float], *, resamples: int = BOOTSTRAP_RESAMPLES,
            seed: int = BOOTSTRAP_SEED, confidence: float = CONFIDENCE) -> list[float] | None:
    """Seeded percentile-bootstrap CI of the mean (``scipy.stats.bootstrap``).

    None with no values; ``[v, v]`` when every value is ``v`` (one value included), where
    resampling can only return ``v`` and scipy would warn about degenerate data."""
    if not values:
        return None
    if min(values) == max(values):
        return [float(values[0]), float(values[0])]
    require_stats()
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np
    from scipy.stats import bootstrap

    batch = max(1, min(resamples, BOOTSTRAP_BLOCK_VALUES // len(values)))
    result = bootstrap((np.asarray(values, dtype=float),), np.mean, n_resamples=resamples,
                       confidence_level=confidence, method="percentile", batch=batch,
                       rng=np.random.default_rng(seed))
    low, high = result.confidence_interval
    return [float(low), float(high)]


def pass_rate(values: Sequence[float], threshold: float, *, confidence: float = CONFIDENCE,
              with_ci: bool = True) -> dict[str, Any]:
    """Share of values ``>= threshold`` with a Wilson CI (``scipy.stats.binomtest``).

    ``rate`` and ``ci95`` are None when there are no values, or not ``with_ci`` (without
    the stats extra)."""
    n = len(values)
    passed = sum(1 for v in values if v >= threshold)
    entry: dict[str, Any] = {"threshold": threshold, "rule": f">= {threshold:g}", "n": n,
                             "passed": passed, "rate": None, "ci95": None}
    if n and with_ci:
        require_stats()
        # Imported here: the stats extra, which `import evaluator` never loads.
        from scipy.stats import binomtest

        ci = binomtest(passed, n).proportion_ci(confidence_level=confidence, method="wilson")
        entry["rate"] = passed / n
        entry["ci95"] = [float(ci.low), float(ci.high)]
    return entry
