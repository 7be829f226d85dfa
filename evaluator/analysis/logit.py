"""Maximum-likelihood logistic regression with case weights, for many weightings: the
length-bias model and the Bradley-Terry strengths of ``evaluator compare``, on the data and
on every bootstrap resample (a resample is a weighting of the cases: how many times each was
drawn).

The fit is scikit-learn's ``LogisticRegression`` without a penalty (``C=inf``) and the
``newton-cholesky`` solver, as Chatbot Arena fits its Bradley-Terry ratings; each bootstrap
refit starts from the full data's estimate (``warm_start``). A response may be 0, 1 or in
between: ``y = 0.5`` with weight ``w`` is the two half-weight rows (one win, one loss) by
which a tie is usually counted, and they stay together when cases are resampled.
``tests/test_pairwise_stats.py`` checks the estimates against statsmodels' ``GLM``.

A weighting whose estimate is not finite (separable data: one side wins every time), or not
identified (a column without information), is reported as not fitted, never as a number.

numpy and scikit-learn are imported inside the function (the ``stats`` extra).
"""

from __future__ import annotations

import warnings
from typing import Any

# A coefficient beyond this (a log-odds of 30: a probability of 1e-13) is an estimate
# running off to infinity (separation), not a fit.
COEFFICIENT_LIMIT = 30.0
MAX_ITERATIONS = 100
TOLERANCE = 1e-10


def fit_logit(x: Any, y: Any, weights: Any, *, start: Any = None,
              max_iterations: int = MAX_ITERATIONS) -> tuple[Any, Any]:
    """Fit P(y = 1) = sigmoid(x @ beta) by weighted maximum likelihood, for each row of
    ``weights`` (shape (B, n); a vector (n,) for one fit). ``x``: (n, p), with a column of
    ones for an intercept (no intercept is added); ``y``: (n,) in [0, 1]. ``start``: where
    each fit starts (e.g. the full data's estimate, for bootstrap refits).

    Returns ``(beta, fitted)``: beta (B, p), and fitted (B,) False where a coefficient
    passed :data:`COEFFICIENT_LIMIT` (separation), the estimate does not solve the score
    equations (the solver did not converge), or the information matrix is singular (a
    parameter the data do not identify)."""
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    weights = np.asarray(weights, dtype=float)
    single = weights.ndim == 1
    weights = np.atleast_2d(weights)
    n, p = x.shape
    # Each case as a win row (weight w * y) and a loss row (weight w * (1 - y)).
    rows = np.vstack([x, x])
    labels = np.concatenate([np.ones(n), np.zeros(n)])
    model = LogisticRegression(C=np.inf, fit_intercept=False, solver="newton-cholesky",
                               tol=TOLERANCE, max_iter=max_iterations,
                               warm_start=start is not None)
    betas = np.full((len(weights), p), np.nan)
    fitted = np.zeros(len(weights), dtype=bool)
    for index, w in enumerate(weights):
        sample_weight = np.concatenate([w * y, w * (1.0 - y)])
        keep = sample_weight > 0
        if len(np.unique(labels[keep])) < 2:
            continue  # one side wins every time: no finite estimate
        if start is not None:
            model.coef_ = np.asarray(start, dtype=float).reshape(1, p).copy()
            model.intercept_ = np.zeros(1)
        # At an estimate already optimal (a tie everywhere: 0) scikit-learn's line search
        # warns and falls back to lbfgs; convergence is judged below, by the score equations.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit(rows[keep], labels[keep], sample_weight=sample_weight[keep])
        beta = model.coef_[0]
        betas[index] = beta
        fitted[index] = (bool(np.isfinite(beta).all())
                         and bool((np.abs(beta) <= COEFFICIENT_LIMIT).all())
                         and _solved(x, y, beta, w) and _identified(x, beta, w))
    if single:
        return betas[0], fitted[0]
    return betas, fitted


def _solved(x: Any, y: Any, beta: Any, w: Any) -> bool:
    """Whether ``beta`` solves the likelihood's score equations (the gradient, per unit of
    weight, is below 1e-6): the fit converged, whatever route the solver took."""
    import numpy as np  # the stats extra, as above

    mu = 0.5 * (1.0 + np.tanh(0.5 * (x @ beta)))
    gradient = x.T @ (w * (y - mu))
    return bool(np.abs(gradient).max() <= 1e-6 * max(float(w.sum()), 1.0))


def _identified(x: Any, beta: Any, w: Any) -> bool:
    """Whether the information matrix at ``beta`` is non-singular: every parameter is
    informed by the (weighted) data."""
    import numpy as np  # the stats extra, as above

    mu = 0.5 * (1.0 + np.tanh(0.5 * (x @ beta)))
    information = (x * (w * mu * (1.0 - mu))[:, None]).T @ x
    eigen = np.linalg.eigvalsh(information)
    return bool(eigen[0] > 1e-9 * max(eigen[-1], 1e-300))
