"""Opening one trajectory in the explorer with 1M rollouts in the store (issue 30, target <= 1 s).

    python bench/explorer.py [--samples 125000] [--attempts 4] [--out bench/out]

Writes synthetic native JSONL with messages (two checkpoints, samples x attempts each: 1M
rollouts at the defaults), ingests it once into its own database, then times what a click on a
row does — ``widgets.trajectory`` (the rollout, its calls, messages and grades) and
``widgets.trajectory_html`` (transcript and timeline) — for rollouts drawn at random, and the
explorer's first page of the list, each on a shared read-only handle as the notebooks use it.
"""
from __future__ import annotations

import random
import statistics
import time

import rolloutlab as rl
from rolloutlab.demo import synth
from rolloutlab.views import widgets

from common import machine, size_parser


def main() -> None:
    ap = size_parser(samples=125_000)
    ap.add_argument("--opens", type=int, default=20)
    args = ap.parse_args()
    folder = args.out / f"explorer-{args.samples}x{args.attempts}"
    db = args.out / f"explorer-{args.samples}x{args.attempts}.duckdb"
    if not db.exists():
        t0 = time.perf_counter()
        paths = synth.write_native(folder, samples=args.samples, attempts=args.attempts, seed=3, messages=True)
        t1 = time.perf_counter()
        con = rl.connect(db)
        rl.ingest(con, paths, progress=True)
        con.close()
        print(f"written in {t1 - t0:.0f} s, ingested in {time.perf_counter() - t1:.0f} s")
    con = rl.connect(db, read_only=True)
    n, calls, msgs = con.execute("SELECT (SELECT count(*) FROM rollouts), (SELECT count(*) FROM tool_calls), "
                                 "(SELECT count(*) FROM messages)").fetchone()
    ids = [r[0] for r in con.execute("SELECT rollout_id FROM rollouts USING SAMPLE 200 ROWS").fetchall()]
    rng = random.Random(0)
    opened = []
    for rid in rng.sample(ids, min(args.opens, len(ids))):
        t0 = time.perf_counter()
        html = widgets.trajectory_html(widgets.trajectory(con, rid))
        opened.append(time.perf_counter() - t0)
        assert "rl-trajectory" in html
    t0 = time.perf_counter()
    rows, total = widgets.page(con, widgets.Filters(runs=("base", "step10")))
    first_page = time.perf_counter() - t0
    print(f"{n:,} rollouts, {calls:,} tool calls, {msgs:,} messages; {machine()}\n")
    print(f"open one trajectory (rows + transcript + timeline), {len(opened)} random rollouts: "
          f"median {statistics.median(opened):.3f} s, max {max(opened):.3f} s (target <= 1 s)")
    print(f"first page of the list ({len(rows)} of {total:,} rows): {first_page:.3f} s")


if __name__ == "__main__":
    main()
