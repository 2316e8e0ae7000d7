"""tau-bench (v1) results: a JSON list of {task_id, trial, reward, info, traj}; traj is chat messages.

The file holds no model: the label comes from its name where tau-bench's runner encodes it there
(``<strategy>-<model>-<temperature>_range_<a>-<b>_user-<user model>-<strategy>_<time>.json``, or
``<model>-<env>.json`` as its historical trajectories are named: ``gpt-4o/airline``), else the
file's stem; the file is the evaluation (two results files of one name are two runs of one label,
``<label>@<folder>``; ``ingest.identity``). A sample is the task id; the attempt is the trial.
ReAct and Act agents write their actions as text (``Action: {"name", "arguments"}``) and get tool
results back as user messages beginning ``API output:``: those are tool calls with their results. A result whose reward is null was never
graded: it loads as ``ungraded``. A task that raised is written by tau-bench's runner as
``{"reward": 0.0, "info": {"error", "traceback"}, "traj": []}``: the harness failed, not the
model, so it loads as ``infra_error`` with no score and the error kept (``truncated`` when the
error says the context window overflowed).
"""
from __future__ import annotations

import re

from ..chat import convert_messages, expected_of
from ..context import LoadContext, LoadResult
from ..convert import Evaluation, Item, field, guarded, label_of, load_items, loads_file, obj, readable
from ..jsonscan import loads_lenient

FORMAT = "tau-bench"
FILE_TYPES = (("json", "tau-bench"),)  # what ingest reads of it (formats.file_types)
BATCHED = True  # records only staged through convert.load_items: they load with other files' (ingest.batch)
# what an API error says when the conversation outgrew the model's context window
CONTEXT_OVERFLOW = re.compile(r"context[ _]length|context window|maximum context|too many tokens", re.I)
ID_KINDS = ("string", "integer")


def sniff(path, head: str, first_record) -> bool:
    return path.suffix == ".json" and head.lstrip().startswith("[") and '"traj"' in head and '"task_id"' in head


def record(t: dict, i: int, run: dict) -> dict:
    task_id = field(t, "task_id", ID_KINDS, required=True)
    trial = field(t, "trial", "integer")
    reward = field(t, "reward", "number")
    calls, messages, answer = convert_messages(t.get("traj"), where="traj", text_actions=True)
    info = obj(t, "info")
    task = obj(info, "task", "info.")
    reward_info = obj(info, "reward_info", "info.")
    parts = obj(reward_info, "info", "info.reward_info.")
    grades = [{"grader": str(k), "score": v, "weight": 0.0} for k, v in parts.items()
              if isinstance(v, (int, float)) and not isinstance(v, bool)]
    out = {
        **run, "sample_id": str(task_id), "attempt": trial,
        "final_answer": answer, "tool_calls": calls, "messages": messages,
        "prompt": field(task, "instruction", "string", "info.task."),
        **expected_of(task.get("actions"), "name", "kwargs", outputs=task.get("outputs")),
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


def items(data: list, run: dict):
    for i, t in enumerate(data):
        loc = f"record {i}"
        if not isinstance(t, dict):
            yield Item(loc, reason="not a JSON object", raw=t)
            continue
        loc = f"record {i} (task {t.get('task_id')!s:.40}, trial {t.get('trial')!s:.20})"
        yield guarded(loc, t, lambda: Item(loc, record=record(t, i, run)))


# tau-bench's runner: f"{agent_strategy}-{model.split('/')[-1]}-{temperature}_range_{start}-{end}_user-{user_model}-{user_strategy}_{time}.json"
RUNNER_NAME = re.compile(r"^(?P<strategy>[a-z-]+?)-(?P<model>.+)-(?P<temperature>[0-9.]+)_range_(?P<start>-?\d+)-"
                         r"(?P<end>-?\d+)_user-(?P<user>.+)-(?P<user_strategy>[a-z]+)_(?P<time>\d{4}\d*.*)$")
ENVS = ("airline", "retail")
HISTORICAL_NAME = re.compile(rf"^(?P<model>.+)-(?P<env>{'|'.join(ENVS)})$")


def evaluation(path) -> Evaluation:
    """The file's label from its name (its model, and the environment where the name says it),
    and the file itself as the evaluation: tau-bench writes no id of its own."""
    stem = path.stem
    runner, historical = RUNNER_NAME.match(stem), HISTORICAL_NAME.match(stem)
    env = next((e for e in ENVS if e in (p.name.lower() for p in path.parents)), None)
    model = readable(runner["model"] if runner else historical["model"] if historical else None)
    if runner:
        label = label_of(model, env, runner["strategy"] if runner["strategy"] != "tool-calling" else None, fallback=stem)
    elif historical:
        label = label_of(model, historical["env"], fallback=stem)
    else:
        label = label_of(stem, fallback="tau-bench")
    return Evaluation(label, f"tau-bench-file:{path.resolve()}", "/".join(p.name for p in path.parents[1::-1] if p.name),
                      model=model)


def load(ctx: LoadContext) -> LoadResult:
    data, damage = loads_lenient(loads_file(ctx.path), depth=1)
    run = evaluation(ctx.path)
    notes: list[str] = []
    fields = run.run_fields(ctx)
    if not isinstance(data, list):
        data = []
        if damage is None:
            damage_reason = "tau-bench results must be a JSON list of {task_id, trial, reward, traj}"
            return load_items(ctx, [Item("file", reason=damage_reason, raw="")], notes)
    found = list(items(data, fields))
    if damage:
        found.append(Item(f"record {len(data)}", reason=damage.describe(), raw=""))
    return load_items(ctx, found, notes)
