"""The fewest labelled cases from which the tool states a direction (issue 47).

``MIN_LABELS_ESTIMATE`` (per system, for an estimate) and ``MIN_LABELS_DIFFERENCE`` (per
pair of systems labelled on the same cases, for a paired difference) come from
benchmarks/small_n_coverage.py (results: benchmarks/results/small_n_coverage.txt;
docs/statistics.md, "Small samples"): the smallest number of labels on a random sheet at and
above which every interval of that kind covered 93-97% (within its Monte Carlo error, 500
replicates per cell) in every scenario simulated: a decent judge, one confidently wrong on a
share of cases, a lenient one, a 0-10 scale, labels piled at the scale's edge, a constant
judge (over the scenarios other than labels piled at the edge, whose PPI++ is below the
band at every n up to 60: docs/statistics.md). At 10-15 labels PPI++, the bias and rates
fell to 91.6-92.4% or rose to 98.2%; paired differences were 89.8-91.4% at 15-20. Active
sheets have their own floor for an interval at all
(:data:`evaluator.analysis.estimate.ppi.ACTIVE_MIN_LABELS`).
"""

MIN_LABELS_ESTIMATE = 20
MIN_LABELS_DIFFERENCE = 30
