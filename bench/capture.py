"""What capture adds to each call of a tool endpoint.

    python bench/capture.py [--calls 20000]

1. In process: a FastAPI tool endpoint answering the build-hour request body with a ~1 KB
   output, called straight through ASGI (no network), with and without CaptureMiddleware,
   interleaved call by call so that drift hits both alike. Per-call time percentiles.
2. Over HTTP: the demo server (uvicorn) with capture on and off, one client sending requests
   one at a time (aiohttp), per-request percentiles.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time

import numpy as np
from fastapi import FastAPI, Request

from rolloutlab.capture import demo_server
from rolloutlab.capture import CaptureMiddleware

from common import machine

OUTPUT = "x" * 1000


def tool_app(log_dir=None):
    app = FastAPI()

    @app.post("/search")
    async def search(request: Request):
        body = await request.json()
        return {"output": OUTPUT, "call_id": body.get("call_id"), "id": body.get("id")}

    if log_dir is not None:
        app.add_middleware(CaptureMiddleware, log=log_dir)
    return app


async def one_call(app, raw: bytes) -> float:
    scope = {"type": "http", "method": "POST", "path": "/search", "headers": [(b"content-type", b"application/json")],
             "query_string": b"", "http_version": "1.1", "scheme": "http", "server": ("b", 80), "client": ("b", 1),
             "root_path": ""}
    messages = [{"type": "http.request", "body": raw, "more_body": False}]

    async def receive():
        return messages.pop() if messages else {"type": "http.disconnect"}

    async def send(message):
        pass

    t0 = time.perf_counter()
    await app(scope, receive, send)
    return time.perf_counter() - t0


async def in_process(calls: int) -> dict[str, np.ndarray]:
    with tempfile.TemporaryDirectory() as tmp:
        apps = {"without capture": tool_app(), "with capture": tool_app(tmp)}
        times = {name: [] for name in apps}
        for i in range(calls + 500):
            raw = json.dumps({"arguments": json.dumps({"query": f"revenue {i}"}), "call_id": f"c{i}",
                              "id": f"rollout-{i // 8}"}).encode()
            for name, app in apps.items():
                elapsed = await one_call(app, raw)
                if i >= 500:  # warm-up left out
                    times[name].append(elapsed)
        return {name: np.array(v) for name, v in times.items()}


async def over_http(url: str, requests: int) -> np.ndarray:
    import aiohttp

    out = []
    async with aiohttp.ClientSession() as session:
        for i in range(requests + 200):
            body = {"arguments": json.dumps({"query": f"Report {i % 200:04d}"}), "call_id": "c", "id": f"r{i}"}
            t0 = time.perf_counter()
            async with session.post(url + "/search", json=body) as response:
                await response.read()
            if i >= 200:
                out.append(time.perf_counter() - t0)
    return np.array(out)


def show(rows: dict[str, np.ndarray]) -> None:
    print("| | p50 | p95 | p99 |\n|---|---:|---:|---:|")
    for name, v in rows.items():
        p50, p95, p99 = np.percentile(v, [50, 95, 99]) * 1000
        print(f"| {name} | {p50:.3f} ms | {p95:.3f} ms | {p99:.3f} ms |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=20_000)
    args = ap.parse_args()
    print(f"{machine()}\n\nIn process, {args.calls} calls each:\n")
    rows = asyncio.run(in_process(args.calls))
    show(rows)
    added = rows["with capture"] - rows["without capture"]
    print(f"\nadded per call (paired): p50 {np.percentile(added, 50) * 1000:.3f} ms, "
          f"p95 {np.percentile(added, 95) * 1000:.3f} ms")
    print(f"\nOver HTTP (uvicorn, one request at a time), {args.calls // 4} requests each:\n")
    http = {}
    for name, capture in (("without capture", False), ("with capture", True)):
        with tempfile.TemporaryDirectory() as tmp:
            with demo_server.running(tmp, latency_s=(0.0, 0.0), capture=capture) as url:
                http[name] = asyncio.run(over_http(url, args.calls // 4))
    show(http)


if __name__ == "__main__":
    main()
