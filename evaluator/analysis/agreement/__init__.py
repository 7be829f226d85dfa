"""Agreement with human labels (``evaluator agree``): figures, design, text."""
