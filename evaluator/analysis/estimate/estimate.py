"""``evaluator estimate``: a clinician-level figure for each system from its judge's scores
on every case and clinicians' labels on a few, and the differences between systems.

For each results file (a *system*: e.g. one generator model's answers, judged) with its
labels file, and each criterion (and each ``--pass`` gate as a 0/1 outcome: the
clinician-level pass rate), over the N cases with an ``ok`` verdict
(:mod:`evaluator.analysis.estimate.ppi`):

* judge only - the judge's mean over all N (what ``summary`` says; its bias is unknown), and
  its bias on the labelled cases, mean(judge - label);
* labels only - the classical estimate from the labels alone;
* PPI++ - the clinician-level estimate with its 95% CI and lambda; for labels drawn with
  known probabilities (``review --design active``), its inverse-probability-weighted form;
* ``effective_labels`` - how many simple-random labels, used alone, would give the same CI.

How the labels were chosen decides what is valid (:mod:`evaluator.analysis.designs`): a
``random`` or ``active`` worksheet carries its probabilities, and its draw must be from this
file's cases (checked by fingerprint); a plain labels file is taken as a simple random sample
(said in a note); labels from a ``priority`` worksheet were chosen for being hard and are
refused: no estimate from them is unbiased. Rows of a worksheet left unlabelled are treated
as missing at random (said in a note).

Labels from a sheet folder (:mod:`evaluator.analysis.labels`): a case labelled by
several gets the mean of their labels (the estimand is the mean clinician's score); for a
gate's pass rate, one labeller's label drawn per case (0/1 kept, the same expectation).

Several systems on the same cases: each pair's difference (later file minus earlier) per
criterion and gate, **paired** when both were labelled on the same draw (the estimator
applied to per-case differences) and **independent** otherwise (said, with how to pair).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from evaluator.analysis.designs import DesignError
from evaluator.analysis.estimate import paired_rate, ppi
from evaluator.analysis.estimate.inputs import (
    GATE_DRAW_SEED,
    GATE_RULE,
    EstimateError,
    System,
    check_gate_scales,
    fill_values,
    load_system,
    outcome_keys,
    scale_note,
    sheet_field,
    system_names,
)
from evaluator.analysis.estimate.paired_rate import paired_rate_difference
from evaluator.analysis.estimate.records import (
    DifferenceRow,
    EstimateReport,
    EstimateRow,
    SystemRow,
)
from evaluator.analysis.gates import Gate
from evaluator.analysis.intervals import NO_INTERVAL, kish_n_eff, wilson_ci
from evaluator.analysis.labels.labelset import LabelSet
from evaluator.analysis.minimum import (
    MIN_LABELS_BIAS,
    MIN_LABELS_DIFFERENCE,
    MIN_LABELS_ESTIMATE,
    label_more,
    too_few,
)
from evaluator.analysis.stats import require_stats
from evaluator.data.sources import LabelSource


def _label_outcome(gate: Gate | None, label: float) -> float:
    return label if gate is None else float(gate.passes(label))


def _response_rate(system: System) -> float:
    drawn = len(system.design.probabilities)
    return len(system.labelled) / drawn if drawn else 1.0


def _rename(figure: ppi.Estimate, method: str) -> None:
    """``figure``'s method named ``method``, keeping why it has no interval, if it has none."""
    reason = figure.method.partition(f"; {NO_INTERVAL}")
    figure.method = f"{method}; {NO_INTERVAL}{reason[2]}" if reason[1] else method


def _zero_one(system: System, key: str) -> bool:
    """``key`` is a 0/1 outcome: its criterion's allowed values are exactly 0 and 1."""
    return any(getattr(f, "key", None) == key and set(getattr(f, "allowed", ())) == {0, 1}
               for f in system.rubric.output)


