"""Text for ``evaluator compare`` (at most 80 columns): per file and criterion each figure
on its own line with its 95% CI, a numbered note naming the CI's method (or why there is
none) and its counts, then the Bradley-Terry ranking, then the notes that say how to read
them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evaluator.analysis.intervals import format_ci, format_number
from evaluator.analysis.pairwise.compare import CompareReport
from evaluator.common.columns import Notes, row, wrap

WIDTH = 80


def _line(name: str, figure: Mapping[str, Any] | None, notes: Notes,
          tail: str = "") -> list[str]:
    """One figure: name, value, 95% CI, ``[n]`` (its method: the notes under the file say
    which), then ``tail``, wrapped under the row when long (nothing is cut)."""
    figure = figure or {}
    mark = notes.mark(figure.get("method") if figure.get("method") != "-" else None)
    head = (f"    {name:<22}{format_number(figure.get('value')):>7}  "
            f"{format_ci(figure.get('ci95')):<16} {mark:<5}")
    return row(head, tail)


def _comparison_lines(entry: Mapping[str, Any], notes: Notes) -> list[str]:
    lines = wrap(f"{entry['criterion']} ({entry['n']} pairs)", "  ")
    if "win_rate" in entry:
        win = entry["win_rate"]
        lines += _line("win rate of A", win, notes, f"{win['n']} pairs")
        lines += wrap(f"A won {win['a_wins']}, B won {win['b_wins']}, tie {win['ties']}, "
                      f"inconsistent {win['inconsistent']}", "      ")
        consistency = entry["position_consistency"]
        lines += _line("position consistency", consistency, notes,
                       f"{consistency['consistent']} of {consistency['n']} pairs")
        bias = entry["position_bias"]
        lines += _line("position bias", bias, notes,
                       f"first {bias['first_chosen']} of {bias['decisive']} decisive")
        lines.extend(wrap(
            f"inconsistent pairs: first shown chosen both times {bias['inconsistent_first_both']}"
            f", second both times {bias['inconsistent_second_both']}, a tie in one order "
            f"{bias['inconsistent_with_tie']}", "      "))
        length = entry["length_bias"]
        lines += _line("length slope", length["slope"], notes, "> 0: longer favoured")
        lines += _line("length-controlled win", length["controlled_win_rate"], notes,
                       "A's, at equal lengths")
        longer = length["longer_wins"]
        lines += _line("longer answer wins", longer, notes,
                       f"{longer['longer_won']} of {longer['n']} decisive")
    if "labels" in entry:
        labels = entry["labels"]
        lines += _line("kappa with labels", labels["kappa"], notes,
                       f"{labels['n']} labelled pairs")
        agreement = labels["agreement"]
        lines += _line("agreement with labels", agreement, notes,
                       f"{agreement['agreed']} of {labels['n']}")
    for note in entry.get("notes", []):
        lines.extend(wrap(f"note: {note}", "    "))
    return lines


def _bradley_terry_lines(block: Mapping[str, Any]) -> list[str]:
    lines = wrap(f"Bradley-Terry strengths, {block['criterion']} ({block['battles']} "
                 f"battles; {block['scale']})", "")
    lines += wrap(f"95% CI: {block['method']}", "  ")
    for system in block["systems"]:
        # A long name goes on its own line(s), whole: a cut name could make two systems look
        # the same.
        name = system["name"]
        if len(name) > 40:
            lines.extend(wrap(name, f"  {system['rank']:>2}  "))
            name = ""
        lines.append(f"  {system['rank']:>2}  {name:<40}{format_number(system['strength']):>7}"
                     f"  {format_ci(system['ci95'])}")
    if block.get("note"):
        lines.extend(wrap(f"note: {block['note']}", "  "))
    return lines


def format_comparison(report: CompareReport) -> str:
    """The report of :func:`evaluator.analysis.pairwise.compare.compare` as text."""
    lines: list[str] = []
    for info in report.files:
        lines.extend(wrap(
            f"{info['path']}: {info['systems']['A']} (A) vs {info['systems']['B']} (B); "
            f"rubric {info['rubric']}; {info['ok']} of {info['records']} records ok", ""))
        lines.append(f"    {'figure':<22}{'value':>7}  {'95% CI':<16} {'CI':<5}counts")
        notes = Notes()
        for entry in report.comparisons:
            if entry["file"] == info["path"]:
                lines.extend(_comparison_lines(entry, notes))
        lines += notes.lines("CI: the method of each 95% CI, or why there is none")
        lines.append("")
    for block in report.bradley_terry:
        lines.extend(_bradley_terry_lines(block))
        lines.append("")
    lines.append("notes:")
    for note in report.notes:
        lines.extend(wrap(f"- {note}", "  "))
    return "\n".join(lines)
