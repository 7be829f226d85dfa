"""Analysis: numbers from verdicts. The per-run summary (statistics over ``ok`` cases,
status counts), the bootstrap and Wilson intervals, the reduction of several verdicts for
one case (self-consistency samples, a jury) and the agreement between raters, and the
agreement of a results file with human labels (agreement, with CIs that name their method
from intervals, the warnings and judge-bias figures of diagnostics, and what the labels'
design means for them from agreement_design), score distributions, and the review
worksheet of the cases to label next (review, with review_signals and review_inputs),
drawn by a design with known probabilities (designs), and its sample-size estimate
(sample_size); labels files (label_files); clinician-level estimates from a judge and a few
labels, per system and between systems (estimate with the PPI estimators of ppi, its
inputs read and checked in estimate_inputs, its text in estimate_text); pairwise
comparisons (compare, with the statistics of pairwise, bradley_terry and their batched
logistic fit, logit, and the text of pairwise_text).

May import :mod:`evaluator.common`, :mod:`evaluator.rubrics` and :mod:`evaluator.data`.
scipy, scikit-learn, krippendorff and pingouin (the ``stats`` extra) are imported inside
the functions that need them.
"""
