"""What the benchmark scripts share: timing a child process (its own peak memory) and warm best-of-n."""
from __future__ import annotations

import os
import subprocess
import sys
import time


def run_child(code: str, *args: str) -> tuple[float, float, str]:
    """Wall seconds, peak resident memory (MB, from wait4) and stdout of ``python -c code args``."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"child failed ({os.waitstatus_to_exitcode(status)}): {code}")
    return seconds, usage.ru_maxrss / 1024, out.strip()


def best_of(fn, repeat: int = 3) -> float:
    """Seconds of the fastest of ``repeat`` calls, after one untimed warm-up call."""
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best
