"""Text for ``evaluator estimate``: per system and outcome the four figures on their own
lines (readable in 80 columns), then the differences between systems."""

from __future__ import annotations

from typing import Any

from evaluator.analysis.estimate.records import DifferenceRow, EstimateReport, EstimateRow
from evaluator.analysis.intervals import NO_INTERVAL, format_ci, format_number, format_p
from evaluator.analysis.minimum import PAIRED_LINE
from evaluator.common.columns import row as table_row
from evaluator.common.columns import wrap


def _labels_text(row: EstimateRow) -> str:
    drawn = row.n_drawn
    return (f"{row.n_labelled} labelled" + (f" of {drawn} drawn" if drawn else ""))


def _estimate_lines(row: EstimateRow) -> list[str]:
    what = "pass rate" if row.outcome == "pass rate" else "mean"
    lines = wrap(f"{row.system}, {row.criterion} ({what}; N = {row.n_cases} "
                 f"cases, {_labels_text(row)}; design: {row.design})", "")

    def line(name: str, value: Any, ci: Any, tail: str, method: str | None) -> list[str]:
        why = no_ci_reason(value, ci, method)
        return table_row(f"  {name:<14}{format_number(value):>7}  {format_ci(ci):<18} ",
                   f"{why}; {tail}" if why and why not in tail else tail)

    lines += line("judge only", row.judge_mean, row.judge_ci,
                  f"all {row.n_cases} cases; its bias unknown", row.judge_method)
    lines += line("judge - label", row.judge_bias, row.judge_bias_ci,
                  "the judge's bias", row.judge_bias_method)
    lines += line("labels only", row.classical_estimate, row.classical_ci,
                  row.classical_method.removeprefix("labels only: "),
                  row.classical_method)
    effective = row.effective_labels
    worth = ("" if effective is None else
             f", worth {effective:.0f} labels")
    lam = "-" if row.lam is None else f"{row.lam:.2f}"
    lines += line("PPI++", row.ppi_estimate, row.ppi_ci, f"lambda {lam}{worth}",
                  row.ppi_method)
    if row.too_few:
        lines += wrap(f"{row.too_few} (the figures are shown; no direction is stated from "
                      "them)", "  ")
    return lines


def no_ci_reason(value: Any, ci: Any, method: str | None) -> str | None:
    """Why a figure with a value has no CI, from its method ("...; no interval: <why>"),
    so a "-" is never left unexplained; None when it has one (or no value)."""
    if value is None or ci is not None:
        return None
    if method and NO_INTERVAL in method:
        return method[method.index(NO_INTERVAL):]
    return "no interval" + (f" ({method})" if method else "")


def _difference_line(diff: DifferenceRow) -> list[str]:
    p = format_p(diff.p)
    lines = wrap(f"{diff.criterion}: {diff.b} - {diff.a}", "  ")
    lines += table_row(f"    PPI++ {format_number(diff.estimate):>7}  "
                       f"{format_ci(diff.ci):<18} p {p:<6} ", diff.mode)
    lines += table_row(f"    judge {format_number(diff.judge_difference):>7}  "
                       f"{format_ci(diff.judge_difference_ci):<18} ", "judge only")
    for name, value, ci, method in (
            ("PPI++", diff.estimate, diff.ci, diff.method),
            ("judge", diff.judge_difference, diff.judge_difference_ci,
             diff.judge_difference_method)):
        why = no_ci_reason(value, ci, method)
        if why:
            lines += wrap(f"{name}: {why}", "    ")
    for said in (diff.too_few, diff.label_more_text):
        if said:
            lines += wrap(said, "    ")
    return lines + wrap(diff.note, "    ")


WIDTH = 80


def format_estimate(report: EstimateReport) -> str:
    """The report of :func:`evaluator.analysis.estimate.estimate.estimate` as text."""
    lines = ["clinician-level estimates (95% CIs): the judge on every case, corrected by",
             f"the labels in {report.label_field!r} ({report.score_mode} scores)"]
    for system in report.systems:
        lines += wrap(f"{system.system}: {system.file} with {system.labels}", "")
        lines += wrap(system.design_text, "  ")
        for note in system.notes:
            lines += wrap(note if note.startswith(("WARNING", "NOTE")) else f"note: {note}",
                          "  ")
    if report.scale_note:
        lines += wrap(f"note: {report.scale_note}", "")
    for row in report.estimates:
        lines += ["", *_estimate_lines(row)]
    if report.differences:
        lines += ["", "differences between systems (later file - earlier file)"]
        for row in report.differences:
            lines += _difference_line(row)
        if any(row.mode == "paired" for row in report.differences):
            lines += wrap(PAIRED_LINE, "", "")
    return "\n".join(lines)
