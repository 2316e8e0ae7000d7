"""Capture: the team's tool and grader endpoints log every call as ``rft-endpoint`` events.

``CaptureMiddleware`` wraps any ASGI app (FastAPI, Starlette); ``captured_tool`` and
``captured_grader`` wrap plain handler functions. Both write through an ``EventLog``: JSONL files
in a folder, one line per event written with a single ``os.write`` on an append-only file, files
created ``0600``, a new file past a size limit. A kill -9 can stop a write only between two pages
of the file, so a line that fits in a page starts on a fresh page when it would straddle one
(blank lines before it, which readers skip): it is written whole or not at all. Logging never
breaks the endpoint: a failure to log is counted (``EventLog.stats()``) and reported through the
``rolloutlab.capture`` logger.

A call is logged before any byte of its answer leaves (the status line is held back until the
body, since servers write it at once and a client that saw "200" saw the call answered); an
answer sent in several parts, before its last part. So a crash can lose only calls nobody saw
answered. A call answered 401 or 403 is not logged (counted as ``unauthenticated``): a client
that did not authenticate cannot put events in the log.

Headers are never logged. The rollout id comes from one configured header (never a credential
header) or from a field of the JSON body.

Secrets are redacted (``redact``, ``redact_text``; docs/security.md): the value of every key
that looks secret (``config.CAPTURE_REDACT_KEY_WORDS`` / ``CAPTURE_REDACT_KEY_SUBSTRINGS``, and
the caller's exact ``redact_fields``) at any depth, also inside strings that are JSON text; in
other text, ``key=value`` / ``key: value`` pairs whose key looks secret and the credential
formats of the common providers (``TOKEN_FORMATS``: OpenAI, Anthropic, Hugging Face, Google,
Stripe, GitHub, GitLab, AWS, Slack, ... JWTs, PEM private keys). Training files
(``redact_training_text``) get the same formats but only pairs whose value looks like a credential,
so that ordinary text ("Answer key: B") is never changed. Error bodies and exception messages are redacted the same
way. A grade event's final answer is what was graded, so it stays verbatim except that the
credential *formats* are masked: a ``key: value`` rule would rewrite ordinary answers, while a
token format is never a legitimate answer (a model that leaks one must not leak it into the log).

Sizes are bounded. The middleware holds at most ``config.CAPTURE_REQUEST_HOLD_BYTES`` of a request
(plus a 64 KiB tail); the rest streams through to the endpoint as it arrives. A body held whole
is parsed; a longer one is read for its ids by a depth-aware scan of its head and a narrow
search of its tail. Logged arguments longer than ``config.CAPTURE_ARGUMENTS_CHARS`` (as compact
JSON text) become ``{"_truncated": true, "chars": <full length>, "head": "<first characters>"}``;
arguments of a request longer than the hold become ``{"_truncated": true, "request_bytes":
<request size>, "head": "<first characters of the arguments, else of the body>"}``. A final
answer is cut to ``config.CAPTURE_ANSWER_CHARS`` characters followed by ``" [truncated: <n>
chars]"`` (or ``" [truncated: request of <n> bytes]"`` when the request was longer than the
hold). Response bodies are read up to ``body_limit``; ``output_chars`` counts the whole answer
whatever is kept.
"""
from __future__ import annotations

import collections
import json
import os
import time
from typing import Any, Iterable, Mapping

from .. import config
from .events import EventLog, Recorder, error_text, exception_text, field, output_chars
from .streaming import Held, nest, peek, peek_tail

UNAUTHENTICATED = (401, 403)  # answers to a client that did not prove who it is: never logged
def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except (ValueError, RecursionError):
        return None


