"""The plain-text form of :func:`evaluator.analysis.summary.summary.summarize` (``evaluator
summary``): the score mode first, the records it left out, statuses, then per criterion and
aggregate n, mean with its 95% CI, SD, median, and the pass rates. Numbers and keys only."""

from __future__ import annotations

import textwrap

from evaluator.analysis.intervals import format_ci, format_number
from evaluator.analysis.summary.records import (
    PairwiseSummary,
    PanelAgreement,
    RunSummary,
    ScoreStats,
)

KEY_WIDTH = 30  # a table's first column; the rows fit in 80 columns


def _keyed(key: str, rest: str) -> list[str]:
    """A table row: the key, then ``rest``; a key too long for its column gets a line of
    its own (never cut: two long keys could read alike)."""
    return keyed_row(key, rest, KEY_WIDTH)


def keyed_row(key: str, rest: str, width: int) -> list[str]:
    """:func:`_keyed` with a first column ``width`` wide; a key longer than a line is
    wrapped, whole, over several."""
    if len(key) < width:
        return [f"  {key:<{width}}{rest}"]
    return [f"  {part}" for part in textwrap.wrap(key, 78, break_on_hyphens=False)] + \
        [f"  {'':<{width}}{rest}"]


def _mean_ci(entry: ScoreStats) -> str:
    """The mean's CI, or why there is none: "- (all equal)" when every score is the same
    (``ci_note``; a point is not a 95% interval)."""
    if entry.ci_note:
        return "- (one score)" if entry.n == 1 else "- (all equal)"
    return format_ci(entry.ci95)


def _row(key: str, entry: ScoreStats) -> list[str]:
    return _keyed(key, f"{entry.n:>6}{format_number(entry.mean):>8}  "
                       f"{_mean_ci(entry):<16}{format_number(entry.sd):>7}"
                       f"{format_number(entry.median):>8}")


def _format_pairwise(summary: PairwiseSummary) -> str:
    block = summary.pairwise
    statuses = ", ".join(f"{k} {v}" for k, v in summary.status_counts.items()) or "none"
    systems = block.systems
    lines = [f"rubric {summary.rubric}, judge {summary.judge}",
             f"{summary.cases} pair(s): {statuses}",
             *textwrap.wrap(f"A = {systems.get('A', '?')}, B = {systems.get('B', '?')}; every "
                            "pair judged in both orders", 80, break_on_hyphens=False)]
    if summary.stats_note:
        lines.append(f"note: {summary.stats_note}")
    lines += ["", (f"  {'criterion':<16}{'n':>5}{'A':>5}{'B':>5}{'tie':>5}{'incons':>7}"
                   f"  {'A win rate [95% CI]':<23}{'consist':>8}")]
    for key, entry in block.criteria.items():
        rate = entry.win_rate or {}
        consistent = entry.position_consistency or {}
        shown = (f"{format_number(rate.get('value'))} {format_ci(rate.get('ci95'))}"
                 if rate else "-")
        lines += keyed_row(key, f"{entry.n:>5}{entry.a_wins:>5}{entry.b_wins:>5}"
                                f"{entry.ties:>5}{entry.inconsistent:>7}  {shown:<23}"
                                f"{format_number(consistent.get('value')):>8}", 16)
    bias = [(key, entry.position_bias) for key, entry in block.criteria.items()
            if entry.position_bias]
    if bias:
        lines += ["", "  position bias: the share of decisive verdicts for the answer shown",
                  "  first (0.5: none)"]
        for key, b in bias:
            lines += keyed_row(key, f"{format_number(b.get('value')):>7}  "
                                    f"{format_ci(b.get('ci95'))}", 16)
    lines += ["", f"note: {block.note}"]
    if summary.cases:  # a run of no pairs has nothing for compare to read
        lines.append("length bias, Bradley-Terry and clinician labels: evaluator compare")
    return "\n".join(lines)


def format_summary(summary: RunSummary) -> str:
    """A human-readable table of a summary."""
    if isinstance(summary, PairwiseSummary):
        return _format_pairwise(summary)
    mode = summary.score_mode
    statuses = ", ".join(f"{k} {v}" for k, v in summary.status_counts.items()) or "none"
    lines = [(f"rubric {summary.rubric}, judge {summary.judge}: {summary.cases} "
              f"case(s) ({statuses})"),
             f"score mode: {mode.mode} ({mode.meaning})"]
    if mode.note:
        lines.append(f"note: {mode.note}")
    if summary.stats_note:
        lines.append(f"note: {summary.stats_note}")
    lines += ["", *_keyed("criterion / aggregate", f"{'n':>6}{'mean':>8}  {'95% CI':<16}"
                                                     f"{'SD':>7}{'median':>8}")]
    entries: list[tuple[str, ScoreStats]] = [*summary.criteria.items(),
                                             *summary.aggregates.items()]
    for key, entry in entries:
        lines += _row(key, entry)
    if summary.pass_rates:
        lines += ["", *_keyed("pass rate", f"{'rule':<6}{'passed/n':>10}{'rate':>7}  "
                                            f"{'95% CI':<15}{'unjudged':>8}")]
        for key, rate in summary.pass_rates.items():
            lines += _keyed(key, f"{rate.rule:<6}{f'{rate.passed}/{rate.n}':>10}"
                                 f"{format_number(rate.rate):>7}  "
                                 f"{format_ci(rate.ci95):<15}{rate.not_judged:>8}")
    for block, title in ((summary.self_consistency, "self-consistency"),
                         (summary.inter_judge, "jury")):
        if block is not None:
            lines += ["", *_panel(title, block)]
    unjudged = (" A pass rate leaves out the cases without a verdict (unjudged)."
                if summary.pass_rates else "")
    points = (" A mean whose scores are all equal has none: a point is not an interval."
              if any(e.ci_note for _, e in entries) else "")
    lines += ["", *textwrap.wrap(f"95% CIs: {summary.ci_method}.{points}{unjudged}", 80,
                                 break_on_hyphens=False)]
    return "\n".join(lines)


def _panel(title: str, block: PanelAgreement) -> list[str]:
    """Agreement across a case's samples or jury members: alpha and unanimity per key."""
    raters = ", ".join(block.raters)
    how = block.reduction or {}
    head = textwrap.wrap(f"{title}: {len(block.raters)} raters ({raters}); one "
                         f"score from their {how.get('integer', '?')}, aggregates from their "
                         f"{how.get('aggregates', '?')}", 78, break_on_hyphens=False)
    lines = [f"  {line}" for line in head]
    if block.alpha is None:
        return [*lines, "  agreement needs the stats extra"]
    lines += _keyed("criterion / aggregate", f"{'alpha':>8}{'unanimous':>11}")
    unanimous = block.unanimous or {}
    for key, value in block.alpha.items():
        lines += _keyed(key, f"{format_number(value):>8}{format_number(unanimous.get(key)):>11}")
    return lines
