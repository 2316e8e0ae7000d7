"""tau2-bench results: {timestamp, info, tasks, simulations[]}; one rollout per simulation.

A sample is ``domain:task_id``; the run label is the agent model (info.agent_info.llm), with the
agent implementation appended when it is not the default ``llm_agent`` (e.g. the no-user
``llm_agent_solo`` setting), so different settings never merge silently.
"""
from __future__ import annotations

from .chat import convert_messages
from .context import LoadContext, LoadResult
from .convert import Item, load_items, loads_file
from .jsonscan import loads_lenient

FORMAT = "tau2"
TRUNCATING = {"max_steps", "too_many_errors"}


def sniff(path, head: str, first_record) -> bool:
    return path.suffix == ".json" and '"agent_info"' in head and '"user_info"' in head


def run_label(info: dict) -> str | None:
    agent = info.get("agent_info") if isinstance(info.get("agent_info"), dict) else {}
    llm = agent.get("llm")
    impl = agent.get("implementation")
    if llm and impl and impl != "llm_agent":
        return f"{llm}/{impl}"
    return llm


def _sum_usage(messages: list, key: str) -> int | None:
    values = [(m.get("usage") or {}).get(key) for m in messages
              if isinstance(m, dict) and m.get("role") == "assistant" and isinstance(m.get("usage"), dict)]
    values = [v for v in values if isinstance(v, (int, float))]
    return int(sum(values)) if values else None


def items(sims: list, domain: str, label: str, model: str | None):
    for i, sim in enumerate(sims):
        if not isinstance(sim, dict):
            yield Item(f"simulation {i}", reason="not a JSON object", raw=sim)
            continue
        loc = f"simulation {i} (task {sim.get('task_id')}, trial {sim.get('trial')})"
        reward_info = sim.get("reward_info")
        if not isinstance(reward_info, dict) or not isinstance(reward_info.get("reward"), (int, float)):
            yield Item(loc, reason="no reward_info.reward: the simulation was never graded", raw=sim)
            continue
        messages = sim.get("messages") or []
        calls, out_messages, answer = convert_messages(
            messages, include_call=lambda c: c.get("requestor", "assistant") == "assistant", ts_key="timestamp")
        termination = sim.get("termination_reason")
        cost = sim.get("agent_cost")
        breakdown = reward_info.get("reward_breakdown") or {}
        yield Item(loc, record={
            "rollout_id": sim.get("id") or f"{label}:{domain}:{sim.get('task_id')}:{sim.get('trial')}:{i}",
            "run": label, "model": model, "sample_id": f"{domain}:{sim.get('task_id')}",
            "attempt": sim.get("trial"), "started_at": sim.get("start_time"), "ended_at": sim.get("end_time"),
            "latency_s": sim.get("duration"),
            "status": "truncated" if termination in TRUNCATING else "ok", "stop_reason": termination,
            "score": float(reward_info["reward"]), "final_answer": answer,
            # agent_cost 0 means unknown in these logs (fine-tuned models are not priced), not free
            "cost_usd": cost if isinstance(cost, (int, float)) and cost > 0 else None,
            "usage": {"input_tokens": _sum_usage(messages, "prompt_tokens"),
                      "output_tokens": _sum_usage(messages, "completion_tokens")},
            "grades": [{"grader": str(k), "score": v, "weight": 0.0} for k, v in breakdown.items()
                       if isinstance(v, (int, float)) and not isinstance(v, bool)],
            "tool_calls": calls, "messages": out_messages,
        })


def load(ctx: LoadContext) -> LoadResult:
    data, damage = loads_lenient(loads_file(ctx.path), depth=2)
    data = data if isinstance(data, dict) else {}
    info = data.get("info") if isinstance(data.get("info"), dict) else {}
    env = info.get("environment_info") if isinstance(info.get("environment_info"), dict) else {}
    domain = env.get("domain_name") or "unknown"
    model = run_label(info)
    label = ctx.run or model or ctx.path.stem
    notes = [] if ctx.run else [f"{ctx.path}: run label '{label}' (the agent model; --run to override)"]
    sims = data.get("simulations") if isinstance(data.get("simulations"), list) else []
    found = list(items(sims, domain, label, (info.get("agent_info") or {}).get("llm")))
    if damage:
        found.append(Item(f"simulation {len(sims)}", reason=damage.describe(), raw=""))
    elif not sims:
        notes.append(f"{ctx.path}: no simulations in the file: nothing to load")
    return load_items(ctx, found, notes)
