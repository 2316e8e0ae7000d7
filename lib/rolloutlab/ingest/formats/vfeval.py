"""verifiers ``vf-eval`` output folders: ``results.jsonl`` (one rollout per line) and ``metadata.json``.

``vf-eval -s`` (verifiers 0.1 – 0.3.1; prime-rl evaluates through it) writes
``outputs/evals/<env>--<model>/<id>/`` — the model's ``/`` as ``--``, ``<id>`` eight hex of a
uuid. Four layouts of a row have been written (docs/formats.md, ``verifiers``):

- A (0.1.3 – 0.1.4): ``id``, ``prompt``, ``completion``, ``answer``, ``info``, ``reward``, one key
  per rubric function, ``generation_ms`` / ``scoring_ms`` / ``total_ms``; metadata ``env``, ``avg_*``;
- B (0.1.5 – 0.1.7): ``example_id`` in place of ``id``; metadata ``env_id``, ``avg_metrics``;
- C (0.1.9 – 0.1.12): ``metrics`` {name: value}, ``timing`` {generation_ms, scoring_ms, total_ms},
  ``error``, ``is_completed``, ``is_truncated``, ``stop_condition``, ``token_usage``;
- D (0.1.14 – 0.3.1): ``timing`` in seconds with the model's and the environment's spans.

A folder is one evaluation (its ``<env>--<model>/<id>``), labelled ``<model>/<env>``; a sample is
the ``example_id`` (``id``), its attempts the rows of that example in file order (verifiers numbers
none). Every rubric metric is a grade (weights are not saved: all 1, the score is verifiers' own
``reward``); timings give latency, and in D the environment's spans time the tool calls. The
metadata's ``avg_reward`` is the producer's figure, shown beside the mean of the rows, never
trusted (a real one says 0.0 over rows that average 1.2); its ``pass_threshold`` is the run's.
Tool calls are JSON strings in these files; results without ``tool_call_id`` (A, B) answer the
calls in order.
"""
from __future__ import annotations

import json
import math
from collections import deque
from datetime import datetime, timezone
from pathlib import Path

from ..chat import convert_messages
from ..context import LoadContext, LoadResult
from ..lines import STAGED_REJECTS
from ..convert import (BadField, Evaluation, dumps, field, harness_error_status, jsonl_items, label_of,
                       lenient_obj, load_items, loads_file, preview, readable)

FORMAT = "verifiers"
FILE_TYPES = (("jsonl", "verifiers (vf-eval results.jsonl)"), ("json", "verifiers (metadata.json, read with its results.jsonl)"))  # what ingest reads of it (formats.file_types)
RESULTS, METADATA = "results.jsonl", "metadata.json"
# row keys that are not rubric metrics (layouts A-D; a state column named in metadata is not one either)
NOT_METRICS = {"example_id", "id", "prompt", "completion", "task", "answer", "info", "reward", "generation_ms",
               "scoring_ms", "total_ms", "error", "timing", "is_completed", "is_truncated", "stop_condition",
               "metrics", "oai_tools", "tool_defs", "token_usage", "trajectory", "error_chain", "long_error_chain"}


def sniff(path, head: str, first_record) -> bool:
    if path.name == METADATA:  # a vf-eval folder's metadata: read with the results beside it
        return '"model"' in head and ('"env_id"' in head or '"env"' in head) and '"rollouts_per_example"' in head
    return (isinstance(first_record, dict) and "prompt" in first_record and "completion" in first_record
            and "reward" in first_record and ("example_id" in first_record or "id" in first_record))


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def metadata(folder: Path) -> dict:
    """The folder's metadata.json (what vf-eval wrote beside the results), {} when absent or unreadable."""
    path = folder / METADATA
    if not path.is_file() or path.stat().st_size > 1 << 20:
        return {}
    try:
        value = json.loads(loads_file(path))
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def evaluation(path: Path, meta: dict) -> tuple[Evaluation, dict]:
    """The folder as an evaluation: ``<model>/<env>``, identified by ``<env>--<model>/<id>`` (the
    same wherever the folder is copied), the producer's ``avg_reward`` as its reported figure; and
    the run's declared scale (``pass_threshold``)."""
    folder = path.parent
    env_model = folder.parent.name
    env_part, _, model_part = env_model.partition("--")
    model = readable(meta.get("model")) if isinstance(meta.get("model"), str) else None
    model = model or (readable(model_part.replace("--", "/")) if model_part else None)
    env = meta.get("env_id") if isinstance(meta.get("env_id"), str) and meta.get("env_id") else meta.get("env")
    env = readable(env) if isinstance(env, str) else readable(env_part) if model_part else None
    label = label_of(model, env, fallback=folder.name or path.stem)
    reported = ({"metric": "avg_reward", "value": float(meta["avg_reward"])} if _number(meta.get("avg_reward"))
                else None)
    tag = meta.get("date") if isinstance(meta.get("date"), str) else folder.name
    scale = {"pass_threshold": float(meta["pass_threshold"])} if _number(meta.get("pass_threshold")) else {}
    return Evaluation(label, f"vf-eval:{env_model}/{folder.name}", tag, reported, model=model), scale


