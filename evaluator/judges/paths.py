"""Where the evaluator keeps its local caches (converted judges, tiny test models)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """Return the cache root: ``$EVALUATOR_CACHE``, else ``$XDG_CACHE_HOME/evaluator``,
    else ``~/.cache/evaluator``. The folder is created on first use."""
    explicit = os.environ.get("EVALUATOR_CACHE")
    if explicit:
        root = Path(explicit)
    else:
        xdg = os.environ.get("XDG_CACHE_HOME")
        root = (Path(xdg) if xdg else Path.home() / ".cache") / "evaluator"
    root.mkdir(parents=True, exist_ok=True)
    return root
