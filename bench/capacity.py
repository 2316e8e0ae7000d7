"""How well the capacity plan's projection predicts observed steps.

    python bench/capacity.py [--sizes 16,64,256]

Steps of R rollouts all started at once against the demo tool server (capture on, on localhost),
each ingested as its own run. Each step's peaks are then projected from the smallest step's
profile (rl.projection_error) and compared with what was observed.
"""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import rolloutlab as rl
from rolloutlab.capture import demo_server

from common import machine


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="16,64,256")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    con = rl.connect(":memory:")
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            logs = Path(tmp) / f"step-{size}"
            with demo_server.running(logs) as url:
                demo_server.drive(url, rollouts=size, concurrency=size, prefix=f"s{size}", think_s=(0.0, 0.02))
            rl.ingest(con, logs, run=f"step-{size}", progress=False)
    print(f"{machine()}\n")
    print("| profile → observed | tool | observed peak in flight | projected | error | observed calls/s | projected | error |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    base = f"step-{sizes[0]}"
    for size in sizes:
        err = rl.projection_error(con, base, f"step-{size}")
        for row in err.itertuples():
            print(f"| {base} → step-{size} | {row.tool} | {row.peak_calls_in_flight} | {row.projected_peak_calls_in_flight} "
                  f"| {row.in_flight_error:+.0%} | {row.peak_calls_per_s:.0f} | {row.projected_peak_calls_per_s:.0f} "
                  f"| {row.rate_error:+.0%} |")


if __name__ == "__main__":
    main()
