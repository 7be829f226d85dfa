"""Agreement between a judge's scores and human (or reference) labels, per criterion.

:func:`agreement` joins the ``ok`` records of a results file with a labels file (JSONL or
CSV) by case id and computes, for each integer criterion and aggregate: Spearman and Kendall
(scipy.stats, with p-values), quadratic-weighted Cohen's kappa (scikit-learn), ICC two-way
absolute agreement, single rater (pingouin), Krippendorff's alpha, ordinal (krippendorff),
exact and within-one agreement and the confusion matrix (scikit-learn), with seeded
bootstrap 95% CIs from resampling case pairs (each resample calls the same library
function). Kappa, exact/within-one agreement and ICC compare values directly, so they assume
judge and labels use the same scale; the rank correlations do not.

The heavy libraries (the ``stats`` extra) are imported inside the functions.
"""

from __future__ import annotations

import csv
import json
import math
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from evaluator.analysis.stats import require_stats
from evaluator.common.readable import NotARegularFile, check_regular_file
from evaluator.data.results import read_results

AGREEMENT_RESAMPLES = 1000
AGREEMENT_SEED = 20141
SAME_SCALE_NOTE = ("kappa, ICC, exact and within-one agreement compare values directly: they "
                   "assume the judge and the labels use the same scale; Spearman and Kendall "
                   "do not")


class AgreementError(ValueError):
    """The labels or results cannot be joined (missing field, no overlap, bad label)."""


