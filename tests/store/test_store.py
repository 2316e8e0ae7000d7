"""The store: schema creation and version, locked-database and wrong-file messages, read-only."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import duckdb
import pandas as pd
import pytest

import rolloutlab as rl
from rolloutlab import config, store


def test_connect_creates_canonical_tables_with_version(con):
    tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    assert {"sources", "runs", "samples", "rollouts", "tool_calls", "grades", "messages", "rejects"} <= tables
    assert con.execute("SELECT value FROM rolloutlab_meta WHERE key = 'schema_version'").fetchone() == \
        (str(store.SCHEMA_VERSION),)
    cols = [r[0] for r in con.execute("SELECT column_name FROM information_schema.columns "
                                      "WHERE table_name = 'rollouts' ORDER BY ordinal_position").fetchall()]
    assert cols == ["rollout_id", "run_id", "sample_id", "attempt", "started_at", "ended_at", "latency_s",
                    "status", "stop_reason", "final_answer", "score", "n_turns", "n_tool_calls", "input_tokens",
                    "output_tokens", "reasoning_tokens", "cost_usd", "error", "source_id", "source_line",
                    "stop_reason_raw", "cached_input_tokens", "attempt_raw", "fingerprint"]
    assert {"run_keys", "duplicates"} <= tables


def test_default_path_comes_from_env(monkeypatch, tmp_path):
    monkeypatch.setenv("ROLLOUTLAB_DB", str(tmp_path / "env.duckdb"))
    c = rl.connect()
    c.close()
    assert (tmp_path / "env.duckdb").exists()


def test_other_schema_version_says_what_to_do(db_path):
    c = rl.connect(db_path)
    c.execute("UPDATE rolloutlab_meta SET value = '99' WHERE key = 'schema_version'")
    c.close()
    with pytest.raises(rl.SchemaVersionError, match=rf"schema version 99; this rolloutlab uses version {store.SCHEMA_VERSION}\. "
                                                     r"Re-ingest your logs into a new file"):
        rl.connect(db_path)


def test_a_foreign_duckdb_file_is_refused(db_path):
    duckdb.connect(str(db_path)).execute("CREATE TABLE t (x INT)").close()
    with pytest.raises(rl.SchemaVersionError, match="not a rolloutlab database"):
        rl.connect(db_path)


def test_read_only_missing_file(tmp_path):
    with pytest.raises(rl.StoreError, match="No database at .*make demo"):
        rl.connect(tmp_path / "nope.duckdb", read_only=True)


def test_read_only_rejects_writes(db_path):
    rl.connect(db_path).close()
    c = rl.connect(db_path, read_only=True)
    with pytest.raises(duckdb.Error):
        c.execute("INSERT INTO runs (run_id, label) VALUES ('x', 'x')")
    c.close()


def test_second_writer_gets_a_clear_message(db_path, monkeypatch):
    monkeypatch.setenv("ROLLOUTLAB_WRITER_WAIT_S", "0.5")
    monkeypatch.setenv("ROLLOUTLAB_READER_WAIT_S", "0.5")
    rl.connect(db_path).close()
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import rolloutlab as rl, sys, time; c = rl.connect({str(db_path)!r}); "
                               "print('ready', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        with pytest.raises(rl.DatabaseLockedError) as info:
            rl.connect(db_path)
        message = str(info.value)
        assert f"The database {db_path} is in use by " in message
        assert f"(PID {holder.pid})" in message
        assert "opening for writing waited" in message and "--db" in message
        with pytest.raises(rl.DatabaseLockedError):
            rl.connect(db_path, read_only=True)
    finally:
        holder.kill()
        holder.wait()


def test_transaction_rolls_back_on_error(con):
    with pytest.raises(ZeroDivisionError):
        with rl.transaction(con):
            con.execute("INSERT INTO runs (run_id, label) VALUES ('x', 'x')")
            1 / 0
    assert con.execute("SELECT count(*) FROM runs").fetchone() == (0,)


def test_version_1_is_upgraded_in_place(db_path):
    c = rl.connect(db_path)
    # back to version 1: no endpoint_events; grades without error / latency; every rollout has a sample
    c.execute("DROP TABLE endpoint_events")
    c.execute("DROP TABLE training_metrics")
    c.execute("DROP TABLE training_jobs")
    c.execute("ALTER TABLE grades DROP COLUMN error")
    c.execute("ALTER TABLE grades DROP COLUMN latency_s")
    c.execute("ALTER TABLE rollouts ALTER COLUMN sample_id SET NOT NULL")
    c.execute("INSERT INTO rollouts (rollout_id, run_id, sample_id, status) VALUES ('r1', 'x', '(unknown)', 'ungraded')")
    c.execute("UPDATE rolloutlab_meta SET value = '1' WHERE key = 'schema_version'")
    c.close()
    with pytest.raises(rl.SchemaVersionError, match="Open it once for writing to upgrade it in place"):
        rl.connect(db_path, read_only=True)
    c = rl.connect(db_path)
    assert c.execute("SELECT value FROM rolloutlab_meta WHERE key = 'schema_version'").fetchone() == \
        (str(store.SCHEMA_VERSION),)
    assert c.execute("SELECT count(*) FROM training_metrics").fetchone() == (0,)
    assert c.execute("SELECT count(*) FROM endpoint_events").fetchone() == (0,)
    assert c.execute("SELECT sample_id FROM rollouts").fetchall() == [(None,)]
    c.execute("INSERT INTO grades (rollout_id, grader, error, latency_s) VALUES ('r1', 'judge', 'HTTP 503', 2.5)")
    c.close()


def test_version_5_gains_the_grader_latency_of_endpoint_events(db_path):
    c = rl.connect(db_path)
    c.execute("ALTER TABLE endpoint_events DROP COLUMN grader_latency_s")
    c.execute("DROP TABLE sample_sources")
    c.execute("UPDATE rolloutlab_meta SET value = '5' WHERE key = 'schema_version'")
    c.close()
    c = rl.connect(db_path)
    assert c.execute("SELECT value FROM rolloutlab_meta WHERE key = 'schema_version'").fetchone() == \
        (str(store.SCHEMA_VERSION),)
    assert c.execute("SELECT count(grader_latency_s) FROM endpoint_events").fetchone() == (0,)
    c.close()


def test_version_6_learns_which_sources_provide_each_sample(db_path, tmp_path):
    # Two files name sample s1: in version 6 only the first "owned" its row. The upgrade links it to
    # both (its own source, and every source with rollouts of it), so replacing one keeps it.
    c = rl.connect(db_path)
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text(json.dumps({"run": "a", "sample_id": "s1", "score": 1, "prompt": "What is 2+2?"}) + "\n")
    second.write_text(json.dumps({"run": "b", "sample_id": "s1", "score": 0}) + "\n")
    rl.ingest(c, [first, second])
    c.execute("DROP TABLE sample_sources")
    c.execute("UPDATE rolloutlab_meta SET value = '6' WHERE key = 'schema_version'")
    c.close()
    c = rl.connect(db_path)
    assert c.execute("SELECT sample_id, source_id FROM sample_sources ORDER BY source_id").fetchall() == \
        [("s1", 1), ("s1", 2)]
    first.write_text(json.dumps({"run": "a", "sample_id": "s2", "score": 1}) + "\n")
    assert rl.ingest(c, first).action.tolist() == ["replaced"]
    assert c.execute("SELECT sample_id, prompt, source_id FROM samples ORDER BY 1").fetchall() == \
        [("s1", "What is 2+2?", 2), ("s2", None, 3)]
    c.close()


def test_version_8_keeps_its_runs_and_asks_for_the_files_its_rules_rejected(db_path, tmp_path):
    """A database the identity rules of version 8 wrote: a training log whose later steps were
    rejected ('each attempt loads once'). The upgrade keeps every run and attempt, names the file to
    read again, and the next ingest of it loads every step."""
    import hashlib

    job = tmp_path / "job.jsonl"
    lines = [{"run": "job1", "step": step, "sample_id": f"s{i}", "attempt": 0, "score": 0.5}
             for step in (1, 2) for i in range(3)]
    job.write_text("".join(json.dumps(r) + "\n" for r in lines[:3]))
    c = rl.connect(db_path)
    rl.ingest(c, job)
    job.write_text("".join(json.dumps(r) + "\n" for r in lines))  # what the file held: both steps
    sha = hashlib.sha256(job.read_bytes()).hexdigest()
    # as version 8 left it: step 1 loaded under the bare label, step 2 rejected
    c.execute("UPDATE sources SET sha256 = ?, n_records = 6, n_rejected = 3, prefix_sha256 = NULL", [sha])
    for i in range(3):
        c.execute("INSERT INTO rejects VALUES (1, ?, '{}', ?)",
                  [i + 4, f"attempt 0 of sample 's{i}' in run 'job1' is already on line {i + 1}: each attempt loads once"])
    # version 8's ids came from the file and line; a person labelled the first one
    c.execute("UPDATE rollouts SET rollout_id = 'job-0a1b2c3d-L' || source_line")
    rl.label(c, "job-0a1b2c3d-L1", "fail", note="wrong unit")
    for ddl in ("DROP TABLE run_keys", "DROP TABLE duplicates", "ALTER TABLE runs DROP COLUMN evaluation",
                "ALTER TABLE rollouts DROP COLUMN attempt_raw", "ALTER TABLE rollouts DROP COLUMN fingerprint",
                "ALTER TABLE sources DROP COLUMN n_duplicates", "ALTER TABLE sources DROP COLUMN options"):
        c.execute(ddl)
    c.execute("UPDATE rolloutlab_meta SET value = '8' WHERE key = 'schema_version'")
    c.close()
    with pytest.warns(UserWarning, match=r"labels follow their lines\): rolloutlab ingest .*job\.jsonl"):
        c = rl.connect(db_path)
    assert c.execute("SELECT value FROM rolloutlab_meta WHERE key = 'schema_version'").fetchone() == \
        (str(store.SCHEMA_VERSION),)
    assert rl.runs(c).run.tolist() == ["job1"] and store.stale_sources(c) == [str(job.resolve())]
    assert c.execute("SELECT label, step, run_id FROM run_keys").fetchall() == [("job1", 1, "job1")]
    assert c.execute("SELECT count(*) FROM rollouts WHERE attempt_raw = attempt").fetchone() == (3,)
    result = rl.ingest(c, job)
    assert result[["action", "loaded", "rejected"]].values.tolist() == [["replaced", 6, 0]]
    assert rl.runs(c).run.tolist() == ["job1-step1", "job1-step2"] and store.stale_sources(c) == []
    # the label followed its line to the rollout's new id
    line1 = c.execute("SELECT rollout_id FROM rollouts WHERE source_line = 1").fetchone()[0]
    assert line1.startswith("rl-") and c.execute("SELECT rollout_id, note FROM labels").fetchall() == [
        (line1, "wrong unit")]
    c.close()


READER = """
import sys, time
import rolloutlab as rl
con = rl.connect(sys.argv[1], read_only=True)   # held for the whole life of this process
print("ready", rl.runs(con).run.tolist(), flush=True)
deadline = time.time() + 60
calls = 0
while time.time() < deadline:
    runs = rl.runs(con).run.tolist()            # a call every 20 ms: never fails while a writer writes
    calls += 1
    if "late" in runs:
        print("saw", runs, calls, con.opened, flush=True)
        break
    time.sleep(0.02)
