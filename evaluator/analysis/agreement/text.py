"""The plain-text table of :func:`evaluator.analysis.agreement.agreement.agreement` (``evaluator
agree``): the labels' design (a priority worksheet's warning before any figure; which
figures are design-weighted), warnings, then per criterion n, every statistic with its CI
and the CI's method, chance levels, the confusion matrix on the rubric's scale, and the
judge-bias figures (verbosity, subgroups). At most 80 columns (a long name or path on a
line of its own; each CI's method a numbered note under its table); a figure with no value
or no CI says why. Field names and group names only, never case text; never "-0.000"."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evaluator.analysis.agreement.ceiling import CEILING_STATISTICS, MIN_DISAGREEMENTS
from evaluator.analysis.agreement.records import (
    AgreementReport,
    Ceiling,
    CeilingFigure,
    LabellerAgreement,
)
from evaluator.analysis.gates import format_gates
from evaluator.analysis.intervals import NO_INTERVAL, format_ci, format_number, format_p
from evaluator.common.columns import Notes, row, whole, wrap

STATISTICS = (("spearman", "Spearman rho"), ("kendall_tau_b", "Kendall tau-b"),
              ("kappa_quadratic", "Cohen kappa (quadratic)"), ("icc_a1", "ICC(A,1) / ICC2"),
              ("krippendorff_alpha_ordinal", "Krippendorff alpha (ordinal)"),
              ("mean_abs_difference", "mean |judge - label|"),
              ("exact", "exact agreement"), ("within_one", "within-one agreement"))
LENGTHS = (("text_chars", "evaluated text, characters"),
           ("completion_tokens", "judge's verdict, completion tokens"))
DRAWN_ONLY = " (drawn cases, not design-weighted)"
CI_NOTES = "CI: the method of each 95% CI, or why there is none"
GROUP_WIDTH = 24  # the subgroup tables' first column
WITHIN_ONE_NOTE = ("within-one agreement is near 1 when clinicians rarely differ by two "
                   "points, so a few cases decide it: its difference's CI is a jackknife t "
                   f"interval, and with fewer than {MIN_DISAGREEMENTS} cases more than one "
                   "point apart it has no CI (docs/statistics.md)")


def _design(design: Mapping[str, Any] | None) -> list[str]:
    """The design's lines: its warning first (a priority worksheet), then what the design
    is and which figures it weights."""
    if not design:
        return []
    lines = wrap(design["warning"]) if design.get("warning") else []
    lines += wrap(design["text"])
    weights = design.get("weights")
    if weights:
        lines += wrap(f"weights 1/pi from {weights['min']:.3g} to {weights['max']:.3g} "
                      f"over the {design['joined']} joined case(s), Kish effective n "
                      f"{weights['n_eff']:.1f}; {design['split']}")
    lines += [line for note in design.get("notes", []) for line in wrap(f"note: {note}")]
    return lines


def _header(report: AgreementReport) -> list[str]:
    design, boot, mode = report.design, report.bootstrap, report.score_mode
    lines = [*wrap(f"labels {report.labels} field {report.label_field!r} vs "
                   f"{report.results}"),
             *_design(design),
             *(wrap(report.verdict_seen) if report.verdict_seen else []),
             *_sheet(report),
             *wrap(f"n = {report.joined} joined case(s)"
                   + (f" (restricted to the {report.common_cases} cases common to "
                      "every file)" if report.common_cases is not None else "")
                   + f"; ok results without a label: {report.unmatched_results}; "
                   f"labels without an ok result: {report.unmatched_labels} (of which "
                   f"labelled but not ok: {report.not_ok_labelled})"
                   + (f"; rows not labelled yet (empty label): {report.unlabelled_rows}"
                      if report.unlabelled_rows else "")),
             *wrap(f"95% CIs: each row's CI note names its method; bootstrap: "
                   f"{boot.resamples} resamples over case pairs, seed {boot.seed}, "
                   f"unreliable above {boot.undefined_limit:.0%} undefined resamples"),
             *wrap(f"note: {report.note}"),
             *wrap(f"score mode: {mode.mode} ({mode.meaning})")]
    if mode.note:
        lines += wrap(f"note: {mode.note}")
    lines += [line for note in report.notes for line in wrap(f"note: {note}")]
    # The design's own warning is printed above, before any figure.
    lines += [line for text in report.warnings if text != design.get("warning")
              for line in wrap(f"WARNING: {text}")]
    return lines


def _sheet(report: AgreementReport) -> list[str]:
    """How a sheet folder's labels were read: who labelled, the rule for a case several
    labelled, what was left out."""
    if report.sheet is None:
        return []
    return [*wrap(report.sheet.rule),
            *(line for note in report.sheet.notes for line in wrap(f"note: {note}"))]


def _figure(figure: CeilingFigure) -> str:
    """``0.61 [0.52, 0.69]`` (kept on one line), or the value and why it has no CI."""
    if figure.value is None:
        return "undefined"
    ci = format_ci(figure.ci95, 2)
    text = format_number(figure.value, 2) + (f" {ci}" if figure.ci95 else "")
    return whole(text)


def format_ceiling(ceiling: Ceiling) -> list[str]:
    """The ceiling of one criterion: per statistic judge vs clinicians, clinician vs
    clinician and the difference, each with its 95% CI, then what kappa's says
    (:func:`evaluator.analysis.agreement.ceiling.reading`)."""
    lines = wrap(f"ceiling: {ceiling.n} case(s) labelled by two or more of "
                 f"{', '.join(ceiling.labellers)}; judge vs clinicians (mean over labellers) "
                 f"beside clinician vs clinician (mean over {ceiling.pairs} pair(s); alpha "
                 f"over all), 95% CIs: {ceiling.method}, {ceiling.resamples} resamples, "
                 f"seed {ceiling.seed}", "  ")
    why: list[str] = []
    for key, title in CEILING_STATISTICS:
        stat = ceiling.statistics[key]
        short = {"kappa_quadratic": "kw", "krippendorff_alpha_ordinal": "alpha"}.get(key, "")
        lines += wrap(f"{title}: judge vs clinicians {short + ' ' if short else ''}"
                      f"{_figure(stat.judge)}; clinician vs clinician "
                      f"{_figure(stat.clinicians)}; difference {_figure(stat.difference)}",
                      "    ")
        for side, figure in (("judge vs clinicians", stat.judge),
                             ("clinician vs clinician", stat.clinicians),
                             ("difference", stat.difference)):
            if figure.ci95 is None and figure.ci_method != "-":
                why.append(f"{title}, {side}: {figure.ci_method}")
            elif figure.ci_method != "BCa" and figure.ci95 is not None:
                why.append(f"{title}, {side}: CI {figure.ci_method}")
    lines += [line for text in why for line in wrap(f"- {text}", "    ")]
    lines += wrap(f"note: {WITHIN_ONE_NOTE}", "    ")
    if ceiling.reading:
        lines += wrap(ceiling.reading, "  ")
    return lines


def _labellers(rows: list[LabellerAgreement]) -> list[str]:
    """The judge against each labeller's own labels."""
    lines = ["  judge vs each labeller (every case that labeller labelled):",
             f"    {'labeller':<{GROUP_WIDTH}}{'n':>5}{'kappa':>8}{'exact':>8}"]
    for entry in rows:
        lines += _group_row(entry.labeller, f"{entry.n:>5}"
                                            f"{format_number(entry.kappa_quadratic, 2):>8}"
                                            f"{format_number(entry.exact, 2):>8}")
    return lines


