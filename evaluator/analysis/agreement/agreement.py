"""Agreement between a judge's scores and human (or reference) labels, per criterion.

:func:`agreement` joins the ``ok`` records of a results file with a labels file (JSONL or
CSV) by case id and computes, for each integer criterion and aggregate: Spearman and Kendall
(scipy.stats, with p-values), quadratic-weighted Cohen's kappa (scikit-learn), ICC two-way
absolute agreement, single rater (pingouin), Krippendorff's alpha, ordinal (krippendorff),
exact and within-one agreement with their chance levels, and the confusion matrix
(scikit-learn; judge axis: the rubric's scale, label axis: ``label_scale`` or the observed
labels). Every 95% CI names its method (:mod:`evaluator.analysis.intervals`): a seeded BCa
bootstrap over case pairs whose undefined resamples are counted, a Fisher-z interval for the
rank correlations when too many are undefined, Wilson for the two agreement shares, the
F-based interval for the ICC. Kappa, exact/within-one agreement and ICC compare values
directly, so they assume judge and labels use the same scale; the rank correlations do not.

It also says what would make the figures mislead, before the figures
(:mod:`evaluator.analysis.diagnostics`): a judge or labels with one value, a judge using two
values of its scale, statistics that chance alone makes high, labels that can be read from
an input field the judge is shown; and measures the judge's biases: score against the
evaluated text's length and the judge's own verdict length, and by subgroup (``by``).

The labels file's design (:mod:`evaluator.analysis.agreement.design`) decides how the figures
are read: labels from a ``priority`` worksheet get a warning before any figure; labels drawn
with known, unequal probabilities (``active``) weight each case by 1/pi in kappa (scikit-learn's
``sample_weight``), the mean absolute difference, exact and within-one agreement (Wilson on
Kish's effective n), the confusion matrix (estimated counts) and the gates; the other
statistics describe the drawn cases.

The heavy libraries (the ``stats`` extra) are imported inside the functions.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluator.analysis import diagnostics
from evaluator.analysis.agreement.ceiling import ceiling
from evaluator.analysis.agreement.design import AgreeDesign, agree_design
from evaluator.analysis.agreement.records import (
    AgreementBootstrap,
    AgreementReport,
    Ceiling,
    LabellerAgreement,
    SheetLabelsBlock,
)
from evaluator.analysis.case_fields import case_fields, evaluated_field
from evaluator.analysis.gates import POSITIVE_CLASS, Gate, gate_table
from evaluator.analysis.intervals import (
    UNDEFINED_SHARE_LIMIT,
    clean,
    fisher_z_ci,
    interval_or_reason,
    kish_n_eff,
    kish_wilson_ci,
    paired_bootstrap,
    weighted_bootstrap,
    wilson_ci,
)
from evaluator.analysis.kinds import KINDS, analysis_kind
from evaluator.analysis.label_files import (
    AgreementError,
    Labels,
    load_groups,
    load_labels,
    rated_criteria,
)
from evaluator.analysis.labels.labelset import LabelSet
from evaluator.analysis.labels.readers import read_labels
from evaluator.analysis.labels.verdict_seen import verdict_seen_note
from evaluator.analysis.minimum import MIN_LABELS_ESTIMATE, too_few
from evaluator.analysis.score_mode import ScoredView, ScoreModeBlock, mode_block, score_view
from evaluator.analysis.stats import require_stats
from evaluator.data.results import ResultRecord, read_results
from evaluator.data.sources import CaseSource, LabelSource
from evaluator.rubrics.load import load_rubric
from evaluator.rubrics.rubric import IntegerCriterion, Rubric, RubricError

AGREEMENT_RESAMPLES = 1000
AGREEMENT_SEED = 20141
SAME_SCALE_NOTE = ("kappa, ICC, exact and within-one agreement compare values directly: they "
                   "assume the judge and the labels use the same scale; Spearman and Kendall "
                   "do not")
# --score expected: statistics that need categories are not computed (docs/statistics.md).
CEILING_DRAWN_NOTE = ("the ceiling describes the overlap cases as drawn (not design-weighted: "
                      "they over-represent the judge's uncertain cases)")
# Fewer overlap cases than this: no ceiling (a bootstrap over a handful of cases says little).
MIN_OVERLAP = 5
NOT_CATEGORIES = ("not applicable to expected scores (they are not categories); ICC, "
                  "Krippendorff's alpha and the mean absolute difference compare them")


def _quiet(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call a library statistic; degenerate input (constant scores, one class) gives NaN or
    raises, and its warnings would be errors under pytest: that becomes None."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return function(*args, **kwargs)
        # pingouin checks its input with assert statements.
        except (ValueError, ZeroDivisionError, FloatingPointError, AssertionError):
            return None


def _spearman(x: Any, y: Any) -> tuple[float | None, float | None]:
    # Imported here: the stats extra, which `import evaluator` never loads.
    from scipy.stats import spearmanr

    result = _quiet(spearmanr, x, y)
    return (None, None) if result is None else (clean(result.statistic), clean(result.pvalue))


def _kendall(x: Any, y: Any) -> tuple[float | None, float | None]:
    # Imported here: the stats extra, which `import evaluator` never loads.
    from scipy.stats import kendalltau

    result = _quiet(kendalltau, x, y)
    return (None, None) if result is None else (clean(result.statistic), clean(result.pvalue))


def _kappa(x: Any, y: Any, w: Any = None) -> float | None:
    """Quadratic kappa; with design weights ``w``, scikit-learn's ``sample_weight`` form."""
    # Imported here: the stats extra, which `import evaluator` never loads.
    from sklearn.metrics import cohen_kappa_score

    return clean(_quiet(cohen_kappa_score, x.astype(int), y.astype(int), weights="quadratic",
                        sample_weight=w))


