"""The plain-text form of :func:`evaluator.analysis.summary.summarize` (``evaluator
summary``): the score mode first, the records it left out, statuses, then per criterion and
aggregate n, mean with its 95% CI, SD, median, and the pass rates. Numbers and keys only."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from typing import Any

from evaluator.analysis.intervals import format_ci, format_number


def _row(key: str, entry: Mapping[str, Any]) -> str:
    return (f"  {key:<32}{entry['n']:>6}{format_number(entry['mean']):>8}  "
            f"{format_ci(entry.get('ci95')):<18}{format_number(entry['sd']):>7}"
            f"{format_number(entry['median']):>8}")


def _format_pairwise(summary: Mapping[str, Any]) -> str:
    block = summary["pairwise"]
    statuses = ", ".join(f"{k} {v}" for k, v in summary["status_counts"].items()) or "none"
    systems = block.get("systems") or {}
    lines = [f"rubric {summary['rubric']}, judge {summary['judge']}",
             f"{summary['cases']} pair(s): {statuses}",
             *textwrap.wrap(f"A = {systems.get('A', '?')}, B = {systems.get('B', '?')}; every "
                            "pair judged in both orders", 80, break_on_hyphens=False)]
    if summary.get("stats_note"):
        lines.append(f"note: {summary['stats_note']}")
    lines += ["", (f"  {'criterion':<16}{'n':>5}{'A':>5}{'B':>5}{'tie':>5}{'incons':>7}"
                   f"  {'A win rate [95% CI]':<23}{'consist':>8}")]
    for key, entry in block["criteria"].items():
        rate = entry.get("win_rate") or {}
        consistent = entry.get("position_consistency") or {}
        shown = (f"{format_number(rate.get('value'))} {format_ci(rate.get('ci95'))}"
                 if rate else "-")
        lines.append(f"  {key[:15]:<16}{entry['n']:>5}{entry['a_wins']:>5}{entry['b_wins']:>5}"
                     f"{entry['ties']:>5}{entry['inconsistent']:>7}  {shown:<23}"
                     f"{format_number(consistent.get('value')):>8}")
    bias = [(key, entry["position_bias"]) for key, entry in block["criteria"].items()
            if entry.get("position_bias")]
    if bias:
        lines += ["", "  position bias: the share of decisive verdicts for the answer shown",
                  "  first (0.5: none)"]
        lines += [f"  {key[:15]:<16}{format_number(b.get('value')):>7}  {format_ci(b.get('ci95'))}"
                  for key, b in bias]
    lines += ["", f"note: {block['note']}",
              "length bias, Bradley-Terry and clinician labels: evaluator compare"]
    return "\n".join(lines)


def format_summary(summary: Mapping[str, Any]) -> str:
    """A human-readable table of a summary dict."""
    if "pairwise" in summary:
        return _format_pairwise(summary)
    mode = summary.get("score_mode") or {"mode": "argmax", "meaning": "", "note": None}
    statuses = ", ".join(f"{k} {v}" for k, v in summary["status_counts"].items()) or "none"
    lines = [(f"rubric {summary['rubric']}, judge {summary['judge']}: {summary['cases']} "
              f"case(s) ({statuses})"),
             f"score mode: {mode['mode']} ({mode['meaning']})"]
    if mode.get("note"):
        lines.append(f"note: {mode['note']}")
    if summary.get("stats_note"):
        lines.append(f"note: {summary['stats_note']}")
    lines += ["", (f"  {'criterion / aggregate':<32}{'n':>6}{'mean':>8}  {'95% CI':<18}"
                   f"{'SD':>7}{'median':>8}")]
    lines += [_row(key, entry) for key, entry in summary["criteria"].items()]
    lines += [_row(key, entry) for key, entry in summary["aggregates"].items()]
    if summary["pass_rates"]:
        lines += ["", "  pass rates (cases without a verdict are neither passes nor failures)"]
        for key, rate in summary["pass_rates"].items():
            lines.append(f"  {key:<32}{rate['rule']:<8}{rate['passed']:>5} of {rate['n']:<5}"
                         f"{format_number(rate['rate']):>7}  {format_ci(rate['ci95'])} Wilson; "
                         f"not judged {rate['not_judged']}")
    lines += ["", f"95% CIs: {summary['ci_method']}"]
    return "\n".join(lines)
