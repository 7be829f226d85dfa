"""The report's figures as typed records: the clinician-level estimates of every results
file (:class:`ReportEstimates`) and each file's agreement with the labels
(:class:`ReportAgreement`). :mod:`evaluator.report.build` makes them; the page's template,
the Decision section (:mod:`evaluator.report.decision`) and the tests read them."""

from __future__ import annotations

from pydantic import Field

from evaluator.analysis.agreement.records import AgreementReport
from evaluator.analysis.estimate.records import DifferenceRow, EstimateRow, SystemRow
from evaluator.common.record import Record


class ReportEstimates(Record):
    """The estimates of every results file: ``rows`` per system and outcome, ``systems``
    (the first estimate's), the ``differences`` between systems (none when one labels file
    serves every results file: ``shared_note`` says why), the estimates that ``failed``
    (one line each), the note on the labels' scale, and each file's page ``labels`` by
    path. ``note``: why there is no estimate at all (then ``rows`` is empty)."""

    note: str | None = None
    rows: list[EstimateRow] = Field(default_factory=list)
    systems: list[SystemRow] = Field(default_factory=list)
    differences: list[DifferenceRow] = Field(default_factory=list)
    failed: list[str] = Field(default_factory=list)
    shared_note: str | None = None
    scale_note: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)

    def label(self, path: str) -> str:
        """The page's label of the results file at ``path`` (the path itself if none)."""
        return self.labels.get(path, path)


class AgreementFile(Record):
    """One results file's agreement with the labels: its page ``label`` and the
    :class:`AgreementReport`, or the ``note`` saying why there is none (no overlap)."""

    label: str
    result: AgreementReport | None
    note: str | None


class ReportAgreement(Record):
    """Every results file's agreement with the labels (``files``, in the page's order) with
    what the labels were (``labels`` shown, their field and id column), the bootstrap's
    resamples, the note on scales, the ``--by`` column, whether the files' joined counts
    differ, and per scored key no file has labels for, why (``unlabelled``)."""

    labels: str
    label_field: str | None
    id_column: str
    resamples: int
    note: str
    files: list[AgreementFile]
    by: str | None
    n_differs: bool
    unlabelled: dict[str, str]
