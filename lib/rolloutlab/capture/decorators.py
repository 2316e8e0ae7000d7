"""``captured_tool`` and ``captured_grader``: plain handler functions (sync or async) wrapped so that
every call is logged as an ``rft-endpoint`` event through the same ``Recorder`` as the middleware.
"""
from __future__ import annotations

import functools
import inspect
import json
import os
import time
from typing import Any, Callable

from .events import EventLog, Recorder, exception_text, output_chars

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
        return recorder.tool_event(tool or fn.__name__, recorder.rollout_id((), kwargs),
                                   recorder.arguments({"arguments": args}), kwargs.get("call_id"), start, end, None,
                                   error, None if error else _size(result))
    return _decorator(recorder, event)


def captured_grader(log: EventLog | str | os.PathLike, rollout_id_arg: str = "rollout_id", **recorder_options):
    """Decorator for a plain grader handler called with keyword arguments (the request body's
    fields: the rollout id, ``item``, ``model_sample`` by default); its return value is the score
    (a number, or an object with ``score`` and/or ``grades``)."""
    recorder = Recorder(log, rollout_id_field=rollout_id_arg, **recorder_options)

    def event(fn, kwargs, result, error, start, end):
        return recorder.grade_event(recorder.rollout_id((), kwargs), kwargs, start, end, None, error, result)
    return _decorator(recorder, event)


