"""The DuckDB store: connection, canonical schema, schema version, transactions."""
from __future__ import annotations

import os
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import duckdb

from . import config

SCHEMA_VERSION = 4

STATUSES = ("ok", "model_error", "infra_error", "truncated", "ungraded")

# Canonical tables (DESIGN.md). Times are UTC TIMESTAMPs, durations seconds.
SCHEMA_DDL = [
    """CREATE TABLE IF NOT EXISTS rolloutlab_meta (key VARCHAR PRIMARY KEY, value VARCHAR)""",
    """CREATE SEQUENCE IF NOT EXISTS source_id_seq START 1""",
    """CREATE TABLE IF NOT EXISTS sources (
        source_id INTEGER PRIMARY KEY, path VARCHAR NOT NULL, format VARCHAR NOT NULL,
        sha256 VARCHAR NOT NULL, bytes BIGINT, n_records BIGINT, n_rejected BIGINT,
        ingested_at TIMESTAMP)""",
    """CREATE TABLE IF NOT EXISTS runs (
        run_id VARCHAR PRIMARY KEY, label VARCHAR NOT NULL, model VARCHAR, checkpoint VARCHAR,
        step INTEGER, split VARCHAR, source_id INTEGER, meta JSON)""",
    """CREATE TABLE IF NOT EXISTS samples (
        sample_id VARCHAR NOT NULL, split VARCHAR, prompt VARCHAR, reference VARCHAR, meta JSON,
        source_id INTEGER)""",
    """CREATE TABLE IF NOT EXISTS rollouts (
        rollout_id VARCHAR PRIMARY KEY, run_id VARCHAR NOT NULL, sample_id VARCHAR,
        attempt INTEGER, started_at TIMESTAMP, ended_at TIMESTAMP, latency_s DOUBLE,
        status VARCHAR NOT NULL, stop_reason VARCHAR, final_answer VARCHAR, score DOUBLE,
        n_turns INTEGER, n_tool_calls INTEGER, input_tokens BIGINT, output_tokens BIGINT,
        reasoning_tokens BIGINT, cost_usd DOUBLE, error VARCHAR, source_id INTEGER,
        source_line BIGINT)""",
    """CREATE TABLE IF NOT EXISTS tool_calls (
        rollout_id VARCHAR NOT NULL, call_idx INTEGER NOT NULL, turn_idx INTEGER, tool VARCHAR,
        arguments JSON, started_at TIMESTAMP, ended_at TIMESTAMP, latency_s DOUBLE,
        status VARCHAR, error VARCHAR, output_chars BIGINT)""",
    """CREATE TABLE IF NOT EXISTS grades (
        rollout_id VARCHAR NOT NULL, grader VARCHAR NOT NULL, score DOUBLE, weight DOUBLE,
        passed BOOLEAN, details JSON, error VARCHAR, latency_s DOUBLE)""",
    """CREATE TABLE IF NOT EXISTS messages (
        rollout_id VARCHAR NOT NULL, msg_idx INTEGER NOT NULL, role VARCHAR, content VARCHAR,
        turn_idx INTEGER, ts TIMESTAMP)""",
    """CREATE TABLE IF NOT EXISTS rejects (
        source_id INTEGER, line_no BIGINT, raw VARCHAR, reason VARCHAR)""",
]

# Raw events of the rft-endpoint format, kept so that rollouts whose events arrive in different
# files, or in different ingest calls, can be assembled again (version 2).
ENDPOINT_EVENTS_DDL = """CREATE TABLE IF NOT EXISTS endpoint_events (
    source_id INTEGER NOT NULL, line_no BIGINT NOT NULL, kind VARCHAR NOT NULL, rollout_id VARCHAR,
    tool VARCHAR, arguments JSON, started_at TIMESTAMP, ended_at TIMESTAMP, status VARCHAR,
    http_status INTEGER, error VARCHAR, output_chars BIGINT, run VARCHAR, step INTEGER, split VARCHAR,
    sample_id VARCHAR, final_answer VARCHAR, score DOUBLE, grades JSON, ts TIMESTAMP, prompt VARCHAR,
    reference VARCHAR)"""
SCHEMA_DDL.append(ENDPOINT_EVENTS_DDL)

# Step-level metrics a trainer reports (OpenAI fine-tuning job events and checkpoints, ART
# history), beside the rollouts; and the jobs they belong to (version 4). ``grader`` is '' for
# whole-run metrics.
TRAINING_DDL = [
    """CREATE TABLE IF NOT EXISTS training_metrics (
        job VARCHAR NOT NULL, step INTEGER, split VARCHAR, grader VARCHAR NOT NULL, metric VARCHAR NOT NULL,
        value DOUBLE, source_id INTEGER)""",
    """CREATE TABLE IF NOT EXISTS training_jobs (
        job VARCHAR NOT NULL, model VARCHAR, fine_tuned_model VARCHAR, method VARCHAR, status VARCHAR,
        hyperparameters JSON, meta JSON, source_id INTEGER)""",
]
SCHEMA_DDL.extend(TRAINING_DDL)

