"""The demo's FinQA-like tool and grader endpoints, with capture on: a real server for the demo
and the tests, and a client that drives rollouts against it. (SYNTHETIC: the corpus is made up.)

Tools take the Agent RFT build-hour request body ``{"arguments": "<json string>", "call_id",
"id"}`` and answer ``{"output": "...", "call_id", "id"}``: ``POST /search`` ({"query"}),
``/list`` ({"path"}), ``/cat`` ({"path"}). ``POST /grade`` takes ``{"id", "item": {"id",
"reference_answer"}, "model_sample"}`` and answers ``{"score"}``.
"""
from __future__ import annotations

import asyncio
import json
import random
import re
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
from fastapi import FastAPI, HTTPException, Request  # module level: FastAPI resolves the annotations here

from . import config, synth
from .capture import CaptureMiddleware, EventLog, check_rollout_id_header

N_SAMPLES = 200
TOOLS = ("search", "list", "cat")


def corpus(n: int = N_SAMPLES, seed: int = 0) -> dict[str, dict]:
    """{path: document} and the dataset items they answer (``document["sample"]``)."""
    docs = {}
    for sample in synth.make_samples(n, random.Random(seed), prefix="live"):
        report = re.search(r"Report (\d+)", sample.prompt).group(1)
        path = f"reports/{report}/10-K.txt"
        docs[path] = {"path": path, "content": f"{sample.prompt.split(': ', 1)[1].split('?')[0]}: {sample.reference}.",
                      "sample": {"id": sample.sample_id, "prompt": sample.prompt, "reference_answer": sample.reference}}
    return docs


def _normalise(answer: str) -> str:
    return re.sub(r"[\s,$]|usd|million|m$", "", str(answer).lower())


def make_app(log_dir: str | Path, *, rollout_id_header: str | None = None, run: str = config.DEMO_SERVER_RUN,
             token: str | None = None, fail_rate: float = 0.0, latency_s: tuple[float, float] = config.DEMO_TOOL_LATENCY_S,
             seed: int = 0, log: EventLog | None = None, capture: bool = True):
    """The FastAPI app with ``CaptureMiddleware`` writing to ``log_dir``. ``token``: require
    ``Authorization: Bearer <token>`` (it is never logged). ``fail_rate``: share of tool calls
    answered 503, an infrastructure failure. ``app.state.capture_log`` is the ``EventLog``."""
    check_rollout_id_header(rollout_id_header)  # now, not at the first request
    docs = corpus(seed=seed)
    by_report = {path.split("/")[1]: doc for path, doc in docs.items()}
    references = {doc["sample"]["id"]: doc["sample"]["reference_answer"] for doc in docs.values()}
    rng = random.Random(seed)
    app = FastAPI(title="rolloutlab demo tool server (synthetic FinQA)")
    event_log = log or EventLog(log_dir)
    if capture:  # off only to measure what capture costs (bench/capture.py)
        app.add_middleware(CaptureMiddleware, log=event_log, tools={f"/{t}": t for t in TOOLS},
                           graders=("/grade",), rollout_id_header=rollout_id_header, run=run)
    app.state.capture_log = event_log

    def authorize(request: Request) -> None:
        if token is not None and request.headers.get("authorization") != f"Bearer {token}":
            raise HTTPException(status_code=401, detail="missing or wrong bearer token")

    async def arguments(request: Request) -> tuple[dict, dict]:
        authorize(request)
        try:
            body = json.loads(await request.body() or b"null")
            args = body["arguments"]
            args = json.loads(args) if isinstance(args, str) else args
        except (ValueError, KeyError, TypeError):
            raise HTTPException(status_code=400, detail="the body must be JSON with 'arguments' (a JSON object or its text)")
        if not isinstance(args, dict):
            raise HTTPException(status_code=400, detail="'arguments' must be a JSON object")
        await asyncio.sleep(rng.uniform(*latency_s))
        if rng.random() < fail_rate:
            raise HTTPException(status_code=503, detail="tool backend unavailable")
        return args, body

    def answer(output: str, body: dict) -> dict:
        return {"output": output, "call_id": body.get("call_id"), "id": body.get("id")}

    @app.post("/search")
    async def search(request: Request):
        args, body = await arguments(request)
        query = str(args.get("query", ""))
        found = re.search(r"(\d{4})", query)
        doc = by_report.get(found.group(1)) if found else None
        return answer(json.dumps({k: doc[k] for k in ("path", "content")}) if doc else "Error: no document matches", body)

    @app.post("/list")
    async def list_(request: Request):
        args, body = await arguments(request)
        prefix = str(args.get("path", "")).rstrip("/")
        return answer(json.dumps(sorted(p for p in docs if p.startswith(prefix))[:50]), body)

    @app.post("/cat")
    async def cat(request: Request):
        args, body = await arguments(request)
        doc = docs.get(str(args.get("path", "")))
        return answer(json.dumps({k: doc[k] for k in ("path", "content")}) if doc else "Error: not a valid document", body)

    @app.post("/grade")
    async def grade(request: Request):
        authorize(request)
        body = json.loads(await request.body() or b"null")
        item = (body or {}).get("item") or {}
        reference = item.get("reference_answer") or references.get(item.get("id"))
        if reference is None:
            raise HTTPException(status_code=422, detail="unknown item: send item.id or item.reference_answer")
        return {"score": 1.0 if _normalise(body.get("model_sample", "")) == _normalise(reference) else 0.0}

    @app.get("/health")
    async def health():
        return {"ok": True}

    @app.get("/capture/stats")
    async def capture_stats():
        return event_log.stats()

    return app


