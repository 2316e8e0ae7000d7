"""Failure modes: planted modes among honest noise are found (adjusted Rand index on the failures),
the diff flags the mode a candidate fixed and the one it introduced, infra errors stay apart,
shares carry bootstrap CIs over samples; aligned trajectory diffs; the real tau2 SFT comparison."""
from __future__ import annotations

import json
import random
import uuid
from pathlib import Path

import pandas as pd
import pytest

import rolloutlab as rl
from rolloutlab import failures as fm

# ---- planted failure modes (SYNTHETIC: written here as native JSONL, loaded with rl.ingest) ----

PLANTED = ("timeout_loop", "wrong_tool", "hallucinated_number", "give_up", "unit_error")
REFUSALS = ["I'm sorry, I couldn't retrieve the report.", "Unable to answer: the search tool keeps timing out.",
            "Sorry, I cannot find this information right now.", "I was unable to get the figure, sorry."]
GIVE_UPS = ["I don't know.", "I'm unable to answer that without access to the report.",
            "Sorry, I can't help with that.", "I cannot answer this question."]


def _call(tool, args, turn, status="ok", error=None, chars=800):
    return {"tool": tool, "arguments": args, "turn": turn, "status": status, "error": error,
            "latency_s": 30.0 if error and "timeout" in error else 0.3, "output_chars": chars}


def _finish(rec, calls, outputs, answer, score):
    """Replace a synthetic rollout's trajectory: calls (one turn each), their outputs, the answer."""
    rec["tool_calls"] = calls
    msgs = [{"role": "user", "content": rec["prompt"], "turn": 0}]
    for c, out in zip(calls, outputs):
        msgs += [{"role": "assistant", "content": "", "turn": c["turn"]},
                 {"role": "tool", "content": out, "turn": c["turn"]}]
    if answer is not None:
        msgs.append({"role": "assistant", "content": answer, "turn": len(calls)})
    rec["messages"] = msgs
    rec.update(status="ok", stop_reason="final_answer", final_answer=answer, score=score, error=None)


def plant(rec: dict, kind: str, rng: random.Random) -> None:
    """Turn one synthetic rollout into a failure of the planted ``kind``."""
    value = float(rec["reference"].strip("$M"))
    wrong = f"${round(value * rng.choice((0.5, 2.0, 3.0)), 1)}M"
    q = {"query": rec["prompt"][:48]}
    if kind == "timeout_loop":  # the search tool times out again and again; the agent gives up
        n = rng.randint(3, 6)
        calls = [_call("search", q, t, "error", f"timeout after {rng.choice((30, 60))}s (request "
                       f"{uuid.UUID(int=rng.getrandbits(128))})", 0) for t in range(n)]
        _finish(rec, calls, ["error: timed out"] * n, rng.choice(REFUSALS), 0.0)
    elif kind == "wrong_tool":  # a web search instead of the reports, then a wrong number
        n = rng.randint(1, 3)
        calls = [_call("web_search", {"q": rec["prompt"][12:60]}, t) for t in range(n)]
        _finish(rec, calls, [f"Web results for {rec['prompt'][12:40]} ..."] * n, wrong, 0.2)
    elif kind == "hallucinated_number":  # the right tools, a report without the figure, a number anyway
        report = rec["prompt"][7:11]
        calls = [_call("search", q, 0), _call("cat", {"path": f"reports/{report}/10-K.txt"}, 1)]
        year = rng.randint(2015, 2024)
        _finish(rec, calls, [f"reports/{report}/10-K.txt", f"No figure for fiscal {year} in report {report}; this "
                             f"filing covers fiscal {year - 3} to {year - 1}."], wrong, 0.2)
    elif kind == "give_up":  # no tool call at all
        _finish(rec, [], [], rng.choice(GIVE_UPS), 0.0)
    elif kind == "unit_error":  # an honest search, the right number in the wrong unit / format
        calls = [dict(c) for c in rec["tool_calls"]] or [_call("search", q, 0)]
        for c in calls:
            c.update(status="ok", error=None)
        answer = rng.choice((f"{value} million", f"{int(value * 1e6)}", f"{value / 1000:.4f} billion dollars"))
        _finish(rec, calls, [f"[{c['tool']} output]" for c in calls], answer, 0.8)
    else:
        raise ValueError(kind)


TOOLS = ("search", "list", "cat")
NEXT_TOOL = {"search": (0.45, 0.25, 0.30), "list": (0.15, 0.15, 0.70), "cat": (0.40, 0.20, 0.40)}
COMPANIES = ["Acme Corp", "Globex", "Initech", "Umbrella", "Hooli", "Wonka", "Vandelay", "Oscorp"]


