"""A study (issue 48): two systems compared on an endpoint, a comparison and a labels
design declared in one plan before any label (:mod:`~evaluator.study.plan`), so that the
decision follows a rule stated in advance.

May import: common, rubrics, data, analysis and itself.
"""
