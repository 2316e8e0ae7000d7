"""Native JSONL ingest against DuckDB's own load of the same file.

    python bench/ingest.py [--samples 50000] [--attempts 4] [--repeat 2] [--pandas] [--out bench/out]

Generates the file once (synthetic, base checkpoint: ~8.6 tool calls per rollout), then runs each
contender in its own child process, so that its peak memory (ru_maxrss from wait4) is its own:
DuckDB's ``count(*)`` scan, DuckDB's unchecked full load (``CREATE TABLE AS SELECT * FROM
read_json(...)`` into a database file: types inferred, nothing checked) and rolloutlab's ingest
(every check, rejects, ids, runs, attempts, four tables, one transaction), ``--repeat`` rounds,
alternating. Times drift on a shared machine: compare the ratios, taken within each round, and the
CPU seconds (user + system), which drift less.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from common import machine, size_parser

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
con.close()
""",
    "rolloutlab ingest (fresh database)": """
import sys, rolloutlab as rl
con = rl.connect(sys.argv[2])
r = rl.ingest(con, sys.argv[1], progress=False)
con.close()
assert (r.records == r.loaded + r.duplicates + r.rejected).all()
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
FULL_LOAD = "duckdb CREATE TABLE AS read_json (full load, no checks)"


def timed(code: str, *args: str) -> dict:
    """Wall seconds, CPU seconds, peak resident memory (MB) and output of ``python -c code``."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"child failed: {code}")
    return {"seconds": round(time.perf_counter() - t0, 2), "cpu": round(usage.ru_utime + usage.ru_stime, 2),
            "peak_mb": round(usage.ru_maxrss / 1024), "output": out.strip()}


def main() -> None:
    ap = size_parser()
    ap.add_argument("--repeat", type=int, default=2, help="rounds, each contender once per round")
    ap.add_argument("--pandas", action="store_true", help="also the pandas loader (slow)")
    args = ap.parse_args()

    from rolloutlab.demo import synth

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

    rounds = []
    for i in range(args.repeat):
        results = {}
        for name, code in CONTENDERS.items():
            if name.startswith("pandas") and not args.pandas:
                continue
            db.unlink(missing_ok=True)
            results[name] = timed(code, str(path), str(db))
            print(f"round {i + 1}: {name}: {results[name]}", file=sys.stderr)
        db.unlink(missing_ok=True)
        rounds.append(results)

    print(f"\nfile: {size_mb:.0f} MB, {args.samples * args.attempts:,} rollouts, {n_calls:,} tool calls; {machine()}; "
          f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}\n")
    print("| round | contender | seconds | CPU s | × DuckDB full load (time) | × (CPU) | peak memory (MB) | "
          "× (memory) |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for i, results in enumerate(rounds, 1):
        full = results[FULL_LOAD]
        for name, r in results.items():
            print(f"| {i} | {name} | {r['seconds']:.2f} | {r['cpu']:.2f} | {r['seconds'] / full['seconds']:.2f} | "
                  f"{r['cpu'] / full['cpu']:.2f} | {r['peak_mb']:,} | {r['peak_mb'] / full['peak_mb']:.2f} |")
    (args.out / "ingest.json").write_text(json.dumps(
        {"file_mb": size_mb, "rollouts": args.samples * args.attempts, "tool_calls": n_calls, "rounds": rounds},
        indent=2))


if __name__ == "__main__":
    main()
