"""Watch a training run from a notebook while it trains: ``rl.live(con)``.

``live_frame`` is the numbers (one row per run along training: reward, signal share, tool calls
per rollout, P95 latency, infra-error and ungraded shares), ``plots.static.live_panel`` their
picture, and ``live`` an ipywidgets view that draws them again every few seconds with the time
of the last update and a stop button. It reads through a shared handle, so it never keeps
``rolloutlab watch`` or ``ingest`` from writing, and each refresh sees what they committed.
"""
from __future__ import annotations

import io
import threading
import time
import warnings
from datetime import datetime, timezone

import duckdb
import pandas as pd

from .. import config
from ..text import fmt
from ..store import database as store
from ..analysis.compare import by_step
from ..analysis.metrics.common import training_runs
from ..text.htmltext import esc

LIVE_COLUMNS = ["run", "split", "step", "step_known", "rollouts", "mean_score", "signal_share", "tool_calls_mean",
                "latency_p95", "infra_share", "ungraded_share"]


def live_frame(con, runs=None) -> pd.DataFrame:
    """One row per run, ordered along training within each split (``by_step``), with the shares
    of rollouts that failed on infrastructure or were never graded. ``runs`` None: the training
    runs only (those with a step), so that a side run (an evaluation, a demo server's burst) never
    shows up as a stray point; name runs to see exactly those."""
    labels = training_runs(con) if runs is None else runs
    if runs is None and not labels:
        return pd.DataFrame(columns=LIVE_COLUMNS)
    df = by_step(con, labels)
    total = df["rollouts"].where(df["rollouts"] > 0)
    df["infra_share"] = df["n_infra_error"] / total
    df["ungraded_share"] = df["n_ungraded"] / total
    return df[LIVE_COLUMNS]


def latest_html(frame: pd.DataFrame) -> str:
    """The latest step of each split, in words (escaped, numbers through fmt)."""
    if frame.empty:
        return ("<p>No training run loaded yet (a run with a training step): start <code>rolloutlab watch LOGS</code>."
                "</p>")
    rows = []
    for split, df in frame.groupby("split", sort=True):
        last = df.sort_values("step").iloc[-1]
        signal = "" if last.signal_share != last.signal_share else f", signal share {fmt.share(last.signal_share, 0)}"
        rows.append(f"<li><b>{esc(split)}</b> step {esc(last.step)} ({esc(last.run)}): mean score "
                    f"{fmt.number(last.mean_score)}{signal}, {fmt.number(last.tool_calls_mean)} tool calls per rollout, "
                    f"P95 latency {fmt.seconds(last.latency_p95)}, infra errors {fmt.share(last.infra_share or 0)}, "
                    f"ungraded {fmt.share(last.ungraded_share or 0)}</li>")
    return f"<ul class='tex2jax_ignore mathjax_ignore'>{''.join(rows)}</ul>"


def _png(frame: pd.DataFrame) -> bytes:
    from .plots.static import live_panel

    buf = io.BytesIO()
    live_panel(frame).savefig(buf, format="png", dpi=80)
    return buf.getvalue()


def live(con=None, every: float | None = None, runs=None, max_updates: int | None = None):
    """An ipywidgets view of the run as it trains, drawn again every ``every`` seconds
    (``config.LIVE_EVERY_S``) until its stop button is pressed or ``max_updates`` draws were made.
    ``runs``: None for the training runs (those with a step), or the runs to follow.

    The refresh timer starts with the view: the view is returned at once (the cell never waits
    for a drawing), the first drawing starts immediately in the background, and the next ones
    keep to a schedule of one every ``every`` seconds from the view's start (a slow drawing does
    not push the later ones back). ``view.refreshed`` holds the monotonic times the drawings
    finished, ``view.started`` the view's.

    ``con``: a shared handle (``rl.connect(db, read_only=True)``), or a database path (None: the
    default database). Pass no writing connection: it would hold the file and stop the writers.
    """
    import ipywidgets as w

    if con is None or isinstance(con, (str, bytes)) or hasattr(con, "__fspath__"):
        con = store.connect(con, read_only=True)
    elif isinstance(con, duckdb.DuckDBPyConnection):
        warnings.warn("rl.live got a DuckDB connection that holds the database file: `rolloutlab watch` and "
                      "`ingest` cannot write while it is open. Pass rl.connect(db, read_only=True) instead.",
                      stacklevel=2)
    every = config.LIVE_EVERY_S if every is None else float(every)
    started = time.monotonic()
    stamp = w.HTML(f"<b>drawing…</b> (view started {datetime.now(timezone.utc):%H:%M:%S} UTC)")
    stop = w.Button(description="stop", icon="stop", tooltip="stop refreshing")
    image = w.Image(format="png")
    latest = w.HTML()
    stopped = threading.Event()
    refreshed: list[float] = []
    refreshing = f" · refreshing every {every:g} s"

    def refresh() -> None:
        try:
            frame = live_frame(con, runs)
            image.value = _png(frame) if len(frame) else b""
            latest.value = latest_html(frame)
            note = refreshing if not stopped.is_set() else " · stopped"
            stamp.value = (f"<b>last updated {datetime.now(timezone.utc):%H:%M:%S} UTC</b> · {len(frame)} runs"
                           + note)
        except Exception as exc:  # a refresh that fails says so and tries again next time
            stamp.value = f"<b>refresh failed</b> ({esc(type(exc).__name__)}: {esc(exc, 200)}); retrying"
        refreshed.append(time.monotonic())

    def loop() -> None:
        while not stopped.is_set():
            refresh()
            if max_updates is not None and len(refreshed) >= max_updates:
                break
            # the next slot of the schedule started with the view (slots a slow drawing missed are skipped)
            slots = int((time.monotonic() - started) // every) + 1
            if stopped.wait(max(0.0, started + slots * every - time.monotonic())):
                break
        stopped.set()
        stamp.value = stamp.value.replace(refreshing, "") + ("" if stamp.value.endswith("stopped") else " · stopped")

    def on_stop(_) -> None:
        stopped.set()
        if not stamp.value.endswith("stopped"):
            stamp.value = stamp.value.replace(refreshing, "") + " · stopped"

    stop.on_click(on_stop)
    view = w.VBox([w.HBox([stamp, stop]), latest, image])
    view.stop = stopped.set  # stop from code, too
    view.started, view.refreshed = started, refreshed
    view.thread = threading.Thread(target=loop, name="rolloutlab-live", daemon=True)
    view.thread.start()
    return view
