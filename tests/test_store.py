"""The store: schema creation and version, locked-database and wrong-file messages, read-only."""
from __future__ import annotations

import subprocess
import sys

import duckdb
import pytest

import rolloutlab as rl
from rolloutlab import store


def test_connect_creates_canonical_tables_with_version(con):
    tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    assert {"sources", "runs", "samples", "rollouts", "tool_calls", "grades", "messages", "rejects"} <= tables
    assert con.execute("SELECT value FROM rolloutlab_meta WHERE key = 'schema_version'").fetchone() == \
        (str(store.SCHEMA_VERSION),)
    cols = [r[0] for r in con.execute("SELECT column_name FROM information_schema.columns "
                                      "WHERE table_name = 'rollouts' ORDER BY ordinal_position").fetchall()]
    assert cols == ["rollout_id", "run_id", "sample_id", "attempt", "started_at", "ended_at", "latency_s",
                    "status", "stop_reason", "final_answer", "score", "n_turns", "n_tool_calls", "input_tokens",
                    "output_tokens", "reasoning_tokens", "cost_usd", "error", "source_id", "source_line"]


def test_default_path_comes_from_env(monkeypatch, tmp_path):
    monkeypatch.setenv("ROLLOUTLAB_DB", str(tmp_path / "env.duckdb"))
    c = rl.connect()
    c.close()
    assert (tmp_path / "env.duckdb").exists()


def test_other_schema_version_says_what_to_do(db_path):
    c = rl.connect(db_path)
    c.execute("UPDATE rolloutlab_meta SET value = '99' WHERE key = 'schema_version'")
    c.close()
    with pytest.raises(rl.SchemaVersionError, match=r"schema version 99; this rolloutlab uses version 4\. "
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


def test_second_writer_gets_a_clear_message(db_path):
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
        assert "one writer at a time" in message and "--db" in message
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
    assert c.execute("SELECT value FROM rolloutlab_meta WHERE key = 'schema_version'").fetchone() == ("4",)
    assert c.execute("SELECT count(*) FROM training_metrics").fetchone() == (0,)
    assert c.execute("SELECT count(*) FROM endpoint_events").fetchone() == (0,)
    assert c.execute("SELECT sample_id FROM rollouts").fetchall() == [(None,)]
    c.execute("INSERT INTO grades (rollout_id, grader, error, latency_s) VALUES ('r1', 'judge', 'HTTP 503', 2.5)")
    c.close()
