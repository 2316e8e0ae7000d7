"""What a format loader is handed and what it hands back."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb


@dataclass
class Converted:
    """A format's records as native lines: (line number, line, location); and those that could not
    be converted: (line number, raw, reason with its location)."""
    lines: list[tuple[int, str, str]]
    failures: list[tuple[int, str, str]]


@dataclass(frozen=True)
class LoadContext:
    con: duckdb.DuckDBPyConnection
    path: Path
    source_id: int
    run: str | None = None  # --run: overrides the file's run labels
    split: str | None = None
    step: int | None = None
    # appending to a file loaded before: read only this file of its new lines, numbered after
    # the ``line_offset`` lines loaded already (``path`` still names the file, for labels)
    read_path: Path | None = None
    line_offset: int = 0
    # the name of the file the records come from: the scope of content ids of records that name
    # no evaluation (empty: ``path``'s)
    file_name: str = ""
    # many files in one call: the ingest's shared batch (ingest.batch.Batch) and this file's place
    # in it; the file's lines load with other files' when the batch is full (counted then, in ``target``)
    batch: Any = None
    target: Any = None
    # records a format converted, handed to the native loader
    converted: Converted | None = None

    @property
    def source(self) -> Path:
        """The file to read."""
        return self.read_path or self.path


@dataclass
class LoadResult:
    n_records: int
    n_rejected: int
    notes: list[str] = field(default_factory=list)
    n_duplicates: int = 0  # records that are rollouts already loaded (kept once, never rejected)