def _alpha(x: Any, y: Any) -> float | None:
    # Imported here: the stats extra, which `import evaluator` never loads.
    import krippendorff
    import numpy as np

    if len(set(x.tolist()) | set(y.tolist())) < 2:
        return None  # one value in all: alpha is undefined (the library divides by zero)
    return clean(_quiet(krippendorff.alpha, reliability_data=np.vstack([x, y]),
                        level_of_measurement="ordinal"))


def _icc(x: Any, y: Any) -> dict[str, Any]:
    """ICC two-way random, absolute agreement, single rater (Shrout & Fleiss ICC2 /
    McGraw & Wong ICC(A,1)) with pingouin's F-based 95% CI."""
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np
    import pandas as pd
    import pingouin

    method = "F distribution (pingouin)"
    n = len(x)
    data = pd.DataFrame({"case": np.concatenate([np.arange(n), np.arange(n)]),
                         "rater": ["judge"] * n + ["label"] * n,
                         "score": np.concatenate([x, y])})
    table = _quiet(pingouin.intraclass_corr, data=data, targets="case", raters="rater",
                   ratings="score")
    if table is None:
        return {"value": None, "ci95": None, "ci_method": method}
    row = table[table["Type"].isin(["ICC2", "ICC(A,1)"])].iloc[0]
    low, high = row["CI95"]
    value = clean(row["ICC"])
    # With no residual disagreement (judge and labels differ by the same amount, 0 included,
    # on every case) the F ratio is infinite: pingouin's interval is NaN or [1, 1]; it is
    # also rounded to 2 decimals, so a near-perfect ICC can give [1.0, 1.0] too.
    ci, why = interval_or_reason([clean(low), clean(high)],
                                 "the F interval (pingouin, 2 decimals) has no width: judge "
                                 "and labels (nearly) agree on every case")
    if ci is None and why is None and value is not None:
        why = ("no interval: the F interval is undefined (no residual disagreement between "
               "judge and labels)")
    return {"value": value, "ci95": ci, "ci_method": f"{method}; {why}" if why else method}


def _mean_abs(x: Any, y: Any, w: Any = None) -> float | None:
    """Mean |judge - label|; with design weights ``w``, the weighted mean (Hajek)."""
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np

    return clean(float(np.average(np.abs(x - y), weights=w))) if len(x) else None


def _is_integral(values: Sequence[float]) -> bool:
    return all(float(v).is_integer() for v in values)


def _bootstrapped(value: float | None, x: Any, y: Any,
                  statistic: Callable[..., float | None], resamples: int, seed: int,
                  fallback: str | None = None, weights: Any = None) -> dict[str, Any]:
    """``value`` with its bootstrap CI; when the bootstrap is unreliable (too many undefined
    resamples) a rank correlation gets its Fisher-z interval (``fallback``: "spearman" or
    "kendall") and any other statistic no interval. ``weights``: a design-weighted
    ``statistic(x, y, w)``, bootstrapped over (judge, label, weight) triples."""
    if value is None:
        return {"value": None, "ci95": None, "ci_method": "-"}
    boot = (paired_bootstrap(x, y, statistic, resamples=resamples, seed=seed)
            if weights is None else
            weighted_bootstrap(x, y, weights, statistic, resamples=resamples, seed=seed))
    entry = {"value": value, "ci95": boot["ci95"], "ci_method": boot["method"],
             "bootstrap": {"resamples": boot["resamples"], "undefined": boot["undefined"]}}
    if weights is not None:
        entry["weighted"] = True
    if not boot["reliable"] and fallback is not None:
        alternative = fisher_z_ci(value, len(x), fallback)
        entry["ci95"] = alternative["ci95"]
        entry["ci_method"] = (f"{alternative['method']} (the bootstrap was unreliable: "
                              f"{boot['undefined']} of {boot['resamples']} resamples undefined)")
    return entry


def _p_disagrees(entry: Mapping[str, Any]) -> bool:
    """Whether a correlation's CI and its p-value disagree about zero (at 5%)."""
    p, ci = entry.get("p"), entry.get("ci95")
    if p is None or not ci:
        return False
    return (p < 0.05) != (not ci[0] <= 0 <= ci[1])


