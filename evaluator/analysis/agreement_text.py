"""The plain-text table of :func:`evaluator.analysis.agreement.agreement` (``evaluator
agree``): the labels' design (a priority worksheet's warning before any figure; which
figures are design-weighted), warnings, then per criterion n, every statistic with its CI
and the CI's method, chance levels, the confusion matrix on the rubric's scale, and the
judge-bias figures (verbosity, subgroups). Field names and group names only, never case
text; never "-0.000"."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from typing import Any

from evaluator.analysis.gates import format_gates
from evaluator.analysis.intervals import format_ci, format_number

STATISTICS = (("spearman", "Spearman rho"), ("kendall_tau_b", "Kendall tau-b"),
              ("kappa_quadratic", "Cohen kappa (quadratic)"), ("icc_a1", "ICC(A,1) / ICC2"),
              ("krippendorff_alpha_ordinal", "Krippendorff alpha (ordinal)"),
              ("mean_abs_difference", "mean |judge - label|"),
              ("exact", "exact agreement"), ("within_one", "within-one agreement"))
LENGTHS = (("text_chars", "evaluated text, characters"),
           ("completion_tokens", "judge's verdict, completion tokens"))
# The design's lines are wrapped to this width (the tables fit in it too).
WIDTH = 96
DRAWN_ONLY = " (drawn cases, not design-weighted)"


def _p(value: float | None) -> str:
    return "-" if value is None else f"{value:.2g}"


def _wrapped(text: str) -> list[str]:
    return textwrap.wrap(text, WIDTH, subsequent_indent="  ", break_on_hyphens=False)


def _design(design: Mapping[str, Any] | None) -> list[str]:
    """The design's lines: its warning first (a priority worksheet), then what the design
    is and which figures it weights."""
    if not design:
        return []
    lines = _wrapped(design["warning"]) if design.get("warning") else []
    lines += _wrapped(design["text"])
    weights = design.get("weights")
    if weights:
        lines += _wrapped(f"weights 1/pi from {weights['min']:.3g} to {weights['max']:.3g} "
                          f"over the {design['joined']} joined case(s), Kish effective n "
                          f"{weights['n_eff']:.1f}; {design['split']}")
    lines += [line for note in design.get("notes", []) for line in _wrapped(f"note: {note}")]
    return lines


def _header(report: Mapping[str, Any]) -> list[str]:
    design = report.get("design") or {}
    lines = [f"labels {report['labels']} field {report['label_field']!r} vs {report['results']}",
             *_design(design),
             (f"n = {report['joined']} joined case(s)"
              + (f" (restricted to the {report['common_cases']} cases common to every file)"
                 if report.get("common_cases") is not None else "")
              + f"; ok results without a label: {report['unmatched_results']}; labels "
              f"without an ok result: {report['unmatched_labels']} (of which labelled but "
              f"not ok: {report['not_ok_labelled']})"
              + (f"; rows not labelled yet (empty label): {report['unlabelled_rows']}"
                 if report.get("unlabelled_rows") else "")),
             (f"95% CIs: each row names its method; bootstrap: {report['bootstrap']['resamples']}"
              f" resamples over case pairs, seed {report['bootstrap']['seed']}, unreliable "
              f"above {report['bootstrap']['undefined_limit']:.0%} undefined resamples"),
             f"note: {report['note']}"]
    mode = report.get("score_mode")
    if mode:
        lines.append(f"score mode: {mode['mode']} ({mode['meaning']})")
        if mode.get("note"):
            lines.append(f"note: {mode['note']}")
    lines += [f"note: {note}" for note in report.get("notes", [])]
    # The design's own warning is printed above, before any figure.
    lines += [f"WARNING: {text}" for text in report.get("warnings", [])
              if text != design.get("warning")]
    return lines


def _statistics(stats: Mapping[str, Any]) -> list[str]:
    lines = [f"  {'statistic':<30}{'value':>8}  {'95% CI':<18}{'p':>8}  CI method"]
    marks = []
    for name, title in STATISTICS:
        entry = stats.get(name)
        if entry is None:
            continue
        value = format_number(entry["value"])
        method = entry.get("ci_method", "-")
        if entry.get("weighted"):
            # "(w)" marks it (the design lines say what it means): the method can be short.
            title = f"{title} (w)"
            method = method.removeprefix("weighted ").replace("Kish n_eff", "n_eff")
        if entry.get("not_applicable"):
            lines.append(f"  {title:<30}{'n/a':>8}  {entry['not_applicable']}")
            continue
        if entry.get("meaningless"):
            marks.append(f"  * {title}: meaningless here ({entry['meaningless']})")
            value += "*"
        p = _p(entry.get("p")) if "p" in entry else ""
        chance = (f"; chance {format_number(entry['chance'])}"
                  if entry.get("chance") is not None else "")
        lines.append(f"  {title:<30}{value:>8}  {format_ci(entry.get('ci95')):<18}{p:>8}  "
                     f"{method}{chance}")
    return lines + marks


def _confusion(confusion: Mapping[str, Any]) -> list[str]:
    weighted = confusion.get("weighted", False)
    matrix = [[f"{c:.1f}" if weighted else str(c) for c in row] for row in confusion["matrix"]]
    judge, label = confusion["judge_values"], confusion["label_values"]
    width = max(4, *(len(v) for row in matrix for v in row),
                *(len(str(v)) for v in judge)) + 1
    lines = [(f"  confusion (rows: label, {confusion['label_axis']}; columns: judge, "
              f"{confusion['judge_axis']})"),
             *([f"  design-weighted: {confusion['counts']}"] if weighted else []),
             "  " + " " * 6 + "".join(f"{v:>{width}}" for v in judge)]
    for value, row in zip(label, matrix):
        lines.append(f"  {value:>6}" + "".join(f"{c:>{width}}" for c in row))
    return lines


def _verbosity(verbosity: Mapping[str, Any], tail: str = "") -> list[str]:
    lines = ["  verbosity: score vs length (Spearman; CI Fisher z, Bonett-Wright SE)" + tail]
    for key, title in LENGTHS:
        entry = verbosity.get(key)
        if not entry:
            continue
        corr = entry["correlation"]
        text = (f"    {title}: rho {format_number(corr['rho'])} "
                f"{format_ci(corr['ci95'])} p {_p(corr['p'])} (n {corr['n']})")
        given = entry.get("given_label")
        if given:
            text += (f"; same label: partial rho {format_number(given['rho'])} "
                     f"{format_ci(given['ci95'])}")
        lines.append(text)
        if entry.get("median_by_score"):
            medians = ", ".join(f"{score}: {format_number(v['median'], 0)} (n {v['n']})"
                                for score, v in entry["median_by_score"].items())
            lines.append(f"      median length by score: {medians}")
    return lines


def _subgroups(by: str, groups: Mapping[str, Any], tail: str = "") -> list[str]:
    lines = [f"  by {by!r}: each group vs the rest (differences of means, Welch t 95% CI)"
             + tail,
             (f"    {'group':<24}{'n':>5}{'score':>8}{'label':>8}{'exact':>8}{'rho':>8}  "
              "score diff [CI]          label diff [CI]")]
    for name, g in groups.items():
        score, label = g["vs_rest"]["score"], g["vs_rest"]["label"]
        lines.append(f"    {name:<24}{g['n']:>5}{format_number(g['mean_score'], 2):>8}"
                     f"{format_number(g['mean_label'], 2):>8}{format_number(g['exact'], 2):>8}"
                     f"{format_number(g['spearman'], 2):>8}  "
                     f"{format_number(score['difference'], 2):>6} "
                     f"{format_ci(score['ci95'], 2):<16} "
                     f"{format_number(label['difference'], 2):>6} {format_ci(label['ci95'], 2)}")
    return lines


def format_agreement(report: Mapping[str, Any]) -> str:
    """A human-readable table of :func:`evaluator.analysis.agreement.agreement`'s result."""
    lines = _header(report)
    tail = DRAWN_ONLY if (report.get("design") or {}).get("weighted") else ""
    for key, stats in report["criteria"].items():
        lines += ["", f"{key}  (n = {stats['n']})"]
        lines += [f"  WARNING: {text}" for text in stats.get("warnings", [])]
        if "spearman" not in stats:
            lines.append(f"  {stats.get('note', '')}")
            continue
        lines += _statistics(stats)
        if stats.get("confusion"):
            lines += _confusion(stats["confusion"])
        elif stats.get("confusion_note"):
            lines.append(f"  {stats['confusion_note']}")
        if stats.get("verbosity"):
            lines += _verbosity(stats["verbosity"], tail)
        if stats.get("subgroups"):
            lines += _subgroups(report["by"], stats["subgroups"], tail)
    lines += format_gates(report.get("gates") or [],
                          (report.get("score_mode") or {}).get("mode", "argmax"))
    return "\n".join(lines)
