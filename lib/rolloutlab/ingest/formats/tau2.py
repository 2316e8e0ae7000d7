"""tau2-bench results: {timestamp, info, tasks, simulations[]}; one rollout per simulation.

A sample is ``domain:task_id``. A results file is one experiment, and its run label says which:
the agent model and the domain (``gpt-4.1/airline``), with the agent implementation appended
when it is not the default ``llm_agent`` (the no-user ``llm_agent_solo`` setting), so different
experiments never merge silently. A results file is one evaluation (its timestamp and setting):
files of one label are runs of one experiment, ``<label>@<timestamp>`` when there are several
(``ingest.identity``; ``rolloutlab runs merge`` makes them one); ``--run`` merges on purpose. The
termination reason sets the status: hitting a limit is ``truncated``, a failure of the
environment or the simulated user is ``infra_error``, the agent's own error ``model_error``; a
simulation without a reward was never graded (``ungraded``). A full-duplex (voice) simulation
stores ``ticks`` instead of ``messages``: its messages are read from the ticks' agent and user
chunks, tool calls and results, as tau2's own ``SimulationRun.get_messages`` does.

Per-simulation files — tau2's "dir" layout (``results.json`` holding the metadata and
``simulations/<id>.json``), and layouts such as ``task_<T>_trial_<R>.json`` — hold one simulation
each: a folder of them is one run, labelled by the folder (``--run`` overrides), its domain and
agent from the ``results.json`` beside them where there is one. They give the same rollouts, row
for row, as the results file of the same simulations.
"""
from __future__ import annotations

import itertools

from ..chat import convert_messages, expected_of
from ..context import LoadContext, LoadResult
from ..convert import (BadField, Evaluation, Item, field, guarded, json_kind, label_of, lenient_obj, lenient_str,
                       load_items, loads_file, obj, preview, readable, text_of)
from ..jsonscan import loads_lenient

FORMAT = "tau2"
FILE_TYPES = (("json", "tau2"),)  # what ingest reads of it (formats.file_types)
BATCHED = True  # records only staged through convert.load_items: they load with other files' (ingest.batch)
HEAD = 1 << 16  # what is_simulation looks at, as sniffing does
# tau2's TerminationReason values -> status (the reason itself is kept as stop_reason)
TERMINATION_STATUS = {
    "max_steps": "truncated", "too_many_errors": "truncated", "timeout": "truncated",
    "context_window_exceeded": "truncated",
    "infrastructure_error": "infra_error", "user_error": "infra_error", "unexpected_error": "infra_error",
    "agent_error": "model_error",
}
ID_KINDS = ("string", "integer")
# tau2's control messages (tau2.data_model.message / orchestrator): how a side ends the conversation
CONTROL_TOKENS = ("###STOP###", "###TRANSFER###", "###OUT-OF-SCOPE###")


def sniff(path, head: str, first_record) -> bool:
    """A results file (``info.agent_info``/``user_info``), a file of one simulation or a bare list of
    them, or a leaderboard submission (``{domain, agent, model, simulations}``)."""
    return path.suffix == ".json" and (('"agent_info"' in head and '"user_info"' in head) or is_simulation(head)
                                       or ('"simulations"' in head and '"termination_reason"' in head
                                           and '"task_id"' in head))


def is_simulation(head: str) -> bool:
    """One simulation per file: its own fields, no results-file header."""
    return ('"termination_reason"' in head and '"task_id"' in head and '"simulations"' not in head
            and '"agent_info"' not in head)


def run_label(info: dict, domain: str | None = None) -> str | None:
    """``<agent model>/<domain>[/<implementation>]``, None when the file names no agent model."""
    agent = lenient_obj(info, "agent_info")
    llm, impl = readable(lenient_str(agent, "llm")), readable(lenient_str(agent, "implementation"))
    if not llm:
        return None
    return label_of(llm, domain, impl if impl != "llm_agent" else None, fallback=llm)


def evaluation(info: dict, domain: str, timestamp: str | None, path) -> Evaluation:
    """The evaluation a results file is (``ingest.identity``): its setting, run at its timestamp
    (one ``tau2 run``); files of one setting are runs of one experiment (``rolloutlab runs``), apart
    until a person merges them. Without a timestamp, the file is the evaluation."""
    label = run_label(info, domain) or label_of(path.stem, fallback="tau2")
    user = lenient_str(lenient_obj(info, "user_info"), "llm")
    identity = f"tau2:{timestamp}:{label}:{user}" if timestamp else f"tau2-file:{path.resolve()}"
    return Evaluation(label, identity, (timestamp or "")[:19] or path.stem)


