"""The store: the DuckDB database and its schema (``database``), what is loaded (``catalog``), the Parquet lake and
Spark as its other engines. May import config and text; the lake reads through ingest's checks, Spark reuses analysis's SQL."""
from .database import (APPEND_DDL, ROLLOUT_CHILD_TABLES, SAMPLE_SOURCES_DDL, SCHEMA_DDL, SCHEMA_VERSION, STALE, STATUSES,
                       DatabaseLockedError, Result, SchemaVersionError, SharedReader, StoreError, connect, glob_literal,
                       read_transaction, require_writer, run_sql, snapshot, stale_sources, transaction, waiting_writer,
                       writer_intent_path)

__all__ = ["connect", "transaction", "read_transaction", "snapshot", "run_sql", "glob_literal", "require_writer",
           "stale_sources", "waiting_writer", "writer_intent_path", "SharedReader", "Result", "StoreError",
           "DatabaseLockedError", "SchemaVersionError", "SCHEMA_VERSION", "SCHEMA_DDL", "APPEND_DDL",
           "SAMPLE_SOURCES_DDL", "ROLLOUT_CHILD_TABLES", "STALE", "STATUSES"]