def _confusion(x: Any, y: Any, judge_scale: Sequence[int] | None,
               label_scale: Sequence[float] | None, w: Any = None) -> dict[str, Any] | None:
    """Rows: the label scale (declared, else observed); columns: the judge's scale (the
    rubric's allowed values, plus any observed value outside it). Design weights ``w``:
    each cell the sum of 1/pi, an estimated count in the run (``drawn``: the counts)."""
    # Imported here: the stats extra, which `import evaluator` never loads.
    from sklearn.metrics import confusion_matrix

    judge_axis = sorted({int(v) for v in (judge_scale or [])} | {int(v) for v in x})
    label_axis = sorted({int(v) for v in label_scale} if label_scale is not None
                        else {int(v) for v in y})
    values = sorted(set(judge_axis) | set(label_axis))
    # sklearn warns when a single value occurs even though ``labels`` fixes the shape.
    matrix = _quiet(confusion_matrix, y.astype(int), x.astype(int), labels=values)
    if matrix is None:
        return None
    rows = [values.index(v) for v in label_axis]
    columns = [values.index(v) for v in judge_axis]
    out = {"rows": "label", "columns": "judge", "label_values": label_axis,
           "judge_values": judge_axis,
           "label_axis": "--label-scale" if label_scale is not None else "observed labels",
           "judge_axis": "rubric scale" if judge_scale else "observed scores",
           "matrix": [[int(matrix[r][c]) for c in columns] for r in rows]}
    if w is not None:
        weighted = _quiet(confusion_matrix, y.astype(int), x.astype(int), labels=values,
                          sample_weight=w)
        if weighted is None:
            return None
        out.update(weighted=True, drawn=out["matrix"],
                   counts="estimated counts in the run: sums of 1/pi",
                   matrix=[[float(weighted[r][c]) for c in columns] for r in rows])
    return out


def criterion_agreement(judge: Sequence[float], labels: Sequence[float], *,
                        resamples: int = AGREEMENT_RESAMPLES, seed: int = AGREEMENT_SEED,
                        judge_scale: Sequence[int] | None = None,
                        label_scale: Sequence[float] | None = None,
                        continuous: bool = False,
                        weights: Sequence[float] | None = None) -> dict[str, Any]:
    """Every agreement statistic for one criterion's paired scores (same order), each with
    its CI and the CI's method, after the warnings that decide how to read them.

    ``judge_scale``: the rubric's allowed values for the criterion (None for an aggregate);
    ``label_scale``: the labels' declared values (None: the observed ones). ``continuous``
    (``--score expected``): the judge's scores are expected values, not categories, so
    kappa, exact and within-one agreement and the confusion matrix are not applicable
    (``not_applicable`` says so) and the scale-use warning is not made.

    ``weights`` (1/pi per pair, labels drawn with unequal known probabilities): kappa, the
    mean absolute difference, exact and within-one agreement (with their chance levels) and
    the confusion matrix are design-weighted and marked ``weighted``; the rest are not."""
    require_stats()
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np

    x = np.asarray(judge, dtype=float)
    y = np.asarray(labels, dtype=float)
    w = None if weights is None else np.asarray(weights, dtype=float)
    out: dict[str, Any] = {"n": len(x)}
    if len(x) < 2:
        out["note"] = "fewer than two joined cases: no statistics"
        out["warnings"] = []
        return out
    warned, meaningless = diagnostics.scale_use(x.tolist(), y.tolist(),
                                                None if continuous else judge_scale)
    out["judge_values_used"] = sorted({clean(v) for v in x.tolist()})
    out["label_values_used"] = sorted({clean(v) for v in y.tolist()})

    def boot(value: float | None, statistic: Callable[..., float | None],
             fallback: str | None = None, weighted: bool = False) -> dict[str, Any]:
        return _bootstrapped(value, x, y, statistic, resamples, seed, fallback,
                             w if weighted else None)

    rho, rho_p = _spearman(x, y)
    tau, tau_p = _kendall(x, y)
    few = too_few(len(x), MIN_LABELS_ESTIMATE)
    if few is not None:  # a p-value from a handful of cases is no evidence (issue 47)
        rho_p = tau_p = None
        warned.append(f"Spearman and Kendall: {few} (no p-value is given)")
    out["spearman"] = {**boot(rho, lambda a, b: _spearman(a, b)[0], "spearman"), "p": rho_p}
    out["kendall_tau_b"] = {**boot(tau, lambda a, b: _kendall(a, b)[0], "kendall"), "p": tau_p}
    integral = not continuous and _is_integral(x) and _is_integral(y)
    # Kappa and the confusion matrix need categories: integer scores only.
    out["kappa_quadratic"] = (boot(_kappa(x, y, w), _kappa, weighted=True) if integral else
                              {"value": None, "ci95": None, "ci_method": "-",
                               "note": "needs integer scores"})
    out["icc_a1"] = _icc(x, y)
    out["krippendorff_alpha_ordinal"] = boot(_alpha(x, y), _alpha)
    out["mean_abs_difference"] = boot(_mean_abs(x, y, w), _mean_abs, weighted=True)
    if continuous:
        for key in ("kappa_quadratic", "exact", "within_one"):
            out[key] = {"value": None, "ci95": None, "ci_method": "-",
                        "not_applicable": NOT_CATEGORIES}
    for key, within in (() if continuous else (("exact", 0.0), ("within_one", 1.0))):
        out[key] = agreement_share(np.abs(x - y) <= within, w)
        share = out[key]["value"]
        chance = clean(diagnostics.chance_agreement(x, y, within, weights=w))
        out[key]["chance"] = chance
        fixed = diagnostics.determined_by_one_side(x.tolist(), y.tolist(), within)
        if fixed is not None and key not in meaningless:
            meaningless[key] = fixed
            warned.append(f"{key.replace('_', '-')} agreement ({share:.3f}): {fixed}")
        elif chance is not None and chance >= diagnostics.CHANCE_CEILING:
            meaningless.setdefault(key, f"chance alone gives {chance:.3f}")
            warned.append(f"{key.replace('_', '-')} agreement is {share:.3f} but "
                          f"chance alone gives {chance:.3f} with these score and label "
                          "distributions: it says nothing about the judge")
    for key in ("spearman", "kendall_tau_b"):
        if _p_disagrees(out[key]):
            warned.append(f"{key}: the 95% CI ({out[key]['ci_method']}) and the p-value "
                          "disagree about zero: read both with care")
    for key, why in meaningless.items():
        if not out[key].get("not_applicable"):
            out[key]["meaningless"] = why
    out["warnings"] = warned
    if integral:
        confusion = _confusion(x, y, judge_scale, label_scale, w)
        if confusion is not None:
            out["confusion"] = confusion
    elif continuous:
        out["confusion_note"] = f"no confusion matrix: {NOT_CATEGORIES}"
    return out


