"""The Decision section's two plots (:mod:`evaluator.report.decision` gives their data):
the forest plot (per outcome, each system's judge-only, labels-only and PPI++ estimate with
its 95% CI on the rubric's scale) and the difference plot (each difference between systems
with its CI against a zero line).

Drawn for a committee, on screen beside each other and on paper one above the other: black
and greys only, each estimator told apart by marker shape, fill and line style (legible in
greyscale). An interval is clipped at its axis's ends (a mean's normal-approximation CI can
run past the scale) and the clip is marked with an arrowhead; a figure without an interval
is its point with "no interval" beside it; a difference's axis is sized by the criterion's
scale, never by a zero-width interval alone; and a caption is wrapped to its panel's width
so that no two captions overlap. The marks a test looks for carry SVG ids (``gid``):
``clipped-low`` / ``clipped-high``, ``no-interval``, ``no-estimate``.

Text is criterion names and ``#n`` file numbers only: no case text or case id.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

from evaluator.report.plots import drawn_figure, svg_uri

# Forest plot: drawn at the width it prints at (A4 and Letter hold 7 inches), so 8-point text
# stays legible on paper. The difference plot is narrower: beside the forest plot it fits a
# 1,300-pixel window (672 + 432 pixels).
FOREST_WIDTH = 7.0
DIFFERENCE_WIDTH = 4.5
# A difference's axis reaches at least this share of its scale's span either side of 0: a
# difference without an interval (or a tiny one) is drawn on an axis that means something.
MIN_REACH = 0.1
_ESTIMATORS = (
    # (key, row label, marker, filled, line style, line width)
    ("judge", "judge only", "o", False, (0, (4, 2)), 1.2),
    ("labels_only", "labels only", "s", False, (0, (1, 1.5)), 1.4),
    ("ppi", "PPI++", "D", True, "solid", 2.2),
)
_INK = "#000000"
_SMALL = 8  # points: tick labels, row labels, captions
_TITLE = 9
_ROW_LABELS = 0.95  # inches the row labels take left of a row of panels
_LINE = 0.14  # inches one more line of caption takes
CLIPPED = "arrowhead: CI clipped"
# A note's white ground: a grid or zero line never runs through its words.
_BEHIND_NOTE = {"facecolor": "white", "edgecolor": "none", "pad": 0.6}


def clip_interval(ci: Sequence[float], low: float, high: float
                  ) -> tuple[float, float, bool, bool]:
    """An interval as drawn on an axis from ``low`` to ``high``: its ends clipped there,
    and whether the low and the high end were clipped."""
    start, end = float(ci[0]), float(ci[1])
    return max(start, low), min(end, high), start < low, end > high


def difference_reach(differences: Sequence[dict[str, Any]], span: float) -> float:
    """How far either side of 0 a panel of differences reaches: their values and CI ends
    with a margin, at least ``MIN_REACH`` of the scale's ``span`` (a difference with no
    interval, every per-case difference 0, has nothing else to size its axis), at most the
    span (the largest difference the scale allows; a CI end past it is clipped)."""
    ends = [abs(v) for item in differences for v in
            [item["difference"].get("value"), *(item["difference"].get("ci95") or [])]
            if v is not None]
    span = span if span > 0 else 1.0
    return min(max(max(ends, default=0.0) * 1.15, MIN_REACH * span), span)


def _wrap(text: str, inches: float, size: float) -> str:
    """``text`` wrapped to lines that fit ``inches`` at ``size`` points (DejaVu Sans: about
    0.55 em a character in words, on the generous side)."""
    width = max(8, int(inches * 72 / (0.55 * size)))
    return "\n".join(textwrap.wrap(text, width, break_long_words=True)) or text


def _title(criterion: str, kind: str) -> str:
    return criterion if kind == "mean" else f"{criterion} ({kind})"


def _interval_row(axes: Any, y: float, figure: dict[str, Any], style: tuple,
                  bounds: tuple[float, float]) -> bool:
    """One estimate as a point and its 95% CI bar, clipped to ``bounds`` (an arrowhead at a
    clipped end); "no interval" beside a point without one. Returns whether it clipped."""
    marker, filled, line, width = style
    value, ci = figure.get("value"), figure.get("ci95")
    low, high = bounds
    if value is None:
        axes.annotate("no estimate", ((low + high) / 2, y), ha="center", va="center",
                      fontsize=_SMALL - 1, gid="no-estimate", bbox=_BEHIND_NOTE)
        return False
    clipped = False
    if ci:
        start, end, cut_low, cut_high = clip_interval(ci, low, high)
        clipped = cut_low or cut_high
        axes.plot([start, end], [y, y], color=_INK, linestyle=line, linewidth=width,
                  solid_capstyle="butt")
        for at, cut, arrow, name in ((start, cut_low, "<", "clipped-low"),
                                     (end, cut_high, ">", "clipped-high")):
            if cut:
                axes.plot([at], [y], marker=arrow, markersize=5, color=_INK,
                          linestyle="none", gid=name)
            else:
                axes.plot([at, at], [y - 0.18, y + 0.18], color=_INK, linewidth=1.0)
    else:
        # Beside the point, on the side with more room.
        right = value <= (low + high) / 2
        axes.annotate("no interval", (min(max(value, low), high), y),
                      xytext=(7 if right else -7, 0), textcoords="offset points",
                      ha="left" if right else "right", va="center", fontsize=_SMALL - 1,
                      gid="no-interval", bbox=_BEHIND_NOTE)
    axes.plot([min(max(value, low), high)], [y], marker=marker, markersize=6, color=_INK,
              markerfacecolor=_INK if filled else "white", markeredgewidth=1.3,
              linestyle="none", zorder=3)
    return clipped


def _columns(panels: int) -> int:
    """Panels per row: two, or three where that saves a row (3, 5, 6 panels: a rubric's
    three criteria in one row keep the decision on one printed page)."""
    return 3 if panels in (3, 5, 6) or panels > 8 else min(2, max(panels, 1))


def _panel_rows(panels: int) -> int:
    return -(-max(panels, 1) // _columns(panels))


def _panel_width(width: float, panels: int) -> float:
    """Inches one panel has for its captions."""
    return (width - _ROW_LABELS) / _columns(panels) - 0.1


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


def _extra_lines(texts: Sequence[Sequence[str]], panels: int) -> float:
    """Inches for the wrapped captions' lines beyond one each, per row of panels (the
    panel with the most in each row); ``texts``: each panel's captions."""
    columns = _columns(panels)
    extra = [sum(text.count("\n") for text in captions) for captions in texts]
    return sum(max(extra[i:i + columns]) for i in range(0, len(extra), columns)) * _LINE


