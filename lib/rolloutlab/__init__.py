"""rolloutlab: a Jupyter workbench for Agent RFT rollout logs, backed by DuckDB."""
from .catalog import rejects, runs, sources
from .ingest import IngestError, detect_format, ingest
from .store import DatabaseLockedError, SchemaVersionError, StoreError, connect, transaction

__version__ = "0.1.0"

__all__ = [
    "connect", "transaction", "StoreError", "DatabaseLockedError", "SchemaVersionError",
    "ingest", "detect_format", "IngestError",
    "runs", "sources", "rejects",
]
