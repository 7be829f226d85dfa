"""What the design of a labels file (:mod:`evaluator.analysis.designs`) means for ``evaluator
agree``: which figures are weighted, what is said before them, and each case's weight.

* ``priority`` (and a worksheet from before designs): the cases were chosen for being hard,
  with no known probability. The figures are computed as they are, after
  :data:`~evaluator.analysis.designs.PRIORITY_WARNING` (the first warning, before any figure).
* ``random``, or no design (a plain labels file): every labelled case counts once; the
  design is said in one line.
* ``active``: cases were drawn with known, unequal inclusion probabilities pi, favouring the
  judge's uncertain cases. A case's weight is 1/pi and the statistics with a standard
  weighted form are design-weighted (Hajek: weighted sums divided by the sum of the
  weights, so they estimate the figure over the run): :data:`WEIGHTED_STATISTICS`. The
  others (:data:`DRAWN_ONLY_STATISTICS`) describe the drawn cases only, which over-represent
  the judge's uncertain cases; one line says which are which.

An active sheet whose joined cases happen to share one probability (e.g. every case drawn)
has equal weights: its figures are left unweighted, and a note says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluator.analysis.designs import (
    PRIORITY_WARNING,
    LabelDesign,
    population_fingerprint,
    read_design,
    redraw_mismatch,
    uneven_weights_warning,
)
from evaluator.analysis.intervals import kish_n_eff

WEIGHTED_STATISTICS = ("kappa_quadratic", "mean_abs_difference", "exact", "within_one",
                       "confusion", "gates")
DRAWN_ONLY_STATISTICS = ("spearman", "kendall_tau_b", "icc_a1", "krippendorff_alpha_ordinal",
                         "verbosity", "subgroups")
WEIGHTED_SPLIT = ("design-weighted by 1/pi (Hajek; marked (w), their bootstrap resamples "
                  "(judge, label, weight) triples): quadratic kappa, mean |judge - label|, "
                  "exact and within-one agreement, the confusion matrix (estimated counts in "
                  "the run) and the --pass gates; on the drawn cases only (they over-represent "
                  "the judge's uncertain cases): Spearman, Kendall, ICC, Krippendorff's alpha, "
                  "the verbosity figures and the --by subgroups")


@dataclass
class AgreeDesign:
    """A labels file's design as ``agree`` uses it: ``weighted`` when the joined cases have
    known, unequal inclusion probabilities; the ``design`` block of agree's result; the
    warnings to give before any figure."""

    design: LabelDesign
    weighted: bool
    block: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    response: float = 1.0

    def weights(self, case_ids: Sequence[str]) -> list[float] | None:
        """1/(pi x the share of drawn cases joined) of each case (None when the figures are
        not weighted): with rows left unlabelled, the joined ones stand for them (missing
        at random), so the estimated counts in the run are not too low; shares and other
        ratios are unchanged by the common factor."""
        if not self.weighted:
            return None
        return [self.design.weight(c) / self.response for c in case_ids]


def agree_design(labels_path: Path, id_column: str, joined_ids: Sequence[str],
                 ok_ids: Sequence[str], results_path: Path,
                 rows: list[tuple[int, dict[str, Any]]] | None = None) -> AgreeDesign:
    """Read the design of ``labels_path`` (:func:`read_design`; raises
    :class:`~evaluator.analysis.designs.DesignError`) and say what it means for the
    agreement of ``results_path`` (its ``ok`` case ids: ``ok_ids``) over ``joined_ids``.
    ``rows``: the labels' rows when they are not read from ``labels_path`` (a sheet
    folder's review.jsonl rows)."""
    design = read_design(Path(labels_path), id_column, rows=rows)
    probabilities = {design.probabilities.get(c) for c in joined_ids}
    weighted = design.kind == "active" and len(probabilities) > 1
    notes: list[str] = []
    if design.known_probabilities:
        notes += _sample_notes(design, joined_ids, ok_ids, results_path)
        if design.kind == "active" and not weighted:
            notes.append("the joined cases' inclusion probabilities are all equal: equal "
                         "weights, no figure is reweighted")
        elif design.kind == "random":
            notes.append("every case had the same probability: equal weights")
    drawn = len(design.probabilities)
    response = len(joined_ids) / drawn if design.known_probabilities and drawn else 1.0
    weights = [design.weight(c) / response for c in joined_ids] if weighted else None
    block: dict[str, Any] = {
        "kind": design.kind,
        "text": design.describe(),
        "legacy": design.legacy,
        "population": design.population,
        "drawn": len(design.probabilities) if design.kind is not None else None,
        "joined": len(joined_ids),
        "weighted": weighted,
        "weights": None if weights is None else {
            "min": min(weights), "max": max(weights), "sum": sum(weights),
            "n_eff": kish_n_eff(weights),
            "method": ("1/pi, divided by the share of drawn cases joined; Hajek: weighted "
                       "sums divided by the sum of the weights")},
        "weighted_statistics": list(WEIGHTED_STATISTICS) if weighted else [],
        "drawn_only_statistics": list(DRAWN_ONLY_STATISTICS) if weighted else [],
        "split": WEIGHTED_SPLIT if weighted else None,
        "notes": notes,
        "warning": PRIORITY_WARNING if design.kind == "priority" else None,
    }
    warnings = [block["warning"]] if block["warning"] else []
    uneven = uneven_weights_warning(weights) if weights is not None else None
    if uneven:
        warnings.append(uneven)
    block["uneven_weights"] = uneven
    return AgreeDesign(design, weighted, block, warnings, response or 1.0)


def _sample_notes(design: LabelDesign, joined_ids: Sequence[str], ok_ids: Sequence[str],
                  results_path: Path) -> list[str]:
    """What makes a drawn sheet's labelled cases less than the draw: another population,
    rows not labelled (or not ok) - said, never refused (agree compares what it has)."""
    notes = []
    if (design.population != len(set(ok_ids))
            or design.population_sha256 != population_fingerprint(list(ok_ids))):
        notes.append(f"the sheet was drawn from {design.population} cases that are not the "
                     f"{len(set(ok_ids))} ok cases of {results_path} (another run, or the run "
                     "changed since): its figures describe the cases it was drawn from")
    elif design.kind == "random":
        mismatch = redraw_mismatch(design, sorted(set(ok_ids)))
        if mismatch:
            notes.append(f"the sheet: {mismatch}: rows were deleted, added or edited, so its "
                         "figures describe a hand-made selection, not the draw")
    missing = len(design.probabilities) - len(joined_ids)
    if missing > 0:
        notes.append(f"{missing} of the {len(design.probabilities)} drawn case(s) are not "
                     "joined (not labelled yet, or no ok result): the joined ones are taken "
                     "as the sample (valid if which are missing is unrelated to the labels; "
                     "weights are scaled by the share joined)")
    return notes
