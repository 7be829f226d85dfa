"""The per-run summary (``evaluator summary``): figures, records, text, confidence."""