def tool_calls_as_objects(messages: list, where: str) -> list:
    """The messages with each ``tool_calls`` entry as an object (vf-eval writes JSON text), and each
    tool result without ``tool_call_id`` (layouts A, B) given the id of the next call it answers."""
    out, waiting = [], deque()
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            out.append(message)
            continue
        message = dict(message)
        calls = message.get("tool_calls")
        if isinstance(calls, list):
            parsed = []
            for j, call in enumerate(calls):
                if isinstance(call, str):
                    try:
                        call = json.loads(call)
                    except ValueError:
                        raise BadField(f"'{where}[{i}].tool_calls[{j}]' must be a tool call as JSON, "
                                       f"got {preview(call)}") from None
                parsed.append(call)
            message["tool_calls"] = parsed
            waiting = deque(c.get("id") for c in parsed if isinstance(c, dict))
        if message.get("role") == "tool" and message.get("tool_call_id") is None and waiting:
            message["tool_call_id"] = waiting.popleft()
        out.append(message)
    return out


def _messages(value, name: str) -> list:
    """``prompt`` / ``completion``: chat messages, or text (a completion-style environment)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [{"role": "user" if name == "prompt" else "assistant", "content": value}]
    if not isinstance(value, list):
        raise BadField(f"field '{name}' must be a JSON array of messages or text, got {preview(value)}")
    return tool_calls_as_objects(value, name)


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat()


def timing(rec: dict) -> tuple[float | None, str | None, list]:
    """(latency in seconds, start, the environment's spans) of a row: layout D's seconds with its
    spans, or the milliseconds of A - C (flat or under ``timing``)."""
    t = rec.get("timing")
    if isinstance(t, dict) and _number(t.get("total")):  # D
        start = t.get("start_time")
        env = t.get("env") if isinstance(t.get("env"), dict) else {}
        spans = [s for s in env.get("spans") or [] if isinstance(s, dict) and _number(s.get("start"))
                 and _number(s.get("end")) and s["end"] >= s["start"]]
        return float(t["total"]), _iso(start) if _number(start) and start > 0 else None, spans
    ms = t.get("total_ms") if isinstance(t, dict) else rec.get("total_ms")
    return (float(ms) / 1000 if _number(ms) else None), None, []


def _count(value) -> int | None:
    return int(round(value)) if _number(value) and value >= 0 else None


def record(rec: dict, ordinal: dict, run: dict, state_columns: set) -> dict:
    sample = rec.get("example_id") if rec.get("example_id") is not None else rec.get("id")
    if sample is None:
        raise BadField("missing required field 'example_id' (or 'id', as vf-eval wrote it before 0.1.5)")
    sample = str(field(rec, "example_id" if rec.get("example_id") is not None else "id", ("string", "integer")))
    attempt = ordinal.get(sample, 0)  # the n-th row of this example, in file order
    ordinal[sample] = attempt + 1
    prompt = _messages(rec.get("prompt"), "prompt")
    completion = _messages(rec.get("completion"), "completion")
    calls, messages, answer = convert_messages(prompt + completion, where="prompt+completion")
    latency, started, spans = timing(rec)
    turns = sorted({c["turn"] for c in calls})
    if spans and len(spans) == len(turns):  # one environment step per turn of calls: it ran them
        when = dict(zip(turns, spans))
        for c in calls:
            c["started_at"], c["ended_at"] = _iso(when[c["turn"]]["start"]), _iso(when[c["turn"]]["end"])
    metrics = rec.get("metrics")
    if metrics is not None and not isinstance(metrics, dict):
        raise BadField(f"field 'metrics' must be a JSON object, got {preview(metrics)}")
    if metrics is None:  # layouts A, B: one top-level key per rubric function
        metrics = {k: v for k, v in rec.items() if k not in NOT_METRICS and k not in state_columns and _number(v)}
    bad = {k: v for k, v in metrics.items() if v is not None and not _number(v)}
    if bad:
        k, v = next(iter(bad.items()))
        raise BadField(f"field 'metrics.{k}' must be a number, got {preview(v)}")
    reward = field(rec, "reward", "number")
    usage = lenient_obj(rec, "token_usage")
    out = {**run, "sample_id": sample, "attempt": attempt, "prompt": dumps(prompt) if prompt else None,
           "reference": rec.get("answer"), "final_answer": answer, "tool_calls": calls, "messages": messages,
           "score": reward, "grades": [{"grader": str(k), "score": float(v)} for k, v in metrics.items()
                                       if v is not None],
           "latency_s": latency if latency is None or latency >= 0 else None,
           "usage": {k: n for k in ("input_tokens", "output_tokens") if (n := _count(usage.get(k))) is not None}}
    if started and latency is not None and latency >= 0:
        out.update(started_at=started, ended_at=_iso(datetime.fromisoformat(started).timestamp() + latency))
    stop = rec.get("stop_condition")
    if isinstance(stop, str):
        out["stop_reason"] = stop
    error = rec.get("error")
    if isinstance(error, dict):
        error = ": ".join(str(error[k]) for k in ("error", "message") if error.get(k))
    # a rollout that broke has no reward: the rubric's numbers on it are not a grade of the model
    if error:
        out.update(status=harness_error_status(str(error)), score=None, grades=[], error=str(error)[:4000])
    elif not completion and not latency:  # an empty completion in no time: it never ran (a broken run)
        out.update(status="infra_error", score=None, grades=[],
                   error="vf-eval wrote an empty completion with zero timing: the rollout never ran")
    elif rec.get("is_truncated") is True:
        out["status"] = "truncated"
    elif reward is None:
        out["status"] = "ungraded"
    return out


def load(ctx: LoadContext) -> LoadResult:
    if ctx.path.name == METADATA:
        ctx.con.execute(f"CREATE OR REPLACE TEMP TABLE {STAGED_REJECTS} (line_no BIGINT, raw VARCHAR, reason VARCHAR)")
        beside = ctx.path.parent / RESULTS
        return LoadResult(n_records=0, n_rejected=0, notes=[
            f"{ctx.path}: the metadata of a vf-eval run, read with the {RESULTS} beside it" if beside.is_file() else
            f"{ctx.path}: the metadata of a vf-eval run without its {RESULTS}: no rollouts to load (a repository "
            "that keeps results in Git LFS holds a pointer, not the file: fetch it)"])
    meta = metadata(ctx.path.parent)
    run, scale = evaluation(ctx.path, meta)
    fields = run.run_fields(ctx)
    if scale:
        fields["run_meta"] = {**(fields.get("run_meta") or {}), **scale}
    states = {c for c in meta.get("state_columns") or [] if isinstance(c, str)}
    ordinal: dict[str, int] = {}
    if ctx.line_offset:  # appended lines: their attempts follow the rows loaded before
        for _, rec in _earlier_rows(ctx):
            sid = rec.get("example_id") if rec.get("example_id") is not None else rec.get("id")
            if sid is not None:
                ordinal[str(sid)] = ordinal.get(str(sid), 0) + 1
    notes = [] if ctx.run else [f"{ctx.path}: run label '{run.label}' (vf-eval {run.identity.split(':', 1)[1]})"]
    return load_items(ctx, jsonl_items(ctx.source, lambda rec: (record(rec, ordinal, fields, states), None),
                                       ctx.line_offset), notes)


def _earlier_rows(ctx: LoadContext):
    """The rows of the file before ``ctx.line_offset`` (a file that grew)."""
    with open(ctx.path, encoding="utf-8", errors="replace") as fh:
        for number, line in enumerate(fh, start=1):
            if number > ctx.line_offset:
                break
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict):
                yield number, rec


def appendable(path) -> bool:
    """Rows are appended as they finish (vf-eval's resume): a file that grew loads its new lines."""
    return Path(path).name != METADATA
