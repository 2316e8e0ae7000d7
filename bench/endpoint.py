"""Assembling Agent RFT endpoint logs of 200,000 rollouts, next to native ingest of the same rollouts.

    python bench/endpoint.py [--samples 50000] [--attempts 4] [--out bench/out]

One training step (the base behaviour: ~8.6 tool calls per rollout) as endpoint logs: ~1.7M tool
events over two files in arrival order, 200,000 grade events. Each contender runs in its own child
process (peak memory from wait4).
"""
from __future__ import annotations

from pathlib import Path

from rolloutlab.demo import synth

from common import machine, print_children, run_child, size_parser

INGEST = """
import sys, rolloutlab as rl
con = rl.connect(sys.argv[1])
r = rl.ingest(con, sys.argv[2:], progress=False)
print(con.execute("SELECT count(*), sum(n_tool_calls) FROM rollouts").fetchone())
"""


def main() -> None:
    ap = size_parser()
    args = ap.parse_args()
    folder = args.out / "endpoint"
    if not folder.exists():
        synth.write_endpoint(folder, samples=args.samples, attempts=args.attempts, steps=(0,), seed=1)
    files = sorted(str(p) for p in folder.glob("*.jsonl"))
    size = sum(Path(f).stat().st_size for f in files) / 1e6
    rows = {}
    for name, paths in (("rft-endpoint: all files in one call", files),):
        db = args.out / "endpoint.duckdb"
        db.unlink(missing_ok=True)
        rows[name] = run_child(INGEST, str(db), *paths)
    native = args.out / "base.jsonl"
    if native.exists():
        db = args.out / "endpoint-native.duckdb"
        db.unlink(missing_ok=True)
        rows["native JSONL of 200,000 rollouts (bench/ingest.py's file), for scale"] = run_child(INGEST, str(db), str(native))
    print(f"endpoint logs: {size:.0f} MB in {len(files)} files; {machine()}\n")
    print_children(rows, "rollouts, tool calls")


if __name__ == "__main__":
    main()