def agreement_share(hits: Sequence[bool], w: Sequence[float] | None = None) -> dict[str, Any]:
    """The share of pairs that agree (``hits``: exact or within-one agreement per pair) with
    its Wilson CI; with design weights ``w`` (1/pi), the weighted share sum(w * hit) /
    sum(w) (Hajek) with a Wilson CI on Kish's n_eff
    (:func:`evaluator.analysis.intervals.kish_wilson_ci`)."""
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np

    hits = np.asarray(hits, dtype=bool)
    if w is None:
        k = int(hits.sum())
        interval = wilson_ci(k, len(hits))
        return {"value": clean(k / len(hits)), "ci95": interval["ci95"],
                "ci_method": interval["method"]}
    w = np.asarray(w, dtype=float)
    share = float((w * hits).sum() / w.sum())
    interval = kish_wilson_ci(share, kish_n_eff(w.tolist()))
    return {"value": clean(share), "ci95": interval["ci95"],
            "ci_method": interval["method"],
            "n_eff": interval["n_eff"], "weighted": True}


def _numeric_keys(record_scores: dict[str, Any]) -> list[str]:
    return [key for key, value in record_scores.items()
            if isinstance(value, int) and not isinstance(value, bool)]


def _completion_tokens(record: ResultRecord) -> float | None:
    """The judge's verdict length: the record's, else the mean over its samples/jury."""
    if record.completion_tokens is not None:
        return float(record.completion_tokens)
    panel = [v.completion_tokens for v in (record.samples or record.jury or [])
             if v.completion_tokens is not None]
    return sum(panel) / len(panel) if panel else None


def _rubric_for(records: Sequence[ResultRecord],
                rubrics_dirs: Sequence[Path]) -> tuple[Rubric | None, str | None]:
    names = sorted({r.rubric for r in records})
    if len(names) != 1:
        return None, f"records of {len(names)} rubrics: no rubric scale"
    try:
        return load_rubric(names[0], tuple(rubrics_dirs)), None
    except RubricError as exc:
        return None, (f"rubric {names[0]!r} cannot be loaded ({exc}): confusion axes from the "
                      "observed scores, no case fields (give --rubrics-dir)")


