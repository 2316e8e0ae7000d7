"""Rows of a Parquet file (TRL completions, ART trajectories), a batch at a time, so memory stays
bounded by a batch. A file that cannot be read, or stops being readable part-way, ends the rows
with one ``Unreadable`` saying where: the rows before it still load."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

BATCH_ROWS = 1000


@dataclass
class Unreadable:
    reason: str


def columns(path: Path) -> list[str]:
    """The column names, [] when the file is not readable Parquet."""
    import pyarrow.parquet as pq

    try:
        return list(pq.read_schema(path).names)
    except Exception:  # not Parquet, or cut off: the sniffer just says no
        return []


def rows(path: Path) -> Iterator[dict | Unreadable]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        handle = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        yield Unreadable(f"not a readable Parquet file ({exc}); the file is cut off or corrupt: re-export it")
        return
    read = 0
    try:
        for batch in handle.iter_batches(batch_size=BATCH_ROWS):
            for row in batch.to_pylist():
                read += 1
                yield row
    except (pa.ArrowException, OSError) as exc:
        yield Unreadable(f"the rows after row {read} are unreadable ({exc}); the file is corrupt")
    finally:
        handle.close()