def honest_record(run: str, sample: dict, attempt: int, rng: random.Random) -> dict:
    """One honest rollout of a financial-QA agent (three tools, about 8 calls one at a time, 6%
    wandering past 15 and cut at 20 steps, 1% failed by the tool server): right with a
    probability set by the sample's difficulty, else a wrong number (partial credit now and
    then)."""
    n = rng.randint(16, 21) if rng.random() < 0.06 else max(1, min(14, round(rng.gauss(8, 1.6))))
    truncated, n = n >= 20, min(n, 20)
    infra_at = rng.randrange(n) if rng.random() < 0.01 else None
    tools = ["search"]
    while len(tools) < n:
        tools.append(rng.choices(TOOLS, NEXT_TOOL[tools[-1]])[0])
    calls, msgs = [], [{"role": "user", "content": sample["prompt"], "turn": 0}]
    for i, tool in enumerate(tools):
        args = ({"query": sample["prompt"][:48]} if tool == "search" else {"folder": f"reports/{rng.randrange(2800):04d}"}
                if tool == "list" else {"path": f"reports/{rng.randrange(2800):04d}/10-K.txt"})
        chars = int(rng.lognormvariate(7, 0.6))
        call = {"tool": tool, "arguments": args, "turn": i, "latency_s": round(rng.uniform(0.1, 0.8), 3),
                "status": "ok", "output_chars": chars}
        if i == infra_at:
            call.update(status="error", error=rng.choice(["timeout after 30s", "HTTP 503 Service Unavailable"]),
                        output_chars=0)
        calls.append(call)
        msgs += [{"role": "assistant", "content": "", "turn": i},
                 {"role": "tool", "content": f"[{tool} output: {chars} chars]", "turn": i}]
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
        value = float(sample["reference"].strip("$M"))
        right = rng.random() < min(1.0, max(0.0, (0.62 - sample["difficulty"]) / 0.25 + 0.5))
        answer = sample["reference"] if right else f"${round(value * rng.choice((0.1, 0.5, 0.9, 1.1, 2.0)), 1)}M"
        msgs.append({"role": "assistant", "content": f"The answer is {answer}.", "turn": n})
        rec.update(status="ok", stop_reason="final_answer", final_answer=answer,
                   score=1.0 if right else sample["partial"])
    return rec


def planted_records(run: str, modes=PLANTED, rate: float = 0.05, samples: int = 200, attempts: int = 3,
                    seed: int = 0) -> tuple[list[dict], dict[str, str]]:
    """Honest rollouts (``honest_record``: passes, wrong numbers, runs cut at max steps, 1%
    infra errors) of ``samples`` x ``attempts``, with ``rate`` of them (each mode) turned into
    each planted mode. Returns (records, rollout id -> planted mode)."""
    rng = random.Random(seed)
    items = [{"sample_id": f"fin-{i:05d}", "reference": f"${round(rng.lognormvariate(3.5, 1.0), 1)}M",
              "prompt": f"Report {i % 2800:04d}: what was {rng.choice(COMPANIES)}'s revenue in fiscal "
                        f"{rng.randint(2015, 2024)}? Answer with a number and unit.",
              "difficulty": rng.random(), "partial": 0.6 if rng.random() < 0.3 else 0.2} for i in range(samples)]
    records = [honest_record(run, s, a, rng) for s in items for a in range(attempts)]
    planted: dict[str, str] = {}
    order = [i for i, r in enumerate(records) if r["status"] != "infra_error"]
    rng.shuffle(order)
    per_mode = int(round(rate * len(records)))
    for m, kind in enumerate(modes):
        for i in order[m * per_mode:(m + 1) * per_mode]:
            plant(records[i], kind, rng)
            planted[records[i]["rollout_id"]] = kind
    return records, planted


def truth(assign: pd.DataFrame, planted: dict[str, str]) -> pd.Series:
    """The planted mode, else the honest failure's kind: cut at max steps, or a wrong answer."""
    return pd.Series([planted.get(r, "truncated" if s == "truncated" else "honest wrong answer")
                      for r, s in zip(assign.rollout_id, assign.status)], index=assign.index)


def _write(tmp_path: Path, records: list[dict], name: str) -> Path:
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.fixture(scope="module")
def planted_db(tmp_path_factory):
    """Four runs of 600 synthetic rollouts each: ``one`` with all five planted modes (5% of its
    rollouts each), ``base`` with all but unit errors, ``cand`` with all but timeout loops (the
    candidate fixed one mode and introduced another; the rest are the same honest behaviour), and
    ``fixed``: base's own honest rollouts with the same modes but the timeout loops."""
    folder = tmp_path_factory.mktemp("planted")
    one, p_one = planted_records("one", PLANTED, seed=3)
    base, p_base = planted_records("base", PLANTED[:4], seed=1)
    cand, p_cand = planted_records("cand", PLANTED[1:], seed=2)
    fixed, p_fixed = planted_records("fixed", PLANTED[1:4], seed=1)  # base's honest rollouts, no timeout loops
    db = folder / "planted.duckdb"
    con = rl.connect(db)
    for name, recs in (("one", one), ("base", base), ("cand", cand), ("fixed", fixed)):
        res = rl.ingest(con, _write(folder, recs, name), progress=False)
        assert res.rejected.sum() == 0
    con.close()
    reader = rl.connect(db, read_only=True)
    yield reader, {**p_one, **p_base, **p_cand, **p_fixed}
    reader.close()


@pytest.fixture(scope="module")
def one_modes(planted_db):
    con, _ = planted_db
    return fm.failure_modes(con, "one", n_boot=300)


@pytest.fixture(scope="module")
def planted_diff(planted_db):
    con, _ = planted_db
    return fm.failure_modes_diff(con, "base", "cand", n_boot=500)


def majority(assign: pd.DataFrame, planted: dict[str, str]) -> pd.DataFrame:
    """Per planted mode (and honest kind): the mode holding most of its rollouts, how much of it
    that mode holds (recall) and how much of that mode it is (purity)."""
    t = truth(assign, planted)
    table = pd.crosstab(t, assign["mode"])
    top = table.idxmax(axis=1)
    return pd.DataFrame({"mode": top, "recall": table.max(axis=1) / table.sum(axis=1),
                         "purity": [table.loc[k, m] / table[m].sum() for k, m in top.items()]})


# ---- modes -----------------------------------------------------------------------------------

