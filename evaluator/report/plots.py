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
from typing import Any

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


def _render(draw: Callable[[Any], None], height: float, width: float = _WIDTH) -> str:
    """Draw on a fresh Figure and return it as an SVG data URI (deterministic bytes)."""
    # Imported here: matplotlib (the report extra), which `import evaluator` never loads.
    import matplotlib
    from matplotlib.figure import Figure

    # Text as paths (no font lookup in the browser), no mathtext ($ stays $), stable ids.
    with matplotlib.rc_context({"svg.fonttype": "path", "svg.hashsalt": "evaluator-report",
                                "text.parse_math": False, "font.size": 9}):
        figure = Figure(figsize=(width, height), layout="constrained")
        draw(figure)
        buffer = io.BytesIO()
        figure.savefig(buffer, format="svg", metadata={key: None for key in _NO_METADATA})
    # The DOCTYPE names the SVG 1.1 DTD by URL; no browser fetches it, but the page should
    # name no URL at all. What remains are xmlns namespace names, which are never loaded.
    svg = re.sub(rb"<!DOCTYPE[^>]*>\s*", b"", buffer.getvalue(), count=1)
    return "data:image/svg+xml;base64," + base64.b64encode(svg).decode("ascii")


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


def status_plot(statuses: Sequence[str], rows: Sequence[dict[str, Any]]) -> str:
    """Stacked bars: each file's cases by status (share of its cases)."""

    def draw(figure: Any) -> None:
        axes = figure.subplots()
        for index, row in enumerate(rows):
            start = 0.0
            total = row["cases"] or 1
            for status, count in zip(statuses, row["counts"]):
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


# The Decision section's plots: drawn at the width they print at (A4 and Letter hold 7
# inches), so 9-point text stays 9 points on paper. Black and greys only; each estimator has
# its own marker, fill and line style, legible in greyscale.
_DECISION_WIDTH = 7.0
_ESTIMATORS = (
    # (key, row label, marker, filled, line style, line width)
    ("judge", "judge only", "o", False, (0, (4, 2)), 1.2),
    ("labels_only", "labels only", "s", False, (0, (1, 1.5)), 1.4),
    ("ppi", "PPI++", "D", True, "solid", 2.2),
)
_INK = "#000000"


def _interval_row(axes: Any, y: float, figure: dict[str, Any], marker: str, filled: bool,
                  style: Any, width: float, right: float) -> None:
    """One estimate as a point and its 95% CI bar; "no CI" beside a point without one."""
    value, ci = figure.get("value"), figure.get("ci95")
    if value is None:
        axes.text(right, y, "no estimate ", ha="right", va="center", fontsize=8)
        return
    if ci:
        axes.plot([ci[0], ci[1]], [y, y], color=_INK, linestyle=style, linewidth=width,
                  solid_capstyle="butt")
        axes.plot([ci[0], ci[0]], [y - 0.18, y + 0.18], color=_INK, linewidth=1.0)
        axes.plot([ci[1], ci[1]], [y - 0.18, y + 0.18], color=_INK, linewidth=1.0)
    else:
        axes.text(right, y, "no CI ", ha="right", va="center", fontsize=8)
    axes.plot([value], [y], marker=marker, markersize=6, color=_INK,
              markerfacecolor=_INK if filled else "white", markeredgewidth=1.3,
              linestyle="none", zorder=3)


def _columns(panels: int) -> int:
    """Panels per row: two, or three where that saves a row (3, 5, 6 panels: a rubric's
    three criteria in one row keep the decision on one printed page)."""
    return 3 if panels in (3, 5, 6) or panels > 8 else min(2, max(panels, 1))


