"""Tokens, dollars, truncation, the frontier and the job budget (metrics/costs.py): hand-made runs
whose every dollar is worked out below from a given price table; the real tau2 logs (costs given
in the logs, 0 = unknown for the fine-tuned model); the demo's synthetic logs."""
from __future__ import annotations

import json
import math
import tomllib
import warnings

import numpy as np
import pandas as pd
import pytest

import rolloutlab as rl
from conftest import FIXTURES, rollout
from rolloutlab.demo import synth
from rolloutlab.analysis.metrics import costs as C
from rolloutlab.views.plots import cost as cost_plots, lint

# USD per 1M tokens. m-a bills reasoning above output, so reasoning must be billed at its own price;
# ft:m-b gives only input and output (cached defaults to input, reasoning to output).
PRICES = {"m-a": {"input": 2.0, "cached_input": 0.5, "output": 8.0, "reasoning": 10.0},
          "ft:m-b": {"input": 1.0, "output": 4.0}}


def usage(i, o, r=None):
    u = {"input_tokens": i, "output_tokens": o}
    if r is not None:
        u["reasoning_tokens"] = r
    return u


def rec(run, model, sample, score, tokens, stop="final_answer", **extra):
    r = rollout(run, sample, score, model=model, stop_reason=stop, **extra)
    if tokens is not None:
        r["usage"] = tokens
    return r


# run a (m-a), per rollout by hand (dollars = tokens x price / 1e6):
#   s1/0 1000 in, 100 out, 200 reasoning, pass:   (2000 + 800 + 2000) / 1e6 = 0.0048
#   s1/1 2000 in, 50 out, cut at max_tokens, 0:    (4000 + 400) / 1e6       = 0.0044
#   s2/0 logs say 0.1 (the tokens would give 0.00108), score 0.9           = 0.1     (logs win)
#   s2/1 3000 in, 0 out, 100 reasoning, 0.5:       (6000 + 0 + 1000) / 1e6  = 0.007
#   s3/0 infra error, 100 in, 10 out: left out, (200 + 80) / 1e6            = 0.00028
RUN_A = [rec("a", "m-a", "s1", 1.0, usage(1000, 100, 200), tool_calls=[
             {"tool": "cat", "turn": 0, "output_chars": 900}, {"tool": "search", "turn": 1, "output_chars": 100}]),
         rec("a", "m-a", "s1", 0.0, usage(2000, 50), stop="max_tokens", status="truncated", tool_calls=[
             {"tool": "cat", "turn": 0, "output_chars": 3000}, {"tool": "cat", "turn": 0, "output_chars": 1000},
             {"tool": "search", "turn": 1, "output_chars": 500}]),
         rec("a", "m-a", "s2", 0.9, usage(500, 10), cost_usd=0.1),
         rec("a", "m-a", "s2", 0.5, usage(3000, 0, 100)),
         rec("a", "m-a", "s3", None, usage(100, 10), stop="tool_error", status="infra_error")]
# run b (an OpenAI-style fine-tuned name, priced as ft:m-b):
#   s1/0 1000 in, 1000 out, pass: (1000 + 4000) / 1e6 = 0.005; s1/1 the same, cut at the context: 0.005
#   s2/0 2000 in, 0 out, pass: 0.002; s2/1 output tokens unknown: NULL, never 0
RUN_B = [rec("b", "ft:m-b:acme:exp:x1", "s1", 1.0, usage(1000, 1000)),
         rec("b", "ft:m-b:acme:exp:x1", "s1", 0.0, usage(1000, 1000), stop="context_length_exceeded",
             status="truncated"),
         rec("b", "ft:m-b:acme:exp:x1", "s2", 1.0, usage(2000, 0)),
         rec("b", "ft:m-b:acme:exp:x1", "s2", 0.0, {"input_tokens": 2000})]
