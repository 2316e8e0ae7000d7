"""Linked exploration: a figure of ``plots.interactive`` as a plotly ``FigureWidget`` whose
clicks open the clicked sample or rollout in the trajectory explorer (``rl.explore``).

    explorer = rl.explore(con, runs=[base, candidate])
    plots.linked(plots.interactive.quadrants(deltas, base, candidate), explorer)

Hovering a point shows what it is (the figure's own hover); a click calls the explorer's
``open_sample`` / ``open_rollout`` / ``open_calls`` with what the trace's ``meta`` and the
point's ``customdata`` name (ids are stored escaped and unescaped here). The linked view is the
figure with the explorer's panel (the list and the trajectory) under it; the explorer shown
elsewhere follows, it is the same widget. Static figures (``plots.static``) stay for export.

The FigureWidget needs ``anywidget`` (plotly 6 and later); without it the figure is shown as it
is, with a note that clicks are not linked.
"""
from __future__ import annotations

import functools
import html

LINKED = ("sample", "rollout", "calls")


def target(meta, point) -> tuple[str, dict]:
    """What a click on a point opens: (explorer method, its keyword arguments), from the trace's
    ``meta`` and the point's ``customdata`` (values escaped, as the figure holds them)."""
    if not isinstance(meta, dict) or meta.get("open") not in LINKED:
        raise ValueError("this trace is not linked to the explorer")
    row = list(point) if isinstance(point, (list, tuple)) or hasattr(point, "tolist") else [point]
    runs = [html.unescape(str(r)) for r in meta.get("runs") or ()]
    kind = meta["open"]
    if kind == "rollout":
        note = html.unescape(str(row[1])) if len(row) > 1 and row[1] not in (None, "") else None
        return "open_rollout", {"rollout_id": html.unescape(str(row[0])), "note": note}
    if kind == "sample":
        return "open_sample", {"sample_id": html.unescape(str(row[0])), "runs": runs or None}
    return "open_calls", {"runs": runs, "low": int(float(row[0])), "high": int(float(row[1]))}


def open_point(explorer, meta, point) -> None:
    """Open what ``point`` (its customdata) of a trace with ``meta`` names, in ``explorer``."""
    method, kwargs = target(meta, point)
    getattr(explorer, method)(**kwargs)


def _on_click(explorer, meta, trace, points, _state=None) -> None:
    for i in points.point_inds[:1]:  # one point: the one clicked (a click never selects several)
        open_point(explorer, meta, trace.customdata[i])


def figure_widget(fig, explorer):
    """``fig`` as a FigureWidget whose linked traces open their points in ``explorer``."""
    import plotly.graph_objects as go

    # the traces go in after the widget exists, as messages: given to the constructor, they travel
    # as the model's first state change, which a view rendered before it arrives never draws
    # (plotly's widget reads its data once, when it renders): an empty plot, now and then
    widget = go.FigureWidget(layout=fig.layout)
    widget.add_traces(list(fig.data))
    for trace in widget.data:
        meta = trace.meta if isinstance(trace.meta, dict) else None
        if meta and meta.get("open") in LINKED and trace.customdata is not None:
            trace.on_click(functools.partial(_on_click, explorer, meta))
    return widget


def linked(fig, explorer):
    """The figure, clickable, with the explorer's panel under it: a click on a bar or point opens
    it there (a sample's attempts under each run, a rollout's trajectory, the rollouts of a
    tool-call count)."""
    import ipywidgets as w

    try:
        shown = figure_widget(fig, explorer)
    except ImportError as exc:  # plotly's FigureWidget needs anywidget
        out = w.Output()
        out.append_display_data(fig)
        note = w.HTML(f"<p class='rl-note'>Clicks are not linked here ({html.escape(str(exc))}).</p>")
        return w.VBox([note, out, explorer.panel])
    box = w.VBox([shown, explorer.panel])
    box.add_class("rl-linked")
    box.figure = shown
    return box
