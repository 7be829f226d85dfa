"""Plots for the HTML report, drawn with matplotlib (the ``report`` extra) on its Agg/SVG
backends without pyplot, and returned as ``data:image/svg+xml;base64,...`` URIs so the page
loads nothing from anywhere.

Text in the plots is criterion names, statuses and ``#n`` file numbers (the page's legend
tables give each number's judge and file); no case text or case id is ever drawn. Text is
stored as paths (no fonts needed by the viewer) and math parsing is off, so a ``$`` in a
file name stays a character. matplotlib is imported inside the functions: ``import
evaluator`` never loads it.
"""

from __future__ import annotations

import base64
import io
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evaluator.report.data import StatusRow

REPORT_EXTRA_HINT = "pip install 'evaluator[report]'"
_WIDTH = 9.0
# Metadata matplotlib writes by default (an RDF block with a date and URLs): left out, so the
# same data gives the same bytes and the SVG names no URL.
_NO_METADATA = ("Date", "Creator", "Format", "Type")
_STATUS_COLOURS = {"ok": "#4c9a2a", "invalid_output": "#d62728", "truncated": "#ff7f0e",
                   "too_long": "#9467bd", "input_error": "#8c564b", "backend_error": "#7f7f7f"}


def plots_available() -> bool:
    """Whether matplotlib (the ``report`` extra) is importable."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _colour(index: int) -> str:
    # Imported here: matplotlib (the report extra), which `import evaluator` never loads.
    from matplotlib import colormaps

    return colormaps["tab10"](index % 10)


# Text as paths (no font lookup in the browser), no mathtext ($ stays $), stable ids.
_RC = {"svg.fonttype": "path", "svg.hashsalt": "evaluator-report", "text.parse_math": False,
       "font.size": 9}


def drawn_figure(draw: Callable[[Any], None], height: float, width: float = _WIDTH) -> Any:
    """A fresh matplotlib Figure (constrained layout) with ``draw`` applied and laid out:
    what :func:`svg_uri` writes, and what a test can measure (its texts' extents)."""
    # Imported here: matplotlib (the report extra), which `import evaluator` never loads.
    import matplotlib
    from matplotlib.figure import Figure

    with matplotlib.rc_context(_RC):
        figure = Figure(figsize=(width, height), layout="constrained")
        draw(figure)
        figure.draw_without_rendering()
    return figure


def svg_uri(figure: Any) -> str:
    """``figure`` as an SVG data URI (deterministic bytes, no metadata, no URL)."""
    # Imported here: matplotlib (the report extra), which `import evaluator` never loads.
    import matplotlib

    with matplotlib.rc_context(_RC):
        buffer = io.BytesIO()
        figure.savefig(buffer, format="svg", metadata={key: None for key in _NO_METADATA})
    # The DOCTYPE names the SVG 1.1 DTD by URL; no browser fetches it, but the page should
    # name no URL at all. What remains are xmlns namespace names, which are never loaded.
    svg = re.sub(rb"<!DOCTYPE[^>]*>\s*", b"", buffer.getvalue(), count=1)
    return "data:image/svg+xml;base64," + base64.b64encode(svg).decode("ascii")


def _render(draw: Callable[[Any], None], height: float, width: float = _WIDTH) -> str:
    """Draw on a fresh Figure and return it as an SVG data URI (deterministic bytes)."""
    return svg_uri(drawn_figure(draw, height, width))


def _legend(axes: Any, files: int) -> None:
    """File numbers above the plot, where they cannot hide a bar."""
    axes.legend(fontsize=8, ncols=min(files, 8), loc="lower left", bbox_to_anchor=(0, 1.0),
                frameon=False)


def _means_panel(axes: Any, series: Sequence[dict[str, Any]]) -> None:
    """Mean with its 95% CI, one row per file (``#n``)."""
    for index, item in enumerate(series):
        mean, ci = item.get("mean"), item.get("ci95")
        if mean is None:
            continue
        if ci:
            # max(0, ...): a constant non-integer value (expected scores) can give a mean an
            # ulp outside its bootstrap CI, and matplotlib refuses a negative error bar.
            axes.errorbar([mean], [index], xerr=[[max(0.0, mean - ci[0])],
                                                 [max(0.0, ci[1] - mean)]], fmt="o",
                          color=_colour(index), capsize=4)
        else:
            axes.plot([mean], [index], "o", color=_colour(index))
    axes.set_yticks(range(len(series)), [f"#{i}" for i in range(1, len(series) + 1)])
    axes.set_ylim(len(series) - 0.5, -0.5)
    axes.set_xlabel("mean (95% CI)")
    axes.grid(axis="x", alpha=0.3)


def criterion_plot(key: str, allowed: Sequence[int], series: Sequence[dict[str, Any]]) -> str:
    """Share of judged cases at each allowed value (grouped bars, one colour per file) and
    the means with CIs. ``series`` items: ``counts`` (value -> count), ``n``, ``mean``,
    ``ci95``."""

    def draw(figure: Any) -> None:
        left, right = figure.subplots(1, 2, width_ratios=[2.2, 1])
        width = 0.8 / max(len(series), 1)
        for index, item in enumerate(series):
            n = item["n"] or 1
            shares = [100.0 * item["counts"].get(str(v), 0) / n for v in allowed]
            positions = [p + (index - (len(series) - 1) / 2) * width for p in range(len(allowed))]
            left.bar(positions, shares, width=width, color=_colour(index), label=f"#{index + 1}")
        left.set_xticks(range(len(allowed)), [str(v) for v in allowed])
        left.set_xlabel(f"{key} score")
        left.set_ylabel("% of judged cases")
        _legend(left, len(series))
        left.grid(axis="y", alpha=0.3)
        _means_panel(right, series)

    return _render(draw, 2.8)


def aggregate_plot(name: str, series: Sequence[dict[str, Any]]) -> str:
    """Histogram of an aggregate's values per file (shared bins) and the means with CIs.
    ``series`` items: ``values``, ``mean``, ``ci95``."""

    def draw(figure: Any) -> None:
        # Imported here: matplotlib (the report extra), which `import evaluator` never loads.
        import numpy as np

        left, right = figure.subplots(1, 2, width_ratios=[2.2, 1])
        every = [v for item in series for v in item["values"]]
        bins = np.histogram_bin_edges(every, bins=min(20, max(len(set(every)), 1))) if every \
            else 10
        for index, item in enumerate(series):
            if item["values"]:
                left.hist(item["values"], bins=bins, histtype="step", linewidth=1.5,
                          color=_colour(index), label=f"#{index + 1}")
        left.set_xlabel(name)
        left.set_ylabel("judged cases")
        if every:
            _legend(left, len(series))
        left.grid(axis="y", alpha=0.3)
        _means_panel(right, series)

    return _render(draw, 2.8)


def status_plot(statuses: Sequence[str], rows: Sequence[StatusRow]) -> str:
    """Stacked bars: each file's cases by status (share of its cases)."""

    def draw(figure: Any) -> None:
        axes = figure.subplots()
        for index, row in enumerate(rows):
            start = 0.0
            total = row.cases or 1
            for status, count in zip(statuses, row.counts):
                share = 100.0 * count / total
                axes.barh([index], [share], left=[start], color=_STATUS_COLOURS.get(status),
                          label=status if index == 0 else None)
                start += share
        axes.set_yticks(range(len(rows)), [f"#{i}" for i in range(1, len(rows) + 1)])
        axes.set_ylim(len(rows) - 0.5, -0.5)
        axes.set_xlim(0, 100)
        axes.set_xlabel("% of cases")
        axes.legend(fontsize=8, ncols=len(statuses), loc="lower center",
                    bbox_to_anchor=(0.5, 1.0))

    return _render(draw, 0.9 + 0.35 * len(rows))


def pass_rate_plot(keys: Sequence[str], series: Sequence[dict[str, Any]]) -> str:
    """Pass rate with its Wilson 95% CI per key, one colour per file. ``series`` items:
    ``rates`` (key -> {"rate", "ci95"})."""

    def draw(figure: Any) -> None:
        axes = figure.subplots()
        width = 0.8 / max(len(series), 1)
        for index, item in enumerate(series):
            for position, key in enumerate(keys):
                entry = item["rates"].get(key) or {}
                rate, ci = entry.get("rate"), entry.get("ci95")
                if rate is None:
                    continue
                x = position + (index - (len(series) - 1) / 2) * width
                error = [[100 * (rate - ci[0])], [100 * (ci[1] - rate)]] if ci else None
                axes.bar([x], [100 * rate], width=width, color=_colour(index), yerr=error,
                         capsize=3, label=f"#{index + 1}" if position == 0 else None)
        axes.set_xticks(range(len(keys)), list(keys))
        axes.set_ylim(0, 100)
        axes.set_ylabel("pass rate % (95% CI)")
        _legend(axes, len(series))
        axes.grid(axis="y", alpha=0.3)

    return _render(draw, 2.6)


def confidence_plot(name: str, series: Sequence[dict[str, Any]], bins: int = 10) -> str:
    """Histogram of the judge's confidence (the probability of the value it chose) for one
    criterion, ``bins`` equal bins over [0, 1], one outline per file. ``series`` items:
    ``values`` (the confidences)."""

    def draw(figure: Any) -> None:
        # Imported here: matplotlib (the report extra), which `import evaluator` never loads.
        import numpy as np

        axes = figure.subplots()
        edges = np.linspace(0.0, 1.0, bins + 1)
        drawn = False
        for index, item in enumerate(series):
            if item["values"]:
                axes.hist(item["values"], bins=edges, histtype="step", linewidth=1.5,
                          color=_colour(index), label=f"#{index + 1}")
                drawn = True
        axes.set_xlim(0, 1)
        axes.set_xlabel(f"{name}: confidence (probability of the chosen value)")
        axes.set_ylabel("scores")
        if drawn:
            _legend(axes, len(series))
        axes.grid(axis="y", alpha=0.3)

    return _render(draw, 2.4)