def _scale(system: System, key: str) -> tuple[float, float] | None:
    """``key``'s scale (its lowest and highest allowed score) where its criterion has
    numeric allowed values and every label given lies between them (a mean of labellers'
    labels may fall between two values; labels on another scale, ``--label-scale 0-100``
    or 0/1 outcomes on a 1-5 rubric, are bounded by nothing the rubric says), else None."""
    for field in getattr(system.rubric, "output", ()) or ():
        if getattr(field, "key", None) == key:
            values = [float(v) for v in getattr(field, "allowed", ()) or ()
                      if isinstance(v, int | float) and not isinstance(v, bool)]
            low, high = (min(values), max(values)) if len(values) >= 2 else (0.0, 0.0)
            if low < high and all(low <= v <= high for v in system.label_values):
                return low, high
    return None


def estimate_outcome(system: System, key: str, gate: Gate | None) -> EstimateRow:
    """Every figure for one outcome (a criterion, or a gate's 0/1) of one system. A gate's
    pass rate keeps every CI in [0, 1] (:func:`ppi.classical_rate`, :func:`ppi.ppi_rate`,
    :func:`ppi.bounded_rate`)."""
    f_all = system.values[gate.rule if gate else key]
    position = {c: i for i, c in enumerate(system.population)}
    labelled = system.labelled
    y = [_label_outcome(gate, system.label_of(c, gate)) for c in labelled]
    f_lab = [f_all[position[c]] for c in labelled]
    judge = ppi.judge_mean(f_all)
    matched_pairs = False  # the bias is a pass rate's with Tango's interval
    if system.design.kind == "active":
        rate = _response_rate(system)
        pi = {c: float(system.design.probabilities[c]) * rate for c in labelled}
        labels_all = [None] * len(f_all)
        gaps = [None] * len(f_all)
        pis = [1.0] * len(f_all)  # an unlabelled case's probability is not used
        for c, value, fv in zip(labelled, y, f_lab, strict=True):
            labels_all[position[c]] = value
            gaps[position[c]] = fv - value
            pis[position[c]] = pi[c]
        classical = ppi.ipw_mean(f_all, labels_all, pis, lam=0.0)
        estimate = ppi.ipw_mean(f_all, labels_all, pis)
        bias = ppi.ipw_mean([0.0] * len(f_all), gaps, pis, lam=0.0)
        _rename(bias, "judge - label: inverse-probability weighted mean over the run")
        weights = [1 / pi[c] for c in labelled]
        variance = ppi.labelled_variance(y, weights)
        # Kish's n_eff of the weights: a rate's n where its SE is 0 (every label the same).
        labels_n = kish_n_eff(weights)
        if gate is not None:
            if not ppi.withheld(classical):
                classical.method = "labels only: weighted"
            classical = ppi.bounded_rate(classical, labels_n, variance)
            estimate = ppi.bounded_rate(estimate, labels_n, variance)
    elif gate is not None:
        labelled_set = set(labelled)
        unlabelled = [f_all[position[c]] for c in system.population if c not in labelled_set]
        classical = ppi.classical_rate(y)
        estimate = ppi.ppi_rate(y, f_lab, unlabelled)
        bias = paired_rate.rate_bias(f_lab, y)
        if bias is None:  # the judge's probabilities of passing: a mean, t
            bias = ppi.classical_mean([a - b for a, b in zip(f_lab, y, strict=True)])
            _rename(bias, "judge - label on the labelled cases, t interval")
        else:
            matched_pairs = True
        variance = ppi.labelled_variance(y)
    else:
        labels_n = float(len(y))
        classical = ppi.classical_mean(y)
        labelled_set = set(labelled)
        estimate = ppi.ppi_mean(y, f_lab, [f_all[position[c]] for c in system.population
                                            if c not in labelled_set])
        bias = ppi.classical_mean([a - b for a, b in zip(f_lab, y, strict=True)])
        _rename(bias, "judge - label on the labelled cases, t interval")
        variance = ppi.labelled_variance(y)
    scale = _scale(system, key) if gate is None else None
    if scale is not None:  # a mean on a rubric's scale: its CI leans away from an edge
        classical = ppi.bounded_mean(classical, *scale, labels_n)
        estimate = ppi.bounded_mean(estimate, *scale, labels_n)
    if gate is not None:
        judge = ppi.bounded_rate(judge, len(f_all))
        bias = ppi.rate_difference(bias)
    elif (classical.ci95 is None and y and set(y) <= {0.0, 1.0} and _zero_one(system, key)
          and not ppi.withheld(classical)):
        # Every label the same on a 0/1 criterion: the labels alone still have Wilson's
        # interval (on Kish's n_eff of the weights on an active sheet), which a point never
        # is. Only on a 0/1 scale: a score of 1 on a 1-4 scale is not a pass.
        if system.design.kind == "active":
            classical = ppi.bounded_rate(classical, labels_n)
        else:
            classical.ci95 = wilson_ci(int(sum(y)), len(y))["ci95"]
        classical.method = ("labels only: Wilson interval (every label the same: no normal "
                            "interval)" + (f", on Kish's n_eff {labels_n:.1f}"
                                           if system.design.kind == "active" else ""))
    effective = (estimate.n_eff if gate is not None
                 else ppi.effective_labels(variance, estimate))
    if system.design.kind != "active":
        # Under the minimum PPI++'s interval is withheld (the labels' own is kept:
        # docs/statistics.md, "Few labels"), and with it the judge's worth; under its own,
        # the judge's bias's t interval.
        # A pass rate's bias by Tango's interval covered 95-100% from 10 labels: kept.
        if len(labelled) < MIN_LABELS_ESTIMATE:
            estimate = ppi.withhold(estimate, ppi.PPI_TOO_FEW.format(
                n=len(labelled), minimum=MIN_LABELS_ESTIMATE))
            effective = None
        if len(labelled) < MIN_LABELS_BIAS and not matched_pairs:
            bias = ppi.withhold(bias, ppi.BIAS_TOO_FEW.format(n=len(labelled),
                                                              minimum=MIN_LABELS_BIAS))
    return EstimateRow(
        file=str(system.path), system=system.name, labels=str(system.labels_path),
        criterion=gate.rule if gate else key, outcome="pass rate" if gate else "mean",
        design=system.design.kind or "none", n_cases=len(f_all), n_labelled=len(labelled),
        n_drawn=len(system.design.probabilities) or None,
        judge_mean=judge.estimate, judge_ci=judge.ci95, judge_method=judge.method,
        judge_bias=bias.estimate, judge_bias_ci=bias.ci95, judge_bias_method=bias.method,
        classical_estimate=classical.estimate, classical_ci=classical.ci95,
        classical_method=classical.method,
        ppi_estimate=estimate.estimate, ppi_ci=estimate.ci95, ppi_se=estimate.se,
        lam=estimate.lam, ppi_method=estimate.method,
        # A pass rate's interval is Wilson's on n_eff: what n_eff random labels would give.
        effective_labels=effective,
        too_few=too_few(len(labelled), MIN_LABELS_ESTIMATE))


