"""Text for ``evaluator compare`` (at most 80 columns): per file and criterion each figure
on its own line with its 95% CI and counts, then the Bradley-Terry ranking, then the notes
that say how to read them."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from typing import Any

from evaluator.analysis.intervals import format_ci, format_number

WIDTH = 80


def _wrapped(text: str, indent: str) -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=indent,
                         subsequent_indent=indent + "  ", break_on_hyphens=False)


def _line(name: str, figure: Mapping[str, Any] | None, tail: str = "") -> str:
    figure = figure or {}
    text = (f"    {name:<22}{format_number(figure.get('value')):>7}  "
            f"{format_ci(figure.get('ci95')):<17} {tail}")
    return text.rstrip()[:WIDTH]


def _comparison_lines(entry: Mapping[str, Any]) -> list[str]:
    lines = _wrapped(f"{entry['criterion']} ({entry['n']} pairs)", "  ")
    if "win_rate" in entry:
        win = entry["win_rate"]
        lines.append(_line("win rate of A", win,
                           f"A {win['a_wins']}, B {win['b_wins']}, tie {win['ties']}, "
                           f"inc. {win['inconsistent']}"))
        consistency = entry["position_consistency"]
        lines.append(_line("position consistency", consistency,
                           f"{consistency['consistent']} of {consistency['n']} pairs"))
        bias = entry["position_bias"]
        lines.append(_line("position bias", bias,
                           f"first {bias['first_chosen']} of {bias['decisive']} decisive"))
        lines.extend(_wrapped(
            f"inconsistent pairs: first shown chosen both times {bias['inconsistent_first_both']}"
            f", second both times {bias['inconsistent_second_both']}, a tie in one order "
            f"{bias['inconsistent_with_tie']}", "      "))
        length = entry["length_bias"]
        lines.append(_line("length slope", length["slope"], "> 0: longer favoured"))
        lines.append(_line("length-controlled win", length["controlled_win_rate"],
                           "A's, at equal lengths"))
        longer = length["longer_wins"]
        lines.append(_line("longer answer wins", longer,
                           f"{longer['longer_won']} of {longer['n']} decisive pairs"))
    if "labels" in entry:
        labels = entry["labels"]
        lines.append(_line("kappa with labels", labels["kappa"],
                           f"{labels['n']} labelled pairs"))
        agreement = labels["agreement"]
        lines.append(_line("agreement with labels", agreement,
                           f"{agreement['agreed']} of {labels['n']}"))
    for note in entry.get("notes", []):
        lines.extend(_wrapped(f"note: {note}", "    "))
    return lines


def _bradley_terry_lines(block: Mapping[str, Any]) -> list[str]:
    lines = _wrapped(f"Bradley-Terry strengths, {block['criterion']} ({block['battles']} "
                     f"battles; {block['scale']})", "")
    for system in block["systems"]:
        # A long name goes on its own line(s), whole: a cut name could make two systems look
        # the same.
        name = system["name"]
        if len(name) > 40:
            lines.extend(_wrapped(name, f"  {system['rank']:>2}  "))
            name = ""
        lines.append(f"  {system['rank']:>2}  {name:<40}{format_number(system['strength']):>7}"
                     f"  {format_ci(system['ci95'])}")
    if block.get("note"):
        lines.extend(_wrapped(f"note: {block['note']}", "  "))
    return lines


def format_comparison(report: Mapping[str, Any]) -> str:
    """The report of :func:`evaluator.analysis.compare.compare` as text."""
    lines: list[str] = []
    for info in report["files"]:
        lines.extend(_wrapped(
            f"{info['path']}: {info['systems']['A']} (A) vs {info['systems']['B']} (B); "
            f"rubric {info['rubric']}; {info['ok']} of {info['records']} records ok", ""))
        lines.append(f"    {'figure':<22}{'value':>7}  95% CI")
        for entry in report["comparisons"]:
            if entry["file"] == info["path"]:
                lines.extend(_comparison_lines(entry))
        lines.append("")
    for block in report["bradley_terry"]:
        lines.extend(_bradley_terry_lines(block))
        lines.append("")
    lines.append("notes:")
    for note in report["notes"]:
        lines.extend(_wrapped(f"- {note}", "  "))
    return "\n".join(lines)
