"""tau-bench (v1) results: a JSON list of {task_id, trial, reward, info, traj}; traj is chat messages.

The file names no model, so the run label is the file's stem unless --run is given. A sample is
the task id; the attempt is the trial.
"""
from __future__ import annotations

from .chat import convert_messages
from .context import LoadContext, LoadResult
from .convert import Item, load_items, loads_file
from .jsonscan import loads_lenient

FORMAT = "tau-bench"


def sniff(path, head: str, first_record) -> bool:
    return path.suffix == ".json" and head.lstrip().startswith("[") and '"traj"' in head and '"task_id"' in head


def items(data: list, label: str, stem: str):
    for i, t in enumerate(data):
        loc = f"record {i}"
        if not isinstance(t, dict):
            yield Item(loc, reason="not a JSON object", raw=t)
            continue
        loc = f"record {i} (task {t.get('task_id')}, trial {t.get('trial')})"
        if t.get("task_id") is None:
            yield Item(loc, reason="missing task_id", raw=t)
            continue
        if not isinstance(t.get("reward"), (int, float)) or isinstance(t.get("reward"), bool):
            yield Item(loc, reason=f"reward must be a number, got {t.get('reward')!r}", raw=t)
            continue
        calls, messages, answer = convert_messages(t.get("traj") or [])
        info = t.get("info") if isinstance(t.get("info"), dict) else {}
        task = info.get("task") if isinstance(info.get("task"), dict) else {}
        reward_info = info.get("reward_info") if isinstance(info.get("reward_info"), dict) else {}
        grades = [{"grader": k, "score": v, "weight": 0.0} for k, v in (reward_info.get("info") or {}).items()
                  if isinstance(v, (int, float)) and not isinstance(v, bool)]
        yield Item(loc, record={
            "rollout_id": f"{stem}:{t['task_id']}:{t.get('trial', 0)}:{i}",
            "run": label, "sample_id": str(t["task_id"]), "attempt": t.get("trial"),
            "score": float(t["reward"]), "final_answer": answer, "tool_calls": calls, "messages": messages,
            "prompt": task.get("instruction"), "grades": [{"grader": "reward", "score": float(t["reward"])}] + grades,
        })


def load(ctx: LoadContext) -> LoadResult:
    data, damage = loads_lenient(loads_file(ctx.path), depth=1)
    label = ctx.run or ctx.path.stem
    notes = [] if ctx.run else [f"{ctx.path}: run label '{label}' (from the file name; --run to override)"]
    if not isinstance(data, list):
        data = []
        if damage is None:
            damage_reason = "tau-bench results must be a JSON list of {task_id, trial, reward, traj}"
            return load_items(ctx, [Item("file", reason=damage_reason, raw="")], notes)
    found = list(items(data, label, ctx.path.stem))
    if damage:
        found.append(Item(f"record {len(data)}", reason=damage.describe(), raw=""))
    return load_items(ctx, found, notes)
