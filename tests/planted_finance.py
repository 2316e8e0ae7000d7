"""Planted failure modes, shape A (SYNTHETIC): a financial-QA agent with three tools (search, list,
cat) answering "what was X's revenue in fiscal Y?" from 10-K reports, as native JSONL records.

Honest rollouts read the sample's report (its revenue for four fiscal years, one of them the
answer), with noise: paths of 1 to 20 calls, a transient timeout retried now and then, runs cut at
20 steps, 1% infra errors, wrong answers that take another year's figure from the report (most)
or slip in arithmetic (a number no tool returned). Five failure modes are planted, each in
``rate`` of the rollouts:

- ``timeout_loop``: the search times out again and again (the same call), then a refusal;
- ``wrong_tool``: a web search instead of the reports, then a number the web results do not hold;
- ``hallucinated_number``: search, then the report, which has no figure for the year; a number
  anyway (the path of an honest rollout that reads one report);
- ``give_up``: no tool call, or one that fails, then a refusal;
- ``unit_error``: an honest path, the right value in another form ("28.9 million", "28900000")
  or the right digits in the wrong unit ("$28.9B", "28.9 thousand").

Used by tests/analysis/test_failure_modes.py and bench/failure_modes.py (``planted_records``, ``truth``)."""
from __future__ import annotations

import random
import uuid

import pandas as pd

PLANTED = ("timeout_loop", "wrong_tool", "hallucinated_number", "give_up", "unit_error")
REFUSALS = ["I'm sorry, I couldn't retrieve the report.", "Unable to answer: the search tool keeps timing out.",
            "Sorry, I cannot find this information right now.", "I was unable to get the figure, sorry."]
GIVE_UPS = ["I don't know.", "I'm unable to answer that without access to the report.",
            "Sorry, I can't help with that.", "I cannot answer this question."]
TOOLS = ("search", "list", "cat")
NEXT_TOOL = {"search": (0.45, 0.25, 0.30), "list": (0.15, 0.15, 0.70), "cat": (0.40, 0.20, 0.40)}
COMPANIES = ["Acme Corp", "Globex", "Initech", "Umbrella", "Hooli", "Wonka", "Vandelay", "Oscorp"]
SAYINGS = ["{}", "The revenue was {}.", "{} in revenue.", "Revenue: {}", "It reported {}."]


def money(value: float) -> str:
    return f"${value:,.1f}M"


def _call(tool, args, turn, status="ok", error=None, chars=800):
    return {"tool": tool, "arguments": args, "turn": turn, "status": status, "error": error,
            "latency_s": 30.0 if error and "timeout" in error else 0.3, "output_chars": chars}


def _finish(rec, calls, outputs, answer, score):
    """Replace a rollout's trajectory: calls (one turn each), their outputs, the answer."""
    rec["tool_calls"] = calls
    msgs = [{"role": "user", "content": rec["prompt"], "turn": 0}]
    for c, out in zip(calls, outputs):
        msgs += [{"role": "assistant", "content": "", "turn": c["turn"]},
                 {"role": "tool", "content": out, "turn": c["turn"]}]
    if answer is not None:
        msgs.append({"role": "assistant", "content": answer, "turn": len(calls)})
    rec["messages"] = msgs
    rec.update(status="ok", stop_reason="final_answer", final_answer=answer, score=score, error=None)


def report_text(sample: dict) -> str:
    years = sorted(sample["figures"])
    body = "; ".join(f"fiscal {y}: {money(sample['figures'][y])}" for y in years)
    return (f"{sample['company']} annual report (10-K), report {sample['report']}. Revenue by fiscal year — {body}. "
            f"Employees: {sample['employees']:,}.")


def _output(tool: str, sample: dict, args: dict, rng: random.Random) -> str:
    if tool == "search":
        return (f"1. reports/{sample['report']}/10-K.txt — {sample['company']} annual report\n"
                f"2. reports/{rng.randrange(2800):04d}/10-K.txt — another filing")
    if tool == "list":
        return f"{args['folder']}/10-K.txt\n{args['folder']}/10-Q.txt\n{args['folder']}/exhibits/"
    if args["path"].startswith(f"reports/{sample['report']}/"):
        return report_text(sample)
    other = {y: round(rng.lognormvariate(3.5, 1.0), 1) for y in sorted(sample["figures"])}
    return "Another company's report. Revenue — " + "; ".join(f"fiscal {y}: {money(v)}" for y, v in other.items())