RUN_C = [rec("c", "mystery-model", "s1", 1.0, usage(10, 10)), rec("c", "mystery-model", "s2", 0.0, usage(10, 10))]
RUN_D = [rec("d", "other-mystery", "s1", 1.0, usage(10, 10), cost_usd=0.25)]


@pytest.fixture
def hand(con, load):
    load(RUN_A + RUN_B + RUN_C + RUN_D)
    return con


def quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", C.PriceWarning)
        return fn(*args, **kwargs)


def test_price_table_ships_with_a_date_and_sources_and_reads_with_tomllib():
    raw = tomllib.loads(C.PRICES_FILE.read_text())
    assert raw["as_of"] and raw["currency"] == "USD" and raw["unit"] == "per 1M tokens"
    text = C.PRICES_FILE.read_text()
    assert "platform.openai.com/docs/pricing" in text and "docs.claude.com" in text
    table = C.price_table()
    assert (table.origin == "package").all() and set(table.as_of) == {raw["as_of"]}
    assert (table[["input", "cached_input", "output", "reasoning"]] >= 0).all().all()
    gpt41 = table.set_index("model").loc["gpt-4.1"]
    assert (gpt41.input, gpt41.cached_input, gpt41.output, gpt41.reasoning) == (2.0, 0.5, 8.0, 8.0)
    assert table.set_index("model").loc["ft:gpt-4.1-2025-04-14"].output == 12.0


def test_price_names_resolve_by_rule_never_by_guess():
    table = C.price_table()
    assert C.price_key("gpt-4.1-2025-04-14", table) == "gpt-4.1"  # an alias
    assert C.price_key("openai/gpt-4o-mini", table) == "gpt-4o-mini"  # a provider prefix
    assert C.price_key("ft:gpt-4.1-2025-04-14:sierra:tau2-full-sft:BzrYdMNm", table) == "ft:gpt-4.1-2025-04-14"
    assert C.price_key("GPT-4.1", table) == "gpt-4.1"
    # close names are not the same model: no price
    for name in ("gpt-4.1-2099-01-01", "gpt-4", "azure/gpt-4o", "ft:gpt-5-mini:acme::x", "my-model", "", None):
        assert C.price_key(name, table) is None, name


def test_user_prices_from_a_dict_or_a_file_replace_the_package_ones(tmp_path):
    table = C.price_table({"gpt-4.1": {"input": 1.0, "output": 3.0}}).set_index("model")
    assert tuple(table.loc["gpt-4.1", ["input", "cached_input", "output", "reasoning", "origin"]]) == \
        (1.0, 1.0, 3.0, 3.0, "dict")
    path = tmp_path / "mine.toml"
    path.write_text('as_of = "2027-01-01"\n[models."gpt-4.1"]\ninput = 1.5\noutput = 6\n'
                    '[models."in-house"]\ninput = 0.1\noutput = 0.2\naliases = ["in-house-v2"]\n')
    table = C.price_table(path)
    assert C.price_key("in-house-v2", table) == "in-house"
    row = table.set_index("model").loc["gpt-4.1"]
    assert (row.input, row.as_of, row.origin) == (1.5, "2027-01-01", str(path))
    assert (table.model == "gpt-4.1").sum() == 1
    with pytest.raises(ValueError, match="'output' is required"):
        C.price_table({"x": {"input": 1.0}})
    for bad in (-1.0, float("nan"), float("inf"), 1e308):  # 1e308 would make every total inf
        with pytest.raises(ValueError, match="from 0 to 100,000"):
            C.price_table({"x": {"input": bad, "output": 1.0}})
    with pytest.raises(ValueError, match="'models' must be a table"):
        C.price_table({"models": [1, 2]})
    (tmp_path / "list.toml").write_text("models = [1, 2]\n")
    with pytest.raises(ValueError, match="'models' must be a table"):
        C.price_table(tmp_path / "list.toml")
    with pytest.raises(ValueError, match="not found: give a TOML file"):
        C.price_table(tmp_path / "missing.toml")
    with pytest.raises(ValueError, match="unknown field"):
        C.price_table({"x": {"input": 1.0, "output": 1.0, "ouput": 2.0}})


