"""The demo's FinQA-like tool and grader endpoints, with capture on: a real server for the demo
and the tests, and a client that drives rollouts against it. (SYNTHETIC: the corpus is made up.)

Tools take the Agent RFT build-hour request body ``{"arguments": "<json string>", "call_id",
"id"}`` and answer ``{"output": "...", "call_id", "id"}``: ``POST /search`` ({"query"}),
``/list`` ({"path"}), ``/cat`` ({"path"}). ``POST /grade`` takes ``{"id", "item": {"id",
"reference_answer"}, "model_sample"}`` and answers ``{"score"}``.

With a token set, every route but ``/health`` needs ``Authorization: Bearer <token>`` (calls
answered 401 are not logged); a server reachable beyond this machine refuses to start without
one. A malformed request is answered 400 with what is wrong; anything unexpected 500, with one
line on the ``rolloutlab.demo_server`` logger (never a traceback).
"""
from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import random
import re
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
from fastapi import FastAPI, HTTPException, Request  # module level: FastAPI resolves the annotations here

from .. import config
from ..demo import synth
from .events import EventLog, check_rollout_id_header, exception_text
from .middleware import CaptureMiddleware

logger = logging.getLogger("rolloutlab.demo_server")

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


class OneLineErrors:
    """ASGI middleware: an exception becomes a 500 ``{"detail": "internal error"}`` and one log
    line, instead of a traceback on stderr (the server's own handler re-raises to log one)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = False

        async def tracking_send(message):
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as exc:
            logger.error("demo server: %s %s failed: %s", scope.get("method"), scope.get("path"),
                         " ".join(exception_text(exc).split()))
            if not started:  # else the server closes the connection on the unfinished answer
                body = b'{"detail":"internal error"}'
                await send({"type": "http.response.start", "status": 500,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})


def check_exposure(host: str, token: str | None) -> None:
    """Refuse a server reachable beyond this machine without a token."""
    if host not in config.LOOPBACK_HOSTS and not token:
        raise ValueError(f"the demo server would listen on {host}, reachable beyond this machine, without a bearer "
                         f"token: pass --token TOKEN (or set ${config.DEMO_SERVER_TOKEN_ENV_VAR}), or listen on "
                         f"127.0.0.1")


async def _json_body(request: Request, what: str):
    """The request's JSON body (None when empty), or a 400 saying ``what`` it must be."""
    try:
        raw = await request.body()
        return json.loads(raw) if raw.strip() else None
    except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested too deep to read
        raise HTTPException(status_code=400, detail=f"the body must be JSON: {what}") from None


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

    app.add_middleware(OneLineErrors)  # added last: outside capture, which logs the failure first
    expected = f"Bearer {token}".encode() if token is not None else None

    def authorize(request: Request) -> None:
        given = request.headers.get("authorization", "").encode("latin-1", errors="replace")
        if expected is not None and not hmac.compare_digest(given, expected):  # in constant time
            raise HTTPException(status_code=401, detail="missing or wrong bearer token")

    async def arguments(request: Request) -> tuple[dict, dict]:
        authorize(request)
        shape = "an object with 'arguments' (a JSON object or its text)"
        body = await _json_body(request, shape)
        if not isinstance(body, dict) or "arguments" not in body:
            raise HTTPException(status_code=400, detail=f"the body must be {shape}")
        args = body["arguments"]
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except (ValueError, RecursionError):
                raise HTTPException(status_code=400, detail="'arguments' text is not JSON") from None
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
        body = await _json_body(request, "a JSON object with 'item' and 'model_sample'")
        if not isinstance(body, dict):
            raise HTTPException(status_code=400, detail="the body must be a JSON object with 'item' and 'model_sample'")
        item = body.get("item")
        if not isinstance(item, dict) or not isinstance(item.get("id"), (str, int, type(None))) \
                or not isinstance(item.get("reference_answer"), (str, int, float, type(None))):
            raise HTTPException(status_code=400, detail="'item' must be a JSON object with 'id' (text) and/or "
                                                        "'reference_answer'")
        reference = item.get("reference_answer") or references.get(item.get("id"))
        if reference is None:
            raise HTTPException(status_code=422, detail="unknown item: send item.id or item.reference_answer")
        return {"score": 1.0 if _normalise(body.get("model_sample", "")) == _normalise(reference) else 0.0}

    @app.get("/health")
    async def health():
        return {"ok": True}

    @app.get("/capture/stats")
    async def capture_stats(request: Request):
        authorize(request)
        stats = event_log.stats()
        # file names only: where the server keeps its logs is not the client's business
        return {"events": stats["events"], "failures": stats["failures"],
                "unauthenticated": stats["unauthenticated"], "files": [Path(f).name for f in stats["files"]],
                "last_error": stats["last_error"] and stats["last_error"].split(":", 1)[0]}

    return app


def serve(port: int = config.DEMO_SERVER_PORT, log_dir: str | Path = config.DEMO_SERVER_DIR,
          host: str = config.DEMO_SERVER_HOST, token: str | None = None, **options) -> EventLog:
    """Run the demo server in the foreground (uvicorn) until interrupted; returns its log.
    ``token``: else ``$ROLLOUTLAB_DEMO_TOKEN`` (config.DEMO_SERVER_TOKEN_ENV_VAR); required
    when ``host`` is not a loopback address."""
    import uvicorn

    token = token or os.environ.get(config.DEMO_SERVER_TOKEN_ENV_VAR) or None
    check_exposure(host, token)
    app = make_app(log_dir, token=token, **options)
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
    return app.state.capture_log


@contextmanager
def running(log_dir: str | Path, host: str = config.DEMO_SERVER_HOST, port: int = 0, token: str | None = None,
            **options):
    """The demo server on a background thread (``port=0``: any free port); yields its base URL.
    ``token`` is required when ``host`` is not a loopback address."""
    import uvicorn

    token = token or None
    check_exposure(host, token)
    app = make_app(log_dir, token=token, **options)
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
                row["http_status"] = response.status  # a status line is an answer a client may act on
                await response.read()
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            row["error"] = type(exc).__name__
        answered.append(row)
        return None if row["error"] else row["http_status"]

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
    (tool/grade), path, http_status (None when no status line came; set, with an error, when
    the body was then cut off), error."""
    rows = asyncio.run(_drive(url, rollouts, concurrency, seed, token, rollout_id_header, prefix, think_s, timeout))
    return pd.DataFrame(rows, columns=["rollout_id", "kind", "path", "http_status", "error"])
