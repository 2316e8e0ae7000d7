"""Capture: the team's tool and grader endpoints log every call as ``rft-endpoint`` events.

``CaptureMiddleware`` wraps any ASGI app (FastAPI, Starlette); ``captured_tool`` and
``captured_grader`` wrap plain handler functions. Both write through an ``EventLog``: JSONL files
in a folder, one whole line per event written with a single ``os.write`` on an append-only file
(so a crash never leaves half an event), files created ``0600``, a new file past a size limit. A
call is logged before its response's last byte is handed to the server, so every call a client
saw answered is in the log. Logging never breaks the endpoint: a failure to log is counted
(``EventLog.stats()``) and reported through the ``rolloutlab.capture`` logger.

Headers are never logged. The rollout id comes from one configured header (never a credential
header) or from a field of the JSON body; argument fields named like secrets are redacted.
"""
from __future__ import annotations

import functools
import inspect
import json
import logging
import os
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from . import config

logger = logging.getLogger("rolloutlab.capture")
REDACTED = "[redacted]"


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


class EventLog:
    """Append-only JSONL event files in ``log_dir``: ``<name>-<start>-<pid>-<seq>.jsonl``.

    One file per process (server workers never share a file), a new one past ``max_bytes``.
    ``fsync=True`` also survives a power cut, at the price of a disk flush per event.
    """

    def __init__(self, log_dir: str | os.PathLike, name: str = "endpoint", max_bytes: int = config.CAPTURE_MAX_BYTES,
                 fsync: bool = False):
        self.dir = Path(log_dir)
        self.name = name
        self.max_bytes = int(max_bytes)
        self.fsync = fsync
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._pid = 0
        self._size = 0
        self._seq = 0
        self._stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
        self.path: Path | None = None
        self.files: list[Path] = []
        self.events = 0
        self.failures = 0
        self.last_error: str | None = None

    def _open(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._pid = os.getpid()
        self._seq += 1
        self.path = self.dir / f"{self.name}-{self._stamp}-{self._pid}-{self._seq:04d}.jsonl"
        # O_APPEND: every write lands at the end, whole; 0600 whatever the umask (fchmod below)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        os.fchmod(self._fd, 0o600)
        self._size = os.fstat(self._fd).st_size
        self.files.append(self.path)

    def write(self, event: Mapping[str, Any]) -> bool:
        """Append one event as one line. Returns False (and counts the failure) instead of raising."""
        try:
            line = (json.dumps(event, ensure_ascii=False, separators=(",", ":"), default=str) + "\n").encode()
            with self._lock:
                if self._fd is None or self._pid != os.getpid() or (self._size and self._size + len(line) > self.max_bytes):
                    self._open()
                view = memoryview(line)
                while view:  # a regular file takes it in one write; loop in case it does not
                    view = view[os.write(self._fd, view):]
                if self.fsync:
                    os.fsync(self._fd)
                self._size += len(line)
                self.events += 1
            return True
        except Exception as exc:  # the endpoint must keep answering
            self.failed(exc)
            return False

    def failed(self, exc: BaseException) -> None:
        """Count an event that could not be logged; warn on the first and every 1000th."""
        self.failures += 1
        self.last_error = f"{type(exc).__name__}: {exc}"
        if self.failures == 1 or self.failures % 1000 == 0:
            logger.warning("rolloutlab capture could not log an event (%d failures so far): %s; the endpoint "
                           "keeps answering; check that %s is writable", self.failures, self.last_error, self.dir)

    def stats(self) -> dict:
        return {"events": self.events, "failures": self.failures, "last_error": self.last_error,
                "files": [str(p) for p in self.files], "log_dir": str(self.dir)}

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


def _as_log(log: EventLog | str | os.PathLike) -> EventLog:
    return log if isinstance(log, EventLog) else EventLog(log)


def field(obj: Any, path: str | None) -> Any:
    """The value at a dotted path (``item.id``) of a JSON object, or None."""
    if not path:
        return None
    for part in path.split("."):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def redact(value: Any, names: Iterable[str] = config.CAPTURE_REDACT_FIELDS) -> Any:
    """A copy of ``value`` with every object field named in ``names`` (any depth) replaced."""
    lowered = {n.lower() for n in names}

    def walk(v):
        if isinstance(v, dict):
            return {k: REDACTED if str(k).lower() in lowered else walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    return walk(value) if lowered else value


def tool_arguments(body: Any, id_fields: Iterable[str] = ()) -> Any:
    """The tool's arguments: the build-hour body's ``arguments`` (a JSON string or an object),
    else the body without the id fields."""
    if isinstance(body, dict) and "arguments" in body:
        args = body["arguments"]
        if isinstance(args, str):
            try:
                return json.loads(args)
            except ValueError:
                return args
        return args
    if isinstance(body, dict):
        skip = set(id_fields) | {"id", "call_id"}
        return {k: v for k, v in body.items() if k not in skip}
    return body


def output_chars(payload: Any, size: int) -> int:
    """The size of what the tool returned: the length of a JSON response's ``output`` text, else
    of the whole response."""
    if isinstance(payload, dict) and isinstance(payload.get("output"), str):
        return len(payload["output"])
    if isinstance(payload, str):
        return len(payload)
    return size


def grader_result(payload: Any) -> tuple[float | None, dict | None]:
    """(score, grades) from a grader's response: a number; or an object with ``score``/``reward``
    and/or ``grades``/``scores`` ({name: score})."""
    if isinstance(payload, (int, float)) and not isinstance(payload, bool):
        return float(payload), None
    if not isinstance(payload, dict):
        return None, None
    score = next((payload[k] for k in ("score", "reward") if isinstance(payload.get(k), (int, float))
                  and not isinstance(payload.get(k), bool)), None)
    grades = next((payload[k] for k in ("grades", "scores") if isinstance(payload.get(k), dict)), None)
    return (None if score is None else float(score)), grades


def exception_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:config.CAPTURE_ERROR_CHARS]


def error_text(status: int, payload: Any, raw: bytes) -> str:
    detail = payload.get("detail") if isinstance(payload, dict) else None
    text = detail if isinstance(detail, str) else raw.decode("utf-8", errors="replace")
    return f"HTTP {status}: {text}"[:config.CAPTURE_ERROR_CHARS]


def check_rollout_id_header(name: str | None) -> str | None:
    """The header's lower-case name; a credential header is refused (it is never logged)."""
    header = name.lower() if name else None
    if header in config.CAPTURE_CREDENTIAL_HEADERS:
        raise ValueError(f"rollout id header {name!r} is a credential header, which is never logged: name the "
                         "header that carries the rollout id (or read it from the body: rollout_id_field)")
    return header


class Recorder:
    """Builds the events; shared by the middleware and the decorators."""

    def __init__(self, log: EventLog | str | os.PathLike, *, rollout_id_header: str | None = None,
                 rollout_id_field: str | None = config.CAPTURE_ROLLOUT_ID_FIELD, run: str | None = None,
                 step: int | None = None, split: str | None = None,
                 sample_id_field: str = config.CAPTURE_SAMPLE_ID_FIELD,
                 final_answer_field: str = config.CAPTURE_FINAL_ANSWER_FIELD,
                 redact_fields: Iterable[str] = config.CAPTURE_REDACT_FIELDS):
        header = check_rollout_id_header(rollout_id_header)
        self.log = _as_log(log)
        self.header = header.encode("latin-1") if header else None
        self.id_field = rollout_id_field
        self.run, self.step, self.split = run, step, split
        self.sample_id_field, self.final_answer_field = sample_id_field, final_answer_field
        self.redact_fields = tuple(redact_fields)

    def rollout_id(self, headers: Iterable[tuple[bytes, bytes]], body: Any) -> str | None:
        if self.header is not None:
            for name, value in headers:
                if name.lower() == self.header:
                    return value.decode("latin-1")
        value = field(body, self.id_field)
        return None if value is None or value == "" else str(value)

    def tool_event(self, tool: str, rollout_id: str | None, body: Any, call_id: Any, start: float, end: float,
                   http_status: int | None, error: str | None, chars: int | None) -> dict:
        failed = error is not None or (http_status or 0) >= 400
        event = {"event": "tool", "rollout_id": rollout_id, "tool": tool,
                 "arguments": redact(tool_arguments(body, [self.id_field or ""]), self.redact_fields),
                 "started_at": _iso(start), "ended_at": _iso(end), "status": "error" if failed else "ok",
                 "http_status": http_status, "error": error, "output_chars": chars}
        if call_id is not None:
            event["call_id"] = call_id
        return event

    def grade_event(self, rollout_id: str | None, body: Any, start: float, end: float, http_status: int | None,
                    error: str | None, payload: Any) -> dict:
        score, grades = grader_result(payload) if error is None else (None, None)
        if error is None and score is None and grades is None:
            error = "the grader's response carried no score"
        answer = field(body, self.final_answer_field)
        sample = field(body, self.sample_id_field)
        return {"event": "grade", "rollout_id": rollout_id, "run": self.run, "step": self.step, "split": self.split,
                "sample_id": None if sample is None else str(sample),
                "final_answer": answer if answer is None or isinstance(answer, str) else json.dumps(answer),
                # not started_at: in this format that is the rollout's start, which the grader cannot see
                "score": score, "grades": grades, "ts": _iso(end), "grader_latency_s": round(end - start, 6),
                "http_status": http_status, "error": error}


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None


class CaptureMiddleware:
    """ASGI middleware: every matching request becomes one tool or grade event.

    ``tools``: None (every ``methods`` request outside ``graders`` is a tool call, named by the last
    segment of its path), a list of paths, or {path: tool name}. ``graders``: the grader endpoint's
    paths. The rest of the keywords are ``Recorder``'s. Starlette/FastAPI::

        app.add_middleware(CaptureMiddleware, log="logs/", run="ft-step-10")
    """

    def __init__(self, app, log: EventLog | str | os.PathLike, *, tools: Mapping[str, str] | Iterable[str] | None = None,
                 graders: Iterable[str] = ("/grade",), methods: Iterable[str] = ("POST",),
                 body_limit: int = config.CAPTURE_BODY_LIMIT, **recorder_options):
        self.app = app
        self.recorder = Recorder(log, **recorder_options)
        self.log = self.recorder.log
        self.tools = (None if tools is None else dict(tools) if isinstance(tools, Mapping)
                      else {p: p.rstrip("/").rsplit("/", 1)[-1] for p in tools})
        self.graders = set(graders)
        self.methods = {m.upper() for m in methods}
        self.body_limit = body_limit

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

    async def __call__(self, scope, receive, send):
        route = self._route(scope) if scope["type"] == "http" else None
        if route is None:
            return await self.app(scope, receive, send)
        kind, tool = route
        start = time.time()
        chunks, pending = [], None
        while True:
            message = await receive()
            if message["type"] != "http.request":
                pending = message  # a disconnect: handed on after the body
                break
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        raw_body = b"".join(chunks)
        replay = [{"type": "http.request", "body": raw_body, "more_body": False}] + ([pending] if pending else [])

        async def replay_receive():
            return replay.pop(0) if replay else await receive()

        state = {"status": None, "size": 0, "kept": [], "logged": False}

        def record(error: str | None = None) -> None:
            state["logged"] = True
            try:
                end = time.time()
                body = _json(raw_body)
                rollout_id = self.recorder.rollout_id(scope.get("headers", ()), body)
                status = state["status"]
                raw = b"".join(state["kept"])
                payload = _json(raw) if state["size"] <= self.body_limit else None
                if error is None and status is not None and status >= 400:
                    error = error_text(status, payload, raw)
                if kind == "grade":
                    event = self.recorder.grade_event(rollout_id, body, start, end, status, error, payload)
                else:
                    chars = None if error else output_chars(payload, state["size"])
                    event = self.recorder.tool_event(tool, rollout_id, body, field(body, "call_id"), start, end,
                                                     status, error, chars)
                self.log.write(event)
            except Exception as exc:  # building the event failed: count it, keep answering
                self.log.failed(exc)

        async def capture_send(message):
            if message["type"] == "http.response.start":
                state["status"] = message["status"]
            elif message["type"] == "http.response.body":
                chunk = message.get("body", b"")
                state["size"] += len(chunk)
                if state["size"] <= self.body_limit:
                    state["kept"].append(chunk)
                if not message.get("more_body", False) and not state["logged"]:
                    record()  # before the last byte goes out: an answered call is a logged call
            await send(message)

        try:
            await self.app(scope, replay_receive, capture_send)
        except BaseException as exc:
            if not state["logged"]:
                state["status"] = state["status"] or 500
                record(exception_text(exc))
            raise
        if not state["logged"]:
            record()


def _wrap(fn: Callable, before_return: Callable[[dict, Any, BaseException | None, float, float], None]):
    """Calls ``fn`` (sync or async) and hands (kwargs, result, exception, start, end) to
    ``before_return`` before returning or raising."""
    if inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def async_wrapper(*args, **kwargs):
            start = time.time()
            try:
                result = await fn(*args, **kwargs)
            except BaseException as exc:
                before_return(kwargs, None, exc, start, time.time())
                raise
            before_return(kwargs, result, None, start, time.time())
            return result
        return async_wrapper

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        start = time.time()
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:
            before_return(kwargs, None, exc, start, time.time())
            raise
        before_return(kwargs, result, None, start, time.time())
        return result
    return wrapper


def _size(result: Any) -> int:
    if isinstance(result, (str, bytes)):
        return len(result)
    try:
        return output_chars(result, len(json.dumps(result, default=str)))
    except (TypeError, ValueError):
        return len(str(result))


def _decorator(recorder: Recorder, event: Callable[..., dict]):
    """A decorator that logs ``event(fn, kwargs, result, error, start, end)`` for every call."""
    def decorate(fn):
        def log_call(kwargs, result, exc, start, end):
            try:
                error = None if exc is None else exception_text(exc)
                recorder.log.write(event(fn, kwargs, result, error, start, end))
            except Exception as e:
                recorder.log.failed(e)

        wrapper = _wrap(fn, log_call)
        wrapper.capture_log = recorder.log
        return wrapper
    return decorate


def captured_tool(log: EventLog | str | os.PathLike, tool: str | None = None, rollout_id_arg: str = "rollout_id",
                  **recorder_options):
    """Decorator for a plain tool handler called with keyword arguments: the ``rollout_id_arg``
    keyword is the rollout id, the other keywords are the tool's arguments. An exception is logged
    as a failed call (``error``) and raised again."""
    recorder = Recorder(log, rollout_id_field=rollout_id_arg, **recorder_options)

    def event(fn, kwargs, result, error, start, end):
        args = {k: v for k, v in kwargs.items() if k != rollout_id_arg}
        return recorder.tool_event(tool or fn.__name__, recorder.rollout_id((), kwargs), {"arguments": args},
                                   kwargs.get("call_id"), start, end, None, error,
                                   None if error else _size(result))
    return _decorator(recorder, event)


def captured_grader(log: EventLog | str | os.PathLike, rollout_id_arg: str = "rollout_id", **recorder_options):
    """Decorator for a plain grader handler called with keyword arguments (the request body's
    fields: the rollout id, ``item``, ``model_sample`` by default); its return value is the score
    (a number, or an object with ``score`` and/or ``grades``)."""
    recorder = Recorder(log, rollout_id_field=rollout_id_arg, **recorder_options)

    def event(fn, kwargs, result, error, start, end):
        return recorder.grade_event(recorder.rollout_id((), kwargs), kwargs, start, end, None, error, result)
    return _decorator(recorder, event)