def honest_record(run: str, sample: dict, attempt: int, rng: random.Random) -> dict:
    """One honest rollout: about 8 calls one at a time (at least one reads the sample's report),
    6% wandering past 15 and cut at 20 steps, 8% with a timeout retried once, 1% failed by the tool
    server; right with a probability set by the sample's difficulty, else another year's figure
    from the report (80%) or an arithmetic slip (20%, a number no tool returned)."""
    n = rng.randint(16, 21) if rng.random() < 0.06 else max(1, min(14, round(rng.gauss(8, 1.6))))
    truncated, n = n >= 20, min(n, 20)
    infra_at = rng.randrange(n) if rng.random() < 0.01 else None
    retry_at = rng.randrange(n) if rng.random() < 0.08 else None
    tools = ["search"]
    while len(tools) < n:
        tools.append(rng.choices(TOOLS, NEXT_TOOL[tools[-1]])[0])
    if "cat" not in tools:
        tools[-1] = "cat"
    read_at = max(i for i, t in enumerate(tools) if t == "cat")
    calls, msgs, turn = [], [{"role": "user", "content": sample["prompt"], "turn": 0}], 0
    for i, tool in enumerate(tools):
        if tool == "search":
            args = {"query": rng.choice([sample["company"], sample["prompt"][:48], f"{sample['company']} revenue",
                                         f"{sample['company']} 10-K fiscal {sample['year']}"])}
        elif tool == "list":
            args = {"folder": f"reports/{rng.randrange(2800):04d}"}
        else:
            report = sample["report"] if i == read_at or rng.random() < 0.5 else f"{rng.randrange(2800):04d}"
            args = {"path": f"reports/{report}/10-K.txt"}
        if i == retry_at:  # a transient timeout, then the same call again
            calls.append(_call(tool, args, turn, "error", "timeout after 30s", 0))
            msgs += [{"role": "assistant", "content": "", "turn": turn},
                     {"role": "tool", "content": "error: timed out", "turn": turn}]
            turn += 1
        out = _output(tool, sample, args, rng)
        call = {"tool": tool, "arguments": args, "turn": turn, "latency_s": round(rng.uniform(0.1, 0.8), 3),
                "status": "ok", "output_chars": len(out)}
        if i == infra_at:
            call.update(status="error", error=rng.choice(["timeout after 30s", "HTTP 503 Service Unavailable"]),
                        output_chars=0)
            out = "error: " + call["error"]
        calls.append(call)
        msgs += [{"role": "assistant", "content": "", "turn": turn}, {"role": "tool", "content": out, "turn": turn}]
        turn += 1
        if i == infra_at:
            break
    rec = {"rollout_id": f"{run}-{sample['sample_id']}-{attempt}", "run": run, "sample_id": sample["sample_id"],
           "attempt": attempt, "prompt": sample["prompt"], "reference": sample["reference"], "tool_calls": calls,
           "messages": msgs}
    if infra_at is not None:
        rec.update(status="infra_error", stop_reason="tool_error", final_answer=None, score=None,
                   error=calls[-1]["error"])
    elif truncated:
        rec.update(status="truncated", stop_reason="max_steps", final_answer=None, score=0.0)
    else:
        right = rng.random() < min(1.0, max(0.0, (0.62 - sample["difficulty"]) / 0.25 + 0.5))
        if right:
            value = sample["figures"][sample["year"]]
        elif rng.random() < 0.8:
            value = sample["figures"][rng.choice([y for y in sample["figures"] if y != sample["year"]])]
        else:
            value = round(sample["figures"][sample["year"]] * rng.choice((0.9, 1.1, 1.25)), 1)
        answer = rng.choice(SAYINGS).format(money(value))
        msgs.append({"role": "assistant", "content": answer, "turn": turn})
        rec.update(status="ok", stop_reason="final_answer", final_answer=answer,
                   score=1.0 if right else sample["partial"])
    return rec