def agreement(results_path: Path, labels: LabelSource, *, criteria: Sequence[str] = (),
              resamples: int = AGREEMENT_RESAMPLES, seed: int = AGREEMENT_SEED,
              rubrics_dirs: Sequence[Path] = (), cases: CaseSource | None = None,
              text_field: str | None = None, by: str | None = None,
              only_ids: set[str] | None = None, score_mode: str = "argmax",
              gates: Sequence[Gate] = (), label_set: LabelSet | None = None) -> AgreementReport:
    """Join a results file with its labels file (``labels.path``) and compute agreement per
    criterion.

    ``criteria`` defaults to the criterion a ``KEY.label`` field names (a review
    worksheet's column: :func:`~evaluator.analysis.label_files.rated_criteria`; another
    ``criteria`` is refused), else every integer criterion and aggregate in the ``ok``
    records. Labels in a ``KEY.label`` field are on KEY's scale in the rubric, or on
    ``labels.scale`` when given (a label off it is refused, naming its line).
    Records that are not ``ok`` are never scored: they are counted (``not_ok_labelled``).
    ``only_ids`` restricts the comparison to those case ids (``--common-cases``). The
    rubric (found by name, ``rubrics_dirs`` first) gives the judge's scale; the cases file
    (``cases.path``, else the one the records name; read with its mapping and id column)
    gives the fields the judge was shown, for the circular-label check,
    and ``text_field``'s length (default: the rubric's input "being evaluated") for the
    verbosity figures. ``by`` names a grouping column of the labels file.

    ``score_mode`` (:mod:`evaluator.analysis.score_mode`): ``expected`` compares the
    judge's expected scores (records without distributions are left out and counted;
    statistics that need categories are marked not applicable). ``gates``: pass rules
    (``--pass``), each the judge's pass/fail against the labels' with the same threshold
    (:mod:`evaluator.analysis.gates`). ``label_set``: the labels of ``labels.path``, when
    the caller has read them already (:func:`evaluator.analysis.labels.readers.read_labels`).

    The labels file's design (:func:`evaluator.analysis.agreement.design.agree_design`) is
    the ``design`` block; a ``priority`` one puts its warning first in ``warnings``, an
    ``active`` one weights the statistics that have a weighted form (each case 1/pi).

    ``labels.path`` a sheet folder (:mod:`evaluator.analysis.labels`): its journal's
    labels, for the criterion ``labels.field`` names (KEY or KEY.label), else ``criteria``,
    else every criterion of the sheet; a case several labelled counts once, with one
    labeller's label drawn per case (seeded by ``seed``); ``by_labeller`` has the judge
    against each labeller, ``ceiling`` the clinician-vs-clinician agreement on the cases
    labelled by two or more beside the judge's on the same cases, and ``sheet`` how the
    labels were read. ``verdict_seen``: the note when labels were given with the judge's
    verdict in view (a sheet, or a labels file in a sheet folder, not blind).

    Three steps: :func:`_read` (the results, their rubric, the labels, the judge's scores),
    :func:`_compare` (what is compared: the joined cases, the criteria and gates, the case
    fields) and the figures. Options that ``evaluator agree``'s click options already
    validate (``--resamples`` at least 100, ``--score`` one of the modes, ``--pass`` well
    formed, ``--label-field`` given for a labels file) are not checked again here. What is
    checked raises :class:`AgreementError` (which the CLI prints in one line, exit 2),
    because it depends on the files read, which click cannot see, and so holds for a
    Python caller too: a pairwise results file or a rubric kind agree does not read,
    ``--score expected`` without a loadable rubric, no case joined, an unknown criterion
    or gate, a gate on a criterion the labels do not rate, a ``text_field`` that is not
    an input of the rubric."""
    require_stats()
    read = _read(Path(results_path), labels, criteria, seed, rubrics_dirs, by, score_mode,
                 label_set)
    compared = _compare(read, criteria, gates, text_field, only_ids, cases or CaseSource())
    continuous = score_mode == "expected"
    scales = _scales(read.rubric)
    per_criterion = {key: _criterion_figures(read, compared, key, scales.get(key),
                                             labels.scale, continuous, resamples, seed)
                     for key in compared.chosen}
    sheet_block, verdict_seen, by_labeller, ceilings = _sheet_figures(
        read, compared, scales, continuous, resamples, seed)
    ok, every = read.ok, read.labels.every
    return AgreementReport(
        results=str(read.results_path), labels=str(read.labels_path),
        label_field=read.label_field, results_ok=len(ok), labels_total=len(every),
        joined=len(compared.joined_ids),
        common_cases=None if only_ids is None else len(only_ids),
        unmatched_results=len(ok) - read.view.left_out - len(compared.joined_ids),
        unmatched_labels=sum(1 for case_id in every if case_id not in ok),
        unlabelled_rows=read.labels.unlabelled,
        not_ok_labelled=sum(1 for r in read.not_ok if r.case_id in every),
        not_ok_status_counts=dict(sorted(Counter(r.status for r in read.not_ok).items())),
        bootstrap=AgreementBootstrap(resamples=resamples, seed=seed, method="BCa, case pairs",
                                     undefined_limit=UNDEFINED_SHARE_LIMIT),
        label_scale=list(labels.scale) if labels.scale is not None else None,
        text_field=compared.text_field if compared.fields is not None else None, by=by,
        notes=compared.notes, warnings=compared.warnings, design=compared.design.block,
        circular=compared.circular, note=SAME_SCALE_NOTE,
        score_mode=ScoreModeBlock(**mode_block(score_mode, read.view.left_out)),
        criteria=per_criterion,
        gates=[_gate(gate, _pairs(read, compared.joined_ids, gate.key), compared.design)
               for gate in compared.gates],
        gates_note=POSITIVE_CLASS if compared.gates else None, sheet=sheet_block,
        by_labeller=by_labeller, ceiling=ceilings, verdict_seen=verdict_seen)


@dataclass
class _Read:
    """What :func:`agreement` read: the results (``ok`` by case id, the rest), their rubric
    (None when it cannot be loaded: ``rubric_note`` says why), the labels (``label_set``,
    as read; ``labels``, as compared; ``id_column``: their case id column), the ``--by``
    groups and the judge's scores."""

    results_path: Path
    labels_path: Path
    label_field: str
    id_column: str
    ok: dict[str, ResultRecord]
    not_ok: list[ResultRecord]
    rubric: Rubric | None
    rubric_note: str | None
    label_set: LabelSet
    labels: _OneColumn | _Named
    groups: dict[str, str] | None
    view: ScoredView


@dataclass
class _Compared:
    """What :func:`agreement` compares: the joined cases and their design, the criteria
    and gates, the case fields the judge was shown (None: not read) with the text field
    whose length the verbosity figures use, and the notes and warnings so far."""

    joined_ids: list[str]
    design: AgreeDesign
    chosen: list[str]
    gates: list[Gate]
    fields: dict[str, dict[str, str]] | None
    text_field: str | None
    notes: list[str]
    warnings: list[str]
    circular: list[dict[str, Any]]


