"""JSONL of chat transcripts: {"messages": [...OpenAI chat messages with tool_calls...],
"score" or "reward", optional "sample_id", "run", "attempt"}.

Without a sample_id, the sample is named by a hash of the first user message, so attempts at the
same prompt group together. Without a run, the label is the file's stem.
"""
from __future__ import annotations

import hashlib

from .chat import convert_messages
from .context import LoadContext, LoadResult
from .convert import jsonl_items, load_items, text_of

FORMAT = "openai-chat"


def sniff(path, head: str, first_record) -> bool:
    return isinstance(first_record, dict) and isinstance(first_record.get("messages"), list) and \
        ("score" in first_record or "reward" in first_record) and "tool_calls" not in first_record


def record(rec: dict, label: str) -> tuple[dict | None, str | None]:
    messages = rec.get("messages")
    if not isinstance(messages, list) or not messages:
        return None, "missing 'messages' (a list of chat messages)"
    score = rec.get("score", rec.get("reward"))
    if score is not None and (not isinstance(score, (int, float)) or isinstance(score, bool)):
        return None, f"'score' must be a number, got {score!r}"
    sample = rec.get("sample_id")
    if sample is None:
        first_user = next((text_of(m.get("content")) for m in messages if isinstance(m, dict)
                           and m.get("role") == "user"), None)
        if not first_user:
            return None, "no sample_id and no user message to name the sample by"
        sample = "prompt:" + hashlib.sha1(first_user.encode()).hexdigest()[:12]
    calls, out_messages, answer = convert_messages(messages)
    out = {"run": str(rec.get("run") or label), "sample_id": str(sample), "attempt": rec.get("attempt"),
           "score": score, "final_answer": answer, "tool_calls": calls, "messages": out_messages,
           "prompt": next((m["content"] for m in out_messages if m["role"] == "user"), None)}
    if rec.get("rollout_id") is not None:
        out["rollout_id"] = str(rec["rollout_id"])
    if score is None:
        out["status"] = rec.get("status") or "ungraded"
    return out, None


def load(ctx: LoadContext) -> LoadResult:
    label = ctx.run or ctx.path.stem

    return load_items(ctx, jsonl_items(ctx.path, lambda rec: record(rec, label)))
