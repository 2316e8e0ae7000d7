"""OpenAI-style chat messages -> native tool calls and messages (tau-bench, tau2, Inspect, chat logs).

Tool calls of one assistant message share a turn (they were issued together). A tool message
answers the earliest call with its id that has no answer yet, so ids reused inside one
trajectory (tau-bench does) still pair up in order. A tool message that answers no call (a
log that kept the results but not the calls) is still a call the agent's tools ran: it becomes
a call of unknown origin — the tool its message names (``function``/``name``), no arguments —
with its output size and error, so a timeout is never lost. Messages and calls of another shape
than these raise BadField naming where they are (``traj[3].tool_calls``).
"""
from __future__ import annotations

import json
from collections import defaultdict, deque

from .convert import BadField, field, json_kind, parse_json_arguments, preview, text_of

ID_KINDS = ("string", "integer")
UNKNOWN_CALL = "(unknown call)"  # the tool of a result whose call is not in the log, when it names none


def call_name_and_args(call: dict, where: str) -> tuple[str | None, object]:
    """Both shapes: OpenAI {function: {name, arguments}} and flat {name|function, arguments}."""
    fn = call.get("function")
    if isinstance(fn, dict):
        return field(fn, "name", "string", f"{where}function."), parse_json_arguments(fn.get("arguments"))
    name = field(call, "name", "string", where) if call.get("name") is not None else \
        field(call, "function", "string", where)
    return name, parse_json_arguments(call.get("arguments"))


def tool_error(message: dict) -> str | None:
    """The error a tool message reports, as text (None when it succeeded)."""
    err = message.get("error")
    if isinstance(err, dict):  # Inspect: {type: "timeout", message: "..."}: the type says what failed
        kind, text = err.get("type"), err.get("message")
        if isinstance(kind, str) and isinstance(text, str) and text:
            return f"{kind}: {text}"
        text = text or kind
        return text if isinstance(text, str) else preview(err)
    if err is True:
        return text_of(message.get("content")) or "error"
    if isinstance(err, str) and err:
        return err
    return None


def _items(value: object, where: str) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise BadField(f"field '{where}' must be a JSON array, got {json_kind(value)} {preview(value)}")
    return value


ACTION = "Action:"
OBSERVATION = "API output:"  # tau-bench's prefix of a text action's result, sent back as a user message


def text_action(content: str | None) -> tuple[str, object] | None:
    """The action a ReAct / Act agent wrote as text (``Action:`` then ``{"name", "arguments"}``, as
    tau-bench's ChatReActAgent parses it: the text after the last ``Action:``), or None."""
    if not content or ACTION not in content:
        return None
    try:
        action = json.loads(content.split(ACTION)[-1].strip())
    except ValueError:
        return None
    if not isinstance(action, dict) or not isinstance(action.get("name"), str):
        return None
    return action["name"], action.get("arguments")


