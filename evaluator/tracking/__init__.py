"""Tracking: a finished run recorded in an experiment tracker (MLflow).

:mod:`.log_run` gathers what a finished results file says (its manifest, its summary
recomputed from the records, agreement with labels and clinician-level estimates, the HTML
report) and hands it to :mod:`.mlflow_store`, the only module that talks to MLflow (its
public ``MlflowClient``, imported lazily: ``import evaluator`` never imports mlflow). What
is logged is built by pure functions: metric names (:mod:`.names`), metrics from the
analysis dicts (:mod:`.figures`), params and tags from the manifest (:mod:`.provenance`).
No case text is logged unless the caller asks for the results file as an artifact.

May import :mod:`evaluator.common`, :mod:`evaluator.rubrics`, :mod:`evaluator.judges` (the
no-telemetry switch), :mod:`evaluator.data`, :mod:`evaluator.analysis`, :mod:`evaluator.run`
(the manifests) and :mod:`evaluator.report` (the HTML report artifact).
"""