def _forest_captions(outcomes: Sequence[dict[str, Any]]) -> list[tuple[str, str, bool]]:
    """Per outcome: its title and axis caption, wrapped to the panel, and whether an
    interval of it is clipped at the scale."""
    inches = _panel_width(FOREST_WIDTH, len(outcomes))
    out = []
    for outcome in outcomes:
        low, high = outcome["scale"]
        clipped = any(clip_interval(f["ci95"], low, high)[2:] != (False, False)
                      for system in outcome["systems"] for key, *_ in _ESTIMATORS
                      if (f := system[key]).get("ci95") and f.get("value") is not None)
        caption = outcome["scale_text"] + (f"; {CLIPPED}" if clipped else "")
        out.append((_wrap(_title(outcome["criterion"], outcome["kind"]), inches, _TITLE),
                    _wrap(caption, inches, _SMALL), clipped))
    return out


def forest_figure(outcomes: Sequence[dict[str, Any]]) -> Any:
    """The forest plot as a laid-out matplotlib Figure (:func:`forest_plot` writes it)."""
    gap = 0.6  # between one system's rows and the next's
    rows = max((3 * len(o["systems"]) + gap * (len(o["systems"]) - 1) for o in outcomes),
               default=3)
    captions = _forest_captions(outcomes)

    def draw(figure: Any) -> None:
        panels, every = _grid(figure, len(outcomes)), []
        for axes, outcome, (title, caption, _) in zip(panels, outcomes, captions):
            low, high = outcome["scale"]
            pad = 0.04 * (high - low)
            ticks, labels = [], []
            y = 0.0
            for system in outcome["systems"]:
                for key, label, *style in _ESTIMATORS:
                    _interval_row(axes, y, system[key], tuple(style), (low, high))
                    ticks.append(y)
                    labels.append(f"#{system['number']} {label}")
                    y += 1
                y += gap
            axes.set_yticks(ticks, labels, fontsize=_SMALL)
            axes.set_ylim(rows - 0.5, -0.6)
            axes.set_xlim(low - pad, high + pad)
            axes.tick_params(axis="x", labelsize=_SMALL)
            axes.grid(axis="x", color="#bbbbbb", linewidth=0.6)
            axes.set_title(title, fontsize=_TITLE)
            axes.set_xlabel(caption, fontsize=_SMALL)
            every.append(labels)
        _row_labels_once(panels, every)

    height = (_panel_rows(len(outcomes)) * (0.62 + 0.16 * rows)
              + _extra_lines([c[:2] for c in captions], len(outcomes)))
    return drawn_figure(draw, height, FOREST_WIDTH)