def convert_messages(messages: object, include_call=lambda call: True, ts_key: str | None = None,
                     where: str = "messages", text_actions: bool = False):
    """(tool_calls, messages, final_answer) in native shape from a list of chat messages. With
    ``text_actions``, an assistant message without tool calls whose text ends in an action
    (``text_action``) is a call of that tool — ``respond`` is the answer, not a call — and the user
    message after it that begins ``API output:`` is that call's result (a tool message)."""
    calls: list[dict] = []
    text_call: dict | None = None  # a text action waiting for its observation
    out_messages: list[dict] = []
    pending: dict[object, deque] = defaultdict(deque)
    left_out: set = set()  # ids of calls include_call leaves out (tau2's user tools): their results too
    turn = -1
    final_answer = None
    for i, msg in enumerate(_items(messages, where)):
        here = f"{where}[{i}]"
        if not isinstance(msg, dict):
            raise BadField(f"'{here}' must be a JSON object (a message), got {json_kind(msg)} {preview(msg)}")
        role = field(msg, "role", "string", f"{here}.")
        ts = msg.get(ts_key) if ts_key else None
        content = text_of(msg.get("content"))
        if text_call is not None and role == "user" and isinstance(content, str) and content.startswith(OBSERVATION):
            result = content[len(OBSERVATION):].lstrip(" ")
            text_call.update(output_chars=len(result), ended_at=ts)
            if result.startswith("Error"):
                text_call.update(status="error", error=result[:2000])
            out_messages.append({"role": "tool", "content": content, "turn": max(turn, 0), "ts": ts})
            text_call = None
            continue
        text_call = None
        raw_calls = _items(msg.get("tool_calls"), f"{here}.tool_calls")
        tool_calls = []
        for j, c in enumerate(raw_calls):
            if not isinstance(c, dict):
                raise BadField(f"'{here}.tool_calls[{j}]' must be a JSON object, got {json_kind(c)} {preview(c)}")
            if include_call(c):
                tool_calls.append((j, c))
            elif isinstance(c.get("id"), (str, int)):
                left_out.add(c["id"])
        if role == "assistant":
            turn += 1
            action = text_action(content) if text_actions and not raw_calls else None
            if action is not None and action[0] == "respond":
                said = action[1].get("content") if isinstance(action[1], dict) else None
                final_answer = said if isinstance(said, str) else content
            elif action is not None:
                text_call = {"call_id": None, "turn": turn, "tool": action[0], "arguments": action[1],
                             "started_at": ts, "status": "ok", "error": None}
                calls.append(text_call)
            elif content:
                final_answer = content
        out_messages.append({"role": role, "content": content, "turn": max(turn, 0), "ts": ts})
        for j, call in tool_calls:
            call_where = f"{here}.tool_calls[{j}]."
            name, args = call_name_and_args(call, call_where)
            call_id = field(call, "id", ID_KINDS, call_where)
            record = {"call_id": None if call_id is None else str(call_id), "turn": max(turn, 0),
                      "tool": name or "(unnamed)", "arguments": args, "started_at": ts, "status": "ok",
                      "error": None}
            calls.append(record)
            if call_id is not None:
                pending[call_id].append(record)
        if role == "tool":
            answered = msg.get("tool_call_id") if msg.get("tool_call_id") is not None else msg.get("id")
            queue = pending.get(answered) if isinstance(answered, (str, int)) else None
            if not queue and isinstance(answered, (str, int)) and answered in left_out:
                continue  # the result of a call left out
            if queue:
                record = queue.popleft()
            else:  # a result whose call the log does not hold
                name = msg.get("function") if isinstance(msg.get("function"), str) else msg.get("name")
                record = {"call_id": None if answered is None else str(answered), "turn": max(turn, 0),
                          "tool": name if isinstance(name, str) and name else UNKNOWN_CALL, "arguments": None,
                          "status": "ok", "error": None}
                calls.append(record)
            record["output_chars"] = len(content or "")
            record["ended_at"] = ts
            error = tool_error(msg)
            if error:
                record["status"], record["error"] = "error", error
    return calls, out_messages, final_answer


def expected_of(actions: object, name_key: str, args_key: str, outputs: object = None,
                assertions: object = None) -> dict:
    """What a benchmark expects of the agent (tau-bench: ``actions`` with ``kwargs``, ``outputs``;
    tau2: ``evaluation_criteria`` ``actions`` with ``arguments``, ``communicate_info``,
    ``nl_assertions``), as native fields: ``sample_meta`` holds the expected tool calls
    (``expected_actions``: ``{tool, arguments}``), what it must say (``expected_outputs``) and
    what a judge checks (``assertions``); ``reference`` is the one thing it must say, where there
    is exactly one (an answer to compare with: several are not one answer)."""
    expected = [{"tool": a[name_key], "arguments": a.get(args_key)}
                for a in (actions if isinstance(actions, list) else [])
                if isinstance(a, dict) and isinstance(a.get(name_key), str)]
    said = [str(o) for o in outputs if isinstance(o, (str, int, float)) and not isinstance(o, bool)] \
        if isinstance(outputs, list) else []
    checks = [a for a in assertions if isinstance(a, str)] if isinstance(assertions, list) else []
    meta = {k: v for k, v in (("expected_actions", expected), ("expected_outputs", said), ("assertions", checks)) if v}
    out: dict = {"sample_meta": meta} if meta else {}
    if len(said) == 1:
        out["reference"] = said[0]
    return out