def test_planted_modes_are_found(planted_db, one_modes):
    """Measured: the adjusted Rand index between the modes found and the planted truth, over the
    run's model failures (infra errors excluded: they are grouped by message, not clustered).
    Truth: the planted mode; an unplanted failure is 'honest wrong answer' or 'truncated' (cut at
    max steps) as the synthetic generator made it. Unit errors were planted in three formats
    ("28.9 million", "28900000", "0.0289 billion dollars"); a mode per format is allowed by
    purity, and counted against the ARI."""
    from sklearn.metrics import adjusted_rand_score

    _, planted = planted_db
    a = one_modes.attrs["assignments"]
    model = a[a.kind == "model"]
    ari = adjusted_rand_score(truth(model, planted), model["mode"])
    assert ari >= 0.8, ari
    m = majority(model, planted)
    for kind in ("timeout_loop", "wrong_tool", "hallucinated_number", "give_up"):
        assert m.loc[kind, "recall"] >= 0.9 and m.loc[kind, "purity"] >= 0.9, (kind, m.loc[kind].tolist())
    unit = truth(model, planted) == "unit_error"
    unit_modes = model["mode"][unit].value_counts()
    for mode, n in unit_modes.items():  # every mode holding unit errors is mostly unit errors
        assert n / (model["mode"] == mode).sum() >= 0.8
    assert m.loc["honest wrong answer", "recall"] >= 0.9  # the honest noise stays one mode
    labels = one_modes.set_index("mode").label
    assert "timeout" in labels[m.loc["timeout_loop", "mode"]]
    assert "no tool calls" in labels[m.loc["give_up", "mode"]]
    assert "web_search" in labels[m.loc["wrong_tool", "mode"]]
    assert "no figure for fiscal" in labels[m.loc["hallucinated_number", "mode"]]
    assert one_modes.attrs["k_chosen_by"] == "silhouette" and one_modes.attrs["method"] == "average"


def test_one_row_per_mode_with_shares(planted_db, one_modes):
    con, _ = planted_db
    m = one_modes
    assert list(m.columns) == fm.MODE_COLUMNS
    failing = con.execute("SELECT count(*) FROM rollouts WHERE run_id = 'one' AND (status IN ('infra_error', "
                          "'ungraded') OR coalesce(score, 0) < 1)").fetchone()[0]
    total = con.execute("SELECT count(*) FROM rollouts WHERE run_id = 'one'").fetchone()[0]
    assert m.rollouts.sum() == failing == m.attrs["failures"]
    assert m.share_of_failures.sum() == pytest.approx(1.0)
    assert (m.share_of_rollouts * total).round().astype(int).tolist() == m.rollouts.tolist()
    model = m[m.kind == "model"]
    assert model.rollouts.tolist() == sorted(model.rollouts, reverse=True)  # largest first
    assert list(m["mode"]) == [f"F{i}" for i in range(1, len(model) + 1)] + \
        [f"I{i}" for i in range(1, len(m) - len(model) + 1)]
    assert ((m.share_ci_low <= m.share_of_failures + 1e-12) & (m.share_of_failures <= m.share_ci_high + 1e-12)).all()
    assert m.label.is_unique
    a = m.attrs["assignments"]
    for row in m.itertuples():  # examples: members, the most typical first
        members = a[a["mode"] == row.mode]
        assert set(row.examples) <= set(members.rollout_id) and 1 <= len(row.examples) <= fm.FAILURE_MODES_EXAMPLES
        if row.kind == "model":
            sims = members.set_index("rollout_id").similarity
            assert sims[row.examples[0]] == pytest.approx(sims.max())
            assert row.mean_tool_calls == pytest.approx(members.n_tool_calls.mean())


def test_infra_errors_are_modes_of_their_own(planted_db, one_modes):
    con, _ = planted_db
    a = one_modes.attrs["assignments"]
    infra_ids = {r[0] for r in con.execute("SELECT rollout_id FROM rollouts WHERE run_id = 'one' AND "
                                           "status = 'infra_error'").fetchall()}
    assert infra_ids, "the synthetic run has infra errors"
    assert set(a.rollout_id[a.kind == "infra"]) == infra_ids
    assert a["mode"][a.kind == "infra"].str.startswith("I").all()
    assert not a["mode"][a.kind == "model"].str.startswith("I").any()
    infra = one_modes[one_modes.kind == "infra"]
    # grouped by the normalised message: 'timeout after 30s' and 'HTTP 503 ...' are two modes
    assert sorted(infra.label) == ["infra error: http <n> service unavailable", "infra error: timeout after <n>"]


def test_failure_mode_of_lists_each_failing_rollout_once(planted_db, one_modes):
    con, _ = planted_db
    a = fm.failure_mode_of(con, "one")
    assert list(a.columns) == fm.ASSIGNMENT_COLUMNS
    assert a.rollout_id.is_unique and len(a) == one_modes.rollouts.sum()
    assert ((a.score < 1) | a.status.isin(["infra_error", "ungraded"])).all()  # passing rollouts have no mode
    pd.testing.assert_frame_equal(a, one_modes.attrs["assignments"])  # deterministic for a seed
    some = list(a.rollout_id[:3])
    assert fm.failure_mode_of(con, "one", rollouts=some).rollout_id.tolist() == some
    timeouts = a[a.sequence.str.contains("search(timeout) → search(timeout) → search(timeout)", regex=False)]
    assert len(timeouts) >= 25 and timeouts["mode"].nunique() == 1


