"""What the benchmark scripts share: timing a child process (its own peak memory) and warm best-of-n."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path


def run_child(code: str, *args: str, python: str | None = None) -> tuple[float, float, str]:
    """Wall seconds, peak resident memory (MB, from wait4) and stdout of ``python -c code args``
    (``python``: another interpreter, e.g. a venv's)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([python or sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"child failed ({os.waitstatus_to_exitcode(status)}): {code}")
    return seconds, usage.ru_maxrss / 1024, out.strip()


def size_parser(samples: int = 50_000) -> argparse.ArgumentParser:
    """The options every ingest benchmark takes: how much synthetic data, and where it goes."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=samples)
    ap.add_argument("--attempts", type=int, default=4)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "out")
    return ap


def best_of(fn, repeat: int = 3) -> float:
    """Seconds of the fastest of ``repeat`` calls, after one untimed warm-up call."""
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def machine() -> str:
    import platform

    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def open_read_only(db, paths):
    """The benchmark database, ingested from ``paths`` when missing (upgraded when an older
    rolloutlab wrote it), opened read-only as users' readers open it."""
    import rolloutlab as rl

    if not db.exists():
        con = rl.connect(db)
        rl.ingest(con, paths, progress=False)
        con.close()
    rl.connect(db).close()
    return rl.connect(db, read_only=True)


def print_timings(timings: dict[str, float]) -> None:
    print("| function | seconds (best of 3, warm) |")
    print("|---|---:|")
    for name, seconds in timings.items():
        print(f"| {name} | {seconds:.3f} |")


def print_children(rows: dict[str, tuple[float, float, str]], output: str) -> None:
    """A table of run_child results; ``output`` names the column of what each child printed."""
    print(f"| contender | seconds | peak memory (MB) | {output} |")
    print("|---|---:|---:|---|")
    for name, (seconds, peak, out) in rows.items():
        print(f"| {name} | {seconds:.2f} | {peak:,.0f} | {out} |")
