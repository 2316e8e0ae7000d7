"""Follow a training run's logs while they grow: ``rolloutlab watch PATH...``.

Every poll looks at the files below the paths given; those that are new or changed since the
last poll are ingested in one transaction (``ingest(follow=True)``: a file that grew loads only its
new lines, a last line still being written waits for the next poll). Files of whole-document
formats (``.json``, ``.parquet``, ``.eval``) are written in one go: they are loaded once their
size and time stay the same for a poll, never half-written. The database is opened for writing
only while a poll ingests, so notebooks and the live view read in between; a poll that is killed
commits nothing, and the next run starts again from what was committed, without duplicates.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable

import pandas as pd

from ..store import database as store
from ..ingest import IngestFailed, expand_paths, ingest  # the package: its __init__ never imports watch

LINE_SUFFIXES = {".jsonl", ".ndjson", ".log"}  # written line by line: loaded as they grow


@dataclass
class WatchState:
    """What the previous polls saw of each file: (size, modification time)."""
    seen: dict[Path, tuple[int, int]] = field(default_factory=dict)
    pending: dict[Path, tuple[int, int]] = field(default_factory=dict)  # whole files waiting to settle


@dataclass
class PollResult:
    at: datetime
    files: pd.DataFrame  # the ingest's one row per file (empty when nothing changed)
    latest_step: int | None

    def line(self) -> str:
        """One line for the terminal: what this poll added."""
        stamp = self.at.strftime("%Y-%m-%d %H:%M:%S UTC")
        step = "" if self.latest_step is None else f", latest step {self.latest_step}"
        if self.files.empty:
            return f"{stamp}  no new records{step}"
        actions = self.files.action.value_counts()
        what = ", ".join(f"{n} {a}" for a, n in actions.items())
        return (f"{stamp}  +{int(self.files.loaded.sum()):,} records from {len(self.files)} file(s) ({what}), "
                f"{int(self.files.rejected.sum()):,} rejected{step}")


def _stat(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_size, st.st_mtime_ns


def changed_files(paths: Iterable[str | os.PathLike], state: WatchState, settle: bool = True) -> list[Path]:
    """Files to ingest now: line files that are new or changed; whole files once they settled
    (``settle=False``: at once, for a single poll)."""
    ready = []
    for path in expand_paths(paths):
        try:
            now = _stat(path)
        except FileNotFoundError:
            continue  # removed between listing and looking
        if state.seen.get(path) == now:
            continue
        if path.suffix in LINE_SUFFIXES or not settle or state.pending.get(path) == now:
            ready.append(path)
            state.pending.pop(path, None)
        else:
            state.pending[path] = now  # still being written? look again next poll
    return ready


def latest_step_sql() -> str:
    return "SELECT max(step) FROM runs"


def poll(db, paths: Iterable[str | os.PathLike], state: WatchState, format: str = "auto",
         run: str | None = None, split: str | None = None, step: int | None = None,
         settle: bool = True) -> PollResult:
    """One poll: ingest what changed, in one transaction, holding the database only meanwhile."""
    files = changed_files(paths, state, settle)
    result = pd.DataFrame()
    if files:
        con = store.connect(db)
        try:
            result = ingest(con, files, format=format, run=run, split=split, step=step, progress=False,
                            follow=True)
            latest = con.execute(latest_step_sql()).fetchone()[0]
        finally:
            con.close()
        for path in files:  # remembered only once committed: a killed poll is redone in full
            state.seen[path] = _stat(path)
    else:
        latest = _latest_step(db)
    return PollResult(datetime.now(timezone.utc), result, latest)


def _latest_step(db) -> int | None:
    """The latest step loaded, read without holding the file (None before the first ingest)."""
    try:
        reader = store.connect(db, read_only=True)
    except store.StoreError:
        return None
    try:
        return reader.execute(latest_step_sql()).fetchone()[0]
    finally:
        reader.close()


def run(db, paths: list, interval: float, echo, once: bool = False, **options) -> int:
    """Poll every ``interval`` seconds until stopped (Ctrl-C), handing one line per poll to
    ``echo`` (the CLI prints them)."""
    state = WatchState()
    try:
        while True:
            started = time.monotonic()
            try:
                echo(poll(db, paths, state, settle=not once, **options).line())
            except IngestFailed as exc:  # a defect rolled this poll back: say so, try again next poll
                echo(f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M:%S UTC}  poll rolled back: {exc}")
                if once:
                    return 1
            if once:
                return 0
            time.sleep(max(0.0, interval - (time.monotonic() - started)))
    except KeyboardInterrupt:  # a poll cut short rolled back: nothing half-written
        echo("stopped")
        return 0