def test_deterministic_for_a_seed_and_k_can_be_given(planted_db, one_modes):
    con, _ = planted_db
    again = fm.failure_modes(con, "one", n_boot=300)
    pd.testing.assert_frame_equal(again.drop(columns="examples"), one_modes.drop(columns="examples"))
    assert again.examples.tolist() == one_modes.examples.tolist()
    three = fm.failure_modes(con, "one", k=3, n_boot=0)
    assert (three.kind == "model").sum() == 3 and three.attrs["k_chosen_by"] == "given"
    assert three.share_ci_low.isna().all()  # n_boot=0: no CI
    for method, k in (("kmeans", 6), ("hdbscan", None)):
        other = fm.failure_modes(con, "one", method=method, k=k, n_boot=0)
        assert other.attrs["method"] == method and other.rollouts.sum() == one_modes.rollouts.sum()
    with pytest.raises(ValueError, match="method"):
        fm.failure_modes(con, "one", method="magic")
    with pytest.raises(rl.UnknownRunError):
        fm.failure_modes(con, "nope")


def test_the_lazy_name_calls_the_function_every_time(planted_db):
    con, _ = planted_db
    first = rl.failure_modes(con, "one", k=2, n_boot=0)
    second = rl.failure_modes(con, "one", k=2, n_boot=0)  # after the module is imported
    pd.testing.assert_frame_equal(first.drop(columns="examples"), second.drop(columns="examples"))
    assert rl.failure_mode_of is fm.failure_mode_of and rl.sample_diff is fm.sample_diff


def test_labeler_is_off_by_default_and_names_modes_when_given(planted_db):
    con, _ = planted_db
    seen = []

    def labeler(summary: dict) -> str:
        seen.append(summary)
        return f"mode with {len(summary['examples'])} examples"

    named = fm.failure_modes(con, "one", n_boot=0, labeler=labeler)
    model = named[named.kind == "model"]
    assert len(seen) == len(model)
    s = seen[0]
    assert set(s) == {"mode", "kind", "label", "rollouts", "features", "examples"}
    assert s["features"][0].keys() == {"feature", "words", "share_in_mode", "share_in_other_failures"}
    assert {"rollout_id", "sequence", "final_answer", "error", "last_output"} == set(s["examples"][0])
    assert model.label.str.startswith("mode with").all()  # unique: suffixed with the mode id
    assert (model.auto_label != model.label).all()
    assert (named[named.kind == "infra"].label == named[named.kind == "infra"].auto_label).all()


def test_bootstrap_cis_resample_samples_not_rollouts(load):
    """All ten failures of mode A come from one sample (ten attempts); mode B is one failure in
    each of nine other samples. Over samples, a resample without that sample has no A at all:
    the CI of A's share reaches 0. Resampling rollouts would give roughly 30%..75%."""
    records = []
    for i in range(10):
        for j in range(10):
            if i == 0:
                calls = [{"tool": "search", "turn": t, "status": "error", "error": "timeout after 30s"} for t in range(4)]
                rec = {"final_answer": "Sorry, I could not find it.", "score": 0.0}
            elif j == 0:
                calls = [{"tool": "cat", "turn": 0, "arguments": {"path": f"r/{i}"}}]
                rec = {"final_answer": f"${i}.5M", "score": 0.0}
            else:
                calls = [{"tool": "cat", "turn": 0}]
                rec = {"final_answer": "$1.0M", "score": 1.0}
            records.append({"run": "r", "sample_id": f"s{i}", "attempt": j, "tool_calls": calls, **rec})
    con = load(records)
    m = fm.failure_modes(con, "r", k=2, n_boot=2000)
    a_row = m[m.rollouts == 10].iloc[0]
    assert a_row.share_of_failures == pytest.approx(10 / 19)
    assert a_row.share_ci_low == pytest.approx(0.0, abs=1e-9) and a_row.share_ci_high > 0.6
    assert "timeout" in a_row.label


def test_a_run_without_failures(load):
    con = load([{"run": "ok", "sample_id": f"s{i}", "score": 1.0, "final_answer": "1"} for i in range(5)])
    m = fm.failure_modes(con, "ok")
    assert m.empty and list(m.columns) == fm.MODE_COLUMNS
    assert fm.failure_mode_of(con, "ok").empty
    from rolloutlab.plots import failure_modes as pf
    from rolloutlab.plots import EmptyDataError
    with pytest.raises(EmptyDataError, match="no failing rollouts"):
        pf.modes_static(m, "ok")


# ---- base vs candidate -------------------------------------------------------------------------

def test_diff_flags_the_fixed_and_the_new_mode(planted_db, planted_diff):
    """The candidate lost the timeout loops (planted in base only) and gained unit errors
    (planted in cand only); wrong tool, hallucinated numbers and giving up were planted at the
    same rate in both, and the honest failures come from the same generator."""
    _, planted = planted_db
    d = planted_diff
    assert list(d.columns) == fm.DIFF_COLUMNS
    a = d.attrs["assignments"]
    m = majority(a[a.kind == "model"], planted)
    verdict = d.set_index("mode").verdict
    assert verdict[m.loc["timeout_loop", "mode"]] == "fixed"
    unit = truth(a[a.kind == "model"], planted) == "unit_error"
    for mode in a[a.kind == "model"]["mode"][unit].unique():
        assert verdict[mode] == "new", mode
    for kind in ("wrong_tool", "hallucinated_number", "give_up", "honest wrong answer"):
        assert verdict[m.loc[kind, "mode"]] == "unchanged", kind
    timeout = d.set_index("mode").loc[m.loc["timeout_loop", "mode"]]
    assert timeout.candidate_rollouts == 0 and timeout.diff_ci_high < 0 and timeout.rate_diff_ci_high < 0
    assert d.base_rollouts.sum() == d.attrs["base_failures"] and d.candidate_rollouts.sum() == d.attrs["candidate_failures"]
    assert d.base_share.sum() == pytest.approx(1) and d.candidate_share.sum() == pytest.approx(1)
    assert (d["diff"] == d.candidate_share - d.base_share).all()
    s = d.attrs["sentence"]
    assert s.startswith("cand removed") and "introduced" in s and "timeout" in s