def forest_plot(outcomes: Sequence[dict[str, Any]]) -> str:
    """Per outcome (a panel, the outcome's scale as the x range): for each system ``#n``
    the judge-only mean, the labels-only estimate and the PPI++ estimate, each a point with
    its 95% CI (clipped at the scale, the clip marked). ``outcomes`` items: ``criterion``,
    ``kind``, ``scale`` (low, high), ``scale_text`` and ``systems`` (``number`` and a
    ``judge`` / ``labels_only`` / ``ppi`` figure each: ``value``, ``ci95``). An SVG data
    URI."""
    return svg_uri(forest_figure(outcomes))


DIFFERENCE_CAPTION = "later − earlier system, 95% CI; dashed line: no difference"


def difference_figure(differences: Sequence[dict[str, Any]]) -> Any:
    """The difference plot as a laid-out matplotlib Figure (:func:`difference_plot`)."""
    by_outcome: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for item in differences:
        by_outcome.setdefault((item["criterion"], item["kind"]), []).append(item)
    rows = max((len(items) for items in by_outcome.values()), default=1)
    inches = _panel_width(DIFFERENCE_WIDTH, len(by_outcome))
    titles = [_wrap(_title(criterion, kind), inches, _TITLE) for criterion, kind in by_outcome]
    # One caption for the whole figure, under it: three panels' captions side by side
    # would run into each other.
    reaches = [difference_reach(items, _span(items)) for items in by_outcome.values()]
    clipped = any(clip_interval(i["difference"]["ci95"], -reach, reach)[2:] != (False, False)
                  for items, reach in zip(by_outcome.values(), reaches) for i in items
                  if i["difference"].get("ci95") and i["difference"].get("value") is not None)
    caption = _wrap(DIFFERENCE_CAPTION + (f"; {CLIPPED}" if clipped else ""),
                    DIFFERENCE_WIDTH - 0.2, _SMALL)

    def draw(figure: Any) -> None:
        panels, every = _grid(figure, len(by_outcome)), []
        for axes, items, title, reach in zip(panels, by_outcome.values(), titles, reaches):
            axes.axvline(0.0, color=_INK, linewidth=1.0, linestyle=(0, (3, 2)))
            for y, item in enumerate(items):
                _interval_row(axes, y, item["difference"], ("D", True, "solid", 2.2),
                              (-reach, reach))
            labels = [f"#{i['b_number']} − #{i['a_number']}" for i in items]
            axes.set_yticks(range(len(items)), labels, fontsize=_SMALL)
            every.append(labels)
            axes.set_ylim(rows - 0.5, -0.5)
            axes.set_xlim(-reach * 1.04, reach * 1.04)
            axes.xaxis.set_major_locator(_symmetric_ticks())
            axes.tick_params(axis="x", labelsize=_SMALL)
            axes.grid(axis="x", color="#bbbbbb", linewidth=0.6)
            axes.set_title(title, fontsize=_TITLE)
        _row_labels_once(panels, every)
        figure.supxlabel(caption, fontsize=_SMALL)

    height = (_panel_rows(len(by_outcome)) * (0.6 + 0.22 * rows) + 0.2
              + _extra_lines([[t] for t in titles], len(by_outcome))
              + caption.count("\n") * _LINE)
    return drawn_figure(draw, height, DIFFERENCE_WIDTH)


def _span(items: Sequence[dict[str, Any]]) -> float:
    """The width of the differences' outcome's scale (1 without one: a pass rate's)."""
    low, high = items[0].get("scale") or (0.0, 1.0)
    return high - low


def _symmetric_ticks() -> Any:
    # Imported here: matplotlib (the report extra), which `import evaluator` never loads.
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(nbins=4, symmetric=True)


def difference_plot(differences: Sequence[dict[str, Any]]) -> str:
    """Per outcome (a panel), each difference between systems (``#b − #a``) as a point with
    its 95% CI against a zero line, on an axis sized by :func:`difference_reach`.
    ``differences`` items: ``criterion``, ``kind``, ``scale``, ``a_number``, ``b_number`` and
    ``difference`` (``value``, ``ci95``). An SVG data URI."""
    return svg_uri(difference_figure(differences))
