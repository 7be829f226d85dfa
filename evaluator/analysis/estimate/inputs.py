"""The inputs of ``evaluator estimate``, read and checked: each system (a results file with
its labels file) with its population (the ``ok`` case ids), labels, design - checked against
the results (fingerprint, the draw done again, the sheet's scores) - and the judge's value of
each outcome on every case; the criteria the labels rate and the gates' scales.

A labels file whose design cannot give an unbiased estimate is refused
(:class:`EstimateError`, one line naming the file, never a case id or text).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from evaluator.analysis.designs import (
    RESULTS_SHA256,
    LabelDesign,
    case_uncertainty,
    population_fingerprint,
    read_design,
    redraw_mismatch,
    uneven_weights_warning,
)
from evaluator.analysis.gates import Gate
from evaluator.analysis.kinds import analysis_kind
from evaluator.analysis.label_files import (
    AgreementError,
    label_number,
    load_labels,
    rated_criteria,
)
from evaluator.analysis.labels.labelset import LabelSet
from evaluator.analysis.labels.readers import names_criteria, rated, read_labels
from evaluator.analysis.labels.verdict_seen import verdict_seen_note
from evaluator.analysis.score_mode import score_view
from evaluator.data.files import sha256_file
from evaluator.data.results import ResultRecord, ResultsFileDamaged, read_results
from evaluator.data.sources import LabelSource
from evaluator.rubrics.load import load_rubric
from evaluator.rubrics.rubric import (
    IntegerCriterion,
    ItemsCriterion,
    Rubric,
    RubricError,
)

NO_DESIGN_NOTE = ("records no design (a plain labels file): its labelled cases are taken as a "
                  "simple random sample of the run's cases; if they were chosen another way "
                  "(e.g. for being hard), the estimate is biased")
PRIORITY_REFUSED = ("labels from a 'priority' worksheet were chosen for being hard, with no "
                    "known probability: no estimate from them is unbiased. Draw a sheet with "
                    "known probabilities (evaluator review --design random, or active) and "
                    "label that")


MAX_LABEL = 1e9
# The seed of the labeller drawn per case for a gate's pass rate on a sheet labelled by
# several (agree's default seed: the same labeller as agree's figures by default).
GATE_DRAW_SEED = 20141
GATE_RULE = ("a --pass gate's pass rate takes, for a case labelled by several, one "
             "labeller's label drawn per case (seed {seed}): the pass or fail stays 0/1, and "
             "its expectation is the mean clinician's pass rate")


class EstimateError(AgreementError):
    """The estimate cannot be made (files, labels, designs, criteria); one line naming the
    file and field, never a case id or case text."""


@dataclass
class System:
    """One results file with its labels: the population (ok case ids, sorted), the labels on
    it, the design, and per outcome key the judge's value on each population case."""

    path: Path
    name: str
    labels_path: Path
    rubric: Rubric
    population: list[str]
    labels: dict[str, float]
    design: LabelDesign
    unlabelled_rows: int
    id_column: str = "case_id"
    notes: list[str] = field(default_factory=list)
    values: dict[str, list[float]] = field(default_factory=dict)
    # Each file is read once: the results' records, the labels file's rows.
    records: list[ResultRecord] = field(default_factory=list)
    rows: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    # The labels as read; when they name their criteria (a sheet, an export): a case's
    # label is the mean of its labellers', and ``given`` every labeller's own, as given.
    label_set: LabelSet | None = None
    given: list[float] | None = None
    # A gate's outcome on a sheet: one labeller's label drawn per case (the pass or fail
    # stays 0/1; its expectation is the mean clinician's pass rate).
    drawn: dict[str, float] | None = None

    def label_of(self, case_id: str, gate: Gate | None = None) -> float:
        """The label of ``case_id`` for a criterion's mean, or for ``gate``'s pass rate."""
        if gate is not None and self.drawn is not None:
            return self.drawn[case_id]
        return self.labels[case_id]

    @property
    def label_values(self) -> list[float]:
        """Every label as given: each labeller's own on a sheet (a mean of two is no value
        of the scale), else the labels."""
        return list(self.labels.values()) if self.given is None else self.given

    @property
    def labelled(self) -> list[str]:
        return [c for c in self.population if c in self.labels]


def system_names(paths: Sequence[Path]) -> list[str]:
    stems = [p.stem for p in paths]
    return stems if len(set(stems)) == len(stems) else [str(p) for p in paths]


def _read(path: Path, rubrics_dirs: Sequence[Path]) -> list[ResultRecord]:
    try:
        return read_results(path, rubrics_dirs)
    except ResultsFileDamaged as exc:
        raise EstimateError(str(exc)) from None
    except OSError as exc:
        raise EstimateError(f"cannot read results file {path} ({exc.strerror})") from None


