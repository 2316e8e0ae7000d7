"""OpenAI-style chat messages -> native tool calls and messages (tau-bench, tau2, Inspect, chat logs).

Tool calls of one assistant message share a turn (they were issued together). A tool message
answers the earliest call with its id that has no answer yet, so ids reused inside one
trajectory (tau-bench does) still pair up in order.
"""
from __future__ import annotations

from collections import defaultdict, deque

from .convert import parse_json_arguments, text_of


def call_name_and_args(call: dict) -> tuple[str | None, object]:
    """Both shapes: OpenAI {function: {name, arguments}} and flat {name|function, arguments}."""
    fn = call.get("function")
    if isinstance(fn, dict):
        return fn.get("name"), parse_json_arguments(fn.get("arguments"))
    return call.get("name") or fn, parse_json_arguments(call.get("arguments"))


def tool_error(message: dict) -> str | None:
    """The error a tool message reports, as text (None when it succeeded)."""
    err = message.get("error")
    if isinstance(err, dict):
        return err.get("message") or err.get("type") or str(err)
    if err is True:
        return text_of(message.get("content")) or "error"
    if isinstance(err, str) and err:
        return err
    return None


def convert_messages(messages: list[dict], include_call=lambda call: True, ts_key: str | None = None):
    """(tool_calls, messages, final_answer) in native shape from a list of chat messages."""
    calls: list[dict] = []
    out_messages: list[dict] = []
    pending: dict[str, deque] = defaultdict(deque)
    turn = -1
    final_answer = None
    for msg in messages or []:
        if not isinstance(msg, dict):
            continue
        role = msg.get("role")
        ts = msg.get(ts_key) if ts_key else None
        content = text_of(msg.get("content"))
        tool_calls = [c for c in (msg.get("tool_calls") or []) if isinstance(c, dict) and include_call(c)]
        if role == "assistant":
            turn += 1
            if content:
                final_answer = content
        out_messages.append({"role": role, "content": content, "turn": max(turn, 0), "ts": ts})
        for call in tool_calls:
            name, args = call_name_and_args(call)
            record = {"call_id": call.get("id"), "turn": max(turn, 0), "tool": name or "(unnamed)",
                      "arguments": args, "started_at": ts, "status": "ok", "error": None}
            calls.append(record)
            if call.get("id") is not None:
                pending[call["id"]].append(record)
        if role == "tool":
            call_id = msg.get("tool_call_id") or msg.get("id")
            queue = pending.get(call_id)
            if queue:
                record = queue.popleft()
                record["output_chars"] = len(content or "")
                record["ended_at"] = ts
                error = tool_error(msg)
                if error:
                    record["status"], record["error"] = "error", error
    return calls, out_messages, final_answer