"""


def test_an_open_reader_never_blocks_a_writer_and_sees_its_run(db_path, tmp_path):
    """A notebook-like reader process keeps its handle and queries all the time; another process
    ingests (twice, the second a new run). Every ingest succeeds, no read fails, and the reader's
    next call sees the new run without reconnecting."""
    from conftest import rollout, write_jsonl

    con = rl.connect(db_path)
    rl.ingest(con, write_jsonl(tmp_path / "early.jsonl", [rollout("early", f"s{i}", 1.0) for i in range(50)]))
    con.close()
    reader = subprocess.Popen([sys.executable, "-c", READER, str(db_path)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        assert reader.stdout.readline().split()[0] == "ready"
        for name in ("more", "late"):
            path = write_jsonl(tmp_path / f"{name}.jsonl", [rollout(name, f"s{i}", 0.5) for i in range(2000)])
            done = subprocess.run([sys.executable, "-m", "rolloutlab.cli", "ingest", str(path), "--db", str(db_path)],
                                  capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, done.stderr
        line = reader.stdout.readline().split(maxsplit=1)
        assert line[0] == "saw" and "'late'" in line[1]
        assert reader.wait(timeout=30) == 0, reader.stderr.read()
    finally:
        reader.kill()


def test_a_shared_reader_gives_what_a_plain_connection_gives(load, con, db_path):
    from conftest import rollout

    records = [rollout(run, f"s{i}", float((i + j + (run == "cand")) % 2), ["search"] * (2 + i % 4),
                       latency=1.0 + i + j, step=None if run == "base" else 5, split="valid")
               for run in ("base", "cand") for i in range(12) for j in range(3)]
    load(records)
    con.close()
    shared = rl.connect(db_path, read_only=True)
    assert isinstance(shared, rl.SharedReader)
    calls = {
        "summary": lambda c: rl.summary(c), "check": lambda c: rl.check(c, "base"),
        "compare": lambda c: rl.compare(c, "base", "cand", n_boot=200),
        "sample_stats": lambda c: rl.sample_stats(c, "cand"), "by_step": lambda c: rl.by_step(c),
        "tool_stats": lambda c: rl.tool_stats(c, "base"), "latency": lambda c: rl.latency(c, "cand", n_boot=100),
        "runs": rl.runs, "rejects": rl.rejects,
    }
    got = {name: call(shared) for name, call in calls.items()}
    shared.close()
    plain = rl.connect(db_path, read_only=True, shared=False)
    for name, call in calls.items():
        # the same values and types (sums of many doubles may differ in the last bit: DuckDB adds
        # in parallel, in no fixed order)
        pd.testing.assert_frame_equal(got[name], call(plain), check_exact=False, rtol=1e-12, obj=name)
    plain.close()


def test_a_waiting_writer_goes_first_and_a_reader_lets_go_when_idle(db_path):
    rl.connect(db_path).close()
    shared = rl.connect(db_path, read_only=True)
    shared.execute("SELECT 1").fetchall()
    assert shared.opened == 1
    time.sleep(config.READER_IDLE_S * 3)  # idle: the file is let go
    w = rl.connect(db_path)  # would fail if the reader still held the file
    w.close()
    assert shared.execute("SELECT count(*) FROM runs").fetchone() == (0,) and shared.opened == 2
    store.writer_intent_path(db_path).write_text(f"{os.getpid()}\n")  # "a writer is waiting"
    shared.release()
    started = time.monotonic()
    with pytest.warns(UserWarning, match="waiting for"):
        threading.Timer(config.READER_WARN_S + 0.5, lambda: store.writer_intent_path(db_path).unlink()).start()
        shared.execute("SELECT 1").fetchall()
    assert time.monotonic() - started >= config.READER_WARN_S
    shared.close()


def test_the_intent_of_a_killed_writer_is_ignored(db_path):
    rl.connect(db_path).close()
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    store.writer_intent_path(db_path).write_text(f"{gone.pid}\n")  # its writer died while waiting
    assert store.waiting_writer(db_path) is None
    started = time.monotonic()
    with rl.connect(db_path, read_only=True) as shared:
        assert shared.execute("SELECT count(*) FROM sources").fetchone() == (0,)
    assert time.monotonic() - started < 1.0


def test_a_writer_has_a_memory_limit(db_path, monkeypatch):
    con = rl.connect(db_path)
    assert con.execute("SELECT current_setting('memory_limit')").fetchone()[0] == "1.8 GiB"  # 2GB, as DuckDB says it
    con.close()
    monkeypatch.setenv("ROLLOUTLAB_MEMORY_LIMIT", "500MB")
    con = rl.connect(db_path)
    assert con.execute("SELECT current_setting('memory_limit')").fetchone()[0] == "476.8 MiB"
    con.close()


def test_version_6_links_a_sample_to_the_files_of_its_own_split(db_path, tmp_path):
    # (s1, train) came only from A, (s1, valid) only from B: B never provided the train row.
    c = rl.connect(db_path)
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(json.dumps({"run": "a", "sample_id": "s1", "split": "train", "score": 1, "prompt": "t"}) + "\n")
    b.write_text(json.dumps({"run": "b", "sample_id": "s1", "split": "valid", "score": 1, "prompt": "v"}) + "\n")
    rl.ingest(c, [a, b])
    c.execute("DROP TABLE sample_sources")
    c.execute("UPDATE rolloutlab_meta SET value = '6' WHERE key = 'schema_version'")
    c.close()
    c = rl.connect(db_path)
    assert c.execute("SELECT sample_id, split, source_id FROM sample_sources ORDER BY 2").fetchall() == \
        [("s1", "train", 1), ("s1", "valid", 2)]
    c.close()