def _statistics(stats: Mapping[str, Any]) -> list[str]:
    """The statistics table (80 columns: each CI's method is a numbered note under it)."""
    lines = [f"  {'statistic':<29}{'value':>7}  {'95% CI':<16}{'p':>8}{'chance':>8}  CI"]
    marks: list[str] = []
    notes = Notes()
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
            lines += row(f"  {title:<29}{'n/a':>7}  ", entry["not_applicable"])
            continue
        if entry.get("meaningless"):
            marks += wrap(f"* {title}: meaningless here ({entry['meaningless']})", "  ")
            value += "*"
        elif entry.get("value") is None:
            # A bare "-" would not say why: the note (e.g. "needs integer scores") does.
            method = f"undefined: {entry.get('note') or 'not computable on these data'}"
        p = format_p(entry.get("p")) if "p" in entry else ""
        chance = (format_number(entry["chance"]) if entry.get("chance") is not None else "")
        mark = notes.mark(method if method != "-" else None)
        lines.append(f"  {title:<29}{value:>7}  {format_ci(entry.get('ci95')):<16}{p:>8}"
                     f"{chance:>8}  {mark}".rstrip())
    return lines + marks + notes.lines(CI_NOTES)


def _confusion(confusion: Mapping[str, Any]) -> list[str]:
    weighted = confusion.get("weighted", False)
    matrix = [[f"{c:.1f}" if weighted else str(c) for c in cells]
              for cells in confusion["matrix"]]
    judge, label = confusion["judge_values"], confusion["label_values"]
    width = max(4, *(len(v) for cells in matrix for v in cells),
                *(len(str(v)) for v in judge)) + 1
    lines = [*wrap(f"confusion (rows: label, {confusion['label_axis']}; columns: judge, "
                   f"{confusion['judge_axis']})", "  "),
             *(wrap(f"design-weighted: {confusion['counts']}", "  ") if weighted else []),
             "  " + " " * 6 + "".join(f"{v:>{width}}" for v in judge)]
    for value, cells in zip(label, matrix):
        lines.append(f"  {value:>6}" + "".join(f"{c:>{width}}" for c in cells))
    return lines