# version -> statements that bring a database of that version to the next one
MIGRATIONS = {
    1: [ENDPOINT_EVENTS_DDL],
    # 3: a failed grader keeps its error (score NULL); a rollout that never reached a dataset
    # sample (ungraded endpoint rollouts) has a NULL sample instead of a made-up one
    2: ["ALTER TABLE grades ADD COLUMN error VARCHAR", "ALTER TABLE grades ADD COLUMN latency_s DOUBLE",
        "ALTER TABLE rollouts ALTER COLUMN sample_id DROP NOT NULL",
        "UPDATE rollouts SET sample_id = NULL WHERE sample_id = '(unknown)'"],
    3: TRAINING_DDL,
}

# Tables whose rows belong to one rollout, deleted with it.
ROLLOUT_CHILD_TABLES = ("tool_calls", "grades", "messages")



class StoreError(RuntimeError):
    """A problem opening or using the database, with what to do next."""


class DatabaseLockedError(StoreError):
    pass


class SchemaVersionError(StoreError):
    pass


_LOCK_HOLDER = re.compile(r"Conflicting lock is held in (?P<prog>.+?) \(PID (?P<pid>\d+)\)")


def _locked_message(path: Path, exc: Exception) -> str:
    m = _LOCK_HOLDER.search(str(exc))
    holder = f" by {m['prog']} (PID {m['pid']})" if m else ""
    return (
        f"The database {path} is in use{holder}. DuckDB allows one writer at a time: close the other "
        f"notebook or command (or shut down its kernel), or point --db / ${config.DB_ENV_VAR} at another file."
    )


def connect(db: str | os.PathLike | None = None, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """Open the rolloutlab database, creating the canonical tables when writable.

    ``db`` defaults to ``$ROLLOUTLAB_DB`` or ``data/rolloutlab.duckdb``. Open ``read_only=True``
    where you only read: several readers may share a file that no writer holds.
    """
    path = config.db_path(db)
    if read_only and not path.exists():
        raise StoreError(f"No database at {path}. Create it with `rolloutlab ingest PATH --db {path}` "
                         "(or `make demo`).")
    if not read_only:
        path.parent.mkdir(parents=True, exist_ok=True)
    try:
        con = duckdb.connect(str(path), read_only=read_only)
    except duckdb.IOException as exc:
        if "lock" in str(exc).lower():
            raise DatabaseLockedError(_locked_message(path, exc)) from None
        raise StoreError(f"Could not open the database {path}: {exc}") from None
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET enable_progress_bar = false")  # our own tqdm bars report progress
    try:
        _ensure_schema(con, path, read_only)
    except Exception:
        con.close()
        raise
    return con


def _ensure_schema(con: duckdb.DuckDBPyConnection, path: Path, read_only: bool) -> None:
    has_meta = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'rolloutlab_meta'"
    ).fetchone()[0]
    if has_meta:
        row = con.execute("SELECT value FROM rolloutlab_meta WHERE key = 'schema_version'").fetchone()
        found = int(row[0]) if row else None
        if found is not None and found < SCHEMA_VERSION and not read_only and \
                all(v in MIGRATIONS for v in range(found, SCHEMA_VERSION)):
            with transaction(con):
                for version in range(found, SCHEMA_VERSION):
                    for ddl in MIGRATIONS[version]:
                        con.execute(ddl)
                con.execute("UPDATE rolloutlab_meta SET value = ? WHERE key = 'schema_version'",
                            [str(SCHEMA_VERSION)])
            return
        if found is not None and found < SCHEMA_VERSION and read_only:
            raise SchemaVersionError(
                f"The database {path} has rolloutlab schema version {found}; this rolloutlab uses "
                f"version {SCHEMA_VERSION}. Open it once for writing to upgrade it in place "
                f"(e.g. `rolloutlab ingest` into it, or rolloutlab.connect(db)).")
        if found != SCHEMA_VERSION:
            raise SchemaVersionError(
                f"The database {path} has rolloutlab schema version {found}; this rolloutlab uses "
                f"version {SCHEMA_VERSION}. Re-ingest your logs into a new file (--db NEW.duckdb), "
                "or use the rolloutlab release that wrote it."
            )
        return
    n_tables = con.execute("SELECT count(*) FROM information_schema.tables").fetchone()[0]
    if n_tables:
        raise SchemaVersionError(
            f"{path} is a DuckDB file but not a rolloutlab database (it has no rolloutlab_meta table). "
            "Point --db at a new file."
        )
    if read_only:
        raise StoreError(f"{path} is empty; ingest logs into it first with `rolloutlab ingest`.")
    with transaction(con):
        for ddl in SCHEMA_DDL:
            con.execute(ddl)
        con.execute("INSERT INTO rolloutlab_meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """All or nothing: commit when the block finishes, roll back on any exception."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield con
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")



_PARAM = re.compile(r"\$([A-Za-z_]\w*)")


def run_sql(con: duckdb.DuckDBPyConnection, sql: str, values: dict) -> duckdb.DuckDBPyConnection:
    """Execute with the named parameters the SQL uses (DuckDB refuses unused ones)."""
    used = set(_PARAM.findall(sql))
    return con.execute(sql, {k: v for k, v in values.items() if k in used} or None)
