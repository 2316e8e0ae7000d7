"""OpenPipe ART: ``.art/{project}/models/{model}/trajectories/{split}/{step:04d}.parquet`` and the
model's ``history.jsonl``.

Trajectories (``Model.log`` -> ``write_trajectory_groups_parquet``): one row per trajectory with
``group_index``, ``reward``, ``metrics`` / ``metadata`` (JSON text) and ``messages`` (role,
content, ``tool_calls`` as JSON text, tool_call_id); format version 2 adds ``format_version``,
``trajectory_index``, ``group_json`` and ``trajectory_json`` (the whole trajectory; assistant turns
as choice objects ``{"message": {...}, "finish_reason": ...}``), used where ``messages`` is empty.
A file is one run: ``<model>-step<N>`` for the train split, ``<model>-<split>-step<N>`` for others
(``val`` is split ``valid``). Sample: the scenario id in the group's or the trajectory's metadata,
else ``step<N>/group<i>`` (a group index means nothing across steps); attempt: the trajectory's
index in its group; latency: ``metrics.duration``; the other numeric metrics are weight-0 grades.
A version-2 group's ``exceptions`` (rollouts that raised) load as errored rollouts, infra or model
by their message, never as a score.

``history.jsonl`` (``Model._log_metrics``): one line per logged step and split, keys
``<split>/<metric>`` (``train/reward``, ``val/exception_rate`` ...) plus sections (``data/...``,
``time/...``) -> ``training_metrics`` with job = the model; ``<split>/reward`` (the step's mean)
is ``reward_mean``, as the other trainers name it.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import replace

from ..chat import convert_messages
from ..context import LoadContext, LoadResult
from ..convert import (BadField, Item, field, guarded, harness_error_status, int32, json_kind, jsonl_records, load_items,
                       preview)
from .. import step_metrics
from ..parquet import Unreadable, columns, rows

FORMAT = "art"
FILE_TYPES = (("jsonl", "art (history.jsonl)"), ("parquet", "art (trajectories)"))  # what ingest reads of it (formats.file_types)
SPLITS = {"train": "train", "val": "valid", "valid": "valid", "eval": "valid", "test": "test"}
HISTORY_SKIP = {"step", "recorded_at", "training_step"}
SCENARIO_KEYS = ("scenario_id", "scenario", "task_id", "id")
STEP_FILE = re.compile(r"^\d+$")


def sniff(path, head: str, first_record) -> bool:
    if path.suffix == ".parquet":
        names = set(columns(path))
        return {"group_index", "reward"} <= names and ("messages" in names or "trajectory_json" in names)
    return (path.name == "history.jsonl" and isinstance(first_record, dict) and "step" in first_record
            and any("/" in str(k) for k in first_record))


def _json_obj(text, where: str) -> dict:
    if text is None:
        return {}
    if not isinstance(text, str):
        raise BadField(f"field '{where}' must be JSON text, got {json_kind(text)} {preview(text)}")
    try:
        value = json.loads(text)
    except ValueError:
        raise BadField(f"field '{where}' is not valid JSON: {preview(text)}") from None
    if not isinstance(value, dict):
        raise BadField(f"field '{where}' must hold a JSON object, got {json_kind(value)}")
    return value


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _messages(row: dict, trajectory: dict) -> list[dict]:
    """Chat messages from the flat ``messages`` column, else from ``trajectory_json``."""
    flat = row.get("messages")
    if flat:
        if not isinstance(flat, list):
            raise BadField(f"field 'messages' must be a list, got {preview(flat)}")
        out = []
        for i, m in enumerate(flat):
            if not isinstance(m, dict):
                raise BadField(f"'messages[{i}]' must be a struct, got {preview(m)}")
            message = {k: m.get(k) for k in ("role", "content", "tool_call_id")}
            calls = m.get("tool_calls")
            if calls:
                try:
                    message["tool_calls"] = json.loads(calls) if isinstance(calls, str) else calls
                except ValueError:
                    raise BadField(f"field 'messages[{i}].tool_calls' is not valid JSON: {preview(calls)}") from None
            out.append(message)
        return out
    items = trajectory.get("messages_and_choices") or []
    if not isinstance(items, list):
        raise BadField("field 'trajectory_json.messages_and_choices' must be a list")
    # assistant turns may be choice objects: {"message": {...}, "finish_reason": ...}
    return [m["message"] if isinstance(m, dict) and isinstance(m.get("message"), dict) and "finish_reason" in m
            else m for m in items]


def _scenario(group_meta: dict, meta: dict) -> str | None:
    for source in (group_meta, meta):
        for key in SCENARIO_KEYS:
            if isinstance(source.get(key), (str, int)) and not isinstance(source.get(key), bool):
                return str(source[key])
    return None


def trajectory_record(row: dict, attempt: int, label: str, split: str, step: int | None) -> dict:
    group = field(row, "group_index", "integer", required=True)
    trajectory = _json_obj(row.get("trajectory_json"), "trajectory_json")
    metrics = _json_obj(row.get("metrics"), "metrics") or trajectory.get("metrics") or {}
    meta = _json_obj(row.get("metadata"), "metadata") or trajectory.get("metadata") or {}
    group_meta = _json_obj(row.get("group_metadata"), "group_metadata")
    reward = field(row, "reward", "number")
    calls, messages, answer = convert_messages(_messages(row, trajectory))
    duration = metrics.get("duration")
    sample = _scenario(group_meta, meta) or f"step{step}/group{group}"
    out = {"run": label, "step": step, "split": split, "sample_id": sample, "attempt": attempt,
           "latency_s": duration if _number(duration) else None, "final_answer": answer,
           "tool_calls": calls, "messages": messages,
           # the trajectory's own metrics, for reference (weight 0): the reward is the score
           "grades": [{"grader": str(k), "score": float(v), "weight": 0.0} for k, v in metrics.items()
                      if k != "duration" and _number(v)],
           "score": None if reward is None or not math.isfinite(reward) else float(reward)}
    if out["score"] is None:
        out["status"] = "ungraded"
    return out


def exception_records(group_json: dict, label: str, split: str, step: int | None, group: int) -> list[dict]:
    """The rollouts of a group that raised instead of finishing (format version 2)."""
    out = []
    meta = group_json.get("metadata") if isinstance(group_json.get("metadata"), dict) else {}
    for i, exc in enumerate(group_json.get("exceptions") or []):
        text = (f"{exc.get('type')}: {exc.get('message')}" if isinstance(exc, dict) else preview(exc))
        out.append({"run": label, "step": step, "split": split,
                    "sample_id": _scenario(meta, {}) or f"step{step}/group{group}",
                    "status": harness_error_status(text), "score": None, "error": text, "stop_reason": "exception",
                    "rollout_id": f"{label}:group{group}:exception{i}"})
    return out


def trajectory_items(ctx: LoadContext, label: str, split: str, step: int | None):
    attempts: dict[int, int] = {}
    seen_groups: set = set()
    for i, row in enumerate(rows(ctx.path)):
        where = f"row {i}"
        if isinstance(row, Unreadable):
            yield Item(where, reason=row.reason, raw="")
            continue
        group = row.get("group_index")
        if isinstance(group, int) and group not in seen_groups and row.get("group_json") is not None:
            seen_groups.add(group)
            try:
                group_json = _json_obj(row.get("group_json"), "group_json")
            except BadField as exc:
                yield Item(f"group {group}", reason=str(exc), raw=row.get("group_json"))
                group_json = {}
            for j, rec in enumerate(exception_records(group_json, label, split, step, group)):
                yield Item(f"group {group} exception {j}", record=rec)
        if row.get("trajectory_index") is None and row.get("trajectory_json") is None and "format_version" in row:
            yield Item(where, skip=True)  # the sentinel of a group without trajectories
            continue
        given = row.get("trajectory_index")
        attempt = given if isinstance(given, int) else attempts.get(group if isinstance(group, int) else -1, 0)
        attempts[group if isinstance(group, int) else -1] = attempt + 1
        yield guarded(where, row, lambda: Item(where, record=trajectory_record(row, attempt, label, split, step)))


def load_trajectories(ctx: LoadContext) -> LoadResult:
    split_dir = ctx.path.parent.name
    model = ctx.path.parents[2].name if ctx.path.parents[1].name == "trajectories" else ctx.path.parent.name
    split = ctx.split or SPLITS.get(split_dir, split_dir if ctx.path.parents[1].name == "trajectories" else "train")
    step = int(ctx.path.stem) if STEP_FILE.match(ctx.path.stem) else None
    name = ctx.run or model
    label = (f"{name}-step{step}" if split == "train" else f"{name}-{split_dir}-step{step}") if step is not None \
        else name
    notes = [] if ctx.run else [f"{ctx.path}: run '{label}' (the model's folder; --run NAME to rename it)"]
    return load_items(replace(ctx, run=None), trajectory_items(ctx, label, split, step), notes)


def history_rows(rec: dict, job: str) -> list[tuple]:
    step = int32(field(rec, "step", "integer", required=True), "step")
    splits = {str(k).split("/", 1)[0] for k in rec if str(k).split("/", 1)[0] in SPLITS and "/" in str(k)}
    line_split = SPLITS[splits.pop()] if len(splits) == 1 else "train"
    out = []
    for key, value in rec.items():
        if key in HISTORY_SKIP or not _number(value):
            continue
        head, _, rest = str(key).partition("/")
        if rest and head in SPLITS:
            # ART's <split>/reward is the step's mean reward: named as the other trainers name it
            out.append((job, step, SPLITS[head], "", "reward_mean" if rest == "reward" else rest, float(value)))
        else:  # a section (data/..., time/...): about the line's split
            out.append((job, step, line_split, "", str(key), float(value)))
    return out


def load_history(ctx: LoadContext) -> LoadResult:
    job = ctx.run or ctx.path.parent.name
    notes = [] if ctx.run else [f"{ctx.path}: job '{job}' (the model's folder; --run to name it)"]
    return step_metrics.load_records(ctx, jsonl_records(ctx.source, ctx.line_offset),
                                     lambda rec: history_rows(rec, job), notes)


def load(ctx: LoadContext) -> LoadResult:
    return load_trajectories(ctx) if ctx.path.suffix == ".parquet" else load_history(ctx)


def appendable(path) -> bool:
    """history.jsonl grows a line per logged step: only its new lines load."""
    return path.name == "history.jsonl"