def _content(chunk) -> str | None:
    return text_of(chunk.get("content")) if isinstance(chunk, dict) else None


def messages_from_ticks(ticks: list) -> list[dict]:
    """A full-duplex simulation's messages from its ticks, in time order: each side's speech
    chunks joined into one message until the other side speaks or a tool runs, tool calls and
    their results as they happened. Ticks without speech or tools (most of them) add nothing."""
    events: list[dict] = []
    for i, tick in enumerate(ticks):
        if not isinstance(tick, dict):
            raise BadField(f"'ticks[{i}]' must be a JSON object, got {json_kind(tick)} {preview(tick)}")
        ts = tick.get("timestamp")
        for side, role in (("agent", "assistant"), ("user", "user")):
            text = _content(tick.get(f"{side}_chunk"))
            calls = tick.get(f"{side}_tool_calls") or []
            if text or calls:
                events.append({"role": role, "content": text, "tool_calls": calls or None, "timestamp": ts})
            for result in tick.get(f"{side}_tool_results") or []:
                if isinstance(result, dict):
                    events.append({**result, "role": "tool", "timestamp": result.get("timestamp", ts)})
    merged: list[dict] = []
    for ev in events:  # one utterance per side until the other speaks: not one message per 50 ms tick
        last = merged[-1] if merged else None
        if last and ev["role"] == last["role"] != "tool" and not last.get("tool_calls") and not ev.get("tool_calls"):
            last["content"] = " ".join(x for x in (last["content"], ev["content"]) if x)
        else:
            merged.append(dict(ev))
    return merged


def _sum_usage(messages: list | None, key: str) -> int | None:
    values = [m["usage"].get(key) for m in messages or ()
              if isinstance(m, dict) and m.get("role") == "assistant" and isinstance(m.get("usage"), dict)]
    values = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return int(sum(values)) if values else None


def task_texts(task: object) -> dict:
    """A task's ``prompt`` (the user simulator's instructions) and what its evaluation expects
    (``chat.expected_of``), for the samples table."""
    if not isinstance(task, dict):
        return {}
    scenario = task.get("user_scenario") if isinstance(task.get("user_scenario"), dict) else {}
    instructions = scenario.get("instructions")
    if isinstance(instructions, dict):
        prompt = "\n".join(f"{k}: {v}" for k, v in instructions.items() if isinstance(v, str) and v.strip(". "))
    else:
        prompt = instructions if isinstance(instructions, str) else None
    criteria = task.get("evaluation_criteria") if isinstance(task.get("evaluation_criteria"), dict) else {}
    info = criteria.get("communicate_info")
    return {"prompt": prompt or None,
            **expected_of(criteria.get("actions"), "name", "arguments", info if isinstance(info, list) else None,
                          criteria.get("nl_assertions"))}


def tasks_by_id(data: object) -> dict:
    """The results file's tasks by id (tau2 writes them beside the simulations)."""
    tasks = data.get("tasks") if isinstance(data, dict) else None
    return {str(t.get("id")): t for t in tasks if isinstance(t, dict)} if isinstance(tasks, list) else {}


def record(sim: dict, i: int, domain: str, run: dict, model: str | None, tasks: dict | None = None) -> dict:
    task_id = field(sim, "task_id", ID_KINDS, required=True)
    trial = field(sim, "trial", "integer")
    reward_info = obj(sim, "reward_info")
    reward = field(reward_info, "reward", "number", "reward_info.")
    messages = sim.get("messages")
    if messages is None and sim.get("ticks") is not None:
        messages = messages_from_ticks(field(sim, "ticks", "array"))
    calls, out_messages, answer = convert_messages(
        messages, include_call=lambda c: c.get("requestor", "assistant") == "assistant", ts_key="timestamp")
    if answer in CONTROL_TOKENS:  # the solo agent ends its run with ###STOP###: its answer came before
        answer = next((m["content"] for m in reversed(out_messages) if m["role"] == "assistant" and m["content"]
                       and m["content"].strip() not in CONTROL_TOKENS), None)
    termination = field(sim, "termination_reason", "string")
    cost = field(sim, "agent_cost", "number")
    diagnostics = sim.get("info") if isinstance(sim.get("info"), dict) else {}  # the runner's error, when it failed
    failure = next((diagnostics[k] for k in ("error", "error_traceback") if isinstance(diagnostics.get(k), str)), None)
    breakdown = obj(reward_info, "reward_breakdown", "reward_info.")
    status = TERMINATION_STATUS.get(termination, "ok")
    if reward is None and status == "ok":
        status = "ungraded"
    sim_id = field(sim, "id", "string")
    return {
        "rollout_id": sim_id,  # tau2's simulation uuid; without one, what it holds (ingest.identity)
        **run, "model": model, "sample_id": f"{domain}:{task_id}", "attempt": trial,
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
        "tool_calls": calls, "messages": out_messages, "error": failure,
        **task_texts((tasks or {}).get(str(task_id))),
    }


