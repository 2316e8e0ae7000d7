"""The standard every figure is held to, as a check: ``problems(fig, runs)`` lists what keeps a
reader from decoding a figure (empty list: none). Used by the tests on every figure function;
call it on a new figure before adding it.

- a title;
- every axis that shows data labelled (an axis matched to a labelled one counts as labelled);
- plotly: every trace named and either in a shown legend or labelled in place (text, a heatmap's
  colorbar, or a repeat of a legend entry in another panel); no legend entry twice in a legend;
  hover numbers formatted by ``fmt`` (no d3 ``g``/``e`` formats);
- matplotlib: an axes with more than one series has a legend (its own or the figure's), legend
  entries unique and named; no tick offset ("1e4" beside an axis);
- no line drawn exactly over another in the same panel (one would hide the other);
- numbers as people read them everywhere text is shown: no scientific notation, no fraction
  with more than 3 significant digits, separators from 10,000 on;
- ``runs`` given (base first): a series named after a run is drawn in that run's color, and the
  base and candidate colors are used for nothing but runs.
"""
from __future__ import annotations

import html
import re

from .style import run_colors

SCIENTIFIC = re.compile(r"(?<![\w.])\d+(\.\d+)?e[+-]?\d+\b", re.IGNORECASE)
LONG_DECIMALS = re.compile(r"(?<![\w.])(?:0\.0*[1-9]\d{3,}|[1-9]\d*\.\d{4,})(?![\w])")
UNSEPARATED = re.compile(r"(?<![\w.,\-:/#@])\d{5,}(?![\w.,:])")
TAG = re.compile(r"<[^>]+>")
BAD_HOVER_FORMAT = re.compile(r"%\{[^}:]*:[^}]*[eEgG]\}")


def text_problems(texts, where: str) -> list[str]:
    """Numbers not formatted for people in the given strings."""
    found = []
    for text in texts:
        if not isinstance(text, str) or not text:
            continue
        plain = html.unescape(TAG.sub(" ", text))
        for pattern, what in ((SCIENTIFIC, "scientific notation"), (LONG_DECIMALS, "more than 3 significant digits"),
                              (UNSEPARATED, "no thousands separator")):
            m = pattern.search(plain)
            if m:
                found.append(f"{where}: {what} in {plain[max(0, m.start() - 30):m.end() + 10]!r}")
                break
    return found


def _hex(color) -> str | None:
    if isinstance(color, str) and color.startswith("#") and len(color) in (7, 9):
        return color[:7].lower()
    return None


def problems(fig, runs=()) -> list[str]:
    """What keeps a reader from decoding ``fig`` (plotly or matplotlib); empty when nothing."""
    if hasattr(fig, "to_plotly_json"):
        return _plotly(fig, list(runs))
    return _matplotlib(fig, list(runs))


def _run_color_problems(series: list[tuple[str, str | None, str]], runs: list[str], where: str) -> list[str]:
    """series: (name, hex color, group). A series named after a run has the run's color; the
    base and candidate colors mean runs only."""
    if not runs:
        return []
    colors = run_colors(runs)
    reserved = {colors[r].lower(): r for r in runs[:2]}
    out = []
    for name, color, group in series:
        plain = html.unescape(TAG.sub("", name or ""))
        owner = next((r for r in sorted(runs, key=len, reverse=True)
                      if plain == r or plain.startswith((r + " ", r + ":", r + " (")) or group == r), None)
        if owner is not None and color is not None and color != colors[owner].lower():
            out.append(f"{where}: {plain!r} is about run {owner!r} but drawn in {color}, not {colors[owner]}")
        if owner is None and color in reserved and not any(r in plain for r in runs):
            out.append(f"{where}: {plain!r} is drawn in {color}, the color of run {reserved[color]!r}, "
                       "but is not about that run")
    return out


# ---- plotly -------------------------------------------------------------------------------

def _axis_name(ref: str, kind: str) -> str:
    return f"{kind}axis{ref[1:]}"


def _trace_color(trace) -> str | None:
    for getter in (lambda t: t.marker.color, lambda t: t.line.color):
        try:
            color = _hex(getter(trace))
        except (AttributeError, ValueError):
            color = None
        if color:
            return color
    return None