def _read(results_path: Path, labels: LabelSource, criteria: Sequence[str], seed: int,
          rubrics_dirs: Sequence[Path], by: str | None, score_mode: str,
          label_set: LabelSet | None) -> _Read:
    """Read the results (a pairwise file, or a rubric kind agree does not read, is refused
    before the labels), their rubric, the labels, the ``by`` groups, and the judge's scores
    as ``score_mode`` takes them."""
    records = read_results(results_path, rubrics_dirs)
    pairwise = next((r for r in records if r.pairwise is not None), None)
    if pairwise is not None:  # before the labels, which hold A/B/tie for such a file
        raise AgreementError(KINDS["pairwise"].elsewhere(results_path, pairwise.rubric, "agree"))
    rubric, rubric_note = _rubric_for(records, rubrics_dirs)
    if rubric is not None and (refused := analysis_kind(rubric).elsewhere(results_path,
                                                                          rubric.name, "agree")):
        raise AgreementError(refused)
    ok = {r.case_id: r for r in records if r.status == "ok" and r.scores is not None}
    labels_path = Path(str(labels.path))
    label_set = label_set or read_labels(labels, labels_path, rubric=rubric)
    read, label_field = _values(label_set, labels, rubric, criteria, seed)
    id_column = label_set.id_column
    groups = (load_groups(label_set.design_path, by, id_column, rows=label_set.rows)
              if by else None)
    if score_mode != "argmax" and rubric is None:
        raise AgreementError(f"--score {score_mode} needs the rubric: {rubric_note}")
    view = (score_view(rubric, records, score_mode, str(results_path)) if rubric is not None
            else _argmax_view(ok.values()))
    return _Read(results_path=results_path, labels_path=labels_path, label_field=label_field,
                 id_column=id_column, ok=ok,
                 not_ok=[r for r in records if r.case_id not in ok], rubric=rubric,
                 rubric_note=rubric_note, label_set=label_set, labels=read, groups=groups,
                 view=view)


def _values(label_set: LabelSet, labels: LabelSource, rubric: Rubric | None,
            criteria: Sequence[str], seed: int) -> tuple[_OneColumn | _Named, str]:
    """The labels as compared (named criteria: each case's one label per criterion; one
    column: the labels in ``--label-field``) and the label field the report names."""
    if label_set.named:
        read = _Named(label_set, label_set.criteria_for(labels.field, criteria), seed)
        return read, labels.field or ", ".join(f"{k}.label" for k in read.keys)
    loaded = load_labels(labels, label_set.origin, rubric=rubric, rows=label_set.rows)
    return _OneColumn(loaded), str(labels.field)


def _compare(read: _Read, criteria: Sequence[str], gates: Sequence[Gate],
             text_field: str | None, only_ids: set[str] | None, cases: CaseSource) -> _Compared:
    """Check what is compared, in this order: the cases joined (refused: none), their design,
    the criteria and gates (refused: unknown ones), the text field; then read the case fields
    the judge was shown and find the labels that can be read from them (circular)."""
    joined_ids = _joined_ids(read, only_ids)
    label_set = read.label_set
    design = agree_design(label_set.design_path, read.id_column, joined_ids, list(read.ok),
                          read.results_path, rows=label_set.rows)
    chosen, known_gates = _chosen(read, criteria, gates)
    fields, text_field, notes = _case_text(read, joined_ids, text_field, cases)
    circular, warned = _circular(read, joined_ids, fields)
    return _Compared(joined_ids=joined_ids, design=design, chosen=chosen, gates=known_gates,
                     fields=fields, text_field=text_field, notes=notes,
                     warnings=list(design.warnings) + warned, circular=circular)


def _joined_ids(read: _Read, only_ids: set[str] | None) -> list[str]:
    """The ``ok`` cases with a label and a score (among ``only_ids``), in the results'
    order; none is refused."""
    every = read.labels.every
    joined = [case_id for case_id in read.ok if case_id in every and case_id in read.view.values
              and (only_ids is None or case_id in only_ids)]
    if not joined:
        raise AgreementError(f"no case id of {read.results_path} ({len(read.ok)} ok result(s)) "
                             f"is in {read.labels_path} ({len(every)} label(s))"
                             + (" among the common cases" if only_ids is not None else "")
                             + ("" if read.label_set.named else "; check --id-column"))
    return joined


def _chosen(read: _Read, criteria: Sequence[str],
            gates: Sequence[Gate]) -> tuple[list[str], list[Gate]]:
    """The criteria compared (those the labels rate, else every one the results have) and
    the gates on them; an unknown criterion or gate, or a gate on a criterion the labels do
    not rate, is refused."""
    available: list[str] = []
    for record in read.ok.values():
        for key in _numeric_keys(record.scores or {}) + list(record.aggregates or {}):
            if key not in available:
                available.append(key)
    # A worksheet's KEY.label column rates KEY alone: never every criterion; a sheet rates
    # its own criteria.
    rated = (read.labels.keys if read.label_set.named
             else rated_criteria(read.label_field, criteria, available))
    chosen = rated or available
    unknown = [key for key in chosen if key not in available]
    if unknown:
        raise AgreementError(f"unknown criterion {', '.join(map(repr, unknown))}; results "
                             f"have: {', '.join(available) or '(none)'}")
    known = [_known_gate(gate, available, read.rubric) for gate in gates]
    outside = [gate.rule for gate in known if rated and gate.key not in chosen]
    if outside:
        among = ("--criterion" if criteria else f"the criteria the labels in "
                 f"{read.label_field!r} rate")
        raise AgreementError(f"--pass {outside[0]!r}: its criterion is not among {among} "
                             f"({', '.join(chosen)}), so it would be compared with labels "
                             "given for another one; "
                             + ("add it to --criterion or drop the gate" if criteria else
                                "drop the gate"))
    return chosen, known