def test_a_price_of_400_digits_is_the_price_error(tmp_path):
    """#34: tomllib reads a 400-digit integer as an int that has no float: the documented error,
    naming the file and the field, not an OverflowError."""
    path = tmp_path / "huge.toml"
    path.write_text(f'[models."gpt-4.1"]\ninput = {"9" * 400}\noutput = 1\n')
    with pytest.raises(ValueError) as err:
        C.price_table(path)
    assert str(err.value) == (f"price of 'gpt-4.1' ({path}): input must be a number of dollars per 1M tokens from 0 "
                              f"to 100,000; got {'9' * 60}… (400 characters)")


def test_dollars_per_rollout_by_hand(hand):
    df = quiet(C.rollout_costs, hand, ["a", "b"], PRICES)
    a = df[df.run == "a"].sort_values(["sample_id", "attempt"])
    assert a.cost_usd.tolist() == pytest.approx([0.0048, 0.0044, 0.1, 0.007, 0.00028], abs=1e-15)
    assert a.cost_source.tolist() == ["prices", "prices", "logs", "prices", "prices"]
    assert a.priced_cost_usd.iloc[2] == pytest.approx(0.00108, abs=1e-15)  # computed, but the logs win
    b = df[df.run == "b"].sort_values(["sample_id", "attempt"])
    assert b.price_model.unique().tolist() == ["ft:m-b"]
    assert b.cost_usd.iloc[:3].tolist() == pytest.approx([0.005, 0.005, 0.002], abs=1e-15)
    assert math.isnan(b.cost_usd.iloc[3]) and pd.isna(b.cost_source.iloc[3])  # unknown output tokens: NULL, not 0


def test_cost_per_run_by_hand(hand):
    df = quiet(C.cost, hand, ["a", "b"], PRICES).set_index("run")
    a, b = df.loc["a"], df.loc["b"]
    assert (a.rollouts, a.rollouts_costed, a.cost_from_logs, a.cost_from_prices, a.cost_source) == \
        (4, 4, 1, 3, "logs+prices")
    assert a.cost_total == pytest.approx(0.1162, abs=1e-15)
    assert a.cost_per_rollout == pytest.approx(0.1162 / 4, abs=1e-15)
    assert a.cost_per_sample == pytest.approx((0.0092 + 0.107) / 2, abs=1e-15)
    assert (a.passes, a.cost_per_solved) == (1, pytest.approx(0.1162, abs=1e-15))  # 0.9 is not a pass
    assert a.cost_truncated == pytest.approx(0.0044, abs=1e-15) and a.truncated == 1
    assert (a.n_excluded, a.cost_excluded) == (1, pytest.approx(0.00028, abs=1e-15))
    assert (a.input_tokens, a.output_tokens, a.reasoning_tokens) == (6500, 160, 300)
    assert (b.cost_source, b.rollouts_costed, b.cost_coverage) == ("prices", 3, 0.75)
    assert b.cost_total == pytest.approx(0.012, abs=1e-15) and b.cost_per_rollout == pytest.approx(0.004, abs=1e-15)
    assert (b.passes_costed, b.cost_per_solved) == (2, pytest.approx(0.006, abs=1e-15))
    assert df.attrs["excludes"].startswith("platform training fees")
    with_errors = quiet(C.cost, hand, "a", PRICES, include_errors=True).iloc[0]
    assert with_errors.cost_total == pytest.approx(0.11648, abs=1e-15) and with_errors.n_excluded == 0