def plant(rec: dict, sample: dict, kind: str, rng: random.Random) -> None:
    """Turn one rollout into a failure of the planted ``kind``."""
    value = sample["figures"][sample["year"]]
    unseen = round(value * rng.choice((0.37, 0.61, 1.7, 2.3, 3.1)), 1)  # in no report
    q = {"query": rec["prompt"][:48]}
    if kind == "timeout_loop":
        n = rng.randint(3, 6)
        err = f"timeout after {rng.choice((30, 60))}s (request {uuid.UUID(int=rng.getrandbits(128))})"
        calls = [_call("search", q, t, "error", err, 0) for t in range(n)]
        _finish(rec, calls, ["error: timed out"] * n, rng.choice(REFUSALS), 0.0)
    elif kind == "wrong_tool":
        n = rng.randint(1, 3)
        calls = [_call("web_search", {"q": rec["prompt"][12:60]}, t) for t in range(n)]
        outs = [f"Web results for {sample['company']}: founded {rng.randint(1950, 2005)}, about "
                f"{sample['employees']:,} employees, news and press releases." for _ in range(n)]
        _finish(rec, calls, outs, rng.choice(SAYINGS).format(money(unseen)), 0.2)
    elif kind == "hallucinated_number":
        report = sample["report"]
        calls = [_call("search", q, 0), _call("cat", {"path": f"reports/{report}/10-K.txt"}, 1)]
        years = sorted(y for y in sample["figures"] if y != sample["year"])
        body = "; ".join(f"fiscal {y}: {money(sample['figures'][y])}" for y in years)
        outs = [_output("search", sample, q, rng),
                f"{sample['company']} annual report, report {report}. No revenue figure for fiscal {sample['year']} "
                f"in this filing. Revenue — {body}."]
        _finish(rec, calls, outs, rng.choice(SAYINGS).format(money(unseen)), 0.2)
    elif kind == "give_up":
        if rng.random() < 0.5:
            _finish(rec, [], [], rng.choice(GIVE_UPS), 0.0)
        else:
            err = rng.choice(["Error: report not found", "Error: access denied for this folder"])
            _finish(rec, [_call(rng.choice(("search", "cat")), q, 0, "error", err, 0)], [err], rng.choice(GIVE_UPS), 0.0)
    elif kind == "unit_error":
        calls = [dict(c) for c in rec["tool_calls"] if c.get("status", "ok") == "ok"] or [_call("search", q, 0)]
        calls.append(_call("cat", {"path": f"reports/{sample['report']}/10-K.txt"}, len(calls)))
        for t, c in enumerate(calls):
            c.update(status="ok", error=None, turn=t)
        outs = [_output(c["tool"], sample, c["arguments"], rng) for c in calls[:-1]] + [report_text(sample)]
        answer = rng.choice((f"{value} million", f"{int(round(value * 1e6))}", f"${value * 1e6:,.0f}",
                             f"{value / 1000:.4f} billion dollars", f"${value}B", f"{value} thousand"))
        _finish(rec, calls, outs, answer, 0.0)
    else:
        raise ValueError(kind)


def make_samples(samples: int, seed: int) -> list[dict]:
    """The data set of ``seed``: its sample ids name the seed (two data sets never share an id)."""
    rng = random.Random(seed)
    items = []
    for i in range(samples):
        year = rng.randint(2015, 2024)
        figures = {y: round(rng.lognormvariate(3.5, 1.0), 1) for y in range(year - 2, year + 2)}
        company = rng.choice(COMPANIES)
        items.append({"sample_id": f"fin{seed}-{i:05d}", "year": year, "figures": figures, "company": company,
                      "report": f"{i % 2800:04d}", "reference": money(figures[year]),
                      "employees": rng.randint(50, 90_000),
                      "prompt": f"Report {i % 2800:04d}: what was {company}'s revenue in fiscal {year}? "
                                "Answer with a number and unit.",
                      "difficulty": rng.random(), "partial": 0.6 if rng.random() < 0.3 else 0.2})
    return items


def planted_records(run: str, modes=PLANTED, rate: float = 0.05, samples: int = 200, attempts: int = 3,
                    seed: int = 0, sample_seed: int | None = None) -> tuple[list[dict], dict[str, str]]:
    """Honest rollouts of ``samples`` x ``attempts`` with ``rate`` of them (each mode) turned into
    each planted mode. ``sample_seed``: the samples' own seed (default ``seed``): two runs with one
    sample seed and different seeds are two runs of one checkpoint. Returns (records, rollout id
    -> planted mode)."""
    items = make_samples(samples, seed if sample_seed is None else sample_seed)
    rng = random.Random(seed * 7919 + 1)
    records = [honest_record(run, s, a, rng) for s in items for a in range(attempts)]
    by_id = {s["sample_id"]: s for s in items}
    planted: dict[str, str] = {}
    order = [i for i, r in enumerate(records) if r["status"] != "infra_error"]
    rng.shuffle(order)
    per_mode = int(round(rate * len(records)))
    for kind in modes:  # each kind in its own slots: runs of one seed with fewer modes differ only there
        m = PLANTED.index(kind)
        for i in order[m * per_mode:(m + 1) * per_mode]:
            plant(records[i], by_id[records[i]["sample_id"]], kind, rng)
            planted[records[i]["rollout_id"]] = kind
    return records, planted


def truth(assign: pd.DataFrame, planted: dict[str, str]) -> pd.Series:
    """The planted mode, else the honest failure's kind: cut at max steps, or a wrong answer."""
    return pd.Series([planted.get(r, "truncated" if s == "truncated" else "honest wrong answer")
                      for r, s in zip(assign.rollout_id, assign.status)], index=assign.index)