def items(sims: list, domain: str, run: dict, model: str | None, tasks: dict | None = None):
    for i, sim in enumerate(sims):
        if not isinstance(sim, dict):
            yield Item(f"simulation {i}", reason="not a JSON object", raw=sim)
            continue
        loc = f"simulation {i} (task {sim.get('task_id')!s:.40}, trial {sim.get('trial')!s:.20})"
        yield guarded(loc, sim, lambda: Item(loc, record=record(sim, i, domain, run, model, tasks)))


def run_folder(path):
    """The folder that names a per-simulation run: the one holding ``simulations/``, else the file's."""
    return path.parent.parent if path.parent.name == "simulations" else path.parent


def load_simulation(ctx: LoadContext, text: str) -> LoadResult:
    folder = run_folder(ctx.path)
    meta, _ = loads_lenient(loads_file(folder / "results.json"), depth=1) if (folder / "results.json").is_file() \
        else ({}, None)
    info = lenient_obj(meta, "info")
    domain = lenient_str(lenient_obj(info, "environment_info"), "domain_name") or "unknown"
    sim, damage = loads_lenient(text, depth=1)
    if isinstance(sim, list):  # a bare list of simulations: the file is the run
        found = evaluation({}, domain, None, ctx.path)
        found = items(sim, domain, found.run_fields(ctx), None)
        if damage:
            found = itertools.chain(found, [Item(f"simulation {len(sim)}", reason=damage.describe(), raw="")])
        notes = [] if ctx.run else [f"{ctx.path}: a list of simulations without the results file's info: labelled "
                                    f"by the file's name, domain '{domain}' (--run to choose a label)"]
        return load_items(ctx, found, notes)
    # one simulation per file: its results.json says which evaluation (as the results file of the
    # same simulations does), else the folder is the evaluation
    timestamp = lenient_str(meta, "timestamp")
    run = evaluation(info, domain, timestamp, folder) if timestamp else Evaluation(
        run_label(info, domain) or label_of(folder.name, fallback="tau2"), f"tau2-folder:{folder.resolve()}", folder.name)
    if damage or not isinstance(sim, dict):
        found = [Item("simulation", reason=damage.describe() if damage else "not a JSON object", raw=text[:2000])]
    else:
        found = list(items([sim], domain, run.run_fields(ctx), readable(lenient_str(lenient_obj(info, "agent_info"), "llm")),
                           tasks_by_id(meta)))
    return load_items(ctx, found, [])


def load(ctx: LoadContext) -> LoadResult:
    text = loads_file(ctx.path)
    if is_simulation(text[:HEAD]):
        return load_simulation(ctx, text)
    data, damage = loads_lenient(text, depth=2)
    info = lenient_obj(data, "info")
    if not info and isinstance(data, dict) and lenient_str(data, "model"):  # a leaderboard submission's own header
        info = {"agent_info": {"llm": lenient_str(data, "model"), "implementation": lenient_str(data, "agent")},
                "environment_info": {"domain_name": lenient_str(data, "domain")}}
    domain = lenient_str(lenient_obj(info, "environment_info"), "domain_name") or "unknown"
    sims = data.get("simulations") if isinstance(data, dict) and isinstance(data.get("simulations"), list) else []
    timestamp = lenient_str(data, "timestamp") if isinstance(data, dict) else None
    run = evaluation(info, domain, timestamp, ctx.path)
    notes: list[str] = []
    found = items(sims, domain, run.run_fields(ctx), readable(lenient_str(lenient_obj(info, "agent_info"), "llm")),
                  tasks_by_id(data))
    if damage:
        found = itertools.chain(found, [Item(f"simulation {len(sims)}", reason=damage.describe(), raw="")])
    elif not sims and isinstance(data, dict) and ("simulation_index" in data or (ctx.path.parent / "simulations").is_dir()):
        notes = [f"{ctx.path}: tau2's dir layout: the simulations are in {ctx.path.parent / 'simulations'} "
                 "(ingest the folder)"]
    elif not sims:
        notes = [f"{ctx.path}: no simulations in the file: nothing to load"]
    return load_items(ctx, found, notes)
