"""Where an ingest's time goes: every statement it runs on its connection, timed, in-process.

    python bench/profile_ingest.py PATH... [--top 25]

Statements of a batch's staging connection (parsing and checking many files' lines outside the
ingest's transaction) are timed as well, under ``[stage]``. The rest of the call (reading and
hashing files, converting records in Python) is the difference to the total. In-process: a
profile, not a benchmark (bench/ingest.py, many_files.py, inspect_eval.py time whole commands).
"""
from __future__ import annotations

import argparse
import collections
import re
import sys
import tempfile
import time
from pathlib import Path


class Timed:
    """A DuckDB connection whose execute() is timed per statement (by its first words)."""

    def __init__(self, con, times, counts, tag=""):
        self._con, self._times, self._counts, self._tag = con, times, counts, tag

    def execute(self, sql, *args, **kwargs):
        t0 = time.perf_counter()
        try:
            return self._con.execute(sql, *args, **kwargs)
        finally:
            key = self._tag + re.sub(r"'[^']*'", "'…'", " ".join(str(sql).split()))[:100]
            self._times[key] += time.perf_counter() - t0
            self._counts[key] += 1

    def cursor(self):
        return Timed(self._con.cursor(), self._times, self._counts, "[stage] ")

    def __getattr__(self, name):
        return getattr(self._con, name)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    import rolloutlab as rl

    times, counts = collections.defaultdict(float), collections.Counter()
    with tempfile.TemporaryDirectory() as tmp:
        con = rl.connect(Path(tmp) / "profile.duckdb")
        timed = Timed(con, times, counts)
        t0 = time.perf_counter()
        result = rl.ingest(timed, args.paths, progress=False)
        total = time.perf_counter() - t0
        con.close()
    print(f"{len(result)} files, {int(result.records.sum()):,} records: {int(result.loaded.sum()):,} loaded, "
          f"{int(result.duplicates.sum()):,} duplicates, {int(result.rejected.sum()):,} rejected", file=sys.stderr)
    print(f"total {total:.2f} s; statements {sum(times.values()):.2f} s (a batch loading beside the call overlaps "
          "the rest)\n")
    print("| seconds | runs | statement |\n|---:|---:|---|")
    for key, seconds in sorted(times.items(), key=lambda kv: -kv[1])[:args.top]:
        print(f"| {seconds:.3f} | {counts[key]} | `{key}` |")


if __name__ == "__main__":
    main()