def _plotly(fig, runs: list[str]) -> list[str]:
    out: list[str] = []
    layout = fig.layout
    title = layout.title.text if layout.title else None
    if not (title or "").strip():
        out.append("plotly: no title")
    traces = list(fig.data)
    listed = [t for t in traces if t.showlegend is not False]
    legend_shown = layout.showlegend is True or (layout.showlegend is None and len(listed) >= 2)
    shown_names = {(t.legendgroup, t.name) for t in listed} if legend_shown else set()
    seen: dict[tuple, int] = {}
    series = []
    drawn: dict[tuple, str] = {}
    for i, t in enumerate(traces):
        name = (t.name or "").strip()
        where = f"plotly trace {i} ({t.type} {name!r})"
        if not name:
            out.append(f"{where}: no name")
        in_legend = legend_shown and t.showlegend is not False
        labelled = ("text" in (getattr(t, "mode", None) or "") and t.text is not None) or \
                   (t.type == "heatmap" and bool(t.colorbar and t.colorbar.title and t.colorbar.title.text)) or \
                   (t.legendgroup is not None and (t.legendgroup, t.name) in shown_names)
        if not (in_legend or labelled):
            out.append(f"{where}: neither in a shown legend nor labelled in place")
        if in_legend:
            key = (getattr(t, "legend", None) or "legend", name)
            seen[key] = seen.get(key, 0) + 1
        for ref, kind in ((getattr(t, "xaxis", None) or "x", "x"), (getattr(t, "yaxis", None) or "y", "y")):
            axis = layout[_axis_name(ref, kind)]
            titled = bool(axis.title and axis.title.text)
            if not titled and axis.matches:
                other = layout[_axis_name(axis.matches, kind)]
                titled = bool(other.title and other.title.text)
            if not titled:
                out.append(f"{where}: its {kind} axis ({ref}) has no title")
        template = t.hovertemplate
        templates = template if isinstance(template, (list, tuple)) else [template]
        for tpl in templates:
            if isinstance(tpl, str) and BAD_HOVER_FORMAT.search(tpl):
                out.append(f"{where}: hover formats numbers with d3 g/e ({tpl[:80]!r}); format them with fmt")
        texts = [name]
        for attr in ("hovertext", "text"):
            value = getattr(t, attr, None)
            if isinstance(value, str):
                texts.append(value)
            elif value is not None:
                texts += [v for row in value for v in (row if isinstance(row, (list, tuple)) else [row])
                          if isinstance(v, str)]
        out += text_problems(texts, where)
        series.append((name, _trace_color(t), t.legendgroup))
        mode = getattr(t, "mode", "markers")  # a scatter without a mode draws lines (up to 20 points)
        if t.type == "scatter" and (mode is None or "lines" in mode) and t.x is not None and len(t.x) > 1:
            key = (t.xaxis, t.yaxis, tuple(t.x), tuple(t.y))
            if key in drawn:
                out.append(f"{where}: drawn exactly over {drawn[key]!r}, which it hides")
            drawn.setdefault(key, name)
    out += [f"plotly: legend entry {name!r} appears {n} times in {legend}" for (legend, name), n in seen.items()
            if n > 1]
    axis_titles = [layout[k].title.text for k in layout if k.startswith(("xaxis", "yaxis")) and layout[k].title]
    annotations = [a.text for a in layout.annotations or ()]
    out += text_problems([title or ""] + axis_titles + annotations, "plotly layout")
    out += _run_color_problems(series, runs, "plotly")
    return sorted(set(out), key=out.index)


# ---- matplotlib ---------------------------------------------------------------------------

def _data_axes(fig):
    bars = {cb for cb in (getattr(a, "_colorbar", None) for a in fig.axes) if cb is not None}
    return [ax for ax in fig.axes if not hasattr(ax, "_colorbar") and ax not in bars
            and (ax.lines or ax.collections or ax.patches or ax.images)]