def test_an_unknown_model_gives_null_and_one_warning_naming_it(hand):
    with pytest.warns(C.PriceWarning) as caught:
        df = C.cost(hand, ["a", "c", "d"], PRICES).set_index("run")
    assert len(caught) == 1  # not one per rollout (c has two), none for d (its costs are in the logs)
    assert "'mystery-model'" in str(caught[0].message) and "other-mystery" not in str(caught[0].message)
    assert math.isnan(df.loc["c", "cost_total"]) and df.loc["c", "rollouts_costed"] == 0
    assert pd.isna(df.loc["c", "cost_source"])
    assert (df.loc["d", "cost_total"], df.loc["d", "cost_source"]) == (0.25, "logs")
    with warnings.catch_warnings():  # a price for it: no warning, a cost
        warnings.simplefilter("error", C.PriceWarning)
        priced = C.cost(hand, "c", {"mystery-model": {"input": 1.0, "output": 1.0}}).iloc[0]
    assert priced.cost_total == pytest.approx(40e-6, abs=1e-15)


def test_per_sample_frame_gives_the_ratios_compare_resamples(hand):
    ps = quiet(C.cost_per_sample_frame, hand, ["a", "b"], PRICES)
    a = ps[ps.run == "a"].set_index("sample_id")
    assert a.loc["s1", ["rollouts", "passes", "n_cost", "passes_costed", "truncated"]].tolist() == [2, 1, 2, 1, 1]
    assert a.loc["s2", "cost_usd"] == pytest.approx(0.107, abs=1e-15) and "s3" not in a.index  # infra error left out
    b = ps[ps.run == "b"]
    assert b.cost_usd.sum() / b.n_cost.sum() == pytest.approx(0.004, abs=1e-15)
    assert b.cost_usd.sum() / b.passes_costed.sum() == pytest.approx(0.006, abs=1e-15)


def test_tokens_by_run_tool_and_turn(hand):
    t = C.tokens(hand, ["a", "b"]).set_index("run")
    assert (t.loc["a", "rollouts"], t.loc["a", "input_tokens"], t.loc["a", "total_tokens"]) == (4, 6500, 6960)
    assert t.loc["a", "input_tokens_mean"] == 1625 and t.loc["b", "rollouts_with_tokens"] == 4
    assert t.loc["a", "tool_output_chars_mean"] == (1000 + 4500) / 4
    # tokens spent on the truncated rollout: 2050 of 6960
    assert t.loc["a", "truncated_token_share"] == pytest.approx(2050 / 6960)
    tools = C.tokens(hand, "a", by="tool").set_index("tool")
    assert tools.index.tolist() == ["cat", "search"] and (tools.unit == "characters").all()
    assert tools.loc["cat", ["calls", "rollouts_using", "output_chars", "output_chars_truncated"]].tolist() == \
        [3, 2, 4900, 4000]
    assert tools.loc["cat", "output_share"] == pytest.approx(4900 / 5500)
    assert tools.loc["search", "output_chars_per_rollout"] == 600 / 4
    turns = C.tokens(hand, "a", by="turn").set_index("turn")
    assert turns.loc[0, ["rollouts", "calls"]].tolist() == [2, 3] and turns.loc[0, "output_chars_mean"] == 2450
    assert turns.loc[1, "cumulative_output_chars_mean"] == (1000 + 4500) / 2
    with pytest.raises(ValueError, match="by must be"):
        C.tokens(hand, by="sample")


def test_truncated_share_exact_and_by_step(con, load):
    load([rec("s3", "m-a", f"q{i}", 0.0, usage(1, 1), stop=stop, status="truncated" if stop != "final_answer" else "ok",
              step=3, split="train")
          for i, stop in enumerate(["max_tokens", "model_length", "max_turns", "max_tool_calls", "timeout"]
                                   + ["final_answer"] * 15)]
         + [rec("s1", "m-a", f"q{i}", 1.0, usage(1, 1), step=1, split="train") for i in range(4)]
         + [rec("s1", "m-a", "q9", 0.0, None, status="truncated", stop=None, step=1, split="train")])
    by_run = C.truncation(con, ["s3", "s1"]).set_index("run")
    assert "step" not in by_run
    s3 = by_run.loc["s3"]
    assert (s3.rollouts, s3.truncated, s3.truncated_share) == (20, 5, 0.25)
    assert [s3[k] for k in ("length", "context", "turn_limit", "tool_budget", "time_limit", "unspecified")] == \
        [1, 1, 1, 1, 1, 0]
    s1 = by_run.loc["s1"]  # marked truncated without a reason: counted as unspecified
    assert (s1.truncated, s1.truncated_share, s1.unspecified) == (1, 0.2, 1)
    steps = C.truncation(con, ["s3", "s1"], by="step")
    assert steps.run.tolist() == ["s1", "s3"] and steps.step.tolist() == [1, 3] and steps.step_known.all()