def _number(value: object) -> float | None:
    """A label as a float, or None when it is not a number (bools are not numbers)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def _label_rows(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(line number, row) for every row of a JSONL or CSV labels file."""
    suffix = path.suffix.lower()
    try:
        check_regular_file(path, "labels file")
        text = path.read_text(encoding="utf-8")
    except NotARegularFile as exc:
        raise AgreementError(str(exc)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise AgreementError(f"{path}: cannot read labels file ({exc})") from None
    rows: list[tuple[int, dict[str, Any]]] = []
    if suffix == ".csv":
        reader = csv.DictReader(text.splitlines())
        for row in reader:
            rows.append((reader.line_num, row))
        return rows
    if suffix != ".jsonl":
        raise AgreementError(f"{path}: labels must be a .jsonl or .csv file")
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise AgreementError(f"{path} line {number}: not valid JSON ({exc.msg})") from None
        if not isinstance(row, dict):
            raise AgreementError(f"{path} line {number}: expected a JSON object")
        rows.append((number, row))
    return rows


def load_labels(path: Path, label_field: str, id_column: str = "case_id") -> dict[str, float]:
    """Map case id -> numeric label. Every row needs the id and a numeric label; errors name
    the file, lines and field, never a case id (``id_column`` may hold case text)."""
    path = Path(path)
    rows = _label_rows(path)
    if not rows:
        raise AgreementError(f"{path}: no label rows")
    if not any(label_field in row for _, row in rows):
        fields = sorted({key for _, row in rows for key in row})
        shown = ", ".join(fields[:20]) + (" ..." if len(fields) > 20 else "")
        raise AgreementError(f"{path}: no row has the label field {label_field!r}; "
                             f"fields: {shown}")
    labels: dict[str, float] = {}
    line_of: dict[str, int] = {}
    for number, row in rows:
        case_id = row.get(id_column)
        if case_id is None or str(case_id).strip() == "":
            raise AgreementError(f"{path} line {number}: no case id in {id_column!r}")
        case_id = str(case_id)
        if label_field not in row:
            raise AgreementError(f"{path} line {number}: field {label_field!r} is missing")
        value = _number(row[label_field])
        if value is None:
            raise AgreementError(f"{path} line {number}: field {label_field!r} is not a "
                                 "number "
                                 f"({type(row[label_field]).__name__})")
        if case_id in labels:
            raise AgreementError(f"{path} lines {line_of[case_id]} and {number} have the same "
                                 f"case id (in {id_column!r})")
        labels[case_id] = value
        line_of[case_id] = number
    return labels


def _finite(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


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
    return (None, None) if result is None else (_finite(result.statistic),
                                                _finite(result.pvalue))


def _kendall(x: Any, y: Any) -> tuple[float | None, float | None]:
    # Imported here: the stats extra, which `import evaluator` never loads.
    from scipy.stats import kendalltau

    result = _quiet(kendalltau, x, y)
    return (None, None) if result is None else (_finite(result.statistic),
                                                _finite(result.pvalue))


def _kappa(x: Any, y: Any) -> float | None:
    # Imported here: the stats extra, which `import evaluator` never loads.
    from sklearn.metrics import cohen_kappa_score

    return _finite(_quiet(cohen_kappa_score, x.astype(int), y.astype(int),
                          weights="quadratic"))


def _alpha(x: Any, y: Any) -> float | None:
    # Imported here: the stats extra, which `import evaluator` never loads.
    import krippendorff
    import numpy as np

    return _finite(_quiet(krippendorff.alpha, reliability_data=np.vstack([x, y]),
                          level_of_measurement="ordinal"))


def _exact(x: Any, y: Any) -> float:
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np

    return float(np.mean(x == y))


def _within_one(x: Any, y: Any) -> float:
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np

    return float(np.mean(np.abs(x - y) <= 1))


def _icc(x: Any, y: Any) -> dict[str, Any]:
    """ICC two-way random, absolute agreement, single rater (Shrout & Fleiss ICC2 /
    McGraw & Wong ICC(A,1)) with pingouin's F-based 95% CI."""
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np
    import pandas as pd
    import pingouin

    n = len(x)
    data = pd.DataFrame({"case": np.concatenate([np.arange(n), np.arange(n)]),
                         "rater": ["judge"] * n + ["label"] * n,
                         "score": np.concatenate([x, y])})
    table = _quiet(pingouin.intraclass_corr, data=data, targets="case", raters="rater",
                   ratings="score")
    if table is None:
        return {"value": None, "ci95": None}
    row = table[table["Type"].isin(["ICC2", "ICC(A,1)"])].iloc[0]
    low, high = row["CI95"]
    return {"value": _finite(row["ICC"]), "ci95": [_finite(low), _finite(high)]
            if _finite(low) is not None else None,
            "ci_method": "F distribution (pingouin)"}


def _bootstrap(x: Any, y: Any, statistic: Callable[[Any, Any], float | None],
               resamples: int, seed: int) -> list[float] | None:
    """Percentile 95% CI of ``statistic`` over case pairs resampled with replacement
    (seeded). Resamples where the statistic is undefined are dropped; None when fewer than
    half remain."""
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np

    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(x), size=(resamples, len(x)))
    values = [statistic(x[i], y[i]) for i in draws]
    finite = np.array([v for v in values if v is not None and math.isfinite(v)])
    if len(finite) < resamples / 2:
        return None
    low, high = np.percentile(finite, [2.5, 97.5])
    return [float(low), float(high)]


def _is_integral(values: Sequence[float]) -> bool:
    return all(float(v).is_integer() for v in values)


def criterion_agreement(judge: Sequence[float], labels: Sequence[float], *,
                        resamples: int = AGREEMENT_RESAMPLES,
                        seed: int = AGREEMENT_SEED) -> dict[str, Any]:
    """Every agreement statistic for one criterion's paired scores (same order)."""
    require_stats()
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np
    from sklearn.metrics import confusion_matrix

    x = np.asarray(judge, dtype=float)
    y = np.asarray(labels, dtype=float)
    out: dict[str, Any] = {"n": len(x)}
    if len(x) < 2:
        out["note"] = "fewer than two joined cases: no statistics"
        return out

    def boot(statistic: Callable[[Any, Any], float | None]) -> list[float] | None:
        return _bootstrap(x, y, statistic, resamples, seed)

    rho, rho_p = _spearman(x, y)
    tau, tau_p = _kendall(x, y)
    out["spearman"] = {"value": rho, "p": rho_p, "ci95": boot(lambda a, b: _spearman(a, b)[0])}
    out["kendall_tau_b"] = {"value": tau, "p": tau_p,
                            "ci95": boot(lambda a, b: _kendall(a, b)[0])}
    integral = _is_integral(x) and _is_integral(y)
    # Kappa and the confusion matrix need categories: integer scores only.
    out["kappa_quadratic"] = ({"value": _kappa(x, y), "ci95": boot(_kappa)} if integral
                              else {"value": None, "ci95": None,
                                    "note": "needs integer scores"})
    out["icc_a1"] = _icc(x, y)
    out["krippendorff_alpha_ordinal"] = {"value": _alpha(x, y), "ci95": boot(_alpha)}
    out["exact"] = {"value": _exact(x, y), "ci95": boot(_exact)}
    out["within_one"] = {"value": _within_one(x, y), "ci95": boot(_within_one)}
    if integral:
        values = sorted({int(v) for v in np.concatenate([x, y])})
        # sklearn warns when a single value occurs even though ``labels`` fixes the shape.
        matrix = _quiet(confusion_matrix, y.astype(int), x.astype(int), labels=values)
        if matrix is not None:
            out["confusion"] = {"values": values, "rows": "label", "columns": "judge",
                                "matrix": matrix.tolist()}
    return out


def _numeric_keys(record_scores: dict[str, Any]) -> list[str]:
    return [key for key, value in record_scores.items()
            if isinstance(value, int) and not isinstance(value, bool)]


def agreement(results_path: Path, labels_path: Path, label_field: str, *,
              criteria: Sequence[str] = (), id_column: str = "case_id",
              resamples: int = AGREEMENT_RESAMPLES, seed: int = AGREEMENT_SEED) -> dict[str, Any]:
    """Join a results file with a labels file and compute agreement per criterion.

    ``criteria`` defaults to every integer criterion and aggregate in the ``ok`` records.
    Records that are not ``ok`` are never scored: they are counted (``not_ok_labelled``)."""
    require_stats()
    results_path, labels_path = Path(results_path), Path(labels_path)
    labels = load_labels(labels_path, label_field, id_column)
    records = read_results(results_path)
    ok = {r.case_id: r for r in records if r.status == "ok" and r.scores is not None}
    not_ok = [r for r in records if r.case_id not in ok]
    joined_ids = [case_id for case_id in ok if case_id in labels]
    if not joined_ids:
        raise AgreementError(f"no case id of {results_path} ({len(ok)} ok result(s)) is in "
                             f"{labels_path} ({len(labels)} label(s)); check --id-column")
    available: list[str] = []
    for record in ok.values():
        for key in _numeric_keys(record.scores or {}) + list(record.aggregates or {}):
            if key not in available:
                available.append(key)
    chosen = list(criteria) or available
    unknown = [key for key in chosen if key not in available]
    if unknown:
        raise AgreementError(f"unknown criterion {', '.join(map(repr, unknown))}; results "
                             f"have: {', '.join(available) or '(none)'}")
    per_criterion: dict[str, Any] = {}
    for key in chosen:
        pairs = []
        for case_id in joined_ids:
            record = ok[case_id]
            value = (record.scores or {}).get(key, (record.aggregates or {}).get(key))
            if value is not None:
                pairs.append((float(value), labels[case_id]))
        per_criterion[key] = criterion_agreement([p[0] for p in pairs], [p[1] for p in pairs],
                                                 resamples=resamples, seed=seed)
    return {
        "results": str(results_path),
        "labels": str(labels_path),
        "label_field": label_field,
        "results_ok": len(ok),
        "labels_total": len(labels),
        "joined": len(joined_ids),
        "unmatched_results": len(ok) - len(joined_ids),
        "unmatched_labels": sum(1 for case_id in labels if case_id not in ok),
        "not_ok_labelled": sum(1 for r in not_ok if r.case_id in labels),
        "not_ok_status_counts": dict(sorted(Counter(r.status for r in not_ok).items())),
        "bootstrap": {"resamples": resamples, "seed": seed, "method": "percentile, case pairs"},
        "note": SAME_SCALE_NOTE,
        "criteria": per_criterion,
    }


def _fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def format_agreement(report: dict[str, Any]) -> str:
    """A human-readable table of :func:`agreement`'s result."""
    lines = [f"labels {report['labels']} field {report['label_field']!r} vs {report['results']}",
             (f"joined {report['joined']} case(s); ok results without a label: "
             f"{report['unmatched_results']}; labels without an ok result: "
             f"{report['unmatched_labels']} (of which labelled but not ok: "
             f"{report['not_ok_labelled']})"),
             (f"95% CIs: bootstrap over case pairs, {report['bootstrap']['resamples']} "
             f"resamples, seed {report['bootstrap']['seed']} (ICC: F-based, pingouin)"),
             f"note: {report['note']}"]
    rows = (("spearman", "Spearman rho"), ("kendall_tau_b", "Kendall tau-b"),
            ("kappa_quadratic", "Cohen kappa (quadratic)"), ("icc_a1", "ICC(A,1) / ICC2"),
            ("krippendorff_alpha_ordinal", "Krippendorff alpha (ordinal)"),
            ("exact", "exact agreement"), ("within_one", "within-one agreement"))
    for key, stats in report["criteria"].items():
        lines += ["", f"{key}  (n = {stats['n']})"]
        if "spearman" not in stats:
            lines.append(f"  {stats.get('note', '')}")
            continue
        lines.append(f"  {'statistic':<30}{'value':>8}  {'95% CI':<18}{'p':>10}")
        for name, title in rows:
            entry = stats[name]
            ci = entry.get("ci95")
            ci_text = "-" if not ci else f"[{_fmt(ci[0])}, {_fmt(ci[1])}]"
            p = entry.get("p")
            p_text = "" if "p" not in entry else ("-" if p is None else f"{p:.2g}")
            lines.append(f"  {title:<30}{_fmt(entry['value']):>8}  {ci_text:<18}{p_text:>10}")
        confusion = stats.get("confusion")
        if confusion:
            width = max(4, *(len(str(v)) for row in confusion["matrix"] for v in row)) + 1
            lines.append("  confusion (rows: label, columns: judge)")
            lines.append("  " + " " * 6 + "".join(f"{v:>{width}}" for v in confusion["values"]))
            for value, row in zip(confusion["values"], confusion["matrix"]):
                lines.append(f"  {value:>6}" + "".join(f"{c:>{width}}" for c in row))
    return "\n".join(lines)