def _series(ax) -> int:
    """Data series on ``ax``: lines with data (reference lines across the axes left out),
    collections and containers (their parts counted once)."""
    parts = set()
    for c in ax.containers:
        parts.update(id(a) for a in c.get_children() if a is not None)
        if hasattr(c, "lines"):
            for item in c.lines:
                items = item if isinstance(item, (list, tuple)) else [item]
                parts.update(id(a) for a in items if a is not None)
    n = len(ax.containers)
    for line in ax.lines:
        if id(line) in parts or len(line.get_xdata()) == 0 or line.get_transform() != ax.transData:
            continue
        n += 1
    n += sum(1 for c in ax.collections if id(c) not in parts)
    return n


def _handle_color(handle) -> str | None:
    from matplotlib.colors import to_hex

    for getter in ("get_color", "get_facecolor", "get_edgecolor"):
        try:
            value = getattr(handle, getter)()
        except (AttributeError, TypeError):
            continue
        try:
            if hasattr(value, "__len__") and len(value) and not isinstance(value, str) and \
                    hasattr(value[0], "__len__"):
                value = value[0]
            return to_hex(value).lower()
        except (ValueError, TypeError, IndexError):
            continue
    return None


def _matplotlib(fig, runs: list[str]) -> list[str]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    out: list[str] = []
    if fig.canvas is None or not hasattr(fig.canvas, "draw") or type(fig.canvas).__name__ == "FigureCanvasBase":
        FigureCanvasAgg(fig)
    fig.canvas.draw()
    axes = _data_axes(fig)
    suptitle = fig._suptitle.get_text() if fig._suptitle else ""
    if not suptitle.strip() and not (axes and axes[0].get_title().strip()):
        out.append("matplotlib: no title (neither the figure's nor the first panel's)")
    texts = [suptitle]
    legends = list(fig.legends)
    series = []
    for i, ax in enumerate(axes):
        where = f"matplotlib panel {i} ({ax.get_title()!r})"
        for kind, label, siblings in (("x", ax.get_xlabel(), ax.get_shared_x_axes().get_siblings(ax)),
                                      ("y", ax.get_ylabel(), ax.get_shared_y_axes().get_siblings(ax))):
            if not label.strip() and not any(getattr(s, f"get_{kind}label")().strip() for s in siblings
                                              if s in axes):
                out.append(f"{where}: no {kind} axis label")
        if _series(ax) > 1 and ax.get_legend() is None and not fig.legends:
            out.append(f"{where}: {_series(ax)} series and no legend")
        if ax.get_legend() is not None:
            legends.append(ax.get_legend())
        drawn: dict[tuple, str] = {}
        for line in ax.lines:
            if line.get_linestyle() in ("None", "", " ") or len(line.get_xdata()) < 2:
                continue
            key = (tuple(map(float, line.get_xdata())), tuple(map(float, line.get_ydata())))
            if key in drawn:
                out.append(f"{where}: {line.get_label()!r} is drawn exactly over {drawn[key]!r}, which it hides")
            drawn.setdefault(key, line.get_label())
        for axis, name in ((ax.xaxis, "x"), (ax.yaxis, "y")):
            offset = axis.get_offset_text().get_text()
            if offset.strip():
                out.append(f"{where}: {name} tick labels carry an offset {offset!r}; format ticks with fmt")
            texts += [t.get_text() for t in axis.get_ticklabels()]
        texts += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()] + [t.get_text() for t in ax.texts]
    for j, legend in enumerate(legends):
        labels = [t.get_text() for t in legend.get_texts()]
        texts += labels
        if any(not label.strip() for label in labels):
            out.append(f"matplotlib legend {j}: an entry without a name")
        dupes = sorted({label for label in labels if labels.count(label) > 1})
        if dupes:
            out.append(f"matplotlib legend {j}: entries {dupes} appear more than once")
        handles = getattr(legend, "legend_handles", None) or getattr(legend, "legendHandles", [])
        series += [(label, _handle_color(h), None) for label, h in zip(labels, handles)]
    out += text_problems(texts, "matplotlib")
    out += _run_color_problems(series, runs, "matplotlib")
    return sorted(set(out), key=out.index)
