"""Ingest cost as files grow: native JSONL of 200,000, 1,000,000 and 2,000,000 rollouts.

    python bench/sweep.py [--sizes 50000,250000,500000] [--out bench/out]

Each size is generated once (``rolloutlab synth``, base checkpoint, no transcripts; ×4 attempts)
and ingested into a fresh database in its own process, beside DuckDB's ``count(*)`` scan of the
same file; time and peak memory of each. The question: does the cost grow with the work (time
linear in the file, memory flat), or faster?
"""
from __future__ import annotations

from common import machine, run_child, size_parser

SCAN = """
import duckdb, sys
print(duckdb.connect().execute("SELECT count(*) FROM read_json(?, format='newline_delimited')", [sys.argv[1]]).fetchone()[0])
"""
INGEST = """
import sys, rolloutlab as rl
con = rl.connect(sys.argv[2])
r = rl.ingest(con, sys.argv[1], progress=False)
con.close()
print(int(r.loaded.sum()))
"""


def main() -> None:
    ap = size_parser()
    ap.add_argument("--sizes", default="50000,250000,500000", help="samples per file (x4 attempts)")
    args = ap.parse_args()
    from rolloutlab.demo import synth

    rows = []
    for samples in (int(s) for s in args.sizes.split(",")):
        folder = args.out / "sweep" / str(samples)
        path = folder / "base.jsonl"
        if not path.exists():
            synth.write_native(folder, samples=samples, attempts=4, checkpoints=("base",), seed=1, messages=False)
        db = folder / "sweep.duckdb"
        db.unlink(missing_ok=True)
        scan = run_child(SCAN, str(path))
        ingest = run_child(INGEST, str(path), str(db))
        db.unlink(missing_ok=True)
        rows.append((samples * 4, path.stat().st_size / 1e6, scan, ingest))
    print(f"\n{machine()}\n")
    print("| rollouts | file (MB) | DuckDB count(*) s | rolloutlab ingest s | × scan | s per 100k rollouts | "
          "ingest peak memory (MB) |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n, mb, scan, ingest in rows:
        print(f"| {n:,} | {mb:,.0f} | {scan[0]:.2f} | {ingest[0]:.2f} | {ingest[0] / scan[0]:.1f} | "
              f"{ingest[0] / n * 1e5:.2f} | {ingest[1]:,.0f} |")


if __name__ == "__main__":
    main()
