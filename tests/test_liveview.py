"""rl.live_frame and rl.live: the run's health along training, refreshed while another process
writes."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

import rolloutlab as rl
from rolloutlab import liveview
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
    assert "<b>train</b> step 2 (t2): mean score 0.750, signal share 100%, 3.0 tool calls" in html
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
    assert "last updated" in stamp.value and "train-step1" in latest.value and image.value[:4] == b"\x89PNG"
    path = write_jsonl(tmp_path / "s2.jsonl", [rollout("train-step2", f"s{i}", 1.0, step=2, split="train")
                                               for i in range(20)])
    done = subprocess.run([sys.executable, "-m", "rolloutlab.cli", "ingest", str(path), "--db", str(db)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr  # the open view did not keep the writer out
    deadline = time.time() + 20
    while "train-step2" not in latest.value and time.time() < deadline:
        time.sleep(0.1)
    assert "step 2 (train-step2): mean score 1.000" in latest.value
    view.children[0].children[1].click()  # stop
    time.sleep(0.5)
    assert stamp.value.endswith("stopped")
    shared.close()


def test_a_writing_connection_is_refused_politely(con):
    with pytest.warns(UserWarning, match="holds the database file"):
        rl.live(con, max_updates=1)