def serve(port: int = config.DEMO_SERVER_PORT, log_dir: str | Path = config.DEMO_SERVER_DIR,
          host: str = config.DEMO_SERVER_HOST, **options) -> EventLog:
    """Run the demo server in the foreground (uvicorn) until interrupted; returns its log."""
    import uvicorn

    app = make_app(log_dir, **options)
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
    return app.state.capture_log


@contextmanager
def running(log_dir: str | Path, host: str = config.DEMO_SERVER_HOST, port: int = 0, **options):
    """The demo server on a background thread (``port=0``: any free port); yields its base URL."""
    import uvicorn

    app = make_app(log_dir, **options)
    # uvicorn binds the port itself: handed a ready socket, it answered keep-alive requests 40 ms late
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the demo server did not start on {host}:{port}")
        time.sleep(0.01)
    try:
        yield f"http://{host}:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        app.state.capture_log.close()


def _plan(i: int, rng: random.Random, items: list[dict], prefix: str) -> tuple[str, dict, list[tuple[str, dict]], str]:
    """One rollout: its id, item, tool calls and final answer."""
    item = rng.choice(items)
    report = re.search(r"Report (\d+)", item["prompt"]).group(1)
    calls = [("search", {"query": item["prompt"][:60]})]
    for _ in range(rng.randint(0, 5)):
        calls.append(("list", {"path": f"reports/{report}"}) if rng.random() < 0.4 else
                     ("cat", {"path": f"reports/{report}/10-K.txt"}))
    answer = item["reference_answer"] if rng.random() < 0.6 else "$1.0M"
    return f"{prefix}-{i:05d}", item, calls, answer


async def _drive(url: str, rollouts: int, concurrency: int, seed: int, token: str | None,
                 rollout_id_header: str | None, prefix: str, think_s: tuple[float, float], timeout: float) -> list[dict]:
    import aiohttp  # httpx's async pool slowed 20x at 64 connections; aiohttp holds its speed

    rng = random.Random(seed)
    items = [doc["sample"] for doc in corpus(seed=0).values()]
    plans = [_plan(i, rng, items, prefix) for i in range(rollouts)]
    answered: list[dict] = []
    gate = asyncio.Semaphore(concurrency)
    headers = {"Authorization": f"Bearer {token}"} if token else {}

    async def post(session, path, body, rollout_id, kind):
        extra = {rollout_id_header: rollout_id} if rollout_id_header else {}
        row = {"rollout_id": rollout_id, "kind": kind, "path": path, "http_status": None, "error": None}
        try:
            async with session.post(url + path, json=body, headers={**headers, **extra}) as response:
                await response.read()
                row["http_status"] = response.status
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            row["error"] = type(exc).__name__
        answered.append(row)
        return row["http_status"]

    async def one(session, plan):
        rollout_id, item, calls, final = plan
        async with gate:
            for n, (tool, args) in enumerate(calls):
                await asyncio.sleep(random.Random(f"{rollout_id}/{n}").uniform(*think_s))
                body = {"arguments": json.dumps(args), "call_id": f"call_{n}"}
                if not rollout_id_header:
                    body["id"] = rollout_id
                if await post(session, f"/{tool}", body, rollout_id, "tool") is None:
                    return
            body = {"item": {"id": item["id"], "reference_answer": item["reference_answer"]}, "model_sample": final}
            if not rollout_id_header:
                body["id"] = rollout_id
            await post(session, "/grade", body, rollout_id, "grade")

    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=timeout)) as session:
        await asyncio.gather(*(one(session, plan) for plan in plans))
    return answered


def drive(url: str, rollouts: int = config.DEMO_DRIVE["rollouts"], concurrency: int = config.DEMO_DRIVE["concurrency"],
          seed: int = 0, token: str | None = None, rollout_id_header: str | None = None, prefix: str = "live",
          think_s: tuple[float, float] = (0.0, 0.01), timeout: float = 30.0) -> pd.DataFrame:
    """Run ``rollouts`` synthetic rollouts against a demo server, ``concurrency`` at once (all
    start together: a training step's burst). Returns one row per request: rollout_id, kind
    (tool/grade), path, http_status (None when no answer came), error."""
    rows = asyncio.run(_drive(url, rollouts, concurrency, seed, token, rollout_id_header, prefix, think_s, timeout))
    return pd.DataFrame(rows, columns=["rollout_id", "kind", "path", "http_status", "error"])
