"""The review worksheet (``evaluator review``): ranking, inputs, sample size."""
