"""tau-bench (v1) results: a JSON list of {task_id, trial, reward, info, traj}; traj is chat messages.

The file names no model, so the run label is the file's stem unless --run is given. A sample is
the task id; the attempt is the trial. A result whose reward is null was never graded: it loads
as ``ungraded``.
"""
from __future__ import annotations

from ..chat import convert_messages
from ..context import LoadContext, LoadResult
from ..convert import Item, field, guarded, load_items, loads_file, obj
from ..jsonscan import loads_lenient

FORMAT = "tau-bench"
ID_KINDS = ("string", "integer")


def sniff(path, head: str, first_record) -> bool:
    return path.suffix == ".json" and head.lstrip().startswith("[") and '"traj"' in head and '"task_id"' in head


def record(t: dict, i: int, label: str, stem: str) -> dict:
    task_id = field(t, "task_id", ID_KINDS, required=True)
    trial = field(t, "trial", "integer")
    reward = field(t, "reward", "number")
    calls, messages, answer = convert_messages(t.get("traj"), where="traj")
    info = obj(t, "info")
    task = obj(info, "task", "info.")
    reward_info = obj(info, "reward_info", "info.")
    parts = obj(reward_info, "info", "info.reward_info.")
    grades = [{"grader": str(k), "score": v, "weight": 0.0} for k, v in parts.items()
              if isinstance(v, (int, float)) and not isinstance(v, bool)]
    out = {
        "rollout_id": f"{stem}:{task_id}:{trial if trial is not None else 0}:{i}",
        "run": label, "sample_id": str(task_id), "attempt": trial,
        "final_answer": answer, "tool_calls": calls, "messages": messages,
        "prompt": field(task, "instruction", "string", "info.task."),
    }
    if reward is None:
        out.update(status="ungraded", score=None, grades=grades)
    else:
        out.update(score=float(reward), grades=[{"grader": "reward", "score": float(reward)}] + grades)
    return out


def items(data: list, label: str, stem: str):
    for i, t in enumerate(data):
        loc = f"record {i}"
        if not isinstance(t, dict):
            yield Item(loc, reason="not a JSON object", raw=t)
            continue
        loc = f"record {i} (task {t.get('task_id')!s:.40}, trial {t.get('trial')!s:.20})"
        yield guarded(loc, t, lambda: Item(loc, record=record(t, i, label, stem)))


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