def truncation_run(run, n_cut, n=100, tools=True):
    records = []
    for i in range(n):
        cut = i < n_cut
        r = rec(run, "m-a", f"q{i}", 0.0 if cut else 1.0, usage(10, 10),
                stop="context_length_exceeded" if cut else "final_answer", status="truncated" if cut else "ok")
        if tools and cut:
            r["tool_calls"] = [{"tool": "cat", "turn": 0, "output_chars": 900},
                               {"tool": "search", "turn": 1, "output_chars": 100}]
        records.append(r)
    return records


@pytest.mark.parametrize("n_cut, status", [(0, "pass"), (2, "pass"), (3, "warn"), (10, "warn"), (11, "fail")])
def test_truncation_check_fires_at_its_thresholds(con, load, n_cut, status):
    load(truncation_run("r", n_cut))
    row = C.truncation_check(con, "r")
    assert set(row) == {"check", "status", "value", "threshold", "advice", "details"} and row["check"] == "truncation"
    assert (row["status"], row["value"]) == (status, n_cut / 100)
    assert row["threshold"] == "warn above 2.0%, fail above 10.0%"
    if status != "pass":
        assert "Raise the limit or shorten tool outputs" in row["advice"] and "the context window" in row["advice"]
        assert "cat (90.0%)" in row["advice"] and "search" not in row["advice"]  # cat alone fills it
        assert row["details"].startswith(f"{n_cut} of 100 counted rollouts cut: context {n_cut}")
    assert C.truncation_check(con, "r", warn=0.001)["status"] == ("pass" if n_cut == 0 else
                                                                  "fail" if n_cut > 10 else "warn")


def test_truncation_check_skips_when_the_logs_give_no_stop_reason(con, load):
    load([rollout("x", f"q{i}", 1.0) for i in range(5)])
    row = C.truncation_check(con, "x")
    assert row["status"] == "skip" and math.isnan(row["value"]) and "no stop reason" in row["advice"]


def test_pareto_flags():
    assert C.pareto([1.0, 2.0, 3.0, 2.0], [0.5, 0.7, 0.6, 0.7]) == [True, True, False, True]  # ties both stay
    assert C.pareto([1.0, float("nan"), 0.5], [0.5, 0.9, 0.4]) == [True, None, True]


def test_frontier_by_hand(hand):
    df = quiet(C.frontier, hand, ["a", "b"], PRICES, n_boot=200).set_index("run")
    # a: samples' means 0.5 and 0.7 -> 0.6 at $0.02905; b: 0.5 and 0.5 -> 0.5 at $0.004: neither dominates
    assert df.loc["a", "score"] == pytest.approx(0.6) and df.loc["b", "score"] == pytest.approx(0.5)
    assert df.loc["a", "cost_per_rollout"] == pytest.approx(0.02905) and df.loc["b", "cost_per_solved"] == \
        pytest.approx(0.006)
    assert df.pareto.tolist() == [True, True] and df.pareto_per_solved.tolist() == [True, True]
    # b's samples have the same mean score: a resample cannot move it
    assert (df.loc["b", "score_ci_low"], df.loc["b", "score_ci_high"]) == (0.5, 0.5)
    assert df.loc["a", "score_ci_low"] == pytest.approx(0.5) and df.loc["a", "score_ci_high"] == pytest.approx(0.7)
    more = quiet(C.frontier, hand, ["a", "b", "c"], PRICES, n_boot=50).set_index("run")
    assert more.loc["c", "pareto"] is pd.NA and pd.isna(more.loc["c", "cost_source"])
    again = quiet(C.frontier, hand, ["a", "b"], PRICES, n_boot=200)
    assert again.equals(df.reset_index())  # seeded


