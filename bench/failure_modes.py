"""Failure modes of 10,000 failing rollouts: time and peak memory, each in a fresh process (the
imports, the connection and the bootstrap included).

    python bench/failure_modes.py [--samples 6100] [--out bench/out]

The data: synthetic rollouts with five planted failure modes among honest failures
(tests/test_failures.py writes them), 6,100 samples x 3 attempts per run: about 10,000 of
each run's 18,300 rollouts fail; the candidate is the base without its timeout loops. Made once
under --out. The target: 10,000 failing
rollouts grouped in <= 60 s with < 2 GB on a 2-core machine; LangSmith Insights needs 15-30
minutes for <= 1,000 traces (and a hosted LLM).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from common import machine, print_children, run_child, size_parser

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import sys, time
t0 = time.perf_counter()
import rolloutlab as rl
con = rl.connect(sys.argv[1], read_only=True)
what = sys.argv[2]
if what == "modes":
    m = rl.failure_modes(con, "base")
    print(f"{m.rollouts.sum():,} failures, {(m.kind == 'model').sum()} model + {(m.kind == 'infra').sum()} infra modes "
          f"(k={m.attrs['k']} by {m.attrs['k_chosen_by']}), 1,000 bootstrap resamples", flush=True)
    # for the adjusted Rand index, computed by the parent (a few ms here, after the result)
    m.attrs["assignments"][["rollout_id", "status", "kind", "mode"]].to_parquet(sys.argv[3])
else:
    d = rl.failure_modes_diff(con, "base", "cand")
    verdicts = d.verdict.value_counts().to_dict()
    print(f"{d.base_rollouts.sum() + d.candidate_rollouts.sum():,} failures, {len(d)} modes, verdicts {verdicts}, "
          "2,000 bootstrap resamples")
"""


def build(db: Path, out: Path, samples: int) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from test_failures import PLANTED, planted_records  # the synthetic planted modes

    import rolloutlab as rl

    out.mkdir(parents=True, exist_ok=True)
    paths = []
    # the candidate: the base's own honest rollouts (same seed), every planted mode but the timeout loops
    for run, modes, seed in (("base", PLANTED, 11), ("cand", PLANTED[1:], 11)):
        records, _ = planted_records(run, modes, samples=samples, attempts=3, seed=seed)
        path = out / f"failure-modes-{run}.jsonl"
        path.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records))
        paths.append(path)
    con = rl.connect(db)
    rl.ingest(con, paths, progress=False)
    con.close()


def adjusted_rand(assign: Path, samples: int) -> float:
    """The ARI of the modes found against the planted truth (the base run's records made again:
    the same seed), over the model failures, as test_planted_modes_are_found measures it."""
    import pandas as pd
    from sklearn.metrics import adjusted_rand_score

    sys.path.insert(0, str(ROOT / "tests"))
    from test_failures import PLANTED, planted_records, truth

    _, planted = planted_records("base", PLANTED, samples=samples, attempts=3, seed=11)
    a = pd.read_parquet(assign)
    model = a[a.kind == "model"]
    return adjusted_rand_score(truth(model, planted), model["mode"])


def main() -> None:
    ap = size_parser(samples=6100)
    ap.add_argument("--build", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    db = args.out / f"failure-modes-{args.samples}.duckdb"
    if args.build:  # in a process of its own: a child forked from a large parent reports its size
        if not db.exists():
            build(db, args.out, args.samples)
        import rolloutlab as rl

        rl.connect(db).close()  # upgraded when an older rolloutlab wrote it
        return
    subprocess.run([sys.executable, __file__, "--build", "--samples", str(args.samples), "--out", str(args.out)],
                   check=True)
    assign = args.out / f"failure-modes-{args.samples}-assignments.parquet"
    rows = {
        "failure_modes(base): ~10,000 failing rollouts": run_child(CHILD, str(db), "modes", str(assign)),
        "failure_modes_diff(base, cand): ~20,000 failing rollouts": run_child(CHILD, str(db), "diff"),
    }
    ari = adjusted_rand(assign, args.samples)
    print(f"{machine()}; synthetic runs of {args.samples * 3:,} rollouts each\n")
    print_children(rows, "what it found")
    print(f"\nAdjusted Rand index of failure_modes(base) against the planted truth, over its model failures "
          f"(as tests/test_failures.py measures it): {ari:.3f}")
    print("\nFor scale: LangSmith Insights, <= 1,000 traces in 15-30 minutes (hosted, with an LLM).")


if __name__ == "__main__":
    main()