def _rubric(path: Path, records: Sequence[ResultRecord], rubrics_dirs: Sequence[Path]) -> Rubric:
    names = sorted({r.rubric for r in records})
    if len(names) != 1:
        raise EstimateError(f"{path}: " + ("no records" if not names else
                                           f"records of {len(names)} rubrics"))
    try:
        rubric = load_rubric(names[0], tuple(rubrics_dirs))
    except RubricError as exc:
        raise EstimateError(f"rubric {names[0]!r} of {path} cannot be loaded ({exc}); give "
                            "--rubrics-dir") from None
    if refused := analysis_kind(rubric).elsewhere(path, rubric.name, "estimate"):
        raise EstimateError(refused)
    return rubric


def _check_design(system: System, records: Sequence[ResultRecord]) -> None:
    design, path = system.design, system.labels_path
    if design.kind == "priority":
        raise EstimateError(f"{path}: {PRIORITY_REFUSED}")
    if design.kind is None:
        system.notes.append(f"{path} {NO_DESIGN_NOTE}")
        outside = [c for c in system.labels if c not in set(system.population)]
        if outside:
            system.notes.append(f"{len(outside)} labelled case(s) have no ok verdict in "
                                f"{system.path}: left out")
        return
    if (design.population != len(system.population)
            or design.population_sha256 != population_fingerprint(system.population)):
        raise EstimateError(
            f"{path}: the sheet was drawn from {design.population} cases that are not the "
            f"{len(system.population)} ok cases of {system.path} (another run, or the run "
            "changed since): estimate the results file the sheet was drawn from, or draw a "
            "new sheet from this one")
    uncertainty = None
    if design.kind == "active":
        criterion = next((f for f in system.rubric.output
                          if isinstance(f, (IntegerCriterion, ItemsCriterion))
                          and f.key == design.criterion), None)
        if criterion is None:
            raise EstimateError(f"{path}: the sheet's design_criterion is not a scored "
                                f"criterion of rubric {system.rubric.name!r}")
        if design.files == 1:
            by_id = {r.case_id: r for r in records if r.status == "ok"}
            uncertainty = {c: case_uncertainty(criterion, [by_id[c]])
                           for c in system.population}
        else:
            system.notes.append(f"the sheet was drawn from {design.files} results files "
                                "together: its draw cannot be re-checked against one")
    mismatch = redraw_mismatch(design, system.population, uncertainty)
    if mismatch:
        raise EstimateError(f"{path}: {mismatch}: rows were deleted, added or edited, so the "
                            "labelled cases are not the draw; use the sheet as evaluator "
                            "review wrote it (an empty label is fine), or draw a new one")
    drawn = len(design.probabilities)
    missing = drawn - len(system.labelled)
    if missing:
        system.notes.append(
            f"{missing} of the {drawn} drawn case(s) are not labelled yet: the labelled ones "
            "are taken as the sample (valid if which were left is unrelated to the labels)"
            + ("; their probabilities are scaled by the share labelled"
               if design.kind == "active" else ""))


def load_system(path: Path, source: LabelSource, labels_path: Path, name: str, *,
                rubrics_dirs: Sequence[Path], label_set: LabelSet | None = None) -> System:
    """Read one results file and its labels file ``labels_path``, as ``source`` says (on its
    scale, else on the rubric's for a ``KEY.label`` field:
    :func:`~evaluator.analysis.label_files.load_labels`), and check the labels' design
    against it. ``label_set``: the labels of ``labels_path``, when read already."""
    label_field = str(source.field)
    records = _read(path, rubrics_dirs)
    rubric = _rubric(path, records, rubrics_dirs)
    population = sorted({r.case_id for r in records if r.status == "ok" and r.scores is not None})
    if len(population) < 2:
        raise EstimateError(f"{path}: {len(population)} ok case(s); an estimate needs at "
                            "least 2")
    label_set = label_set or read_labels(source, labels_path, rubric=rubric)
    id_column = label_set.id_column
    if label_set.named:
        key = label_set.criteria_for(label_field)[0]
        # Each labeller's label was checked on the scale as it was read; a mean of two is
        # not a value of the scale.
        rows = label_set.rows_for(key, "mean")
        labels = load_labels(replace(source, id_column=id_column), label_set.design_path,
                             rows=rows)
    else:
        rows = label_set.rows
        labels = load_labels(source, labels_path, rows=rows, rubric=rubric)
    if any(abs(v) > MAX_LABEL for v in labels.values()):
        raise EstimateError(f"{labels_path}: a label in {label_field!r} is beyond "
                            f"+-{MAX_LABEL:g}: not a score or an outcome (the estimators' sums "
                            "would overflow)")
    design = read_design(label_set.design_path, id_column, rows=label_set.rows)
    system = System(path, name, labels_path, rubric, population, dict(labels), design,
                    labels.unlabelled, id_column, records=records, rows=rows,
                    label_set=label_set)
    if label_set.named:
        system.given = [float(v) for by in label_set.ratings[key].values() for v in by.values()]
        system.drawn = {case: float(v) for case, v
                        in label_set.combined(key, "draw", GATE_DRAW_SEED).items()}
        system.notes += [label_set.rule_line("mean"), *label_set.notes]
    seen = verdict_seen_note(label_set, priority=design.kind == "priority")
    if seen:
        system.notes.append(seen)
    _check_design(system, records)
    if not system.labelled:
        raise EstimateError(f"no labelled case of {labels_path} has an ok verdict in {path}; "
                            "check --id-column")
    if design.kind == "active":
        uneven = uneven_weights_warning([design.weight(c) for c in system.labelled])
        if uneven:
            system.notes.append(f"WARNING: {uneven}")
    return system


