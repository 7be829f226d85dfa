"""Clinician-level estimates (``evaluator estimate``): PPI, inputs, text."""