def test_frontier_figures_meet_the_figure_standard(hand):
    df = quiet(C.frontier, hand, ["a", "b", "c"], PRICES, n_boot=50)
    for x in ("cost_per_rollout", "cost_per_solved"):
        static, interactive = cost_plots.static_frontier(df, x), cost_plots.interactive_frontier(df, x)
        assert lint.problems(static, ["a", "b", "c"]) == [] and lint.problems(interactive, ["a", "b", "c"]) == []
        title = interactive.layout.title.text
        assert "Pareto" in title and "no cost, not shown: c" in title and "training fees not included" in title
        stars = [t for t in interactive.data if t.marker and t.marker.symbol == "star"]
        assert sorted(t.name for t in stars) == ["a", "b"]
    with pytest.raises(ValueError, match="x must be"):
        cost_plots.static_frontier(df, "cost")


def test_job_cost_from_the_runs_own_cost_per_rollout(hand):
    df = quiet(C.job_cost, hand, "a", samples=10, compute_multiplier=4, steps=3, prices=PRICES, n_boot=200)
    per = (0.0048 + 0.0044 + 0.1 + 0.007 + 0.00028) / 5  # every rollout, the infra error too
    assert df.scope.tolist() == ["rollout", "step", "job"] and df.rollouts.tolist() == [1, 40, 120]
    assert df.cost_usd.tolist() == pytest.approx([per, 40 * per, 120 * per], abs=1e-14)
    assert (df.ci_low <= df.cost_usd).all() and (df.cost_usd <= df.ci_high).all()
    assert df.ci_high.iloc[2] == pytest.approx(120 * df.ci_high.iloc[0])
    assert df.p95.iloc[0] == pytest.approx(np.quantile([0.0048, 0.0044, 0.1, 0.007, 0.00028], 0.95))
    assert all("platform training fees" in e and "not included" in e for e in df.excludes)
    assert df.attrs["rollouts_per_step"] == 40 and df.attrs["cost_source"] == "logs+prices"
    one = quiet(C.job_cost, hand, "a", prices=PRICES, n_boot=10)
    assert one.rollouts.tolist() == [1, 3, 3]  # default: the run's samples, multiplier 1, one step
    with pytest.raises(ValueError, match="steps must be 1 or more"):
        quiet(C.job_cost, hand, "a", steps=0, prices=PRICES)


def test_job_usage_prices_the_model_graders_tokens_per_step(con):
    rl.ingest(con, FIXTURES / "openai-finetune", progress=False)
    df = C.job_usage(con).set_index(["step", "split"])
    train = df.loc[(10, "train")]
    # gpt-4o-2024-08-06 (a gpt-4o alias, $2.50 per 1M input) read 120,741 prompt tokens at step 10
    assert (train.grader_model, train.price_model, train.input_tokens) == ("gpt-4o-2024-08-06", "gpt-4o", 120741)
    assert train.grader_cost_usd == pytest.approx(120741 * 2.5 / 1e6, abs=1e-15) and train.grader_output_unknown
    assert df.loc[(10, "valid"), "grader_cost_usd"] == pytest.approx(4820 * 2.5 / 1e6, abs=1e-15)
    assert train.sampling_reasoning_tokens_mean == pytest.approx(3330.017964071856)
    assert math.isnan(df.loc[(9, "train"), "grader_cost_usd"])  # step 9 reports no grader tokens


