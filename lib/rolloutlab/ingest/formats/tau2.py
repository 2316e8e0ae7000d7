"""tau2-bench results: {timestamp, info, tasks, simulations[]}; one rollout per simulation.

A sample is ``domain:task_id``; the run label is the agent model (info.agent_info.llm), with the
agent implementation appended when it is not the default ``llm_agent`` (e.g. the no-user
``llm_agent_solo`` setting), so different settings never merge silently. The termination
reason sets the status: hitting a limit is ``truncated``, a failure of the environment or the
simulated user is ``infra_error``, the agent's own error ``model_error``; a simulation without a
reward was never graded (``ungraded``).

Per-simulation files — tau2's "dir" layout (``results.json`` holding the metadata and
``simulations/<id>.json``), and layouts such as ``task_<T>_trial_<R>.json`` — hold one simulation
each: a folder of them is one run, labelled by the folder (``--run`` overrides), its domain and
agent from the ``results.json`` beside them where there is one. They give the same rollouts, row
for row, as the results file of the same simulations.
"""
from __future__ import annotations

from ..chat import convert_messages
from ..context import LoadContext, LoadResult
from ..convert import Item, field, guarded, lenient_obj, lenient_str, load_items, loads_file, obj
from ..jsonscan import loads_lenient

FORMAT = "tau2"
HEAD = 1 << 16  # what is_simulation looks at, as sniffing does
# tau2's TerminationReason values -> status (the reason itself is kept as stop_reason)
TERMINATION_STATUS = {
    "max_steps": "truncated", "too_many_errors": "truncated", "timeout": "truncated",
    "context_window_exceeded": "truncated",
    "infrastructure_error": "infra_error", "user_error": "infra_error", "unexpected_error": "infra_error",
    "agent_error": "model_error",
}
ID_KINDS = ("string", "integer")


def sniff(path, head: str, first_record) -> bool:
    return path.suffix == ".json" and (('"agent_info"' in head and '"user_info"' in head) or is_simulation(head))


def is_simulation(head: str) -> bool:
    """One simulation per file: its own fields, no results-file header."""
    return ('"termination_reason"' in head and '"task_id"' in head and '"simulations"' not in head
            and '"agent_info"' not in head)


def run_label(info: dict) -> str | None:
    agent = lenient_obj(info, "agent_info")
    llm, impl = lenient_str(agent, "llm"), lenient_str(agent, "implementation")
    if llm and impl and impl != "llm_agent":
        return f"{llm}/{impl}"
    return llm


def _sum_usage(messages: list, key: str) -> int | None:
    values = [m["usage"].get(key) for m in messages
              if isinstance(m, dict) and m.get("role") == "assistant" and isinstance(m.get("usage"), dict)]
    values = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return int(sum(values)) if values else None


def record(sim: dict, i: int, domain: str, label: str, model: str | None) -> dict:
    task_id = field(sim, "task_id", ID_KINDS, required=True)
    trial = field(sim, "trial", "integer")
    reward_info = obj(sim, "reward_info")
    reward = field(reward_info, "reward", "number", "reward_info.")
    messages = sim.get("messages")
    calls, out_messages, answer = convert_messages(
        messages, include_call=lambda c: c.get("requestor", "assistant") == "assistant", ts_key="timestamp")
    termination = field(sim, "termination_reason", "string")
    cost = field(sim, "agent_cost", "number")
    breakdown = obj(reward_info, "reward_breakdown", "reward_info.")
    status = TERMINATION_STATUS.get(termination, "ok")
    if reward is None and status == "ok":
        status = "ungraded"
    sim_id = field(sim, "id", "string")
    return {
        "rollout_id": sim_id or f"{label}:{domain}:{task_id}:{trial}:{i}",
        "run": label, "model": model, "sample_id": f"{domain}:{task_id}", "attempt": trial,
        "started_at": field(sim, "start_time", "string"), "ended_at": field(sim, "end_time", "string"),
        "latency_s": field(sim, "duration", "number"),
        "status": status, "stop_reason": termination,
        "score": None if reward is None else float(reward), "final_answer": answer,
        # agent_cost 0 means unknown in these logs (fine-tuned models are not priced), not free
        "cost_usd": cost if cost is not None and cost > 0 else None,
        "usage": {"input_tokens": _sum_usage(messages, "prompt_tokens"),
                  "output_tokens": _sum_usage(messages, "completion_tokens")},
        "grades": [{"grader": str(k), "score": v, "weight": 0.0} for k, v in breakdown.items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool)],
        "tool_calls": calls, "messages": out_messages,
    }


def items(sims: list, domain: str, label: str, model: str | None):
    for i, sim in enumerate(sims):
        if not isinstance(sim, dict):
            yield Item(f"simulation {i}", reason="not a JSON object", raw=sim)
            continue
        loc = f"simulation {i} (task {sim.get('task_id')!s:.40}, trial {sim.get('trial')!s:.20})"
        yield guarded(loc, sim, lambda: Item(loc, record=record(sim, i, domain, label, model)))


def run_folder(path):
    """The folder that names a per-simulation run: the one holding ``simulations/``, else the file's."""
    return path.parent.parent if path.parent.name == "simulations" else path.parent


def load_simulation(ctx: LoadContext, text: str) -> LoadResult:
    folder = run_folder(ctx.path)
    meta, _ = loads_lenient(loads_file(folder / "results.json"), depth=1) if (folder / "results.json").is_file() \
        else ({}, None)
    info = lenient_obj(meta, "info")
    domain = lenient_str(lenient_obj(info, "environment_info"), "domain_name") or "unknown"
    label = ctx.run or folder.name
    sim, damage = loads_lenient(text, depth=0)
    if damage or not isinstance(sim, dict):
        found = [Item("simulation", reason=damage.describe() if damage else "not a JSON object", raw=text[:2000])]
    else:
        found = list(items([sim], domain, label, lenient_str(lenient_obj(info, "agent_info"), "llm")))
    return load_items(ctx, found, [])


def load(ctx: LoadContext) -> LoadResult:
    text = loads_file(ctx.path)
    if is_simulation(text[:HEAD]):
        return load_simulation(ctx, text)
    data, damage = loads_lenient(text, depth=2)
    info = lenient_obj(data, "info")
    domain = lenient_str(lenient_obj(info, "environment_info"), "domain_name") or "unknown"
    model = run_label(info)
    label = ctx.run or model or ctx.path.stem
    notes = [] if ctx.run else [f"{ctx.path}: run label '{label}' (the agent model; --run to override)"]
    sims = data.get("simulations") if isinstance(data, dict) and isinstance(data.get("simulations"), list) else []
    found = list(items(sims, domain, label, lenient_str(lenient_obj(info, "agent_info"), "llm")))
    if damage:
        found.append(Item(f"simulation {len(sims)}", reason=damage.describe(), raw=""))
    elif not sims and isinstance(data, dict) and "simulation_index" in data:
        notes.append(f"{ctx.path}: tau2's dir layout: the simulations are in {ctx.path.parent / 'simulations'} "
                     "(ingest the folder)")
    elif not sims:
        notes.append(f"{ctx.path}: no simulations in the file: nothing to load")
    return load_items(ctx, found, notes)