def test_diff_verdict_per_rollouts_and_rules():
    assert fm._verdict(10, 0, 0.2, 0.0, -0.3, -0.1) == "fixed"
    assert fm._verdict(10, 5, 0.2, 0.1, -0.15, -0.01) == "reduced"
    assert fm._verdict(10, 9, 0.2, 0.18, -0.1, 0.05) == "unchanged"
    assert fm._verdict(0, 9, 0.0, 0.2, 0.1, 0.3) == "new"
    assert fm._verdict(4, 30, 0.02, 0.3, 0.1, 0.4) == "new"  # the base's share under 10% of the candidate's
    assert fm._verdict(10, 20, 0.2, 0.4, 0.1, 0.3) == "grew"
    assert fm._verdict(0, 9, 0.0, 0.2, float("nan"), float("nan")) == "unchanged"  # no CI, no verdict


def test_diff_per_failures(planted_db, planted_diff):
    """Shares of failures move with the other modes. ``fixed`` is base without its timeout loops
    (the same honest rollouts, the other modes planted as often): every other planted mode is
    as frequent per rollout, yet a larger share of the fewer failures. The default verdicts read
    shares of rollouts, where those modes stay unchanged."""
    con, planted = planted_db
    assert planted_diff.attrs["per"] == "rollouts" and "of rollouts" in planted_diff.attrs["sentence"]
    by = {per: fm.failure_modes_diff(con, "base", "fixed", per=per, n_boot=500) for per in ("failures", "rollouts")}
    d = by["failures"]
    assert d.attrs["per"] == "failures" and "of failures" in d.attrs["sentence"]
    a = d.attrs["assignments"]
    m = majority(a[a.kind == "model"], planted)
    assert d.set_index("mode").verdict[m.loc["timeout_loop", "mode"]] == "fixed"
    same = [m.loc[k, "mode"] for k in ("wrong_tool", "hallucinated_number", "give_up")]
    rows = d.set_index("mode").loc[same]
    assert (rows["diff"] > 0).all() and (rows.rate_diff.abs() < 1e-9).all()
    assert (by["rollouts"].set_index("mode").loc[same].verdict == "unchanged").all()
    with pytest.raises(ValueError, match="per"):
        fm.failure_modes_diff(con, "base", "cand", per="samples")
    with pytest.raises(ValueError, match="same run"):
        fm.failure_modes_diff(con, "base", "base")


# ---- aligned trajectory diffs ----------------------------------------------------------------------

def _rec(run, sample, score, calls, answer, attempt=0, outputs=None, rid=None):
    msgs = [{"role": "user", "content": "q", "turn": 0}]
    for i, c in enumerate(calls):
        msgs.append({"role": "assistant", "content": "", "turn": c.get("turn", i)})
        if outputs:
            msgs.append({"role": "tool", "content": outputs[i], "turn": c.get("turn", i)})
    calls = [{"turn": i, **c} for i, c in enumerate(calls)]
    return {"run": run, "sample_id": sample, "attempt": attempt, "score": score, "final_answer": answer,
            "tool_calls": calls, "messages": msgs, "rollout_id": rid or f"{run}-{sample}-{attempt}"}


@pytest.fixture
def pair(load):
    a = [{"tool": "search", "arguments": {"query": "Acme  revenue", "k": 3.0}},
         {"tool": "cat", "arguments": {"path": "reports/1/10-K.txt"}, "status": "error", "error": "timeout after 30s"},
         {"tool": "search", "arguments": {"query": "acme revenue 2020"}}]
    b = [{"tool": "search", "arguments": {"k": 3, "query": "acme revenue"}},  # same, normalised
         {"tool": "list", "arguments": {"folder": "reports/1"}},             # only b
         {"tool": "cat", "arguments": {"path": "reports/1/10-K.txt"}},        # same call, other outcome
         {"tool": "search", "arguments": {"query": "acme revenue 2021"}}]     # other arguments
    return load([_rec("base", "s1", 0.0, a, "$1.0M", outputs=["hit", "", "hit2"]),
                 _rec("base", "s1", 0.2, a[:1], "$2.0M", attempt=1),
                 _rec("cand", "s1", 1.0, b, "$28.9M", outputs=["hit", "dir", "Revenue: $28.9M", "hit3"]),
                 _rec("cand", "s2", 1.0, b[:1], "x"), _rec("base", "s2", 1.0, b[:1], "x")])


