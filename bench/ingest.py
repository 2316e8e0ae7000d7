"""Native JSONL ingest against DuckDB's own scan and a pandas loader of the same file.

    python bench/ingest.py [--samples 50000] [--attempts 4] [--out bench/out]

Generates the file once (synthetic, base checkpoint: ~8.6 tool calls per rollout), then runs each
contender in its own child process, so that its peak memory (ru_maxrss from wait4) is its own.
Times drift between runs on a shared machine: compare the ratios, which are taken in one run.
"""
from __future__ import annotations

import json
import os
import platform
import sys
import time

from common import run_child, size_parser

CONTENDERS = {
    "duckdb count(*) over read_json": """
import duckdb, sys
con = duckdb.connect()
n = con.execute("SELECT count(*) FROM read_json(?, format='newline_delimited')", [sys.argv[1]]).fetchone()[0]
print(n)
""",
    "duckdb CREATE TABLE AS read_json (full load, no checks)": """
import duckdb, sys
con = duckdb.connect(sys.argv[2])
con.execute("CREATE TABLE t AS SELECT * FROM read_json(?, format='newline_delimited')", [sys.argv[1]])
print(con.execute("SELECT count(*) FROM t").fetchone()[0])
""",
    "rolloutlab ingest (fresh database)": """
import sys, rolloutlab as rl
con = rl.connect(sys.argv[2])
r = rl.ingest(con, sys.argv[1], progress=False)
con.close()
print(int(r.loaded.sum()))
""",
    "pandas json_normalize": """
import json, sys, pandas as pd
with open(sys.argv[1]) as fh:
    records = [json.loads(line) for line in fh]
rollouts = pd.json_normalize(records, max_level=1).drop(columns=["tool_calls", "grades"])
calls = pd.json_normalize(records, record_path="tool_calls", meta=["rollout_id"])
print(len(rollouts), len(calls))
""",
}


def main() -> None:
    ap = size_parser()
    ap.add_argument("--skip-pandas", action="store_true")
    args = ap.parse_args()

    from rolloutlab import synth

    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "base.jsonl"
    if not path.exists():
        t0 = time.perf_counter()
        synth.write_native(args.out, samples=args.samples, attempts=args.attempts, checkpoints=("base",),
                           seed=1, messages=False)
        print(f"generated {path} in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    n_calls = sum(line.count('"tool":') for line in open(path))
    size_mb = path.stat().st_size / 1e6
    db = args.out / "bench.duckdb"

    results = {}
    for name, code in CONTENDERS.items():
        if args.skip_pandas and name.startswith("pandas"):
            continue
        db.unlink(missing_ok=True)
        seconds, peak, out = run_child(code, str(path), str(db))
        results[name] = {"seconds": round(seconds, 2), "peak_mb": round(peak), "output": out}
        print(f"{name}: {seconds:.2f}s, peak {peak:.0f} MB ({out})", file=sys.stderr)

    scan = results["duckdb count(*) over read_json"]["seconds"]
    print(f"\nfile: {size_mb:.0f} MB, {args.samples * args.attempts:,} rollouts, {n_calls:,} tool calls; "
          f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}\n")
    print("| contender | seconds | × DuckDB scan | peak memory (MB) |")
    print("|---|---:|---:|---:|")
    for name, r in results.items():
        print(f"| {name} | {r['seconds']:.2f} | {r['seconds'] / scan:.2f} | {r['peak_mb']:,} |")
    (args.out / "ingest.json").write_text(json.dumps(
        {"file_mb": size_mb, "rollouts": args.samples * args.attempts, "tool_calls": n_calls, "results": results},
        indent=2))


if __name__ == "__main__":
    main()