def active_wider_note(system: System, row: EstimateRow) -> str | None:
    """On an active sheet, when its PPI++ interval came out wider than the labels alone on
    a random sheet of the same size would give (worth fewer labels than were labelled):
    the note saying so and what to do (issue 47; docs/statistics.md, "Few labels"). None
    otherwise."""
    worth = row.effective_labels
    if system.design.kind != "active" or worth is None or worth >= row.n_labelled:
        return None
    return (f"NOTE: on {row.criterion}, this active sheet's interval is as wide as "
            f"{worth:.0f} labels on a random sheet would give, from {row.n_labelled} "
            "labelled: wider than a random sheet of the same size (the judge's uncertainty "
            "does not track its errors here); draw the next sheet with --design random")


def _paired(a: System, b: System) -> bool:
    """Both labelled on one draw of the same cases: the same population, designs without
    differing probabilities (random, or none), and the same cases drawn (for a plain labels
    file: labelled)."""
    if a.population != b.population:
        return False
    kinds = {a.design.kind, b.design.kind}
    if not kinds <= {"random", None} or len(kinds) != 1:
        return False
    if a.design.kind == "random":
        return set(a.design.probabilities) == set(b.design.probabilities)
    return set(a.labelled) == set(b.labelled)


def difference(a: System, b: System, key: str, gate: Gate | None,
               estimates: Mapping[str, EstimateRow]) -> DifferenceRow:
    """b - a for one outcome: paired (the estimator on per-case differences) when both were
    labelled on one draw, else independent."""
    outcome = gate.rule if gate else key
    n_labelled: int | None = None
    n_cases: int | None = None
    if _paired(a, b):
        both = [c for c in a.population if c in a.labels and c in b.labels]
        position = {c: i for i, c in enumerate(a.population)}
        g_all = [fb - fa for fa, fb in zip(a.values[outcome], b.values[outcome], strict=True)]
        d = [_label_outcome(gate, b.label_of(c, gate)) - _label_outcome(gate, a.label_of(c, gate))
             for c in both]
        labelled_both = set(both)
        unlabelled = [g_all[position[c]] for c in a.population if c not in labelled_both]
        # A pass rate's per-case differences are -1, 0 or 1: Tango's score interval
        # (paired_rate), not the t interval, which such differences defeat.
        fit = ppi.ppi_mean if gate is None else paired_rate_difference
        result = (fit(d, [g_all[position[c]] for c in both], unlabelled) if both else
                  ppi.Estimate(None, None, None, None, "no case labelled for both"))
        judge = ppi.judge_mean(g_all)
        mode, n_labelled, n_cases = "paired", len(both), len(g_all)
        note = (f"paired: both systems labelled on the same {len(both)} case(s); "
                "PPI++ on the per-case differences")
    else:
        # The method carries a withheld interval's reason (too few labels on an active
        # sheet): the difference is withheld with it (ppi.independent_difference).
        ea, eb = (ppi.Estimate(e.ppi_estimate, e.ppi_se, e.ppi_ci, None, e.ppi_method or "",
                               n=e.n_labelled)
                  for e in (estimates[a.name], estimates[b.name]))
        result = ppi.independent_difference(ea, eb)
        ja, jb = (ppi.Estimate(e.judge_mean, _se(e.judge_ci), e.judge_ci, None, "")
                  for e in (estimates[a.name], estimates[b.name]))
        judge = ppi.independent_difference(ja, jb)
        shared = bool(set(a.population) & set(b.population))
        mode = "independent"
        counts = [(estimates[s.name].n_labelled, estimates[s.name].n_cases) for s in (a, b)]
        note = ("independent: the systems were not labelled on one draw of the same "
                "cases, so the CI treats the two estimates as independent"
                + ("; it is conservative when the systems' errors go together on "
                   "the same cases (for a paired comparison, draw both sheets with "
                   "--design random and the same --n and --seed)" if shared else ""))
    scale = (_scale(a, key) if _scale(b, key) == _scale(a, key) else None) \
        if gate is None else (0.0, 1.0)
    if scale is not None:  # a difference of two rates, or means on a scale, stays within it
        span = scale[1] - scale[0]
        result, judge = ppi.rate_difference(result, span), ppi.rate_difference(judge, span)
    # The minimum and "label about N more" (evaluator.analysis.minimum): paired, on the
    # cases labelled for both; independent, on the system with fewer labels, per system.
    if mode == "paired":
        k, unit = n_labelled or 0, "cases (per system, paired)"
        left = (n_cases or 0) - k
    else:
        k, left = min(n for n, _ in counts), min(total - n for n, total in counts)
        unit = "cases per system"
    few = too_few(k, MIN_LABELS_DIFFERENCE)
    more = None if few else label_more(k, result.estimate, result.ci95, left, unit=unit)
    return DifferenceRow(
        criterion=outcome, a=a.name, b=b.name, a_file=str(a.path), b_file=str(b.path),
        mode=mode, n_labelled=n_labelled, n_cases=n_cases, note=note,
        estimate=result.estimate, ci=result.ci95, p=None if few else result.p,
        method=result.method, judge_difference=judge.estimate,
        judge_difference_ci=judge.ci95, judge_difference_method=judge.method, lam=result.lam,
        too_few=few, label_more=more.more if more else None,
        label_more_text=more.text if more else None)


