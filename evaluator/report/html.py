"""Render :func:`evaluator.report.build.build_report`'s data as one self-contained HTML file.

The page comes from ``evaluator/templates/report.html.j2`` through Jinja2 with autoescape
on (case ids and, with ``--show-text``, case text are hostile input). It carries a
Content-Security-Policy that forbids every load except inline styles and ``data:`` images,
has no JavaScript, and embeds its plots as SVG data URIs: opened offline it needs nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

from evaluator.data.files import write_bytes_atomic
from evaluator.report import plots as rp
from evaluator.report.build import build_report, status_table

TEMPLATE = "report.html.j2"
CSP = ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; "
       "form-action 'none'")


def _num(value: Any, digits: int = 2) -> str:
    if value is None or isinstance(value, bool):
        return "-" if value is None else str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.{digits}f}" if math.isfinite(value) else "-"
    return str(value)


def _ci(pair: Sequence[float | None] | None, digits: int = 2) -> str:
    if not pair or pair[0] is None or pair[1] is None:
        return "-"
    return f"[{pair[0]:.{digits}f}, {pair[1]:.{digits}f}]"


def _pct(rate: float | None) -> str:
    return "-" if rate is None else f"{100 * rate:.1f}%"


def environment() -> Any:
    """The Jinja2 environment: the package's templates, autoescape always on."""
    # autoescape=True, not select_autoescape: the template's name ends in .j2, which
    # select_autoescape would not escape.
    env = Environment(loader=PackageLoader("evaluator.report", "templates"), autoescape=True,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(num=_num, ci=_ci, pct=_pct)
    return env


def _plots(report: dict[str, Any], statuses: list[dict[str, Any]]) -> dict[str, Any]:
    """Every plot as a data URI, or an empty dict with a note when matplotlib is missing."""
    if not rp.plots_available():
        return {"note": f"plots need the report extra (matplotlib): {rp.REPORT_EXTRA_HINT}"}
    files = report["files"]
    plots: dict[str, Any] = {"status": rp.status_plot(report["statuses"], statuses)}
    for field in report["criteria"]:
        series = [dict(f["summary"]["criteria"][field.key]) for f in files]
        plots[field.key] = rp.criterion_plot(field.key, field.allowed, series)
    for agg in report["aggregates"]:
        series = [dict(f["summary"]["aggregates"][agg.name], values=f["values"][agg.name])
                  for f in files]
        plots[agg.name] = rp.aggregate_plot(agg.name, series)
    keys = list(report["rubric"].pass_thresholds)
    if keys:
        plots["pass_rates"] = rp.pass_rate_plot(
            keys, [{"rates": f["summary"]["pass_rates"]} for f in files])
    return plots


def render_html(report: dict[str, Any], *, plots: bool = True) -> str:
    """The report page as a string (``plots=False`` leaves the plots out)."""
    statuses = status_table(report)
    drawn = _plots(report, statuses) if plots else {"note": "plots left out"}
    template = environment().get_template(TEMPLATE)
    return template.render(report=report, status_rows=statuses, plots=drawn, csp=CSP)


def write_report(results: Sequence[Path], output: Path, **options: Any) -> Path:
    """Build the report for ``results`` (see :func:`evaluator.report.build.build_report` for the
    options) and write it to ``output`` (mode 0600: with ``show_text`` it holds case text)."""
    page = render_html(build_report(results, **options))
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(output, page.encode("utf-8"))
    return output
