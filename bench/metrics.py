"""summary, check, tool_stats (and latency) on 200,000 rollouts / ~1.7M tool calls.

    python bench/metrics.py [--out bench/out]

Uses the file bench/ingest.py generates (made here if missing) and its own database. Each call is
timed warm (after one untimed run), best of three, in one process.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import rolloutlab as rl
from rolloutlab.demo import synth

from common import best_of, machine, open_read_only, print_timings


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "out")
    args = ap.parse_args()
    path = args.out / "base.jsonl"
    if not path.exists():
        synth.write_native(args.out, samples=50_000, attempts=4, checkpoints=("base",), seed=1, messages=False)
    con = open_read_only(args.out / "metrics.duckdb", [path])
    n, calls = con.execute("SELECT count(*), sum(n_tool_calls) FROM rollouts").fetchone()
    timings = {
        "summary": best_of(lambda: rl.summary(con, "base")),
        "check": best_of(lambda: rl.check(con, "base")),
        "tool_stats": best_of(lambda: rl.tool_stats(con, "base")),
        "signal_plan": best_of(lambda: rl.signal_plan(con, "base")),
        "latency (1,000 + 200 per tool bootstrap resamples)": best_of(lambda: rl.latency(con, "base"), repeat=1),
    }
    print(f"{n:,} rollouts, {calls:,} tool calls; {machine()}\n")
    print_timings(timings)


if __name__ == "__main__":
    main()