def _panel_rows(panels: int) -> int:
    return -(-max(panels, 1) // _columns(panels))


def _grid(figure: Any, panels: int) -> list[Any]:
    columns = _columns(panels)
    axes = figure.subplots(_panel_rows(panels), columns, squeeze=False).ravel().tolist()
    for extra in axes[panels:]:
        extra.set_axis_off()
    return axes[:panels]


def _row_labels_once(panels: Sequence[Any], labels: Sequence[Sequence[str]]) -> None:
    """Row labels ("#1 PPI++") on the first panel of each row of panels only, where the
    panels beside it have the same rows: the others get the width instead."""
    columns = _columns(len(panels))
    for index, axes in enumerate(panels):
        first = index - index % columns
        if index % columns and list(labels[index]) == list(labels[first]):
            axes.tick_params(axis="y", labelleft=False)


def forest_plot(outcomes: Sequence[dict[str, Any]]) -> str:
    """Per outcome (a panel, the outcome's scale as the x range): for each system ``#n``
    the judge-only mean, the labels-only estimate and the PPI++ estimate, each a point with
    its 95% CI. ``outcomes`` items: ``criterion``, ``kind``, ``scale`` (low, high),
    ``scale_text`` and ``systems`` (``number`` and a ``judge`` / ``labels_only`` / ``ppi``
    figure each: ``value``, ``ci95``)."""
    gap = 0.6  # between one system's rows and the next's
    rows = max((3 * len(o["systems"]) + gap * (len(o["systems"]) - 1) for o in outcomes),
               default=3)

    def draw(figure: Any) -> None:
        panels, every = _grid(figure, len(outcomes)), []
        for axes, outcome in zip(panels, outcomes):
            low, high = outcome["scale"]
            pad = 0.04 * (high - low)
            ticks, labels = [], []
            y = 0.0
            for system in outcome["systems"]:
                for key, title, marker, filled, style, width in _ESTIMATORS:
                    _interval_row(axes, y, system[key], marker, filled, style, width,
                                  high + pad)
                    ticks.append(y)
                    labels.append(f"#{system['number']} {title}")
                    y += 1
                y += gap
            axes.set_yticks(ticks, labels, fontsize=8)
            axes.set_ylim(rows - 0.5, -0.6)
            axes.set_xlim(low - pad, high + pad)
            axes.tick_params(axis="x", labelsize=8)
            axes.grid(axis="x", color="#bbbbbb", linewidth=0.6)
            axes.set_title(f"{outcome['criterion']} ({outcome['kind']})", fontsize=9)
            axes.set_xlabel(outcome["scale_text"], fontsize=8)
            every.append(labels)
        _row_labels_once(panels, every)

    return _render(draw, _panel_rows(len(outcomes)) * (0.62 + 0.16 * rows), _DECISION_WIDTH)


def difference_plot(differences: Sequence[dict[str, Any]]) -> str:
    """Per outcome (a panel), each difference between systems (``#b − #a``) as a point with
    its 95% CI against a zero line. ``differences`` items: ``criterion``, ``kind``,
    ``a_number``, ``b_number`` and ``difference`` (``value``, ``ci95``)."""
    by_outcome: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for item in differences:
        by_outcome.setdefault((item["criterion"], item["kind"]), []).append(item)
    rows = max((len(items) for items in by_outcome.values()), default=1)

    def draw(figure: Any) -> None:
        panels, every = _grid(figure, len(by_outcome)), []
        for axes, ((criterion, kind), items) in zip(panels, by_outcome.items()):
            ends = [abs(v) for item in items for v in
                    [item["difference"].get("value") or 0.0,
                     *(item["difference"].get("ci95") or [])]]
            reach = max(ends + [1e-3]) * 1.15
            if kind == "pass rate":
                reach = min(reach, 1.0)
            axes.axvline(0.0, color=_INK, linewidth=1.0, linestyle=(0, (3, 2)))
            for y, item in enumerate(items):
                _interval_row(axes, y, item["difference"], "D", True, "solid", 2.2, reach)
            labels = [f"#{i['b_number']} − #{i['a_number']}" for i in items]
            axes.set_yticks(range(len(items)), labels, fontsize=8)
            every.append(labels)
            axes.set_ylim(rows - 0.5, -0.5)
            axes.set_xlim(-reach, reach)
            axes.tick_params(axis="x", labelsize=8)
            axes.grid(axis="x", color="#bbbbbb", linewidth=0.6)
            axes.set_title(f"{criterion}: difference ({kind})", fontsize=9)
            axes.set_xlabel("95% CI; dashed line: no difference", fontsize=8)
        _row_labels_once(panels, every)

    return _render(draw, _panel_rows(len(by_outcome)) * (0.68 + 0.22 * rows), _DECISION_WIDTH)