class CaptureMiddleware:
    """ASGI middleware: every matching request becomes one tool or grade event.

    ``tools``: None (every ``methods`` request outside ``graders`` is a tool call, named by the last
    segment of its path), a list of paths, or {path: tool name}. ``graders``: the grader endpoint's
    paths. ``hold``: how much of a request body is held for the event (the rest streams through).
    The rest of the keywords are ``Recorder``'s. Starlette/FastAPI::

        app.add_middleware(CaptureMiddleware, log="logs/", run="ft-step-10")
    """

    def __init__(self, app, log: EventLog | str | os.PathLike, *, tools: Mapping[str, str] | Iterable[str] | None = None,
                 graders: Iterable[str] = ("/grade",), methods: Iterable[str] = ("POST",),
                 body_limit: int = config.CAPTURE_BODY_LIMIT, hold: int = config.CAPTURE_REQUEST_HOLD_BYTES,
                 recorder: "Recorder | None" = None, **recorder_options):
        self.app = app
        self.recorder = recorder if recorder is not None else Recorder(log, **recorder_options)
        self.log = self.recorder.log
        self.tools = (None if tools is None else dict(tools) if isinstance(tools, Mapping)
                      else {p: p.rstrip("/").rsplit("/", 1)[-1] for p in tools})
        self.graders = set(graders)
        self.methods = {m.upper() for m in methods}
        self.body_limit = body_limit
        self.hold = int(hold)

    def _route(self, scope) -> tuple[str, str] | None:
        path = scope.get("path", "")
        if scope.get("method") not in self.methods:
            return None
        if path in self.graders:
            return "grade", "grader"
        if self.tools is None:
            name = path.rstrip("/").rsplit("/", 1)[-1]
            return ("tool", name) if name else None
        return ("tool", self.tools[path]) if path in self.tools else None

    def _request(self, kind: str, held: Held) -> tuple[Any, int | None, dict | None]:
        """(body, request_bytes, arguments): the parsed body when it was held whole; else what
        its head and tail show, the request's size and its cut arguments."""
        if held.whole:
            return _json(held.head_bytes()), None, None
        rec = self.recorder
        paths = [rec.id_field] + (["call_id", "arguments"] if kind == "tool" else
                                  [rec.sample_id_field, rec.final_answer_field])
        paths = [p for p in paths if p]
        head = held.head_bytes().decode("utf-8", errors="replace")
        found = peek(head, paths)
        tail = held.tail.decode("utf-8", errors="replace") if held.complete else ""
        for path in paths:
            if tail and path not in found:
                value = peek_tail(tail, path)
                if value is not None:
                    found[path] = value
        body = nest(found)
        arguments = rec.cut_arguments(found, head, held.size) if kind == "tool" else None
        return body, held.size, arguments

    async def __call__(self, scope, receive, send):
        route = self._route(scope) if scope["type"] == "http" else None
        if route is None:
            return await self.app(scope, receive, send)
        kind, tool = route
        start = time.time()
        held = Held(self.hold)
        # read up to the hold before the app starts (so the event has the ids even when the app
        # never reads the body); the rest streams through as the app asks for it
        replay: collections.deque = collections.deque()
        while held.size < self.hold:
            message = await receive()
            replay.append(message)
            if message["type"] != "http.request":
                break
            held.add(message.get("body", b""), message.get("more_body", False))
            if held.complete:
                break

        async def capture_receive():
            if replay:
                return replay.popleft()
            message = await receive()
            if message["type"] == "http.request" and not held.complete:
                held.add(message.get("body", b""), message.get("more_body", False))
            return message

        state = {"status": None, "start": None, "size": 0, "kept": [], "logged": False}

        def record(error: str | None = None) -> None:
            state["logged"] = True
            status = state["status"]
            if error is None and status in UNAUTHENTICATED:
                self.log.unauthenticated += 1  # not logged: the caller did not prove who it is
                return
            try:
                end = time.time()
                body, request_bytes, cut_args = self._request(kind, held)
                rollout_id = self.recorder.rollout_id(scope.get("headers", ()), body)
                raw = b"".join(state["kept"])
                payload = _json(raw) if state["size"] <= self.body_limit else None
                if error is None and status is not None and status >= 400:
                    error = error_text(status, payload, raw, self.recorder.redact_fields)
                if kind == "grade":
                    event = self.recorder.grade_event(rollout_id, body, start, end, status, error, payload,
                                                      request_bytes)
                else:
                    chars = None if error else output_chars(payload, state["size"])
                    arguments = cut_args if cut_args is not None else self.recorder.arguments(body)
                    event = self.recorder.tool_event(tool, rollout_id, arguments, field(body, "call_id"), start, end,
                                                     status, error, chars)
                self.log.write(event)
            except Exception as exc:  # building the event failed: count it, keep answering
                self.log.failed(exc)

        async def capture_send(message):
            if message["type"] == "http.response.start":
                # held until the first body part: the server writes the status line as soon as it
                # has it, and a client that saw "200" saw the call answered (the event comes first)
                state["status"], state["start"] = message["status"], message
                return
            if message["type"] == "http.response.body":
                chunk = message.get("body", b"")
                state["size"] += len(chunk)
                if state["size"] <= self.body_limit:
                    state["kept"].append(chunk)
                if not message.get("more_body", False) and not state["logged"]:
                    record()  # before the first byte of a one-part answer, the last of any answer
            if state["start"] is not None:
                start, state["start"] = state["start"], None
                await send(start)
            await send(message)

        try:
            await self.app(scope, capture_receive, capture_send)
        except BaseException as exc:
            if not state["logged"]:
                if state["start"] is not None:  # never sent: the server answers 500 instead
                    state["status"] = None
                state["status"] = state["status"] or 500
                record(exception_text(exc))
            raise
        if not state["logged"]:
            record()
        if state["start"] is not None:  # an app that started an answer and never finished it
            await send(state["start"])


