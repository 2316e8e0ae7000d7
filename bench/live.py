"""A run followed while it trains: re-ingest of a grown file, and what the shared reader costs.

    python bench/live.py [--samples 50000] [--attempts 4] [--out bench/out]

1. Append: the native file of ``bench/ingest.py`` (200,000 rollouts by default) is ingested into a
   fresh database; then 0.5% more rollouts are appended and it is ingested again (only the new
   lines load). Target: the second ingest takes at most 10% of the first. Both run in one child
   process, as ``rolloutlab watch`` runs them, each timed from opening the database for writing to
   closing it.
2. Reader cost: ``summary`` and ``check`` through the shared read-only handle that notebooks use
   (it opens the file for a call and lets go when idle), against a plain read-only connection
   held open; and how long a writer waits for a reader that queries all the time.
"""
from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

from common import machine, run_child, size_parser

# Both ingests in one process, as `rolloutlab watch` runs them (imports paid once); each timed
# from opening the database for writing to closing it.
INGEST_TWICE = """
import sys, time, rolloutlab as rl
sys.path.insert(0, sys.argv[3])
from live import append_rollouts
from pathlib import Path
times = []
for grow in (0, int(sys.argv[4])):
    if grow:
        append_rollouts(Path(sys.argv[1]), grow)
    t0 = time.perf_counter()
    con = rl.connect(sys.argv[2])
    r = rl.ingest(con, sys.argv[1], progress=False)
    con.close()
    times.append((time.perf_counter() - t0, r.action[0], int(r.loaded.sum())))
print(repr(times))
"""

READER = """
import sys, time, rolloutlab as rl
con = rl.connect(sys.argv[1], read_only=True)
print("ready", flush=True)
end = time.time() + float(sys.argv[2])
while time.time() < end:
    rl.runs(con)
"""


def append_rollouts(path: Path, n: int) -> None:
    from rolloutlab.demo import synth

    with open(path, "a") as fh:
        for i, record in enumerate(synth.generate(samples=n // 4 + 1, attempts=4, checkpoints=("base",), seed=777,
                                                  messages=False)):
            if i == n:
                break
            record["rollout_id"] = f"appended-{i}"
            fh.write(json.dumps(record, separators=(",", ":")) + "\n")


def per_call(db: Path) -> dict[str, float]:
    import rolloutlab as rl

    out = {}
    for name, call in {"summary": lambda c: rl.summary(c), "check": lambda c: rl.check(c, "base")}.items():
        plain = rl.connect(db, read_only=True, shared=False)
        call(plain)
        t0 = time.perf_counter()
        call(plain)
        out[f"{name}, plain connection held open"] = time.perf_counter() - t0
        plain.close()
        shared = rl.connect(db, read_only=True)
        call(shared)
        t0 = time.perf_counter()
        call(shared)
        out[f"{name}, shared handle, file still open (results fetched, then converted)"] = time.perf_counter() - t0
        time.sleep(0.5)  # idle: the handle let go of the file, as between two notebook cells
        t0 = time.perf_counter()
        call(shared)
        out[f"{name}, shared handle after a pause (opens the file again)"] = time.perf_counter() - t0
        shared.close()
    return out


def writer_wait(db: Path) -> float:
    """Seconds a writer waits to get the file while another process reads in a tight loop."""
    import subprocess

    reader = subprocess.Popen([sys.executable, "-c", READER, str(db), "30"], stdout=subprocess.PIPE, text=True)
    reader.stdout.readline()
    import rolloutlab as rl

    t0 = time.perf_counter()
    con = rl.connect(db)
    waited = time.perf_counter() - t0
    con.close()
    reader.kill()
    reader.wait()
    return waited


def main() -> None:
    ap = size_parser()
    args = ap.parse_args()
    from rolloutlab.demo import synth

    args.out.mkdir(parents=True, exist_ok=True)
    src = args.out / "base.jsonl"
    if not src.exists():
        synth.write_native(args.out, samples=args.samples, attempts=args.attempts, checkpoints=("base",), seed=1,
                           messages=False)
    live, db = args.out / "live" / "base.jsonl", args.out / "live.duckdb"
    live.parent.mkdir(exist_ok=True)
    shutil.copy(src, live)
    db.unlink(missing_ok=True)
    n = args.samples * args.attempts
    _, peak, out = run_child(INGEST_TWICE, str(live), str(db), str(Path(__file__).parent), str(n // 200))
    (first, action1, loaded1), (second, action2, loaded2) = eval(out)  # our own child's repr
    print(f"\n{n:,} rollouts ({src.stat().st_size / 1e6:.0f} MB), then {n // 200:,} appended; {machine()}\n")
    print("| ingest | seconds | action, rollouts loaded |")
    print("|---|---:|---|")
    print(f"| first (fresh database) | {first:.2f} | {action1} {loaded1:,} |")
    print(f"| after appending 0.5% | {second:.2f} | {action2} {loaded2:,} |")
    print(f"\nre-ingest / first ingest: {second / first:.1%} (target ≤ 10%); peak memory of the process {peak:,.0f} MB\n")
    print("| call | seconds |")
    print("|---|---:|")
    for name, seconds in per_call(db).items():
        print(f"| {name} | {seconds:.3f} |")
    print(f"\na writer waited {writer_wait(db):.3f} s for the file while another process read in a tight loop")


if __name__ == "__main__":
    main()
