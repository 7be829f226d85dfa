"""Render :func:`evaluator.report.build.build_report`'s data as one self-contained HTML file.

The page comes from ``evaluator/templates/report.html.j2`` through Jinja2 with autoescape
on (case ids and, with ``--show-text``, case text are hostile input). It carries a
Content-Security-Policy that forbids every load except inline styles and ``data:`` images,
has no JavaScript, and embeds its plots as SVG data URIs: opened offline it needs nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from evaluator.analysis.agreement.agreement import MIN_OVERLAP
from evaluator.analysis.intervals import format_ci, format_p
from evaluator.analysis.minimum import MIN_LABELS_DIFFERENCE, MIN_LABELS_ESTIMATE
from evaluator.data.files import write_bytes_atomic
from evaluator.report import decision_plots as dp
from evaluator.report import plots as rp
from evaluator.report.build import build_report, status_table
from evaluator.report.data import ReportData, StatusRow
from evaluator.report.decision import number
from evaluator.report.notes import AGREEMENT_STATISTICS, meaningless_note
from evaluator.report.targets import (
    Target,
    case_files,
    check_target,
    refuse_inputs,
    refuse_recorded_input,
)

TEMPLATE = "report.html.j2"
# In every page's head: how an existing file is known to be a report (replaced without
# --overwrite).
GENERATOR_TAG = '<meta name="generator" content="evaluator report">'
REPORT_SUFFIXES = (".html", ".htm")
CSP = ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; "
       "form-action 'none'")


def _num(value: Any, digits: int = 2) -> str:
    return number(value, digits)  # never "-0.00"; the decision's sentences print the same


def _ci(pair: Sequence[float | None] | None, digits: int = 2) -> str:
    return format_ci(pair, digits)


def _pct(rate: float | None) -> str:
    return "-" if rate is None else f"{100 * rate:.1f}%"


def css_string(value: Any) -> Markup:
    """``value`` as a quoted CSS string for the page's ``<style>`` (the printed pages'
    header). Everything but ASCII letters, digits and spaces becomes a CSS hex escape, so no
    quote, backslash, newline or ``</style>`` can end the string or the element: a rubric
    or judge name is data, never style. Marked safe because HTML escaping does not apply
    inside ``<style>`` (an ``&amp;`` there would be printed as it is)."""
    escaped = "".join(ch if ch == " " or (ch.isascii() and ch.isalnum())
                      else f"\\{ord(ch):x} " for ch in str(value))
    return Markup(f'"{escaped}"')


def page_header(report: ReportData) -> str:
    """The line at the top of every printed page: rubric, judge(s) and when it was made."""
    return f"{report.rubric.name} · {', '.join(report.judges)} · generated {report.generated}"


def environment() -> Any:
    """The Jinja2 environment: the package's templates, autoescape always on."""
    # autoescape=True, not select_autoescape: the template's name ends in .j2, which
    # select_autoescape would not escape.
    env = Environment(loader=PackageLoader("evaluator.report", "templates"), autoescape=True,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(num=_num, ci=_ci, pct=_pct, pval=format_p, css_string=css_string)
    env.globals.update(meaningless_note=meaningless_note,
                       agreement_statistics=AGREEMENT_STATISTICS, min_overlap=MIN_OVERLAP,
                       min_labels=MIN_LABELS_ESTIMATE, min_pair_labels=MIN_LABELS_DIFFERENCE)
    return env


def _plots(report: ReportData, statuses: list[StatusRow]) -> dict[str, str]:
    """Every plot as a data URI by name, or only a note when matplotlib is missing."""
    if not rp.plots_available():
        return {"note": f"plots need the report extra (matplotlib): {rp.REPORT_EXTRA_HINT}"}
    files = report.files
    plots = {"status": rp.status_plot(report.statuses, statuses)}
    decision = report.decision
    if decision is not None and decision.outcomes:
        plots["decision_forest"] = dp.forest_plot([o.model_dump() for o in decision.outcomes])
        if decision.differences:
            plots["decision_differences"] = dp.difference_plot(
                [d.model_dump() for d in decision.differences])
    for field in report.criteria:
        series = [f.summary.criteria[field.key].model_dump() for f in files]
        if report.expected:
            # Expected scores are not categories: a histogram, like an aggregate's.
            series = [dict(item, values=f.values[field.key])
                      for item, f in zip(series, files)]
            plots[field.key] = rp.aggregate_plot(f"{field.key} (expected score)", series)
        else:
            plots[field.key] = rp.criterion_plot(field.key, field.allowed, series)
    for name in report.confidence_criteria:
        series = [{"values": f.confidence["criteria"].get(name, {}).get("values", [])}
                  for f in files]
        if any(item["values"] for item in series):
            plots[f"confidence:{name}"] = rp.confidence_plot(name, series)
    for agg in report.aggregates:
        series = [dict(f.summary.aggregates[agg.name].model_dump(),
                       values=f.values[agg.name]) for f in files]
        plots[agg.name] = rp.aggregate_plot(agg.name, series)
    keys = list(report.rubric.pass_thresholds)
    if keys:
        plots["pass_rates"] = rp.pass_rate_plot(
            keys, [{"rates": {k: r.model_dump() for k, r in f.summary.pass_rates.items()}}
                   for f in files])
    return plots


def render_html(report: ReportData, *, plots: bool = True) -> str:
    """The report page as a string (``plots=False`` leaves the plots out)."""
    statuses = status_table(report)
    drawn = _plots(report, statuses) if plots else {"note": "plots left out"}
    template = environment().get_template(TEMPLATE)
    return template.render(report=report, status_rows=statuses, plots=drawn, csp=CSP,
                           generator=GENERATOR_TAG, page_header=page_header(report))


def is_report_file(path: Path) -> bool:
    """Whether ``path`` is a page :func:`write_report` wrote (its generator tag, or the title
    pages had before the tag), judged from its first 4 KiB."""
    try:
        with Path(path).open("rb") as handle:
            head = handle.read(4096)
    except OSError:
        return False
    return head.startswith(b"<!DOCTYPE html>") and (
        GENERATOR_TAG.encode() in head or b"<title>Evaluation report: " in head)


REPORT_TARGET = Target("report", "--html", REPORT_SUFFIXES, is_report_file)


def write_report(results: Sequence[Path], output: Path, *, overwrite: bool = False,
                 finish: Callable[[ReportData], Any] | None = None, **options: Any) -> Path:
    """Build the report for ``results`` (see :func:`evaluator.report.build.build_report` for
    the options) and write it to ``output`` (mode 0600: with ``show_text`` it holds case
    text). ``output`` must end in .html or .htm. An existing ``output`` is replaced only when
    it is a report (:func:`is_report_file`) or with ``overwrite``; never when it is one of
    ``results``, a labels file or a case file the records name, or a symbolic link
    (:class:`evaluator.data.files.OutputRefused`). ``finish`` completes the built report
    before it is rendered (a study adds its block)."""
    output = Path(output)
    labels, cases = options.get("labels"), options.get("cases")
    sources = ([Path(p) for p in results] + list(labels.paths if labels else ())
               + ([cases.path] if cases and cases.path else []))
    check_target(output, sources, overwrite, REPORT_TARGET)
    report = build_report(results, **options)
    if finish is not None:
        finish(report)
    # The case files the runs read (named in the records) are inputs too.
    named = set().union(*(case_files(Path(entry.path),
                                     {r.input_file for r in entry.records if r.input_file})
                          for entry in report.files))
    refuse_inputs(output, sorted(named), REPORT_TARGET)
    refuse_recorded_input(output, [Path(p) for p in results], REPORT_TARGET)
    page = render_html(report)
    write_bytes_atomic(output, page.encode("utf-8"))
    return output
