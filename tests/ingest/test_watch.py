"""rolloutlab watch: polls that ingest what grew, a kill -9 mid-poll, and a restart."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import rolloutlab as rl
from rolloutlab.demo import synth
from rolloutlab.ingest import watch
from test_ingest import assert_same_tables


def write(path, records, mode="w", tail=""):
    with open(path, mode) as fh:
        fh.write("".join(json.dumps(r) + "\n" for r in records) + tail)


def record(run, i, step):
    return {"run": run, "sample_id": f"s{i % 9}", "score": (i % 4) / 3, "step": step, "split": "train"}


def test_polls_load_new_files_and_new_lines_and_wait_for_whole_files(tmp_path):
    logs, db = tmp_path / "logs", tmp_path / "w.duckdb"
    logs.mkdir()
    write(logs / "step1.jsonl", [record("train-step1", i, 1) for i in range(30)])
    (logs / "results.json").write_text("[")  # a whole-document file still being written
    state = watch.WatchState()
    first = watch.poll(db, [logs], state)
    assert first.files.path.tolist() == [str(logs / "step1.jsonl")] and first.latest_step == 1
    assert "+30 records from 1 file(s) (1 loaded), 0 rejected, latest step 1" in first.line()
    write(logs / "step1.jsonl", [record("train-step2", i, 2) for i in range(5)], mode="a",
          tail='{"run": "train-st')  # the trainer is mid-line
    (logs / "results.json").write_text('[{"task_id": 1, "trial": 0, ')  # still growing: not read yet
    second = watch.poll(db, [logs], state)
    assert (second.files.action.tolist(), int(second.files.loaded.sum())) == (["appended"], 5)
    assert second.latest_step == 2 and "held back" in " ".join(second.files.reasons[0])
    (logs / "results.json").write_text(json.dumps([{"task_id": 1, "trial": 0, "reward": 1.0, "traj": []}]))
    third = watch.poll(db, [logs], state)
    assert third.files.empty and third.line().endswith("no new records, latest step 2")
    fourth = watch.poll(db, [logs], state)  # settled: the same size and time two polls running
    assert fourth.files[["format", "action", "loaded"]].values.tolist() == [["tau-bench", "loaded", 1]]


WATCH = [sys.executable, "-m", "rolloutlab.cli", "watch"]


def test_kill_9_mid_poll_then_restart_loses_nothing_and_duplicates_nothing(tmp_path):
    logs, db = tmp_path / "logs", tmp_path / "w.duckdb"
    logs.mkdir()
    synth.write_native(logs, samples=6000, attempts=4, checkpoints=("base",), messages=False)
    proc = subprocess.Popen(WATCH + [str(logs), "--db", str(db), "--interval", "0.2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)  # the first poll is ingesting 24,000 rollouts (about 3 s)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert db.exists()  # the poll had opened the database
    killed = rl.connect(db)
    assert killed.execute("SELECT count(*) FROM rollouts").fetchone() == (0,)  # killed mid-poll: nothing committed
    killed.close()
    with open(logs / "base.jsonl", "a") as fh:  # the run goes on while nobody watches
        fh.write(json.dumps({"run": "base", "sample_id": "late", "score": 1.0}) + "\n")
    again = subprocess.run(WATCH + [str(logs), "--db", str(db), "--once"], capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("\n") == 1 and "records from 1 file(s)" in again.stdout
    grown, whole = rl.connect(db), rl.connect(tmp_path / "whole.duckdb")
    rl.ingest(whole, logs / "base.jsonl")
    assert_same_tables(grown, whole)
    assert grown.execute("SELECT count(*) FROM rollouts").fetchone() == (24001,)
    grown.close(), whole.close()


def test_ctrl_c_stops_cleanly(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    write(logs / "a.jsonl", [record("r", i, 1) for i in range(3)])
    proc = subprocess.Popen(WATCH + [str(logs), "--db", str(tmp_path / "w.duckdb"), "--interval", "0.2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert "+3 records" in proc.stdout.readline()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and out.strip().endswith("stopped") and "Traceback" not in err


def test_a_poll_that_fails_is_logged_and_watching_goes_on(tmp_path, monkeypatch):
    # A defect that rolls a whole poll back (here: assembling endpoint rollouts) is one line in the
    # log; the next poll loads the file. Bad records of one file never even get this far.
    from rolloutlab.ingest.formats import rft_endpoint

    logs, db = tmp_path / "logs", tmp_path / "w.duckdb"
    logs.mkdir()
    write(logs / "events.jsonl", [{"event": "grade", "rollout_id": "r1", "run": "train", "sample_id": "q1", "score": 1}])
    real_finish, failures = rft_endpoint.finish, []

    def finish_once_broken(con, run):
        if not failures:
            failures.append(1)
            raise RuntimeError("boom")
        return real_finish(con, run)

    monkeypatch.setattr(rft_endpoint, "finish", finish_once_broken)
    lines = []

    def echo(line):
        lines.append(line)
        if len(lines) == 2:
            raise KeyboardInterrupt  # stop after the second poll

    assert watch.run(db, [logs], interval=0.0, echo=echo) == 0
    assert "poll rolled back" in lines[0] and "RuntimeError: boom" in lines[0]
    assert "+1 records from 1 file(s)" in lines[1]
    con = rl.connect(db, read_only=True)
    assert con.execute("SELECT rollout_id, score FROM rollouts").fetchall() == [("r1", 1.0)]
    con.close()
