"""Judges: ``models.yaml`` (the named judges and juries, parsed strictly), the embedded
default judge and the tiny random test model, the cache folder they live in, the offline
switches, and ``backends/``: one module per backend behind one batch method (rendered chats +
output schema + sampling -> generations), loaded lazily by name so that no torch or vLLM is
imported until a run needs it.

A judge knows nothing of rubrics, cases or runs: it may import :mod:`evaluator.common` only.
"""