def _correlation_text(name: str, figure: Mapping[str, Any]) -> str:
    """``rho 0.123 [0.01, 0.23]`` (and ``, p 0.05``), or why it is undefined."""
    if figure.get("rho") is None:
        return f"{name} undefined ({figure.get('undefined') or 'too few cases'})"
    if figure.get("ci95") is None:
        # The p-value comes from the CI's own statistic: no CI, no p; say why, not "- p -".
        method = figure.get("method", "")
        why = (method.split(f"{NO_INTERVAL}: ", 1)[1] if f"{NO_INTERVAL}: " in method else
               method[method.rindex("(") + 1:].rstrip(")") if method.endswith(")") else
               "not computable")
        what = "CI or p-value" if "p" in figure else "CI"
        return f"{name} {format_number(figure['rho'])} (no {what}: {why})"
    text = f"{name} {format_number(figure['rho'])} {whole(format_ci(figure['ci95']))}"
    return text + (f", p {format_p(figure['p'])}" if "p" in figure else "")


def _verbosity(verbosity: Mapping[str, Any], tail: str = "") -> list[str]:
    lines = wrap("verbosity: score vs length (Spearman; CI and p: Fisher z, "
                 "Bonett-Wright SE)"
                 + tail, "  ")
    for key, title in LENGTHS:
        entry = verbosity.get(key)
        if not entry:
            continue
        corr = entry["correlation"]
        n = whole(f"(n {corr['n']})")
        lines += wrap(f"{title}: {_correlation_text('rho', corr)} {n}", "    ")
        given = entry.get("given_label")
        if given:
            lines += wrap(f"same label: {_correlation_text('partial rho', given)}", "      ")
        if entry.get("median_by_score"):
            medians = ", ".join(whole(f"{score}: {format_number(v['median'], 0)} (n {v['n']})")
                                for score, v in entry["median_by_score"].items())
            lines += wrap(f"median length by score: {medians}", "      ")
    return lines


def _group_row(name: str, rest: str) -> list[str]:
    """A subgroup table's row; a name too long for its column gets line(s) of its own."""
    if len(name) < GROUP_WIDTH:
        return [f"    {name:<{GROUP_WIDTH}}{rest}".rstrip()]
    return [*wrap(name, "    "), f"    {'':<{GROUP_WIDTH}}{rest}".rstrip()]


def _subgroups(by: str, groups: Mapping[str, Any], tail: str = "") -> list[str]:
    """Two tables (80 columns): each group's figures, then each group against the rest;
    a "-" in either is explained under them."""
    lines = [*wrap(f"by {by!r}: each group vs the rest (differences of means, Welch t 95% "
                   "CI)" + tail, "  "),
             f"    {'group':<{GROUP_WIDTH}}{'n':>5}{'score':>8}{'label':>8}{'exact':>8}"
             f"{'rho':>8}"]
    why: list[str] = []
    for name, g in groups.items():
        lines += _group_row(name, f"{g['n']:>5}{format_number(g['mean_score'], 2):>8}"
                                  f"{format_number(g['mean_label'], 2):>8}"
                                  f"{format_number(g['exact'], 2):>8}"
                                  f"{format_number(g['spearman'], 2):>8}")
        if g["spearman"] is None:
            why.append(f"{name}: rho undefined ({g.get('spearman_undefined') or 'too few cases'})")
    lines.append(f"    {'group':<{GROUP_WIDTH}}{'score - rest [95% CI]':<26}"
                 "label - rest [95% CI]")
    for name, g in groups.items():
        cells = []
        for what in ("score", "label"):
            diff = g["vs_rest"][what]
            cells.append(f"{format_number(diff['difference'], 2):>6} "
                         f"{format_ci(diff['ci95'], 2):<19}")
            if diff["ci95"] is None:
                why.append(f"{name}: {what} - rest, {diff['method']}")
        lines += _group_row(name, "".join(cells))
    return lines + [line for text in why for line in wrap(f"- {text}", "    ")]


def format_agreement(report: AgreementReport) -> str:
    """A human-readable table of :func:`evaluator.analysis.agreement.agreement.agreement`'s
    result."""
    lines = _header(report)
    tail = DRAWN_ONLY if report.design["weighted"] else ""
    for key, stats in report.criteria.items():
        lines += ["", *wrap(f"{key}  (n = {stats['n']})")]
        lines += [line for text in stats.get("warnings", [])
                  for line in wrap(f"WARNING: {text}", "  ")]
        if "spearman" not in stats:
            lines += wrap(stats.get("note", ""), "  ")
            continue
        lines += _statistics(stats)
        for ceiling in report.ceiling:
            if ceiling.criterion == key:
                lines += format_ceiling(ceiling)
        if report.by_labeller.get(key):
            lines += _labellers(report.by_labeller[key])
        if stats.get("confusion"):
            lines += _confusion(stats["confusion"])
        elif stats.get("confusion_note"):
            lines += wrap(stats["confusion_note"], "  ")
        if stats.get("verbosity"):
            lines += _verbosity(stats["verbosity"], tail)
        if stats.get("subgroups"):
            lines += _subgroups(str(report.by), stats["subgroups"], tail)
    lines += format_gates(report.gates, report.score_mode.mode)
    return "\n".join(lines)
