"""The evaluator's version (shown by ``evaluator --version``'s package metadata, written into
reports)."""

__version__ = "0.1.0"
