"""Common ground: what every layer may use and that knows nothing of any of them — the
text of a strict configuration file's validation errors, and the package's version.

Imports nothing of the evaluator; every other package may import it.
"""
