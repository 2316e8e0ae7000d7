"""The DuckDB store: connection, canonical schema, schema version, transactions."""
from __future__ import annotations

import atexit
import os
import re
import shlex
import threading
import time
import warnings
import weakref
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import duckdb

from .. import config
from .stop_reasons import stop_reason_sql

SCHEMA_VERSION = 9

STATUSES = ("ok", "model_error", "infra_error", "truncated", "ungraded")

# What a file that grows needs remembered (version 5): where its complete lines end, how many
# there are, the hash of the bytes up to there, and what a last line without its newline added
# (loaded by a finished ingest, taken back when the line is completed).
APPEND_DDL = [
    "ALTER TABLE sources ADD COLUMN IF NOT EXISTS bytes_loaded BIGINT",
    "ALTER TABLE sources ADD COLUMN IF NOT EXISTS lines_loaded BIGINT",
    "ALTER TABLE sources ADD COLUMN IF NOT EXISTS prefix_sha256 VARCHAR",
    "ALTER TABLE sources ADD COLUMN IF NOT EXISTS tail_records INTEGER",
    "ALTER TABLE sources ADD COLUMN IF NOT EXISTS tail_rejected INTEGER",
]

# Canonical tables (DESIGN.md). Times are UTC TIMESTAMPs, durations seconds.
SCHEMA_DDL = [
    """CREATE TABLE IF NOT EXISTS rolloutlab_meta (key VARCHAR PRIMARY KEY, value VARCHAR)""",
    """CREATE SEQUENCE IF NOT EXISTS source_id_seq START 1""",
    """CREATE TABLE IF NOT EXISTS sources (
        source_id INTEGER PRIMARY KEY, path VARCHAR NOT NULL, format VARCHAR NOT NULL,
        sha256 VARCHAR NOT NULL, bytes BIGINT, n_records BIGINT, n_rejected BIGINT,
        ingested_at TIMESTAMP)""",
    *APPEND_DDL,
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
    reference VARCHAR, grader_latency_s DOUBLE)"""
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

# Which sources provide each sample row (version 7): a row shared by several files stays until
# the last of them is replaced or removed.
SAMPLE_SOURCES_DDL = """CREATE TABLE IF NOT EXISTS sample_sources (
    sample_id VARCHAR NOT NULL, split VARCHAR, source_id INTEGER NOT NULL)"""
SCHEMA_DDL.append(SAMPLE_SOURCES_DDL)

# People's judgements of rollouts (version 8): "this one is actually correct". Not tied to a
# source, so they survive re-ingest; one row per judgement (several people may label a rollout).
LABELS_DDL = """CREATE TABLE IF NOT EXISTS labels (
    rollout_id VARCHAR NOT NULL, value DOUBLE, passed BOOLEAN, note VARCHAR, who VARCHAR,
    labelled_at TIMESTAMP, origin VARCHAR)"""
SCHEMA_DDL.append(LABELS_DDL)
# Why a rollout stopped (version 8): stop_reason in one vocabulary (ingest/stop_reasons.py), the
# producer's own word beside it.
STOP_REASON_DDL = "ALTER TABLE rollouts ADD COLUMN IF NOT EXISTS stop_reason_raw VARCHAR"
SCHEMA_DDL.append(STOP_REASON_DDL)
# Input tokens read from a prompt cache (version 8), billed at the cached price (metrics/costs.py).
CACHED_TOKENS_DDL = "ALTER TABLE rollouts ADD COLUMN IF NOT EXISTS cached_input_tokens BIGINT"
SCHEMA_DDL.append(CACHED_TOKENS_DDL)

# Identity (version 9). A run is one (label, evaluation, step, split): ``run_keys`` maps each such
# key to the run it loads into (``named``: chosen by a person with merge or rename, kept across
# re-ingest; ``tag``: the evaluation as people read it, e.g. when it started). A rollout keeps the
# producer's own attempt number and a fingerprint of what it holds; a record that is a rollout
# already loaded is counted (``sources.n_duplicates``) and listed (``duplicates``), never rejected.
RUN_KEYS_DDL = """CREATE TABLE IF NOT EXISTS run_keys (
    label VARCHAR NOT NULL, evaluation VARCHAR, step INTEGER, split VARCHAR, run_id VARCHAR NOT NULL,
    named BOOLEAN NOT NULL DEFAULT false, tag VARCHAR)"""
DUPLICATES_DDL = """CREATE TABLE IF NOT EXISTS duplicates (
    source_id INTEGER NOT NULL, line_no BIGINT, rollout_id VARCHAR NOT NULL, fingerprint VARCHAR,
    same_content BOOLEAN)"""
IDENTITY_DDL = [
    "ALTER TABLE runs ADD COLUMN IF NOT EXISTS evaluation VARCHAR",
    "ALTER TABLE rollouts ADD COLUMN IF NOT EXISTS attempt_raw INTEGER",
    "ALTER TABLE rollouts ADD COLUMN IF NOT EXISTS fingerprint VARCHAR",
    "ALTER TABLE sources ADD COLUMN IF NOT EXISTS n_duplicates BIGINT DEFAULT 0",
    # what the file was loaded with (--run, --split, --step), to read it again the same way
    "ALTER TABLE sources ADD COLUMN IF NOT EXISTS options JSON",
    RUN_KEYS_DDL,
    DUPLICATES_DDL,
]
SCHEMA_DDL.extend(IDENTITY_DDL)

STALE = "stale:"  # sources.sha256 of a file to read again: ingest loads it anew, as if its content changed

STOP_REASON_SQL = stop_reason_sql("stop_reason_raw")

# version -> statements that bring a database of that version to the next one
MIGRATIONS = {
    1: [ENDPOINT_EVENTS_DDL],
    # 3: a failed grader keeps its error (score NULL); a rollout that never reached a dataset
    # sample (ungraded endpoint rollouts) has a NULL sample instead of a made-up one
    2: ["ALTER TABLE grades ADD COLUMN error VARCHAR", "ALTER TABLE grades ADD COLUMN latency_s DOUBLE",
        "ALTER TABLE rollouts ALTER COLUMN sample_id DROP NOT NULL",
        "UPDATE rollouts SET sample_id = NULL WHERE sample_id = '(unknown)'"],
    3: TRAINING_DDL,
    4: APPEND_DDL,
    5: ["ALTER TABLE endpoint_events ADD COLUMN IF NOT EXISTS grader_latency_s DOUBLE"],  # 6: how long the grader took
    # 7: the sources that provide each sample row: its own, and every source with rollouts of it
    6: [SAMPLE_SOURCES_DDL,
        """INSERT INTO sample_sources SELECT sample_id, split, source_id FROM samples WHERE source_id IS NOT NULL
           UNION SELECT DISTINCT s.sample_id, s.split, r.source_id FROM samples s JOIN rollouts r USING (sample_id)
           JOIN runs u ON u.run_id = r.run_id AND u.split IS NOT DISTINCT FROM s.split  -- the split the run is of
           WHERE r.source_id IS NOT NULL"""],
    7: [LABELS_DDL, STOP_REASON_DDL, CACHED_TOKENS_DDL,  # 8: labels; stop reasons in one vocabulary; cached tokens
        "UPDATE rollouts SET stop_reason_raw = stop_reason",
        f"UPDATE rollouts SET stop_reason = {STOP_REASON_SQL}"],
    # 9: identity. Every run keeps its name (its key: its label, step and split, and the
    # experiment an earlier rolloutlab recorded) and its attempts; the files whose records the old
    # rules rejected as duplicates are listed and read again by the next ingest of them.
    8: [*IDENTITY_DDL,
        "UPDATE sources SET n_duplicates = 0",
        "UPDATE rollouts SET attempt_raw = attempt",
        "INSERT INTO run_keys SELECT label, meta->>'experiment', step, split, run_id, false, NULL FROM runs "
        "WHERE run_id NOT IN (SELECT run_id FROM run_keys)",
        "UPDATE runs SET evaluation = meta->>'experiment'",
        # the vocabulary learned more providers' words (Anthropic's model_context_window_exceeded ...)
        f"UPDATE rollouts SET stop_reason = {STOP_REASON_SQL} WHERE stop_reason_raw IS NOT NULL",
        # every file is read again by its next ingest: rollouts and runs decided anew (the old rules
        # merged evaluations and rejected steps), people's labels following their lines
        f"UPDATE sources SET sha256 = '{STALE}' || sha256, prefix_sha256 = NULL, bytes_loaded = NULL"],
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


def _holder(exc: Exception) -> str:
    m = _LOCK_HOLDER.search(str(exc))
    return f"{m['prog']} (PID {m['pid']})" if m else "another process"


def _is_lock_error(exc: Exception) -> bool:
    return isinstance(exc, duckdb.IOException) and "lock" in str(exc).lower()


def _same_process_message(path: Path) -> str:
    return (f"This process already holds {path} open for writing (rolloutlab.connect(db) without read_only): close "
            "that connection (con.close()) before reading through a shared handle, or read through it.")


def writer_intent_path(path: Path) -> Path:
    """Where a writer waiting for the file says so, so that readers let it in."""
    return path.with_name(path.name + ".writer")


def waiting_writer(path: Path) -> int | None:
    """The PID of a live writer waiting for the file, or None."""
    try:
        pid = int(writer_intent_path(path).read_text().split()[0])
        os.kill(pid, 0)
    except (OSError, ValueError, IndexError):
        return None  # no intent, or its writer is gone (killed while it waited)
    return pid


def _wait(what: str, path: Path, limit: float, attempt) -> object:
    """Call ``attempt()`` until it returns something, for at most ``limit`` seconds; it returns
    None (or raises a lock error) while the file is taken. Says so when the wait is long."""
    start = time.monotonic()
    warned = False
    holder = "another process"
    while True:
        try:
            got = attempt()
        except duckdb.IOException as exc:
            if not _is_lock_error(exc):
                raise StoreError(f"Could not open the database {path}: {exc}") from None
            holder, got = _holder(exc), None
        if got is not None:
            return got
        waited = time.monotonic() - start
        if waited > limit:
            raise DatabaseLockedError(
                f"The database {path} is in use by {holder}: {what} waited {waited:.0f} s for it. A writer "
                "(rolloutlab ingest / watch) holds the file while it loads; readers only while they query. "
                f"Wait for it to finish, or point --db / ${config.DB_ENV_VAR} at another file.")
        if waited > config.READER_WARN_S and not warned:
            warnings.warn(f"{what}: waiting for {holder} to finish with {path} ({waited:.0f} s so far)",
                          stacklevel=4)
            warned = True
        time.sleep(config.LOCK_POLL_S)


def _configure(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET enable_progress_bar = false")  # our own tqdm bars report progress
    return con


def connect(db: str | os.PathLike | None = None, read_only: bool = False,
            shared: bool = True) -> "duckdb.DuckDBPyConnection | SharedReader":
    """Open the rolloutlab database, creating the canonical tables when writable.

    ``db`` defaults to ``$ROLLOUTLAB_DB`` or ``data/rolloutlab.duckdb``.

    ``read_only=True`` (notebooks, the CLI's reading commands) returns a ``SharedReader``: it holds
    the file only while it runs a query and lets go right after, so a notebook left open never
    blocks ``rolloutlab ingest`` or ``watch``, and every call sees what was committed last; while
    a writer holds the file, a call waits for it (and says so when the wait is long).
    ``shared=False`` gives a plain read-only DuckDB connection instead, which holds the file
    until closed.

    Writing (the default) waits for readers to let go (``config.wait_s("writer")``), then holds the
    file until ``close()``: keep writing connections short-lived.
    """
    path = config.db_path(db)
    if read_only and not path.exists():
        raise StoreError(f"No database at {path}. Create it with `rolloutlab ingest PATH --db {path}` "
                         "(or `make demo`).")
    if read_only and shared:
        return SharedReader(path)
    if not read_only:
        path.parent.mkdir(parents=True, exist_ok=True)
    intent = writer_intent_path(path)
    if not read_only:
        intent.write_text(f"{os.getpid()}\n")
    try:
        con = _wait("opening for writing" if not read_only else "opening", path,
                    config.wait_s("reader" if read_only else "writer"),
                    lambda: duckdb.connect(str(path), read_only=read_only))
    except duckdb.Error as exc:
        raise StoreError(_same_process_message(path) if "different configuration" in str(exc)
                         else f"Could not open the database {path}: {exc}") from None
    finally:
        if not read_only:
            intent.unlink(missing_ok=True)
    _configure(con)
    if not read_only:  # an ingest's memory stays flat as files grow
        con.execute("SET memory_limit = ?", [os.environ.get("ROLLOUTLAB_MEMORY_LIMIT", config.WRITER_MEMORY_LIMIT)])
    try:
        _ensure_schema(con, path, read_only)
    except Exception:
        con.close()
        raise
    return con


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class Result:
    """A query's rows, already fetched (the connection that ran it may be closed): ``df()``,
    ``fetchall()``, ``fetchone()``, ``fetchnumpy()``, ``arrow()`` convert as DuckDB's own do."""

    _lock = threading.Lock()
    _converter: duckdb.DuckDBPyConnection | None = None

    def __init__(self, table):
        self._table = table
        self._next = 0

    def _convert(self, how: str):
        with Result._lock:
            if Result._converter is None:
                Result._converter = duckdb.connect()
            rel = Result._converter.from_arrow(self._table)
            # Arrow has no 128-bit integer: DuckDB hands HUGEINT (sums of BIGINT) over as
            # decimal128(38, 0); read it back as HUGEINT so values come out as they would directly
            names = [f.name for f in self._table.schema]
            huge = [str(f.type) == "decimal128(38, 0)" for f in self._table.schema]
            if any(huge):
                rel = rel.project(", ".join(
                    f'CAST({_quote(n)} AS HUGEINT) AS {_quote(n)}' if h else _quote(n) for n, h in zip(names, huge)))
            return getattr(rel, how)()

    def df(self):
        return self._convert("df")

    fetchdf = df

    def fetchall(self) -> list[tuple]:
        rows = self._convert("fetchall")[self._next:]
        self._next += len(rows)
        return rows

    def fetchone(self):
        rows = self._convert("fetchall")
        if self._next >= len(rows):
            return None
        self._next += 1
        return rows[self._next - 1]

    def fetchnumpy(self):
        return self._convert("fetchnumpy")

    def arrow(self):
        return self._table

    fetch_arrow_table = arrow


_OPEN_READERS: "weakref.WeakSet[SharedReader]" = weakref.WeakSet()


@atexit.register
def _close_readers() -> None:
    """Close what readers still hold before the interpreter goes: a DuckDB connection closed
    by a timer thread during shutdown aborts the process."""
    for reader in list(_OPEN_READERS):
        reader.close()


class SharedReader:
    """A read-only handle on the database that never holds the file between calls.

    Each query opens the file read-only if it is not open already (waiting while a writer holds
    it), runs, and fetches its rows; the file is let go ``config.READER_IDLE_S`` seconds after the
    last query, so the queries of one call (a summary, a readiness check) share one opening. A
    writer that wants the file says so (``writer_intent_path``): the next query lets go first, so
    even a reader that queries all the time lets writers in, and then reads what they wrote.
    Usable wherever the functions of rolloutlab take ``con``.
    """

    def __init__(self, path: Path, idle_s: float | None = None):
        self.path = Path(path)
        self.idle_s = config.READER_IDLE_S if idle_s is None else idle_s
        self.opened = 0  # how many times the file was opened (the cost per call, in bench/)
        self._lock = threading.RLock()
        self._con: duckdb.DuckDBPyConnection | None = None
        self._timer: threading.Timer | None = None
        self._closed = False
        _OPEN_READERS.add(self)
        with self._lock:
            _ensure_schema(self._open(), self.path, True)
            self._release_later()

    def _attempt(self):
        if waiting_writer(self.path) is not None:
            return None  # a writer is waiting: let it in first
        try:
            return duckdb.connect(str(self.path), read_only=True)
        except duckdb.ConnectionException as exc:
            if "different configuration" in str(exc):
                raise StoreError(_same_process_message(self.path)) from None
            raise

    def _open(self) -> duckdb.DuckDBPyConnection:
        if self._closed:
            raise StoreError(f"This handle on {self.path} was closed; open another with rolloutlab.connect.")
        if self._con is None:
            self._con = _configure(_wait("reading", self.path, config.wait_s("reader"), self._attempt))
            self.opened += 1
        return self._con

    def _release_later(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = threading.Timer(self.idle_s, self.release)
        self._timer.daemon = True
        self._timer.start()

    def release(self) -> None:
        """Let go of the file now (it is opened again by the next query)."""
        with self._lock:
            if self._con is not None:
                self._con.close()
                self._con = None

    def execute(self, sql: str, parameters=None) -> Result:
        with self._lock:
            if self._con is not None and waiting_writer(self.path) is not None:
                self.release()  # a writer waits: let it in, then read what it wrote
            con = self._open()
            try:
                cursor = con.cursor()  # its own statement state: nothing left half-fetched on con
                try:
                    rel = cursor.sql(sql) if parameters is None else cursor.sql(sql, params=parameters)
                    return Result(rel.to_arrow_table() if rel is not None else None)
                finally:
                    cursor.close()
            finally:
                self._release_later()

    @contextmanager
    def snapshot(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """Hold the file for the whole block and yield a plain connection inside one read
        transaction: every query of the block sees the same committed state (an export, a
        backup). Writers wait until the block ends, so keep it to what must be consistent."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
            con = self._open()
            try:
                with read_transaction(con):
                    yield con
            finally:
                self._release_later()

    def close(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
            self.release()
            self._closed = True

    def __enter__(self) -> "SharedReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<rolloutlab.SharedReader {self.path}>"


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
            stale = stale_sources(con) if found < 9 else []
            if stale:
                warnings.warn(
                    f"{path}: upgraded to schema version {SCHEMA_VERSION}, whose rules decide anew which records are "
                    f"one rollout and which one run (the earlier rules rejected a second step or split under one "
                    f"label, and merged evaluations that reused ids). Until its {len(stale)} file(s) are ingested "
                    "again, they keep what the earlier rules made of them. Ingest them again (each is read once "
                    f"more; people's labels follow their lines): rolloutlab ingest "
                    f"{' '.join(shlex.quote(p) for p in stale[:20])}" + (" ..." if len(stale) > 20 else ""),
                    stacklevel=3)
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


def require_writer(con, what: str) -> None:
    """``what`` writes: refuse a shared reader with how to open the database for writing."""
    if isinstance(con, SharedReader):
        raise StoreError(f"{con.path} was opened for reading (rl.connect(db, read_only=True)); {what} needs it open "
                         "for writing: con = rl.connect(db), then con.close() when done.")


def stale_sources(con) -> list[str]:
    """Paths of files the store asks to read again (the identity rules of an earlier version
    rejected records of them): the next ingest of each loads it anew."""
    return [r[0] for r in con.execute("SELECT path FROM sources WHERE starts_with(sha256, ?) ORDER BY path",
                                      [STALE]).fetchall()]


# Connections (by id) inside a ``transaction`` block: DuckDB cannot say, and a failed BEGIN
# would abort the transaction already open.
_IN_TRANSACTION: set[int] = set()


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """All or nothing: commit when the block finishes, roll back on any exception."""
    con.execute("BEGIN TRANSACTION")
    _IN_TRANSACTION.add(id(con))
    try:
        yield con
    except BaseException:
        _IN_TRANSACTION.discard(id(con))
        con.execute("ROLLBACK")
        raise
    _IN_TRANSACTION.discard(id(con))
    con.execute("COMMIT")



@contextmanager
def read_transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """One consistent view for a block of reads: a transaction of its own when ``con`` has none
    open, else the caller's (DuckDB has no nested transactions)."""
    if id(con) in _IN_TRANSACTION:  # already inside the caller's transaction
        yield con
        return
    con.execute("BEGIN TRANSACTION")
    _IN_TRANSACTION.add(id(con))
    try:
        yield con
    finally:
        _IN_TRANSACTION.discard(id(con))
        con.execute("ROLLBACK")  # nothing was written: ending it is all


@contextmanager
def snapshot(con) -> Iterator[duckdb.DuckDBPyConnection]:
    """A plain connection whose reads all see one committed state, from a ``SharedReader`` or a
    DuckDB connection."""
    if isinstance(con, SharedReader):
        with con.snapshot() as held:
            yield held
    else:
        with read_transaction(con) as held:
            yield held


GLOB_CHARACTERS = "*?["


def glob_literal(path: str | os.PathLike) -> str:
    """``path`` as DuckDB's file readers take it literally: they expand * ? [ ] (and ** in
    folders) in every name they are given, so a file called ``a[1].jsonl`` would read ``a1.jsonl``.
    Each of those characters becomes a one-character class ([[], [*], [?]), which matches only
    itself. Every path handed to a DuckDB reader goes through here."""
    return "".join(f"[{c}]" if c in GLOB_CHARACTERS else c for c in str(path))


_PARAM = re.compile(r"\$([A-Za-z_]\w*)")


def run_sql(con: duckdb.DuckDBPyConnection, sql: str, values: dict) -> duckdb.DuckDBPyConnection:
    """Execute with the named parameters the SQL uses (DuckDB refuses unused ones)."""
    used = set(_PARAM.findall(sql))
    return con.execute(sql, {k: v for k, v in values.items() if k in used} or None)
