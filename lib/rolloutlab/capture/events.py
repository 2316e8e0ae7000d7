"""The event log and the events: an ``EventLog`` appends ``rft-endpoint`` events as JSONL (one ``os.write`` a line,
files ``0600``, a new file past a size limit, a line never straddling a page); ``Recorder`` builds a
tool or grade event from what a call sent and answered (ids, bounded redacted arguments, the final
answer with credential formats masked), shared by the middleware and the decorators.
"""
from __future__ import annotations

import json
import logging
import mmap
import os
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Mapping

from .. import config
from .redaction import _compact, _exact, _walk, mask_tokens, redact, redact_head, redact_text
from .streaming import Cut

logger = logging.getLogger("rolloutlab.capture")
PAGE = mmap.PAGESIZE


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
        self.unauthenticated = 0
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

    def _pad(self, n: int) -> int:
        """Blank-line bytes that make a line of ``n`` bytes start on a page: the kernel stops a write
        that a kill -9 interrupts only between pages, so a line within one page is written whole or
        not at all. (Longer lines can still be cut, at a page boundary, as their file's last line.)"""
        offset = self._size % PAGE
        return PAGE - offset if offset and n <= PAGE and offset + n > PAGE else 0

    def write(self, event: Mapping[str, Any]) -> bool:
        """Append one event as one line. Returns False (and counts the failure) instead of raising."""
        try:
            # a lone surrogate (JSON allows "\ud800") is not UTF-8, nor loadable escaped: it becomes "?"
            line = (json.dumps(event, ensure_ascii=False, separators=(",", ":"), default=str) + "\n").encode(
                errors="replace")
            with self._lock:
                pad = self._pad(len(line))
                if (self._fd is None or self._pid != os.getpid()
                        or (self._size and self._size + pad + len(line) > self.max_bytes)):
                    self._open()
                    pad = self._pad(len(line))
                if pad:  # one write still: a cut can only fall at the page boundary, after the blank lines
                    line = b"\n" * pad + line
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
        return {"events": self.events, "failures": self.failures, "unauthenticated": self.unauthenticated,
                "last_error": self.last_error, "files": [str(p) for p in self.files], "log_dir": str(self.dir)}

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


# --- the parts of a body that are logged ---------------------------------------------------------

def tool_arguments(body: Any, id_fields: Iterable[str] = ()) -> Any:
    """The tool's arguments: the build-hour body's ``arguments`` (a JSON string or an object),
    else the body without the id fields."""
    if isinstance(body, dict) and "arguments" in body:
        args = body["arguments"]
        if isinstance(args, str):
            try:
                return json.loads(args)
            except (ValueError, RecursionError):
                return args
        return args
    if isinstance(body, dict):
        skip = set(id_fields) | {"id", "call_id"}
        return {k: v for k, v in body.items() if k not in skip}
    return body



def bound_arguments(args: Any, names: Iterable[str] = config.CAPTURE_REDACT_FIELDS) -> Any:
    """``args`` as they are logged: redacted, and past ``CAPTURE_ARGUMENTS_CHARS`` characters of
    compact JSON text, ``{"_truncated": true, "chars": <full length>, "head": <redacted head>}``."""
    limit = config.CAPTURE_ARGUMENTS_CHARS
    size = len(_compact(args))  # before redacting: what was sent
    if size <= limit:
        cleaned = redact(args, names)
        if len(_compact(cleaned)) <= limit:
            return cleaned
    return {"_truncated": True, "chars": size, "head": redact_head(args, limit, names)}


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


def _one_line(text: str) -> str:
    return " ".join(text.split("\n"))


def exception_text(exc: BaseException) -> str:
    # the message only: "KeyError: 'x'" is not a key=value pair
    message = redact_text(_one_line(str(exc))[:config.CAPTURE_ERROR_CHARS * 4])
    return f"{type(exc).__name__}: {message}"[:config.CAPTURE_ERROR_CHARS]


def error_text(status: int, payload: Any, raw: bytes, names: Iterable[str] = config.CAPTURE_REDACT_FIELDS) -> str:
    """An error answer as logged: its ``detail`` text, else the whole body, redacted."""
    limit = config.CAPTURE_ERROR_CHARS
    detail = payload.get("detail") if isinstance(payload, dict) else None
    if isinstance(detail, str):
        text = redact_head(detail, limit, names)
    elif payload is not None:  # e.g. FastAPI's 422, which echoes the input
        text = redact_head(payload, limit, names)
    else:
        text = redact_text(raw[:limit * 4].decode("utf-8", errors="replace"), names)
    return _one_line(f"HTTP {status}: {text}")[:limit]


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

    def arguments(self, body: Any) -> Any:
        """The body's arguments as logged: redacted, bounded."""
        return bound_arguments(tool_arguments(body, [self.id_field or ""]), self.redact_fields)

    def cut_arguments(self, peeked: Mapping[str, Any], head: str, size: int) -> dict:
        """The arguments of a request longer than the hold: the head of its ``arguments`` text when
        that was found, else of the body."""
        args = peeked.get("arguments")
        text = args if isinstance(args, str) else head
        limit = config.CAPTURE_ARGUMENTS_CHARS
        # redact a little more than is kept: a pair cut at the edge is still recognised
        return {"_truncated": True, "request_bytes": size,
                "head": redact_text(text[:limit + 4096], self.redact_fields)[:limit]}

    def tool_event(self, tool: str, rollout_id: str | None, arguments: Any, call_id: Any, start: float, end: float,
                   http_status: int | None, error: str | None, chars: int | None) -> dict:
        failed = error is not None or (http_status or 0) >= 400
        event = {"event": "tool", "rollout_id": rollout_id, "tool": tool, "arguments": arguments,
                 "started_at": _iso(start), "ended_at": _iso(end), "status": "error" if failed else "ok",
                 "http_status": http_status, "error": error, "output_chars": chars}
        if call_id is not None:
            event["call_id"] = _walk(call_id, _exact(self.redact_fields), 1024)[0]
        return event

    def final_answer(self, body: Any, request_bytes: int | None = None) -> str | None:
        answer = field(body, self.final_answer_field)
        if answer is None:
            return None
        text = answer if isinstance(answer, str) else json.dumps(answer)
        limit = config.CAPTURE_ANSWER_CHARS
        if isinstance(answer, Cut):
            return mask_tokens(text[:limit + 4096])[:limit] + f" [truncated: request of {request_bytes} bytes]"
        if len(text) > limit:
            return mask_tokens(text[:limit + 4096])[:limit] + f" [truncated: {len(text)} chars]"
        return mask_tokens(text)

    def grade_event(self, rollout_id: str | None, body: Any, start: float, end: float, http_status: int | None,
                    error: str | None, payload: Any, request_bytes: int | None = None) -> dict:
        score, grades = grader_result(payload) if error is None else (None, None)
        if error is None and score is None and grades is None:
            error = "the grader's response carried no score"
        sample = field(body, self.sample_id_field)
        return {"event": "grade", "rollout_id": rollout_id, "run": self.run, "step": self.step, "split": self.split,
                "sample_id": None if sample is None else str(sample),
                "final_answer": self.final_answer(body, request_bytes),
                # not started_at: in this format that is the rollout's start, which the grader cannot see
                "score": score, "grades": grades, "ts": _iso(end), "grader_latency_s": round(end - start, 6),
                "http_status": http_status, "error": error}


