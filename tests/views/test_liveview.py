"""rl.live_frame and rl.live: the run's health along training, refreshed while another process
writes."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

import rolloutlab as rl
from rolloutlab.views import liveview
from conftest import rollout, write_jsonl


def test_live_frame_counts_by_hand(load, con):
    load([rollout("t1", "a", 1.0, step=1, split="train"), rollout("t1", "b", 0.0, step=1, split="train"),
          rollout("t1", "c", None, step=1, split="train", status="infra_error"),
          rollout("t1", "d", None, step=1, split="train", status="ungraded"),
          rollout("t2", "a", 1.0, ["search"] * 2, step=2, split="train"),
          rollout("t2", "a", 0.5, ["search"] * 4, step=2, split="train"),
          rollout("v2", "a", 1.0, step=2, split="valid")])
    f = rl.live_frame(con)
    assert f.columns.tolist() == liveview.LIVE_COLUMNS
    rows = f.set_index("run")
    assert rows.loc["t1", ["split", "step", "rollouts", "mean_score", "infra_share", "ungraded_share"]].tolist() == \
        ["train", 1, 4, 0.5, 0.25, 0.25]  # the two failures are left out of the score, counted as shares
    assert rows.loc["t2", ["mean_score", "signal_share", "tool_calls_mean"]].tolist() == [0.75, 1.0, 3.0]
    assert rows.loc["v2", "split"] == "valid"
    html = liveview.latest_html(f)
    assert "<b>train</b> step 2 (t2): mean score 0.75, signal share 100%, 3 tool calls" in html
    assert "<b>valid</b> step 2 (v2)" in html


def test_the_live_view_refreshes_while_another_process_ingests(tmp_path):
    db = tmp_path / "live.duckdb"
    con = rl.connect(db)
    rl.ingest(con, write_jsonl(tmp_path / "s1.jsonl", [rollout("train-step1", f"s{i}", 0.5, step=1, split="train")
                                                        for i in range(20)]))
    con.close()
    shared = rl.connect(db, read_only=True)
    view = rl.live(shared, every=0.2, max_updates=200)
    stamp, latest, image = view.children[0].children[0], view.children[1], view.children[2]
    deadline = time.time() + 20
    while not view.refreshed and time.time() < deadline:
        time.sleep(0.05)
    assert "last updated" in stamp.value and "train-step1" in latest.value and image.value[:4] == b"\x89PNG"
    path = write_jsonl(tmp_path / "s2.jsonl", [rollout("train-step2", f"s{i}", 1.0, step=2, split="train")
                                               for i in range(20)])
    done = subprocess.run([sys.executable, "-m", "rolloutlab.cli", "ingest", str(path), "--db", str(db)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr  # the open view did not keep the writer out
    deadline = time.time() + 20
    while "train-step2" not in latest.value and time.time() < deadline:
        time.sleep(0.1)
    assert "step 2 (train-step2): mean score 1" in latest.value
    view.children[0].children[1].click()  # stop
    time.sleep(0.5)
    assert stamp.value.endswith("stopped")
    shared.close()


def test_a_writing_connection_is_refused_politely(con):
    with pytest.warns(UserWarning, match="holds the database file"):
        view = rl.live(con, max_updates=1)
    view.thread.join(60)  # its one drawing, before the connection closes


def test_live_shows_training_runs_only_unless_runs_are_named(load, con):
    """Issue 25: the demo server's side run (no step) was the first line of the live view."""
    load([rollout("live", "a", 0.0), rollout("t1", "a", 1.0, step=1, split="train"),
          rollout("t2", "a", 0.5, step=2, split="train")])
    f = rl.live_frame(con)
    assert f.run.tolist() == ["t1", "t2"] and f.step_known.all()
    assert "live" not in liveview.latest_html(f) and "<b>train</b> step 2 (t2)" in liveview.latest_html(f)
    assert rl.live_frame(con, runs=["live", "t2"]).run.tolist() == ["live", "t2"]  # named: exactly those


def test_no_training_run_yet_says_so(load, con):
    load([rollout("side", "a", 0.0)])
    f = rl.live_frame(con)
    assert f.empty and f.columns.tolist() == liveview.LIVE_COLUMNS
    assert "No training run loaded yet" in liveview.latest_html(f)


def test_the_refresh_timer_starts_with_the_view(tmp_path, monkeypatch):
    """Issue 25: the first refresh of 07-live once stalled ~45 s after Run All. The view returns
    at once, its first drawing starts with it (in the background), and drawings keep to a
    schedule from the view's start: a slow one does not push the next ones back."""
    db = tmp_path / "timer.duckdb"
    writer = rl.connect(db)
    rl.ingest(writer, write_jsonl(tmp_path / "t.jsonl", [rollout("t1", "a", 1.0, step=1, split="train")]))
    frame = rl.live_frame(writer)
    writer.close()
    shared = rl.connect(db, read_only=True)

    def slow(*_, **__):  # a drawing that takes 0.3 s
        time.sleep(0.3)
        return frame

    monkeypatch.setattr(liveview, "live_frame", slow)
    monkeypatch.setattr(liveview, "_png", lambda _: b"\x89PNG")
    t0 = time.monotonic()
    view = rl.live(shared, every=0.5, max_updates=5)
    assert time.monotonic() - t0 < 0.25  # the cell does not wait for a drawing
    assert "drawing" in view.children[0].children[0].value
    view.thread.join(10)
    done = [t - view.started for t in view.refreshed]
    assert len(done) == 5 and done[0] < 0.6, done  # the first drawing right away
    # on schedule: drawing k ends ~0.3 s after k * 0.5 s (sleeping `every` after each drawing would
    # end the last at 4 * 0.8 + 0.3 = 3.5 s)
    assert done[-1] < 4 * 0.5 + 0.3 + 0.5, done
    assert view.children[0].children[0].value.endswith("stopped") and "t1" in view.children[1].value
    shared.close()
