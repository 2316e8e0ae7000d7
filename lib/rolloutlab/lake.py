"""The Parquet lake: the canonical tables as Parquet files, for engines beyond one DuckDB file.

Layout (docs/scale.md)::

    DIR/rolloutlab-lake.json            the manifest: lake and schema version, tables, row counts
    DIR/rollouts/run_id=<run>/*.parquet  per-rollout tables, Hive-partitioned by run
    DIR/tool_calls/run_id=<run>/...      (tool_calls, grades, messages carry their rollout's run)
    DIR/runs.parquet ...                 the small tables whole

zstd-compressed. ``export`` writes one from a database; ``read_lake`` (what ``ingest`` does with
a lake folder) loads one back; ``connect_lake`` opens DuckDB views over one without loading it.
"""
from __future__ import annotations

import json
import os
import shutil
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import pandas as pd
from tqdm.auto import tqdm

from . import config, store

MANIFEST = "rolloutlab-lake.json"
LAKE_VERSION = 1
PARTITION = "run_id"
# per-rollout tables: partitioned by their rollout's run
PARTITIONED = ("rollouts", "tool_calls", "grades", "messages")
WHOLE = ("runs", "samples", "sources", "rejects", "training_metrics", "training_jobs", "endpoint_events")
TABLES = PARTITIONED + WHOLE


class LakeError(ValueError):
    """A lake that cannot be written or read, with what to do."""


def _lit(value: str) -> str:
    """A SQL string literal (COPY's target cannot be a bound parameter)."""
    return "'" + str(value).replace("'", "''") + "'"


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def table_schema(con: duckdb.DuckDBPyConnection, table: str) -> list[tuple[str, str]]:
    """(column, DuckDB type) of a table, in order."""
    return [tuple(r) for r in con.execute(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ? AND table_schema = 'main' "
        "ORDER BY ordinal_position", [table]).fetchall()]


def table_columns(con: duckdb.DuckDBPyConnection, table: str) -> list[str]:
    return [name for name, _ in table_schema(con, table)]


def export_query_sql(table: str, columns: list[str]) -> str:
    """The rows of one table as exported: per-rollout child tables gain their rollout's run."""
    cols = ", ".join(f"t.{_q(c)}" for c in columns)
    if table in PARTITIONED and table != "rollouts":
        return f"SELECT {cols}, r.run_id FROM {_q(table)} t JOIN rollouts r USING (rollout_id)"
    return f"SELECT {cols} FROM {_q(table)} t"


