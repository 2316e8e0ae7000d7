"""The results.jsonl of OpenAI's Agent RFT build-hour notebooks: one rollout per line.

{sample_index, input_item, trace[events], final_message_text, metrics{grader: value},
grader_durations, error, duration_seconds, grading_duration_seconds, usage_cumulative, usage_at_final}.
A failed rollout there has ``metrics == {"reward": -1}`` and ``error`` set: it is an errored
rollout (infra or model, from the error text), never a score of -1 or 0.
"""
from __future__ import annotations

from .context import LoadContext, LoadResult
from .convert import classify_error, jsonl_items, load_items, parse_json_arguments, text_of

FORMAT = "buildhours"


def sniff(path, head: str, first_record) -> bool:
    return isinstance(first_record, dict) and "trace" in first_record and "sample_index" in first_record


def trace_calls(trace: list) -> tuple[list[dict], str | None, list[str]]:
    """Tool calls from trace events: calls of one model response (consecutive tool_call events)
    share a turn; results pair by call_id; a tool_error marks the open call of that tool."""
    calls, by_id, errors = [], {}, []
    turn, last = -1, None
    final = None
    for ev in trace or []:
        if not isinstance(ev, dict):
            continue
        kind = ev.get("event")
        if kind == "tool_call":
            if last != "tool_call":
                turn += 1
            call = {"call_id": ev.get("call_id"), "turn": turn, "tool": ev.get("name") or "(unnamed)",
                    "arguments": parse_json_arguments(ev.get("arguments")), "status": "ok", "error": None}
            calls.append(call)
            if ev.get("call_id") is not None:
                by_id[ev["call_id"]] = call
        elif kind == "tool_result":
            call = by_id.get(ev.get("call_id"))
            if call is not None:
                call["output_chars"] = len(text_of(ev.get("output")) or "")
        elif kind == "tool_error":
            open_calls = [c for c in calls if c["tool"] == ev.get("name") and "output_chars" not in c
                          and c["status"] == "ok"]
            target = open_calls[-1] if open_calls else (calls[-1] if calls else None)
            if target is not None:
                target["status"], target["error"] = "error", str(ev.get("error"))
            errors.append(f"{ev.get('name')}: {ev.get('error')}")
        elif kind == "runtime_error":
            errors.append(str(ev.get("error")))
        elif kind == "final_message":
            final = ev.get("text")
        if kind in ("tool_call", "tool_result", "final_message"):
            last = kind
    return calls, final, errors


def record(rec: dict, label: str) -> tuple[dict | None, str | None]:
    if rec.get("sample_index") is None:
        return None, "missing sample_index"
    metrics = rec.get("metrics") if isinstance(rec.get("metrics"), dict) else {}
    calls, final, trace_errors = trace_calls(rec.get("trace"))
    error = rec.get("error")
    error_text = (error if isinstance(error, str) else str(error)) if error else None
    usage = rec.get("usage_cumulative") if isinstance(rec.get("usage_cumulative"), dict) else {}
    out = {"run": label, "sample_id": str(rec["sample_index"]), "latency_s": rec.get("duration_seconds"),
           "final_answer": rec.get("final_message_text") or final, "tool_calls": calls,
           "prompt": text_of(rec.get("input_item")) if not isinstance(rec.get("input_item"), dict)
           else text_of(rec["input_item"].get("content") or rec["input_item"].get("messages")),
           "usage": {k: usage.get(k) for k in ("input_tokens", "output_tokens", "reasoning_tokens")
                     if isinstance(usage.get(k), int)}}
    failed = error_text is not None and (metrics == {"reward": -1} or not metrics)
    if failed:
        out.update(status=classify_error(error_text), score=None, error=error_text, stop_reason="error")
        return out, None
    numeric = {k: v for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    if not numeric:
        return None, f"metrics has no numeric grade: {metrics!r}"
    out["grades"] = [{"grader": k, "score": float(v)} for k, v in numeric.items()]
    out["score"] = float(numeric["reward"]) if "reward" in numeric else None  # else: mean of the grades
    if error_text or trace_errors:
        out["error"] = error_text or "; ".join(trace_errors)
    return out, None


def load(ctx: LoadContext) -> LoadResult:
    label = ctx.run or ctx.path.parent.name or ctx.path.stem
    notes = [] if ctx.run else [f"{ctx.path}: run label '{label}' (the run folder; repeated evaluations of "
                                "one model: pass the same --run to make them attempts of one run)"]

    return load_items(ctx, jsonl_items(ctx.path, lambda rec: record(rec, label)), notes)
