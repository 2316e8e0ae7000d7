"""rolloutlab: a Jupyter workbench for Agent RFT rollout logs, backed by DuckDB."""
from .catalog import rejects, runs, sources
from .ingest import IngestError, detect_format, ingest
from .metrics import (UnknownRunError, latency, latency_ecdf, rollout_table, sample_stats, signal_plan, summary,
                      tool_pairs, tool_stats)
from .readiness import check
from .compare import by_step, compare, distribution_shift, sample_deltas, shift_test
from .store import DatabaseLockedError, SchemaVersionError, StoreError, connect, transaction

__version__ = "0.1.0"

__all__ = [
    "connect", "transaction", "StoreError", "DatabaseLockedError", "SchemaVersionError",
    "ingest", "detect_format", "IngestError",
    "runs", "sources", "rejects",
    "summary", "sample_stats", "signal_plan", "tool_stats", "tool_pairs", "latency", "latency_ecdf",
    "rollout_table", "UnknownRunError",
    "check",
    "compare", "sample_deltas", "distribution_shift", "shift_test", "by_step",
]