def export(con: duckdb.DuckDBPyConnection, to: str | os.PathLike, progress: bool | None = None) -> pd.DataFrame:
    """Write every canonical table of ``con`` to the lake folder ``to`` (which must not exist or
    be empty). Written beside it first and renamed at the end, so a lake is never half there.
    Returns one row per table: table, rows, partitioned, path."""
    target = Path(to)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise LakeError(f"{target} exists and is not empty: export to a new folder (a lake is written whole)")
    staging = target.with_name(f".{target.name}.partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    tables, disable = {}, config.progress_disabled() if progress is None else not progress
    try:
        for table in tqdm(TABLES, desc="export", unit="table", disable=disable):
            schema = table_schema(con, table)
            columns = [name for name, _ in schema]
            query = export_query_sql(table, columns)
            rows = con.execute(f"SELECT count(*) FROM ({query})").fetchone()[0]
            if table in PARTITIONED:
                path = staging / table
                options = f"FORMAT parquet, COMPRESSION zstd, PARTITION_BY ({_q(PARTITION)})"
                if rows:
                    con.execute(f"COPY ({query}) TO {_lit(path)} ({options})")
                else:
                    path.mkdir()
            else:
                path = staging / f"{table}.parquet"
                con.execute(f"COPY ({query}) TO {_lit(path)} (FORMAT parquet, COMPRESSION zstd)")
            tables[table] = {"rows": rows, "path": path.name, "partition_by": PARTITION if table in PARTITIONED else None,
                             "columns": columns, "types": [t for _, t in schema]}
        from . import __version__  # (the package finishes importing after this module)

        meta = {"format": "rolloutlab-lake", "lake_version": LAKE_VERSION, "schema_version": store.SCHEMA_VERSION,
                    "rolloutlab": __version__, "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                    "compression": "zstd", "tables": tables}
        (staging / MANIFEST).write_text(json.dumps(meta, indent=2) + "\n")
        if target.exists():
            target.rmdir()
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return pd.DataFrame([{"table": t, "rows": v["rows"], "partitioned": v["partition_by"] is not None,
                          "path": str(target / v["path"])} for t, v in tables.items()])


def is_lake(path: str | os.PathLike) -> bool:
    return (Path(path) / MANIFEST).is_file()


def manifest(path: str | os.PathLike) -> dict:
    """The lake's manifest, checked: a lake of another version is refused with what to do."""
    file = Path(path) / MANIFEST
    try:
        data = json.loads(file.read_text())
    except (OSError, ValueError) as exc:
        raise LakeError(f"{file}: not a readable lake manifest ({exc}); export the lake again") from exc
    if data.get("format") != "rolloutlab-lake" or data.get("lake_version") != LAKE_VERSION:
        raise LakeError(f"{file}: lake version {data.get('lake_version')!r}, this rolloutlab reads version "
                        f"{LAKE_VERSION}: export it again with this release")
    if data.get("schema_version") != store.SCHEMA_VERSION:
        raise LakeError(f"{file}: tables of schema version {data.get('schema_version')}, this rolloutlab uses "
                        f"{store.SCHEMA_VERSION}: ingest the lake with the release that wrote it, open the database "
                        "with this one (it upgrades in place), and export again")
    return data


def empty_table_sql(info: dict) -> str:
    """No rows, with the table's columns and types from the manifest."""
    return "SELECT " + ", ".join(f"CAST(NULL AS {t}) AS {_q(c)}" for c, t in zip(info["columns"], info["types"])) \
        + " LIMIT 0"


def scan_sql(lake: str | os.PathLike, table: str, info: dict) -> str:
    """A query over one table of the lake, with the table's own columns in order."""
    root = Path(lake)
    cols = ", ".join(_q(c) for c in info["columns"])
    if info["partition_by"]:
        pattern = root / info["path"] / "**" / "*.parquet"
        if not info["rows"]:  # no partition, no file
            return empty_table_sql(info)
        return (f"SELECT {cols} FROM read_parquet({_lit(pattern)}, hive_partitioning = true, "
                f"hive_types = {{{_lit(PARTITION)}: VARCHAR}})")
    return f"SELECT {cols} FROM read_parquet({_lit(root / info['path'])})"


SOURCE_TABLES = ("runs", "samples", "sources", "rejects", "training_metrics", "training_jobs", "endpoint_events",
                 "rollouts")  # rows that name their source; the other per-rollout rows follow their rollout


def read_lake_sql(lake: str | os.PathLike, table: str, tables: dict) -> str:
    """Insert one table of the lake, its sources renumbered by ``_rl_lake_ids`` (old_id, new_id),
    which leaves out the sources already loaded."""
    info = tables[table]
    scan = scan_sql(lake, table, info)
    names = ", ".join(_q(c) for c in info["columns"])
    if "source_id" in info["columns"]:
        values = ", ".join("m.new_id" if c == "source_id" else f"t.{_q(c)}" for c in info["columns"])
        join = "JOIN _rl_lake_ids m ON m.old_id = t.source_id"
    else:
        values, join = ", ".join(f"t.{_q(c)}" for c in info["columns"]), ""
    if table == "runs":  # a run already here keeps its row
        join += " WHERE t.run_id NOT IN (SELECT run_id FROM runs)"
    keep = "" if table in SOURCE_TABLES else (
        f"WHERE t.rollout_id IN (SELECT rollout_id FROM ({scan_sql(lake, 'rollouts', tables['rollouts'])}) "
        "WHERE source_id IN (SELECT old_id FROM _rl_lake_ids))")
    return f"INSERT INTO {_q(table)} ({names}) SELECT {values} FROM ({scan}) t {join} {keep}"


def read_lake(con: duckdb.DuckDBPyConnection, lake: str | os.PathLike) -> list[dict]:
    """Load a lake into ``con`` (inside the caller's transaction): one result row per source of
    the lake — ``loaded``, or ``unchanged`` when a source with the same content is already here.
    Into an empty database the source ids stay as they were (a round trip gives identical
    tables); otherwise they are numbered after the database's own."""
    tables = manifest(lake)["tables"]
    missing = [t for t in TABLES if t not in tables]
    if missing:
        raise LakeError(f"{Path(lake) / MANIFEST}: tables {', '.join(missing)} missing; export the lake again")
    sources = scan_sql(lake, "sources", tables["sources"])
    empty = con.execute("SELECT count(*) = 0 FROM sources").fetchone()[0]
    con.execute(f"""CREATE OR REPLACE TEMP TABLE _rl_lake_ids AS
        SELECT source_id AS old_id, {'source_id' if empty else "nextval('source_id_seq')"} AS new_id
        FROM ({sources}) WHERE sha256 NOT IN (SELECT sha256 FROM sources) ORDER BY source_id""")
    clash = con.execute(f"""SELECT count(*), any_value(rollout_id) FROM ({scan_sql(lake, 'rollouts', tables['rollouts'])})
                            WHERE source_id IN (SELECT old_id FROM _rl_lake_ids)
                              AND rollout_id IN (SELECT rollout_id FROM rollouts)""").fetchone()
    if clash[0]:
        raise LakeError(f"{lake}: {clash[0]} of its rollouts are already in this database from other files (e.g. "
                        f"{clash[1]!r}); ingest the lake into a new database (--db NEW.duckdb)")
    if empty:  # the sequence continues after the ids kept
        con.execute("SELECT max(nextval('source_id_seq')) FROM range((SELECT coalesce(max(new_id), 0) FROM _rl_lake_ids))")
    for table in SOURCE_TABLES + tuple(t for t in PARTITIONED if t not in SOURCE_TABLES):
        con.execute(read_lake_sql(lake, table, tables))
    rows = con.execute(f"""SELECT s.path, s.format, m.new_id, s.n_records, s.n_rejected
                           FROM ({sources}) s LEFT JOIN _rl_lake_ids m ON m.old_id = s.source_id
                           ORDER BY s.source_id""").fetchall()
    con.execute("DROP TABLE IF EXISTS _rl_lake_ids")
    return [{"path": path, "format": fmt, "action": "unchanged" if sid is None else "loaded", "source_id": sid,
             "records": n, "loaded": 0 if sid is None else n - rej, "rejected": 0 if sid is None else rej,
             "reasons": []} for path, fmt, sid, n, rej in rows]


def connect_lake(lake: str | os.PathLike, memory_limit: str | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection whose canonical tables are views over the lake's Parquet
    files: every metric function runs on it, reading only what its query needs (out of core)."""
    tables = manifest(lake)["tables"]
    con = duckdb.connect(":memory:")
    con.execute("SET enable_progress_bar = false")  # as store.connect: no bars printed into output
    if memory_limit:
        con.execute("SET memory_limit = ?", [memory_limit])
    for table in TABLES:
        con.execute(f"CREATE VIEW {_q(table)} AS {scan_sql(lake, table, tables[table])}")
    return con