def _se(ci: Sequence[float] | None) -> float | None:
    return None if not ci else (ci[1] - ci[0]) / (2 * ppi.Z95)


def estimate(results: Sequence[Path], labels: LabelSource, *, criteria: Sequence[str] = (),
             gates: Sequence[Gate] = (), score_mode: str = "argmax",
             rubrics_dirs: Sequence[Path] = (),
             label_sets: Mapping[Path, LabelSet] | None = None) -> EstimateReport:
    """Clinician-level estimates for each results file (with the labels file at the same
    position in ``labels.paths``; one labels file with one results file) and each criterion
    and gate, and every pair's difference (see the module docstring). The labels are on
    ``labels.scale`` when given, else those of a ``KEY.label`` field on KEY's scale in the
    rubric (a label off it is refused, naming its line). ``label_sets``: labels path ->
    its labels, for those the caller has read already (the report: each path read once)."""
    require_stats()
    results, paths, label_field = [Path(p) for p in results], labels.paths, str(labels.field)
    if not results:
        raise EstimateError("give at least one results file")
    if len(paths) != len(results):
        raise EstimateError(f"{len(results)} results file(s) and {len(paths)} --labels: give "
                            "one --labels per results file, in the same order (labels rate "
                            "one system's answers)")
    for i, path in enumerate(results):
        for other in results[:i]:
            if path.resolve() == other.resolve():
                raise EstimateError(f"{path} is given twice: each results file is one system "
                                    "(to compare two sheets of one system, estimate each "
                                    "on its own)")
    names = system_names(results)
    field = sheet_field(labels, criteria, label_sets)
    if field is not None:  # sheet folders: the criterion's KEY.label, as a worksheet's
        labels, label_field = replace(labels, field=field), field
    try:
        systems = [load_system(p, labels, lp, name, rubrics_dirs=rubrics_dirs,
                               label_set=(label_sets or {}).get(lp))
                   for p, lp, name in zip(results, paths, names, strict=True)]
    except DesignError as exc:
        raise EstimateError(str(exc)) from None
    rubric_names = {s.rubric.name for s in systems}
    if len(rubric_names) != 1:
        raise EstimateError(f"the results files are of {len(rubric_names)} rubrics "
                            f"({', '.join(sorted(rubric_names))}): compare one rubric")
    keys = outcome_keys(systems[0].rubric, label_field, criteria)
    resolved = [Gate(systems[0].rubric.aliases.get(g.key, g.key), g.op, g.threshold)
                for g in gates]
    for gate in resolved:
        if gate.key not in keys:
            raise EstimateError(f"--pass {gate.rule!r}: its criterion is not among the "
                                f"criteria the labels rate ({', '.join(keys)}); add it with "
                                "--criterion or drop the gate")
    check_gate_scales(systems, resolved)
    for system in systems:
        if resolved and system.label_set is not None and system.label_set.several():
            system.notes.append(GATE_RULE.format(seed=GATE_DRAW_SEED))
    for system in systems:
        fill_values(system, keys, resolved, score_mode)
    outcomes: list[tuple[str, Gate | None]] = ([(k, None) for k in keys]
                                               + [(g.key, g) for g in resolved])
    rows: list[EstimateRow] = []
    differences: list[DifferenceRow] = []
    for key, gate in outcomes:
        per_system = {s.name: estimate_outcome(s, key, gate) for s in systems}
        rows += per_system.values()
        for system in systems:
            wider = active_wider_note(system, per_system[system.name])
            if wider:
                system.notes.append(wider)
        for i, a in enumerate(systems):
            for b in systems[i + 1:]:
                differences.append(difference(a, b, key, gate, per_system))
    scale = scale_note(systems, keys)
    return EstimateReport(
        label_field=label_field, score_mode=score_mode,
        systems=[SystemRow(system=s.name, file=str(s.path), labels=str(s.labels_path),
                           n_cases=len(s.population), n_labelled=len(s.labelled),
                           unlabelled_rows=s.unlabelled_rows, design=s.design.kind or "none",
                           design_text=s.design.describe(), notes=s.notes, scale_note=scale)
                 for s in systems],
        estimates=rows, differences=differences, scale_note=scale)