def _case_text(read: _Read, joined_ids: Sequence[str], text_field: str | None,
               cases: CaseSource) -> tuple[dict[str, dict[str, str]] | None, str | None,
                                           list[str]]:
    """With the rubric: the fields each joined case showed the judge (None when the cases
    cannot be read), the text field (default: the input being evaluated; one that is not an
    input is refused) and the notes on both."""
    notes = [read.rubric_note] if read.rubric_note else []
    rubric = read.rubric
    if rubric is None:
        return None, text_field, notes
    if text_field is not None and text_field not in rubric.inputs:
        raise AgreementError(f"--text-field {text_field!r} is not an input of rubric "
                             f"{rubric.name!r} (its inputs: {', '.join(rubric.inputs)})")
    fields, fields_note = case_fields([read.ok[i] for i in joined_ids], read.results_path,
                                      rubric, cases)
    return fields, text_field or evaluated_field(rubric), [*notes, fields_note]


def _circular(read: _Read, joined_ids: Sequence[str], fields: dict[str, dict[str, str]] | None,
              ) -> tuple[list[dict[str, Any]], list[str]]:
    """The labels that can be read from a field the judge was shown, and their warnings."""
    circular: list[dict[str, Any]] = []
    warned: list[str] = []
    if fields is None:
        return circular, warned
    for key in (read.labels.keys if read.label_set.named else [None]):
        labels_of = read.labels.of(key)
        labelled = [i for i in joined_ids if i in labels_of]
        shown = {name: [fields[i].get(name, "") for i in labelled]
                 for name in (read.rubric.inputs if read.rubric else ())}
        found = diagnostics.circular_fields(shown, [labels_of[i] for i in labelled])
        circular += found
        warned += [diagnostics.circular_warning(f"{key}.label" if key else read.label_field,
                                                entry) for entry in found]
    return circular, warned


def _scales(rubric: Rubric | None) -> dict[str, list[int]]:
    """Each integer criterion's allowed values in the rubric (none without one)."""
    return ({f.key: f.allowed for f in rubric.output if isinstance(f, IntegerCriterion)}
            if rubric else {})


def _pairs(read: _Read, joined_ids: Sequence[str],
           key: str) -> tuple[list[str], list[float], list[float]]:
    """The joined cases with a judge's score and a label for ``key``: (ids, judge, labels)."""
    ids, judge, label = [], [], []
    labels_of = read.labels.of(key)
    for case_id in joined_ids:
        value = read.view.value(case_id, key)
        if value is not None and case_id in labels_of:
            ids.append(case_id)
            judge.append(float(value))
            label.append(labels_of[case_id])
    return ids, judge, label


def _criterion_figures(read: _Read, compared: _Compared, key: str,
                       scale: Sequence[int] | None, label_scale: Sequence[float] | None,
                       continuous: bool, resamples: int, seed: int) -> dict[str, Any]:
    """``key``'s figures (:func:`criterion_agreement`) with, over three cases or more, the
    verbosity and ``--by`` subgroup figures."""
    ids, judge, label = _pairs(read, compared.joined_ids, key)
    stats = criterion_agreement(judge, label, resamples=resamples, seed=seed,
                                judge_scale=scale, label_scale=label_scale,
                                continuous=continuous, weights=compared.design.weights(ids))
    if len(ids) >= 3:
        fields, text_field = compared.fields, compared.text_field
        chars = ([len(fields[i].get(text_field, "")) for i in ids]
                 if fields is not None and text_field else None)
        stats["verbosity"] = diagnostics.verbosity(
            judge, label, chars, [_completion_tokens(read.ok[i]) for i in ids])
        if read.groups is not None:
            stats["subgroups"] = diagnostics.subgroups(
                [read.groups.get(i, "(none)") for i in ids], judge, label)
        if continuous:
            _drop_categories(stats)
    return stats


def _sheet_figures(read: _Read, compared: _Compared, scales: Mapping[str, Sequence[int]],
                   continuous: bool, resamples: int, seed: int,
                   ) -> tuple[SheetLabelsBlock | None, str | None,
                              dict[str, list[LabellerAgreement]], list[Ceiling]]:
    """A sheet folder's block, the judge against each labeller and the ceilings (none for a
    labels file); and the note when the labels were given with the verdict in view."""
    sheet = read.label_set
    if not sheet.named:
        return None, verdict_seen_note(sheet, priority=compared.design.design.kind
                                       == "priority"), {}, []
    joined_ids, keys = compared.joined_ids, read.labels.keys
    verdict_seen = verdict_seen_note(sheet)
    ceilings, ceiling_notes, overlap = _ceilings(sheet, keys, joined_ids, read.view,
                                                 scales, continuous, resamples, seed)
    by_labeller = {key: _by_labeller(sheet, key, joined_ids, read.view) for key in keys
                   if len(sheet.labellers) >= 2}
    block = SheetLabelsBlock(
        folder=str(read.labels_path), blind=bool(sheet.blind), labellers=sheet.labellers,
        rule=sheet.rule_line("draw", seed), cannot_judge=sheet.cannot_judge,
        judge_seen=sheet.judge_seen,
        notes=sheet.notes + ceiling_notes
        + ([CEILING_DRAWN_NOTE] if compared.design.weighted and ceilings else []),
        overlap=overlap)
    return block, verdict_seen, by_labeller, ceilings


