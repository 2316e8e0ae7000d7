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
import warnings
from datetime import datetime, timezone

import duckdb
import pandas as pd

from . import config, store
from .compare import by_step
from .htmltext import esc

LIVE_COLUMNS = ["run", "split", "step", "step_known", "rollouts", "mean_score", "signal_share", "tool_calls_mean",
                "latency_p95", "infra_share", "ungraded_share"]


def live_frame(con, runs=None) -> pd.DataFrame:
    """One row per run, ordered along training within each split (``by_step``), with the shares
    of rollouts that failed on infrastructure or were never graded."""
    df = by_step(con, runs)
    total = df["rollouts"].where(df["rollouts"] > 0)
    df["infra_share"] = df["n_infra_error"] / total
    df["ungraded_share"] = df["n_ungraded"] / total
    return df[LIVE_COLUMNS]


def latest_html(frame: pd.DataFrame) -> str:
    """The latest step of each split, in words (escaped)."""
    if frame.empty:
        return "<p>No runs loaded yet: start <code>rolloutlab watch LOGS</code>.</p>"
    rows = []
    for split, df in frame.groupby("split", sort=True):
        last = df.sort_values("step").iloc[-1]
        signal = "" if last.signal_share != last.signal_share else f", signal share {100 * last.signal_share:.0f}%"
        rows.append(f"<li><b>{esc(split)}</b> step {esc(last.step)} ({esc(last.run)}): mean score "
                    f"{last.mean_score:.3f}{signal}, {last.tool_calls_mean:.1f} tool calls per rollout, "
                    f"P95 latency {last.latency_p95:.1f} s, infra errors {100 * (last.infra_share or 0):.1f}%, "
                    f"ungraded {100 * (last.ungraded_share or 0):.1f}%</li>")
    return f"<ul class='tex2jax_ignore mathjax_ignore'>{''.join(rows)}</ul>"


def _png(frame: pd.DataFrame) -> bytes:
    from .plots.static import live_panel

    buf = io.BytesIO()
    live_panel(frame).savefig(buf, format="png", dpi=80)
    return buf.getvalue()


def live(con=None, every: float | None = None, runs=None, max_updates: int | None = None):
    """An ipywidgets view of the run as it trains, drawn again every ``every`` seconds
    (``config.LIVE_EVERY_S``) until its stop button is pressed or ``max_updates`` draws were made.

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
    stamp = w.HTML()
    stop = w.Button(description="stop", icon="stop", tooltip="stop refreshing")
    image = w.Image(format="png")
    latest = w.HTML()
    stopped = threading.Event()
    count = {"n": 0}

    def refresh() -> None:
        try:
            frame = live_frame(con, runs)
            image.value = _png(frame) if len(frame) else b""
            latest.value = latest_html(frame)
            note = f" · refreshing every {every:g} s" if not stopped.is_set() else " · stopped"
            stamp.value = (f"<b>last updated {datetime.now(timezone.utc):%H:%M:%S} UTC</b> · {len(frame)} runs"
                           + note)
        except Exception as exc:  # a refresh that fails says so and tries again next time
            stamp.value = f"<b>refresh failed</b> ({esc(type(exc).__name__)}: {esc(exc, 200)}); retrying"
        count["n"] += 1

    def loop() -> None:
        while not stopped.wait(every):
            if max_updates is not None and count["n"] >= max_updates:
                break
            refresh()
        stopped.set()

    def on_stop(_) -> None:
        stopped.set()
        stamp.value = stamp.value.replace(f" · refreshing every {every:g} s", "") + " · stopped"

    stop.on_click(on_stop)
    if max_updates is not None and max_updates <= 1:
        stopped.set()  # one drawing: nothing to refresh
    refresh()
    if not stopped.is_set():
        threading.Thread(target=loop, name="rolloutlab-live", daemon=True).start()
    view = w.VBox([w.HBox([stamp, stop]), latest, image])
    view.stop = stopped.set  # stop from code, too
    return view
