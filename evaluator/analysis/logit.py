"""Maximum-likelihood logistic regression with case weights, fitted for many weightings at
once: the length-bias model and the Bradley-Terry strengths of ``evaluator compare``, on
the data and on every bootstrap resample (a resample is a weighting of the cases: how many
times each was drawn).

:func:`fit_logit` runs Newton's method on a batch of weight vectors together (numpy), so
2,000 refits cost about what one does. It finds the same maximum-likelihood estimate as
scikit-learn's ``LogisticRegression(C=np.inf)`` (no penalty) and statsmodels' ``GLM``
(binomial): ``tests/test_pairwise_stats.py`` checks both to 1e-6. A response may be 0, 1 or
in between: ``y = 0.5`` with weight ``w`` is exactly the two half-weight rows (one win, one
loss) by which a tie is usually counted, and it keeps the tie's two halves together when
cases are resampled.

A weighting whose estimate is not finite (separable data: one side wins every time), or not
identified (a column without information), is reported as not fitted, never as a number.

numpy is imported inside the function (the ``stats`` extra).
"""

from __future__ import annotations

from typing import Any

# A coefficient beyond this (a log-odds of 30: a probability of 1e-13) is an estimate
# running off to infinity (separation), not a fit.
COEFFICIENT_LIMIT = 30.0
MAX_ITERATIONS = 100
TOLERANCE = 1e-10
MAX_STEP = 5.0  # a Newton step is cut to this size (far from the optimum it can overshoot)


def fit_logit(x: Any, y: Any, weights: Any, *, start: Any = None,
              max_iterations: int = MAX_ITERATIONS) -> tuple[Any, Any]:
    """Fit P(y = 1) = sigmoid(x @ beta) by weighted maximum likelihood, for each row of
    ``weights`` (shape (B, n); a vector (n,) for one fit). ``x``: (n, p), with a column of
    ones for an intercept; ``y``: (n,) in [0, 1].

    Returns ``(beta, fitted)``: beta (B, p), and fitted (B,) False where the fit did not
    converge, a coefficient passed :data:`COEFFICIENT_LIMIT` (separation) or the
    information matrix is singular (a parameter the data do not identify)."""
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np

    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    weights = np.asarray(weights, dtype=float)
    single = weights.ndim == 1
    weights = np.atleast_2d(weights)
    batch, p = weights.shape[0], x.shape[1]
    beta = (np.zeros((batch, p)) if start is None
            else np.broadcast_to(np.asarray(start, dtype=float), (batch, p)).copy())
    outer = (x[:, :, None] * x[:, None, :]).reshape(len(x), p * p)
    ridge = 1e-12 * np.eye(p)
    converged = np.zeros(batch, dtype=bool)
    information = np.zeros((batch, p, p))
    for _ in range(max_iterations):
        mu = 0.5 * (1.0 + np.tanh(0.5 * (beta @ x.T)))  # the logistic function, stably
        gradient = (weights * (y - mu)) @ x
        information = ((weights * mu * (1.0 - mu)) @ outer).reshape(batch, p, p)
        step = np.linalg.solve(information + ridge, gradient[:, :, None])[:, :, 0]
        size = np.abs(step).max(axis=1)
        step *= np.minimum(1.0, MAX_STEP / np.maximum(size, 1e-300))[:, None]
        beta += step
        converged = size < TOLERANCE * np.maximum(1.0, np.abs(beta).max(axis=1))
        if converged.all() or (np.abs(beta) > COEFFICIENT_LIMIT).any(axis=1).all():
            break
    eigen = np.linalg.eigvalsh(information)
    identified = eigen[:, 0] > 1e-9 * np.maximum(eigen[:, -1], 1e-300)
    fitted = converged & identified & (np.abs(beta) <= COEFFICIENT_LIMIT).all(axis=1)
    if single:
        return beta[0], fitted[0]
    return beta, fitted