def test_trajectory_diff_aligns_calls(pair):
    d = fm.trajectory_diff(pair, "base-s1-0", "cand-s1-0")
    assert list(d.columns) == fm.TRAJECTORY_DIFF_COLUMNS
    assert d.op.tolist() == ["same", "only_b", "outcome", "arguments", "differs"]
    assert d.kind.tolist() == ["call"] * 4 + ["final"]
    assert d.first_divergence.tolist() == [False, True, False, False, False]
    assert d.attrs["first_divergence"] == 1 and d.attrs["answers_same"] is False
    assert d.attrs["counts"] == {"same": 1, "outcome": 1, "arguments": 1, "only_a": 0, "only_b": 1}
    outcome = d.iloc[2]
    assert (outcome.a_status, outcome.b_status, outcome.a_error) == ("error", "ok", "timeout after 30s")
    assert outcome.b_output == "Revenue: $28.9M" and outcome.outcome_differs
    assert d.iloc[3].args_differ and pd.isna(d.iloc[1].a_tool) and d.iloc[1].b_tool == "list"
    assert (d.iloc[-1].a_output, d.iloc[-1].b_output) == ("$1.0M", "$28.9M")
    assert d.attrs["score_a"] == 0.0 and d.attrs["run_b"] == "cand"
    back = fm.trajectory_diff(pair, "cand-s1-0", "base-s1-0")  # symmetric: only_b becomes only_a
    assert back.op.tolist() == ["same", "only_a", "outcome", "arguments", "differs"]
    assert not d.moved.any()
    same = fm.trajectory_diff(pair, "cand-s2-0", "base-s2-0")
    assert same.op.tolist() == ["same", "same"] and same.attrs["first_divergence"] is None
    with pytest.raises(KeyError):
        fm.trajectory_diff(pair, "nope", "cand-s1-0")


def test_alignment_prefers_the_same_call_and_never_pairs_different_tools():
    a = [("search", "1"), ("cat", "x"), ("cat", "y")]
    b = [("cat", "y"), ("search", "1")]
    pairs = fm.align(a, b)
    paired = [(i, j) for i, j in pairs if i is not None and j is not None]
    assert all(a[i][0] == b[j][0] for i, j in paired)
    assert sorted(i for i, _ in pairs if i is not None) == [0, 1, 2]
    assert sorted(j for _, j in pairs if j is not None) == [0, 1]
    assert fm.align([("t", "1"), ("t", "2")], [("t", "2")]) == [(0, None), (1, 0)]  # exact match wins
    big_a = [("t", str(i % 7)) for i in range(600)]
    big_b = [("t", str(i % 5)) for i in range(500)]
    pairs = fm.align(big_a, big_b)  # 300,000 cells: difflib
    assert sorted(i for i, _ in pairs if i is not None) == list(range(600))
    assert fm.normalise_arguments('{"b": 1.0, "a": " X  y "}') == fm.normalise_arguments({"a": "x y", "b": 1})
    assert fm.normalise_arguments("not json") == "not json" and fm.normalise_arguments(None) == ""


def test_calls_in_another_order_are_marked_moved(load):
    x, y = {"tool": "get", "arguments": {"id": "A"}}, {"tool": "get", "arguments": {"id": "B"}}
    con = load([_rec("r", "s", 0.0, [x, y], "1", rid="xy"), _rec("r", "t", 0.0, [y, x], "1", rid="yx")])
    d = fm.trajectory_diff(con, "xy", "yx")
    assert d.op.tolist() == ["arguments", "arguments", "same"] and d.moved.tolist() == [True, True, False]
    assert "↕" in fm.trajectory_diff_html(d)


def test_sample_diff_picks_a_failing_base_and_a_passing_candidate(pair):
    d = fm.sample_diff(pair, "s1", "base", "cand")
    assert (d.attrs["rollout_a"], d.attrs["rollout_b"]) == ("base-s1-0", "cand-s1-0")  # the lowest score
    assert "fails" in d.attrs["message"] and "passes" in d.attrs["message"]
    none = fm.sample_diff(pair, "s1", "cand", "base")
    assert none.empty and none.attrs["rollout_a"] is None
    assert none.attrs["message"].startswith("no failing cand attempt at sample s1")
    assert fm.sample_diff(pair, "s2", "base", "cand").attrs["message"].startswith("no failing base attempt")
    assert fm.sample_diff(pair, "s9", "base", "cand").attrs["message"] == "base has no attempt at sample s9"
    assert "no failing" in fm.trajectory_diff_html(none)
    assert fm.sample_diff(pair, "s1", "base", "cand", prefer=["base-s1-1"]).attrs["rollout_a"] == "base-s1-1"
    pairs = fm.samples_to_diff(pair, "base", "cand")
    assert pairs.to_dict("records") == [{"sample_id": "s1", "base_attempts": 2, "base_failing": 2,
                                         "candidate_attempts": 1, "candidate_passing": 1}]
    assert fm.samples_to_diff(pair, "base", "cand", rollouts=["base-s1-1"]).sample_id.tolist() == ["s1"]
    assert fm.samples_to_diff(pair, "base", "cand", rollouts=["cand-s1-0"]).empty  # not a failing base attempt


EVIL = "<script>window.__pwned=1</script><img src=x onerror=alert(1)>"


def test_diff_html_escapes_every_log_string(load):
    calls = [{"tool": EVIL, "arguments": {"q": EVIL}, "status": "error", "error": EVIL}]
    con = load([_rec(EVIL, EVIL, 0.0, calls, EVIL, outputs=[EVIL], rid="a" + EVIL),
                _rec("c", EVIL, 1.0, [{"tool": "x", "arguments": {}}], EVIL + "$1 and $2", outputs=[EVIL], rid="b")])
    html_text = fm.trajectory_diff_html(fm.trajectory_diff(con, "a" + EVIL, "b"))
    assert "<script>" not in html_text and "<img" not in html_text
    assert html_text.count("&lt;script&gt;") >= 6
    assert "tex2jax_ignore" in html_text  # dollar amounts never typeset
    m = fm.failure_modes(con, EVIL, n_boot=0)
    table = fm.modes_html(m)
    assert "<script>" not in table and "<img" not in table


