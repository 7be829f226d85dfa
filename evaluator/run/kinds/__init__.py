"""Rubric kinds, run side: one module per kind (``absolute``, ``pairwise``), each a
:class:`evaluator.run.judging.RunKind`, chosen once from ``rubric.kind`` by :func:`run_kind`.
The analysis side of the same kinds: :mod:`evaluator.analysis.kinds`.
"""

from __future__ import annotations

from evaluator.rubrics.rubric import Rubric
from evaluator.run.judging import RunKind
from evaluator.run.kinds import absolute, pairwise

KINDS: dict[str, RunKind] = {"absolute": absolute, "pairwise": pairwise}


def run_kind(rubric: Rubric) -> RunKind:
    """The run side of ``rubric``'s kind."""
    return KINDS[rubric.kind]
