"""The results.jsonl of OpenAI's Agent RFT build-hour notebooks: one rollout per line.

{sample_index, input_item, trace[events], final_message_text, metrics{grader: value},
grader_durations, error, duration_seconds, grading_duration_seconds, usage_cumulative, usage_at_final}.
A failed rollout there has ``metrics == {"reward": -1}`` and ``error`` set: the notebook's loop
raised, so it is an ``infra_error`` unless the text says the model's output broke it (invalid
JSON, an unknown tool: ``model_error``) — never a score of -1 or 0 (``convert.harness_error_status``).
A grader whose value is null failed: it is kept as a grade without a score, and the rollout is an
``infra_error``.
"""
from __future__ import annotations

from ..context import LoadContext, LoadResult
from ..convert import (BadField, field, harness_error_status, jsonl_items, load_items, obj, parse_json_arguments,
                       preview, text_of)

FORMAT = "buildhours"
FILE_TYPES = (("jsonl", "buildhours"),)  # what ingest reads of it (formats.file_types)
BATCHED = True  # records only staged through convert.load_items: they load with other files' (ingest.batch)


def sniff(path, head: str, first_record) -> bool:
    return isinstance(first_record, dict) and "trace" in first_record and "sample_index" in first_record


def trace_calls(trace: list) -> tuple[list[dict], str | None, list[str]]:
    """Tool calls from trace events: calls of one model response (consecutive tool_call events)
    share a turn; results pair by call_id; a tool_error marks the open call of that tool."""
    calls, by_id, errors = [], {}, []
    turn, last = -1, None
    final = None
    if trace is not None and not isinstance(trace, list):
        raise BadField(f"field 'trace' must be a JSON array, got {preview(trace)}")
    for i, ev in enumerate(trace or []):
        if not isinstance(ev, dict):
            raise BadField(f"'trace[{i}]' must be a JSON object (an event), got {preview(ev)}")
        ev_where = f"trace[{i}]."
        kind = ev.get("event")
        if kind == "tool_call":
            if last != "tool_call":
                turn += 1
            call_id = field(ev, "call_id", ("string", "integer"), ev_where)
            call = {"call_id": None if call_id is None else str(call_id), "turn": turn,
                    "tool": field(ev, "name", "string", ev_where) or "(unnamed)",
                    "arguments": parse_json_arguments(ev.get("arguments")), "status": "ok", "error": None}
            calls.append(call)
            if call_id is not None:
                by_id[call_id] = call
        elif kind == "tool_result":
            call_id = ev.get("call_id")
            call = by_id.get(call_id) if isinstance(call_id, (str, int)) else None
            if call is not None:
                call["output_chars"] = len(text_of(ev.get("output")) or "")
        elif kind == "tool_error":
            open_calls = [c for c in calls if c["tool"] == ev.get("name") and "output_chars" not in c
                          and c["status"] == "ok"]
            target = open_calls[-1] if open_calls else (calls[-1] if calls else None)
            if target is not None:
                target["status"], target["error"] = "error", _text(ev.get("error"))
            errors.append(f"{_text(ev.get('name'))}: {_text(ev.get('error'))}")
        elif kind == "runtime_error":
            errors.append(_text(ev.get("error")))
        elif kind == "final_message":
            final = field(ev, "text", "string", ev_where)
        if kind in ("tool_call", "tool_result", "final_message"):
            last = kind
    return calls, final, errors


def _text(value) -> str:
    return value if isinstance(value, str) else preview(value)


def _count(value):
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def record(rec: dict, label: str) -> tuple[dict | None, str | None]:
    sample = field(rec, "sample_index", ("integer", "string"), required=True)
    metrics = obj(rec, "metrics")
    durations = obj(rec, "grader_durations")
    calls, final, trace_errors = trace_calls(rec.get("trace"))
    error = rec.get("error")
    error_text = _text(error) if error else None
    usage = obj(rec, "usage_cumulative")
    item = rec.get("input_item")
    out = {"run": label, "sample_id": str(sample), "latency_s": field(rec, "duration_seconds", "number"),
           "final_answer": field(rec, "final_message_text", "string") or final, "tool_calls": calls,
           "prompt": text_of(item) if not isinstance(item, dict)
           else text_of(item.get("content") or item.get("messages")),
           # every count to the native loader's checks (a float or a string is a reject naming it,
           # never dropped); a whole float (3000.0) is the integer it says
           "usage": {k: _count(usage[k]) for k in ("input_tokens", "output_tokens", "reasoning_tokens")
                     if usage.get(k) is not None}}
    failed = error_text is not None and (metrics == {"reward": -1} or not metrics)
    if failed:
        out.update(status=harness_error_status(error_text), score=None, error=error_text, stop_reason="error")
        return out, None
    bad = {k: v for k, v in metrics.items() if v is not None and not _number(v)}
    if bad:
        k, v = next(iter(bad.items()))
        raise BadField(f"field 'metrics.{k}' must be a number (or null for a grader that failed), got {preview(v)}")
    if not metrics:
        out.update(status="ungraded", score=None)  # never reached the graders
    out["grades"] = [{"grader": str(k), "score": None if v is None else float(v),
                      "latency_s": durations.get(k) if _number(durations.get(k)) else None,
                      "error": "the grader returned no value" if v is None else None}
                     for k, v in metrics.items()]
    reward = metrics.get("reward")
    out["score"] = float(reward) if _number(reward) else None  # else: the mean of the grades
    if error_text or trace_errors:
        out["error"] = error_text or "; ".join(trace_errors)
    return out, None


def load(ctx: LoadContext) -> LoadResult:
    label = ctx.run or ctx.path.parent.name or ctx.path.stem
    notes = [] if ctx.run else [f"{ctx.path}: run label '{label}' (the run folder; repeated evaluations of "
                                "one model: pass the same --run to make them attempts of one run)"]

    return load_items(ctx, jsonl_items(ctx.source, lambda rec: record(rec, label), ctx.line_offset), notes)


def appendable(path) -> bool:
    """Lines are independent records: a file that grew loads only its new lines."""
    return True