# ---- SQL pieces -------------------------------------------------------------------------------

def test_error_messages_are_normalised(con):
    def norm(text):
        return con.execute(f"SELECT {fm.mask_sql('?')}", [text]).fetchone()[0]

    assert norm("Timeout after 30s (request 3f2b8c1e-1a2b-4c3d-9e8f-001122334455)") == "timeout after <n> (request <id>)"
    assert norm("Error: Plan with ID P1009 not found") == norm("Error: Plan with ID P1014 not found") == \
        "error: plan with id <id> not found"
    assert norm("open /var/data/reports/0042/10-K.txt failed") == "open <path> failed"
    assert norm("GET https://api.example.com/v1/x?id=9 -> 503") == "get <url> -> <n>"
    assert norm("user jane.doe@example.com   locked") == "user <email> locked"
    cls = con.execute(f"SELECT {fm.error_class_sql('e', 's')} FROM (VALUES ('Request timed out', 'error'), "
                      "('HTTP 503 Service Unavailable', 'error'), ('Error: User not found', 'error'), "
                      "(NULL, 'ok'), (NULL, 'error'), ('Error: Payment amount does not add up', 'error')) t(e, s)"
                      ).fetchall()
    assert [c[0] for c in cls] == ["timeout", "server_error", "not_found", None, "error", "error"]
    shapes = con.execute(f"SELECT {fm.answer_shape_sql('a')}, {fm.answer_mask_sql('a')} FROM (VALUES ('$28.9M'), "
                         "('28.9 million'), ('28900000'), (''), ('I''m sorry, I cannot help.'), ('Which year?'), "
                         "('Acme'), (NULL)) t(a)").fetchall()
    assert shapes == [("number_unit", "$9.9M"), ("number_unit", "9.9 w"), ("number", "9"), ("empty", None),
                      ("refusal", None), ("question", None), ("short_text", None), ("empty", None)]


# ---- figures -----------------------------------------------------------------------------------

def test_figures_are_titled_labelled_with_a_legend(one_modes, planted_diff):
    import matplotlib

    matplotlib.use("Agg")
    from rolloutlab.plots import failure_modes as pf
    from rolloutlab.plots.style import BASE_COLOR, CANDIDATE_COLOR

    fig = pf.modes_static(one_modes)
    ax = fig.axes[0]
    assert ax.get_title().startswith("How one fails:") and ax.get_xlabel().startswith("share of the run")
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["model failure", "infra error", "95% CI"]
    assert len(ax.patches) == len(one_modes)  # one bar per mode, as given
    assert ax.patches[0].get_width() == pytest.approx(one_modes.share_of_failures.iloc[0])
    fig = pf.diff_static(planted_diff)
    ax = fig.axes[0]
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert texts[:2] == ["base", "cand"] and {"fixed", "new", "unchanged"} <= set(texts)
    assert "base to cand" in ax.get_title() and ax.get_ylabel().startswith("failure mode")
    colors = {matplotlib.colors.to_hex(line.get_color()) for line in ax.lines}
    assert BASE_COLOR.lower() in colors and CANDIDATE_COLOR.lower() in colors
    ifig = pf.diff_interactive(planted_diff)
    assert {t.name for t in ifig.data} >= {"base", "cand", "fixed", "new", "unchanged"}
    assert "base" in ifig.layout.title.text and ifig.layout.xaxis.title.text.startswith("share")
    ifig = pf.modes_interactive(one_modes)
    assert [t.name for t in ifig.data] == ["model failure", "infra error"]


def test_interactive_figures_escape_labels(one_modes):
    from rolloutlab.plots import failure_modes as pf

    evil = one_modes.copy()
    evil.loc[0, "label"] = EVIL
    fig = pf.modes_interactive(evil)
    text = fig.to_json()
    assert "<script>" not in text and "&lt;script&gt;" in text
    static = pf.modes_static(evil.assign(label="costs $1 and $2"))  # two dollars: no mathtext
    static.canvas.draw()
    assert any(r"costs \$1 and \$2" in t.get_text() for t in static.axes[0].get_yticklabels())


# ---- the real tau2 SFT comparison ----------------------------------------------------------------

@pytest.fixture(scope="module")
def tau2(tmp_path_factory):
    real = rl.config.real_data_dir() / "tau2-sft"
    if not real.is_dir():
        pytest.skip(f"real logs not found at {real} (set ${rl.config.REAL_DATA_ENV_VAR} to their folder)")
    db = tmp_path_factory.mktemp("tau2") / "tau2.duckdb"
    con = rl.connect(db)
    base = sorted(p for p in real.glob("gpt-4.1_*.json") if "no-user" not in p.name)
    sft = sorted(p for p in real.glob("ft:*.json") if "no-user" not in p.name)
    rl.ingest(con, base, run="base", progress=False)
    rl.ingest(con, sft, run="sft", progress=False)
    con.close()
    reader = rl.connect(db, read_only=True)
    yield reader
    reader.close()