def sheet_field(source: LabelSource, criteria: Sequence[str],
                label_sets: Mapping[Path, LabelSet] | None = None) -> str | None:
    """The label field of ``--labels`` that name their criteria (a sheet folder, an
    export): ``KEY.label`` of ``--label-field`` (KEY or KEY.label), else of the one
    ``--criterion``, else of the labels' one criterion; None when no labels path names its
    criteria. Labels of several criteria need one named: an estimate is of one criterion's
    labels. ``label_sets``: the paths' labels where read already (not read again)."""
    known = label_sets or {}
    named = [p for p in source.paths
             if (known[p].named if p in known else names_criteria(p))]
    if not named:
        return None
    if len(named) != len(source.paths):
        raise EstimateError("give every --labels as a sheet folder, or every one as a labels "
                            "file (one --label-field names the labels of both)")
    if source.field:
        return source.field if source.field.endswith(".label") else f"{source.field}.label"
    if len(criteria) == 1:
        return f"{criteria[0]}.label"
    keys = known[named[0]].criteria if named[0] in known else rated(named[0])
    if len(keys) == 1:
        return f"{keys[0]}.label"
    raise EstimateError(f"{named[0]} rates {', '.join(keys)}: give --label-field KEY, the "
                        "criterion to estimate")


def outcome_keys(rubric: Rubric, label_field: str, criteria: Sequence[str]) -> list[str]:
    """The criteria the labels rate (:func:`~evaluator.analysis.label_files.rated_criteria`:
    ``--criterion``, else KEY of a ``KEY.label`` field), aliases resolved."""
    comparable = ([f.key for f in rubric.output if isinstance(f, IntegerCriterion)]
                  + [a.name for a in rubric.aggregates])
    keys = [rubric.aliases.get(k, k) for k in dict.fromkeys(criteria)]
    unknown = [k for k in keys if k not in comparable]
    if unknown:
        raise EstimateError(f"unknown --criterion {', '.join(map(repr, unknown))}; rubric "
                            f"{rubric.name!r} has: {', '.join(comparable)}")
    try:
        rated = rated_criteria(label_field, keys, comparable)
    except AgreementError as exc:
        raise EstimateError(str(exc)) from None
    if rated:
        return rated
    raise EstimateError(f"which criterion do the labels in {label_field!r} rate? give "
                        f"--criterion (rubric {rubric.name!r} has: {', '.join(comparable)})")


def fill_values(system: System, keys: Sequence[str], gates: Sequence[Gate],
                 score_mode: str) -> None:
    """The judge's value of each key (and of each gate: 1 when the score passes, else 0;
    in expected mode, for an integer criterion with a distribution, the judge's probability
    that it passes) on every population case. A case ``score_mode`` cannot read (expected
    mode without distributions) uses its verdict's own score, and a missing value the mean
    of the others: any fixed prediction keeps PPI unbiased (each is said in a note)."""
    records = system.records
    view = score_view(system.rubric, records, score_mode, str(system.path))
    fallback = score_view(system.rubric, records, "argmax", str(system.path))
    if view.left_out:
        system.notes.append(f"{view.left_out} case(s) have no score distributions: their "
                            "verdict's own score stands in for the expected score")

    def raw(key: str) -> list[float | None]:
        out = []
        for case_id in system.population:
            value = view.value(case_id, key)
            if value is None:
                value = fallback.value(case_id, key)
            out.append(None if value is None else float(value))
        return out

    drawn_from = _check_sheet_results(system)
    for key in keys:
        system.values[key] = _imputed(system, key, raw(key))
        if not drawn_from:
            _check_sheet_scores(system, key, fallback)
    integer = {f.key for f in system.rubric.output if isinstance(f, IntegerCriterion)}
    by_id = {r.case_id: r for r in records if r.status == "ok"}
    for gate in gates:
        outcomes = [None if v is None else float(gate.passes(v)) for v in raw(gate.key)]
        if score_mode == "expected" and gate.key in integer:
            # The expected value of a 0/1 outcome is its probability: P(score passes).
            for i, case_id in enumerate(system.population):
                dist = (by_id[case_id].distributions or {}).get(gate.key)
                total = sum(dist.probabilities.values()) if dist is not None else 0.0
                if dist is not None and total > 0:
                    outcomes[i] = sum(prob for value, prob in dist.probabilities.items()
                                      if gate.passes(float(value))) / total
        system.values[gate.rule] = _imputed(system, gate.rule, outcomes)


