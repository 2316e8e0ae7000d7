"""compare (2,000 bootstrap resamples) on two runs of 200,000 rollouts each.

    python bench/compare.py [--out bench/out]

Generates base.jsonl (as bench/ingest.py does) and step10.jsonl on the same 50,000 samples x 4
attempts if missing, ingests both into their own database, then times compare warm, best of three.
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
    args.out.mkdir(parents=True, exist_ok=True)
    for ckpt in ("base", "step10"):
        if not (args.out / f"{ckpt}.jsonl").exists():
            synth.write_native(args.out, samples=50_000, attempts=4, checkpoints=(ckpt,), seed=1, messages=False)
    con = open_read_only(args.out / "compare.duckdb", [args.out / "base.jsonl", args.out / "step10.jsonl"])
    n = dict(con.execute("SELECT run_id, count(*) FROM rollouts GROUP BY run_id").fetchall())
    timings = {}
    for name, fn in {
        "compare (2,000 resamples)": lambda: rl.compare(con, "base", "step10", n_boot=2000),
        "sample_deltas": lambda: rl.sample_deltas(con, "base", "step10"),
        "distribution_shift (tool calls)": lambda: rl.distribution_shift(con, "base", "step10"),
        "by_step": lambda: rl.by_step(con),
    }.items():
        timings[name] = best_of(fn)
    print(f"rollouts per run: {n}; {machine()}\n")
    print_timings(timings)


if __name__ == "__main__":
    main()