def test_real_tau2_sft_introduces_long_loops(tau2):
    """gpt-4.1 vs its SFT checkpoint on airline, retail and telecom (100 tasks, one trial each):
    the SFT model's new failure mode is the long loop cut at max steps (telecom, get_details_by_id
    again and again), absent from the base model's failures."""
    d = fm.failure_modes_diff(tau2, "base", "sft")
    truncated = {r[0] for r in tau2.execute("SELECT rollout_id FROM rollouts WHERE run_id = 'sft' AND status = "
                                            "'truncated'").fetchall()}
    assert len(truncated) >= 5
    a = d.attrs["assignments"]
    loop = a[a.rollout_id.isin(truncated)]["mode"].value_counts()
    row = d.set_index("mode").loc[loop.index[0]]
    assert loop.iloc[0] >= len(truncated) - 1  # one mode holds the loops...
    assert row.verdict == "new" and row.base_rollouts == 0  # ...which fine-tuning introduced
    assert "truncated" in row.label or "consecutive" in row.label
    assert a.rollout_id.is_unique and set(a.run) == {"base", "sft"}
    assert "introduced" in d.attrs["sentence"]
    base = fm.failure_modes(tau2, "base")
    top = base.iloc[0]
    assert top.kind == "model" and top.share_of_failures > 0.5  # most base failures share one pattern
    s = tau2.execute("SELECT b.sample_id FROM rollouts b JOIN rollouts c USING (sample_id) WHERE b.run_id = 'base' "
                     "AND c.run_id = 'sft' AND b.score < 1 AND c.score >= 1 ORDER BY 1 LIMIT 1").fetchone()[0]
    sd = fm.sample_diff(tau2, s, "base", "sft")
    assert len(sd) >= 2 and sd.iloc[-1].kind == "final" and sd.attrs["first_divergence"] is not None
    html_text = fm.trajectory_diff_html(sd)
    assert "rl-diff" in html_text and "<script" not in html_text.lower().replace("<style>", "")


def _lint_all(modes, run, diff, runs):
    lint = pytest.importorskip("rolloutlab.plots.lint")
    import matplotlib

    matplotlib.use("Agg")
    from rolloutlab.plots import failure_modes as pf

    for draw in (pf.modes_static, pf.modes_interactive):
        assert lint.problems(draw(modes, run), [run]) == [], draw.__name__
    for draw in (pf.diff_static, pf.diff_interactive):
        assert lint.problems(draw(diff), runs) == [], draw.__name__


def test_figures_meet_the_figure_standard(one_modes, planted_diff):
    """plots.lint: titled, labelled axes, legends, numbers as people read them, base blue and
    candidate orange for the runs and nothing else."""
    _lint_all(one_modes, "one", planted_diff, ["base", "cand"])


def test_figures_meet_the_figure_standard_on_real_logs(tau2):
    _lint_all(fm.failure_modes(tau2, "sft", n_boot=300), "sft", fm.failure_modes_diff(tau2, "base", "sft", n_boot=300),
              ["base", "sft"])


def test_banded_alignment_past_the_cell_limit_is_valid_and_optimal_when_the_band_covers_it(monkeypatch):
    import random
    rng = random.Random(1)

    def score(a, b, pairs):
        return sum(-1 if i is None or j is None else fm._pair_score(a[i], b[j], -10 ** 9) for i, j in pairs)

    for _ in range(100):
        a = [(f"t{rng.randrange(3)}", str(rng.randrange(3))) for _ in range(rng.randrange(1, 30))]
        b = [(f"t{rng.randrange(3)}", str(rng.randrange(3))) for _ in range(rng.randrange(1, 30))]
        full = fm.align(a, b)
        monkeypatch.setattr(fm, "DIFF_MAX_CELLS", 0)  # the narrowest band
        narrow = fm.align(a, b)
        monkeypatch.setattr(fm, "DIFF_MAX_CELLS", 10 ** 6)
        wide = fm._align_banded(a, b)  # a band covering every cell: the same optimum
        monkeypatch.undo()
        for pairs in (narrow, wide):
            assert [i for i, _ in pairs if i is not None] == list(range(len(a)))
            assert [j for _, j in pairs if j is not None] == list(range(len(b)))
            assert all(a[i][0] == b[j][0] for i, j in pairs if i is not None and j is not None)
        assert score(a, b, wide) == score(a, b, full) >= score(a, b, narrow)


def test_a_runaway_rollout_is_compared_on_its_first_calls_only(load):
    # repetitive sequences made difflib cubic (4,000 calls per side: 35 s); now the first
    # DIFF_MAX_CALLS calls per side are aligned (banded, linear) and the rest is said not aligned
    n = 5_000
    a = [{"tool": f"t{i % 2}", "arguments": {"k": i % 2}, "turn": 0} for i in range(n)]
    b = [{"tool": f"t{i % 3}", "arguments": {"k": i % 3}, "turn": 0} for i in range(n)]
    con = load([_rec("r", "s", 0.0, a, "1", rid="long-a"), _rec("r", "t", 0.0, b, "1", rid="long-b")])
    d = fm.trajectory_diff(con, "long-a", "long-b")
    calls = d[d.kind == "call"]
    assert calls.a_call.dropna().astype(int).tolist() == list(range(fm.DIFF_MAX_CALLS))
    assert calls.b_call.dropna().astype(int).tolist() == list(range(fm.DIFF_MAX_CALLS))
    assert (d.attrs["calls_a"], d.attrs["calls_b"]) == (n, n)
    assert d.attrs["not_aligned"].startswith(f"calls after {fm.DIFF_MAX_CALLS:,} not aligned")
    assert "not aligned" in fm.trajectory_diff_html(d)
    short = fm.trajectory_diff(con, "long-a", "long-a")
    assert short.attrs["not_aligned"] is not None and set(short.op[short.kind == "call"]) == {"same"}
