"""Analysis: numbers from verdicts. One sub-package per concept (agreement, estimate, review,
pairwise, summary, kinds), each saying what it holds, above the shared statistics: the
modules directly here (intervals, stats, logit, diagnostics, distributions, score_mode,
panel, gates, designs, label_files, case_fields), which import no sub-package.

May import :mod:`evaluator.common`, :mod:`evaluator.rubrics` and :mod:`evaluator.data`.
scipy, scikit-learn, krippendorff and pingouin (the ``stats`` extra) are imported inside
the functions that need them.
"""