def test_job_usage_of_an_unknown_grader_model_is_null_with_one_warning(con, tmp_path):
    event = {"object": "fine_tuning.job.event", "id": "e1", "type": "metrics",
             "data": {"step": 1, "model_graders_token_usage": {"judge-9000": {"train_prompt_tokens": 500,
                                                                              "train_completion_tokens": 20}}}}
    path = tmp_path / "ftjob-unknown1-events.jsonl"
    path.write_text(json.dumps(event) + "\n")
    rl.ingest(con, path, progress=False)
    with pytest.warns(C.PriceWarning) as caught:
        df = C.job_usage(con)
    assert len(caught) == 1 and "'judge-9000'" in str(caught[0].message)
    row = df.iloc[0]
    assert (row.input_tokens, row.output_tokens) == (500, 20) and math.isnan(row.grader_cost_usd)
    priced = C.job_usage(con, prices={"judge-9000": {"input": 2.0, "output": 10.0}}).iloc[0]
    assert priced.grader_cost_usd == pytest.approx((500 * 2 + 20 * 10) / 1e6, abs=1e-15)
    assert not priced.grader_output_unknown


# ---- the real tau2 logs ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tau2(tmp_path_factory, real_dir_module):
    files = sorted((real_dir_module / "tau2-sft").glob("*.json"))
    con = rl.connect(tmp_path_factory.mktemp("tau2") / "t.duckdb")
    rl.ingest(con, files, progress=False)
    yield con, files
    con.close()


@pytest.fixture(scope="module")
def real_dir_module():
    from rolloutlab import config

    path = config.real_data_dir()
    if not (path / "tau2-sft").is_dir():
        pytest.skip(f"real logs not found at {path}")
    return path


def test_tau2_costs_in_the_logs_win_and_unknown_zeros_are_priced(tau2):
    con, files = tau2
    with warnings.catch_warnings():
        warnings.simplefilter("error", C.PriceWarning)  # every model of these logs has a price
        df = C.cost(con).set_index("run")
    logged = {}  # run -> (sum of agent_cost, sum of (prompt x $3 + completion x $12) / 1e6), plain Python
    for path in files:
        raw = json.loads(path.read_text())
        for sim in raw["simulations"]:
            prompt = sum(m["usage"]["prompt_tokens"] for m in sim["messages"]
                         if m.get("role") == "assistant" and m.get("usage"))
            completion = sum(m["usage"]["completion_tokens"] for m in sim["messages"]
                             if m.get("role") == "assistant" and m.get("usage"))
            key = path.name.split("_")[0]
            cost, priced = logged.setdefault(key, {}).get(path.name, (0.0, 0.0))
            logged[key][path.name] = (cost + sim["agent_cost"], priced + (prompt * 3 + completion * 12) / 1e6)
    base = df[df.model == "gpt-4.1"]
    tuned = df[df.model.str.startswith("ft:")]
    assert len(base) == len(tuned) == 4
    assert set(base.cost_source) == {"logs"} and set(tuned.cost_source) == {"prices"}
    assert set(tuned.price_model) == {"ft:gpt-4.1-2025-04-14"} and (tuned.cost_coverage == 1).all()
    assert base.cost_total.sum() == pytest.approx(sum(c for c, _ in logged["gpt-4.1"].values()), rel=1e-12)
    ft = next(k for k in logged if k.startswith("ft:"))
    assert tuned.cost_total.sum() == pytest.approx(sum(p for _, p in logged[ft].values()), rel=1e-12)
    assert (tuned.cost_total > 0).all()  # agent_cost 0 meant unknown: priced, never $0