def _check_sheet_results(system: System) -> bool:
    """A blind worksheet (issue 37) shows no verdict to compare with: its ``results_sha256``
    column names the results files it was drawn from (their SHA-256, joined by ``;``). When
    this results file is not one of them, the same warning as :func:`_check_sheet_scores`.
    False when the sheet has no such column (an older sheet: its scores are compared)."""
    drawn = {h for _, row in system.rows
             for h in str(row.get(RESULTS_SHA256) or "").split(";") if h}
    if not drawn:
        return False
    if sha256_file(Path(system.path)) not in drawn:
        system.notes.append(
            f"WARNING: the worksheet was not drawn from {system.path} (its "
            f"{RESULTS_SHA256!r} names other results files): was it drawn from another "
            "results file (another system's answers)? Check that each --labels goes with its "
            "results file")
    return True


def _check_sheet_scores(system: System, key: str, verdicts: Any) -> None:
    """A worksheet shows each drawn case's score (``<key>.score``): when they are not this
    results file's verdicts, the labels may rate another system's answers (same case ids,
    another file) - said in a warning, since a sheet over several judges' files shows one
    of them."""
    column = f"{key}.score"
    compared = differ = 0
    for _, row in system.rows:
        shown = label_number(row.get(column))
        case_id = row.get(system.id_column)
        if shown is None or case_id is None:
            continue
        verdict = verdicts.value(str(case_id), key)
        if verdict is None:
            continue
        compared += 1
        differ += float(verdict) != shown
    if differ:
        system.notes.append(
            f"WARNING: on {differ} of the {compared} worksheet rows, {column!r} is not "
            f"{system.path}'s verdict: was the sheet drawn from another results file (another "
            "system's answers)? Check that each --labels goes with its results file")


def _imputed(system: System, key: str, values: list[float | None]) -> list[float]:
    present = [v for v in values if v is not None]
    if not present:
        raise EstimateError(f"{system.path}: no ok case has a value for {key!r}")
    missing = len(values) - len(present)
    if missing:
        mean = sum(present) / len(present)
        system.notes.append(f"{missing} case(s) have no value for {key!r}: the judge's mean "
                            "stands in for them")
        return [mean if v is None else v for v in values]
    return [float(v) for v in values]  # type: ignore[arg-type]


def check_gate_scales(systems: Sequence[System], gates: Sequence[Gate]) -> None:
    """A gate applies to the judge's score and to the label alike: labels off the
    criterion's scale (e.g. 0/1 outcomes) make the labels' side meaningless."""
    scales = {f.key: set(f.allowed) for f in systems[0].rubric.output
              if isinstance(f, IntegerCriterion)}
    for gate in gates:
        allowed = scales.get(gate.key)
        if allowed is None:
            continue
        for system in systems:
            if any(v not in allowed for v in system.label_values):
                raise EstimateError(
                    f"--pass {gate.rule!r}: the labels in {system.labels_path} are not on "
                    f"{gate.key!r}'s scale ({min(allowed)}-{max(allowed)}), so the gate "
                    "cannot be applied to them; label pass/fail as 0/1 and estimate its mean "
                    "with --criterion instead")


def scale_note(systems: Sequence[System], keys: Sequence[str]) -> str | None:
    """Labels outside the criterion's scale (e.g. 0/1 outcomes against a 1-5 score): the
    judge-only mean and its bias are on another scale, PPI++ is still valid."""
    scales = {f.key: set(f.allowed) for f in systems[0].rubric.output
              if isinstance(f, IntegerCriterion)}
    for key in keys:
        allowed = scales.get(key)
        if allowed is None:
            continue
        if any(v not in allowed for s in systems for v in s.label_values):
            return (f"the labels are not on {key!r}'s scale ({min(allowed)}-{max(allowed)}): "
                    "the judge-only mean and the judge - label bias compare different scales "
                    "and say nothing; labels only and PPI++ estimate the labels' mean (PPI++ "
                    "rescales the judge by lambda, and stays valid whatever the judge)")
    return None
