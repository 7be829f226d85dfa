"""Text for ``evaluator estimate``: per system and outcome the four figures on their own
lines (readable in 80 columns), then the differences between systems."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from typing import Any

from evaluator.analysis.intervals import format_ci, format_number


def _labels_text(row: Mapping[str, Any]) -> str:
    drawn = row.get("n_drawn")
    return (f"{row['n_labelled']} labelled" + (f" of {drawn} drawn" if drawn else ""))


def _estimate_lines(row: Mapping[str, Any]) -> list[str]:
    what = "pass rate" if row["outcome"] == "pass rate" else "mean"
    lines = _wrapped(f"{row['system']}, {row['criterion']} ({what}; N = {row['n_cases']} "
                     f"cases, {_labels_text(row)}; design: {row['design']})", "")

    def line(name: str, value: Any, ci: Any, tail: str) -> str:
        return f"  {name:<14}{format_number(value):>7}  {format_ci(ci):<18} {tail}"

    lines.append(line("judge only", row["judge_mean"], row["judge_ci"],
                      f"all {row['n_cases']} cases; its bias unknown"))
    lines.append(line("judge - label", row["judge_bias"], row["judge_bias_ci"],
                      "the judge's bias"))
    lines.append(line("labels only", row["classical_estimate"], row["classical_ci"],
                      row["classical_method"].removeprefix("labels only: ")))
    effective = row.get("effective_labels")
    worth = ("" if effective is None else
             f", worth {effective:.0f} labels")
    lam = "-" if row.get("lambda") is None else f"{row['lambda']:.2f}"
    lines.append(line("PPI++", row["ppi_estimate"], row["ppi_ci"],
                      f"lambda {lam}{worth}"))
    return lines


def _difference_line(row: Mapping[str, Any]) -> list[str]:
    p = "-" if row.get("p") is None else (f"{row['p']:.2g}" if row["p"] >= 1e-4 else "<1e-4")
    return [f"  {row['criterion']}: {row['b']} - {row['a']}",
            (f"    PPI++ {format_number(row['estimate']):>7}  {format_ci(row['ci']):<18} "
            f"p {p:<6} {row['mode']}"),
            (f"    judge {format_number(row['judge_difference']):>7}  "
            f"{format_ci(row['judge_difference_ci']):<18} judge only"),
            *_wrapped(row["note"], "    ")]


def _wrapped(text: str, indent: str) -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=indent,
                         subsequent_indent=indent + "  ", break_on_hyphens=False)


WIDTH = 80


def format_estimate(report: Mapping[str, Any]) -> str:
    """The report of :func:`evaluator.analysis.estimate.estimate` as text."""
    lines = ["clinician-level estimates (95% CIs): the judge on every case, corrected by",
             f"the labels in {report['label_field']!r} ({report['score_mode']} scores)"]
    for system in report["systems"]:
        lines.append(f"{system['system']}: {system['file']} with {system['labels']}")
        lines += _wrapped(system["design_text"], "  ")
        for note in system["notes"]:
            lines += _wrapped(note if note.startswith("WARNING") else f"note: {note}", "  ")
    if report.get("scale_note"):
        lines += _wrapped(f"note: {report['scale_note']}", "")
    for row in report["estimates"]:
        lines += ["", *_estimate_lines(row)]
    if report["differences"]:
        lines += ["", "differences between systems (later file - earlier file)"]
        for row in report["differences"]:
            lines += _difference_line(row)
    return "\n".join(lines)
