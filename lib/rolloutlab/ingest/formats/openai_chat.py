"""JSONL of chat transcripts: {"messages": [...OpenAI chat messages with tool_calls...],
"score" or "reward", optional "sample_id", "run", "attempt"}.

Without a sample_id, the sample is named by a hash of the first user message, so attempts at the
same prompt group together. Without a run, the label is the file's stem.
"""
from __future__ import annotations

from ..chat import convert_messages
from ..context import LoadContext, LoadResult
from ..convert import field, jsonl_items, load_items, prompt_sample_id
from . import native

FORMAT = "openai-chat"
FILE_TYPES = (("jsonl", "openai-chat"),)  # what ingest reads of it (formats.file_types)
BATCHED = True  # records only staged through convert.load_items: they load with other files' (ingest.batch)
# Fields of a native record that a chat transcript may carry beside its messages: kept, never dropped.
KEPT_AS_THEY_ARE = ("model", "checkpoint", "step", "split", "started_at", "ended_at", "latency_s", "status",
                    "stop_reason", "usage", "cost_usd", "error", "grades", "reference", "meta", "final_answer")


def sniff(path, head: str, first_record) -> bool:
    """Messages and a score; a record that only native reads whole (native.prefers) is left to it."""
    return isinstance(first_record, dict) and isinstance(first_record.get("messages"), list) and \
        ("score" in first_record or "reward" in first_record) and "tool_calls" not in first_record \
        and not native.prefers(first_record)


def record(rec: dict, label: str) -> tuple[dict | None, str | None]:
    messages = field(rec, "messages", "array")
    if not messages:
        return None, "missing 'messages' (a list of chat messages)"
    score = field(rec, "score", "number") if "score" in rec else field(rec, "reward", "number")
    sample = field(rec, "sample_id", ("string", "integer"))
    calls, out_messages, answer = convert_messages(messages)
    if sample is None:
        first_user = next((m["content"] for m in out_messages if m["role"] == "user" and m["content"]), None)
        if not first_user:
            return None, "no sample_id and no user message to name the sample by"
        sample = prompt_sample_id(first_user)
    out = {"run": field(rec, "run", "string") or label, "sample_id": str(sample),
           "attempt": field(rec, "attempt", "integer"),
           "score": score, "final_answer": answer, "tool_calls": calls, "messages": out_messages,
           "prompt": next((m["content"] for m in out_messages if m["role"] == "user"), None)}
    rollout_id = field(rec, "rollout_id", ("string", "integer"))
    if rollout_id is not None:
        out["rollout_id"] = str(rollout_id)
    for key in KEPT_AS_THEY_ARE:  # native fields a transcript may carry: checked by the native loader
        if key in rec and key not in out:
            out[key] = rec[key]
    if score is None:
        out["status"] = field(rec, "status", "string") or "ungraded"
    return out, None


def load(ctx: LoadContext) -> LoadResult:
    label = ctx.run or ctx.path.stem

    return load_items(ctx, jsonl_items(ctx.source, lambda rec: record(rec, label), ctx.line_offset))


def appendable(path) -> bool:
    """Lines are independent records: a file that grew loads only its new lines."""
    return True