class _OneColumn:
    """Labels of one column (a labels file's): one label per case, for every criterion
    compared."""

    def __init__(self, labels: Labels) -> None:
        self.keys: list[str] = []
        self.labels = labels
        self.every = labels
        self.unlabelled = labels.unlabelled

    def of(self, key: str | None) -> Mapping[str, float]:
        return self.labels


class _Named:
    """Labels that name their criteria (a sheet's, an export's): per criterion compared
    (``keys``), each case's one label
    (several labellers: one drawn per case, :data:`~evaluator.analysis.labels.labelset.RULES`)."""

    def __init__(self, sheet: LabelSet, keys: list[str], seed: int) -> None:
        self.keys = keys
        self.by_key = {key: {case: float(value) for case, value
                             in sheet.combined(key, "draw", seed).items()} for key in keys}
        self.every = {case for labels in self.by_key.values() for case in labels}
        self.unlabelled = sum(1 for _, row in sheet.rows
                              if str(row.get(sheet.id_column)) not in self.every)

    def of(self, key: str | None) -> Mapping[str, float]:
        return self.by_key.get(str(key), {})


def _ceilings(sheet: LabelSet, keys: Sequence[str], joined_ids: Sequence[str],
              view: ScoredView, scales: Mapping[str, Sequence[int]], continuous: bool,
              resamples: int, seed: int) -> tuple[list[Ceiling], list[str], dict[str, int]]:
    """The ceiling of each criterion with overlap cases among the joined ones
    (:func:`evaluator.analysis.agreement.ceiling.ceiling`), notes on those without, and
    each criterion's count of overlap cases (those with any)."""
    joined = set(joined_ids)
    out: list[Ceiling] = []
    notes: list[str] = []
    counts: dict[str, int] = {}
    for key in keys:
        overlap = {case: by for case, by in sheet.overlap(key).items()
                   if case in joined and view.value(case, key) is not None}
        if not overlap:
            continue
        counts[key] = len(overlap)
        if continuous:
            notes.append(f"{key}: no ceiling with --score expected (the judge's expected "
                         "scores are not categories); run agree with --score argmax")
            continue
        if len(overlap) < MIN_OVERLAP:
            notes.append(f"{key}: {len(overlap)} case(s) labelled by two or more labellers: "
                         f"no ceiling under {MIN_OVERLAP}")
            continue
        cases = sorted(overlap)
        out.append(ceiling(key, [float(view.value(c, key)) for c in cases],
                           [{name: float(v) for name, v in overlap[c].items()} for c in cases],
                           scale=[float(v) for v in scales.get(key, ())],
                           resamples=resamples, seed=seed))
    return out, notes, counts


def _by_labeller(sheet: LabelSet, key: str, joined_ids: Sequence[str],
                 view: ScoredView) -> list[LabellerAgreement]:
    """The judge against each labeller's own labels of ``key`` on the joined cases."""
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np

    rows = []
    joined = set(joined_ids)
    for name in sheet.labellers:
        pairs = [(float(view.value(c, key)), float(by[name]))
                 for c, by in sheet.ratings.get(key, {}).items()
                 if name in by and c in joined and view.value(c, key) is not None]
        if not pairs:
            continue
        x, y = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
        integral = _is_integral(x) and _is_integral(y)
        rows.append(LabellerAgreement(
            labeller=name, n=len(pairs), kappa_quadratic=_kappa(x, y) if integral else None,
            exact=clean(float(np.mean(x == y)))))
    return rows


def _gate(gate: Gate, pairs: tuple[list[str], list[float], list[float]],
          design: AgreeDesign) -> dict[str, Any]:
    """``gate``'s table over the (ids, judge, labels) ``pairs``, design-weighted or not."""
    ids, judge, label = pairs
    return gate_table(gate, judge, label, design.weights(ids))


def _argmax_view(records: Any) -> ScoredView:
    """The verdicts as written, without a rubric (its file could not be loaded)."""
    view = ScoredView(mode="argmax")
    for record in records:
        view.ok += 1
        view.values[record.case_id] = {**(record.scores or {}), **(record.aggregates or {})}
    return view


def _known_gate(gate: Gate, available: Sequence[str], rubric: Rubric | None) -> Gate:
    """``gate`` on a criterion or aggregate the results have (an alias is accepted)."""
    key = rubric.aliases.get(gate.key, gate.key) if rubric is not None else gate.key
    if key not in available:
        raise AgreementError(f"--pass {gate.rule!r}: unknown criterion {gate.key!r}; results "
                             f"have: {', '.join(available) or '(none)'}")
    return Gate(key, gate.op, gate.threshold)


def _drop_categories(stats: dict[str, Any]) -> None:
    """Expected scores: no median length per score value (one per case) and no exact
    agreement per group."""
    for entry in (stats.get("verbosity") or {}).values():
        entry.pop("median_by_score", None)
    for group in (stats.get("subgroups") or {}).values():
        group["exact"] = None