def test_tau2_logged_costs_lie_between_the_list_price_and_the_cached_price(tau2):
    """The price table against the costs the producer logged: gpt-4.1 at $2 (uncached) / $0.50
    (cached) input and $8 output brackets every logged cost (tau2 logs no cached-token counts, so a
    priced cost is an upper bound)."""
    con, _ = tau2
    r = C.rollout_costs(con, [x for x in rl.runs(con).run if x.startswith("gpt-4.1/")])
    assert len(r) == 140 and (r.cost_source == "logs").all()
    cached_floor = (r.input_tokens * 0.5 + r.output_tokens * 8) / 1e6
    assert (r.logged_cost_usd <= r.priced_cost_usd * (1 + 1e-9)).all()
    assert (r.logged_cost_usd >= cached_floor * (1 - 1e-9)).all()
    assert r.logged_cost_usd.sum() / r.priced_cost_usd.sum() < 0.6  # caching saved a lot: say so in the docs


def test_tau2_truncation_names_the_turn_limit(tau2):
    con, _ = tau2
    run = "ft:gpt-4.1-2025-04-14:sierra:tau2-full-sft:BzrYdMNm/telecom"
    t = C.truncation(con, run).iloc[0]
    # 5 simulations hit max_steps; the one that ended on too_many_errors is an error, not a limit
    assert (t.rollouts, t.truncated, t.turn_limit) == (40, 5, 5)
    row = C.truncation_check(con, run)
    assert (row["status"], row["value"]) == ("fail", 0.125) and "the turn limit" in row["advice"]
    assert "get_details_by_id" in row["advice"]


# ---- the demo ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The demo's native runs, as ``rolloutlab demo`` writes them (smaller for speed would change the
    shares; this is the demo's own call)."""
    folder = tmp_path_factory.mktemp("demo")
    paths, _ = synth.write_judged(folder / "native", samples=200, attempts=3, messages=False, hack_rate=0.02)
    records = [json.loads(line) for p in paths for line in p.read_text().splitlines()]
    con = rl.connect(folder / "d.duckdb")
    rl.ingest(con, paths, progress=False)
    yield con, records
    con.close()


def test_demo_costs_come_from_the_logs_for_the_base_and_the_table_for_the_tuned_model(demo):
    con, records = demo
    with warnings.catch_warnings():
        warnings.simplefilter("error", C.PriceWarning)
        r = C.rollout_costs(con, ["base", "step10"])
    base, tuned = r[r.run == "base"], r[r.run == "step10"]
    assert set(base.cost_source) == {"logs"} and set(tuned.cost_source) == {"prices"}
    assert set(base.price_model) == {"o4-mini"} and set(tuned.price_model) == {"ft:o4-mini-2025-04-16"}
    # the platform's logged cost for the base is the table's list price: the two agree
    assert np.allclose(base.logged_cost_usd, base.priced_cost_usd, rtol=1e-12, atol=0)
    by_id = {x["rollout_id"]: x for x in records}
    row = tuned.iloc[0]
    u = by_id[row.rollout_id]["usage"]
    assert row.cost_usd == pytest.approx((u["input_tokens"] * 4 + (u["output_tokens"] + u["reasoning_tokens"]) * 16)
                                         / 1e6, rel=1e-12)
    front = C.frontier(con, ["base", "step10"], n_boot=100).set_index("run")
    assert front.cost_per_rollout.notna().all() and front.pareto.notna().all()


def test_demo_truncation_warns_on_the_base_and_names_cat(demo):
    con, records = demo
    limits = {"max_steps", "context_length_exceeded", "max_output_tokens"}
    expected = {}
    for run in ("base", "step10"):
        counted = [x for x in records if x["run"] == run and x["status"] != "infra_error"]
        expected[run] = sum(x["stop_reason"] in limits for x in counted) / len(counted)
    t = C.truncation(con, ["base", "step10"]).set_index("run")
    assert t.truncated_share.to_dict() == pytest.approx(expected, abs=1e-15)
    assert t.loc["base", ["turn_limit", "context", "length"]].gt(0).all()
    base = C.truncation_check(con, "base")
    assert base["status"] == "warn" and "cat (" in base["advice"]
    assert C.truncation_check(con, "step10")["status"] == "pass"
