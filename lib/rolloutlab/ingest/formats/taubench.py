"""tau-bench (v1) results: a JSON list of {task_id, trial, reward, info, traj}; traj is chat messages.

The file names no model, so the run label is the file's stem unless --run is given (another
results file of the same name whose (task, trial) pairs overlap becomes ``<stem>@<its folder>``).
A sample is the task id; the attempt is the trial. A result whose reward is null was never
graded: it loads as ``ungraded``. A task that raised is written by tau-bench's runner as
``{"reward": 0.0, "info": {"error", "traceback"}, "traj": []}``: the harness failed, not the
model, so it loads as ``infra_error`` with no score and the error kept (``truncated`` when the
error says the context window overflowed).
"""
from __future__ import annotations

import re

from ..chat import convert_messages
from ..context import LoadContext, LoadResult
from ..convert import Experiment, Item, choose_run, field, guarded, load_items, loads_file, obj
from ..jsonscan import loads_lenient

FORMAT = "tau-bench"
# what an API error says when the conversation outgrew the model's context window
CONTEXT_OVERFLOW = re.compile(r"context[ _]length|context window|maximum context|too many tokens", re.I)
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
        # the run's label, not the file's name: two results files of one name are two runs
        "rollout_id": f"{label}:{task_id}:{trial if trial is not None else 0}:{i}",
        "run": label, "sample_id": str(task_id), "attempt": trial,
        "final_answer": answer, "tool_calls": calls, "messages": messages,
        "prompt": field(task, "instruction", "string", "info.task."),
    }
    crash = info.get("error") if isinstance(info.get("error"), str) else (
        "the task raised (info.traceback)" if info.get("traceback") else None)
    if crash is not None:  # the runner's except branch: reward 0.0 that no grader gave
        traceback = info.get("traceback")
        out.update(status="truncated" if CONTEXT_OVERFLOW.search(crash) else "infra_error", score=None, grades=[],
                   stop_reason="error", error=crash + (f"\n{traceback}" if isinstance(traceback, str) else ""))
    elif reward is None:
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


def experiment(path) -> Experiment:
    return Experiment(path.stem, None, (f"{path.stem}@{path.parent.name}", f"{path.stem}@{path.parent.parent.name}"))


def load(ctx: LoadContext) -> LoadResult:
    data, damage = loads_lenient(loads_file(ctx.path), depth=1)
    keys = [(str(t.get("task_id")), t.get("trial")) for t in data if isinstance(t, dict)
            and isinstance(t.get("task_id"), (str, int)) and isinstance(t.get("trial"), int)] \
        if isinstance(data, list) else []
    label, notes = choose_run(ctx, experiment(ctx.path), keys)
    if not isinstance(data, list):
        data = []
        if damage is None:
            damage_reason = "tau-bench results must be a JSON list of {task_id, trial, reward, traj}"
            return load_items(ctx, [Item("file", reason=damage_reason, raw="")], notes)
    found = list(items(data, label, ctx.path.stem))
    if damage:
        found.append(Item(f"record {len(data)}", reason=damage.describe(), raw=""))
    return load_items(ctx, found, notes)
