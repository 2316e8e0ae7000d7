"""Every readiness check on a fixture built to trigger it, and on one built not to."""
from __future__ import annotations

import json

import numpy as np
import pytest

import rolloutlab as rl
from rolloutlab.analysis import readiness
from conftest import rollout


def dataset(run="h", n=120, vary=0.3, easy=0.4, attempts=3, calls=3, output=100, split=None, model="m",
            binary=False):
    """n samples x attempts: a share ``vary`` varies (1, 0, 0.5 ...), ``easy`` always 1, the rest a
    constant 0.5 (0 when ``binary``). Answers are determined by the score, so the grader is consistent."""
    out = []
    low = 0.0 if binary else 0.5
    for i in range(n):
        sid = f"s{i:03d}"
        for j in range(attempts):
            if i < round(vary * n):
                score = [1.0, 0.0, low][j % 3]
            elif i < round((vary + easy) * n):
                score = 1.0
            else:
                score = low
            r = rollout(run, sid, score, ["search"] * calls, answer=f"ans-{score}", split=split, model=model,
                        prompt=f"question {sid}")
            for c in r["tool_calls"]:
                c["output_chars"] = output
            out.append(r)
    return out


def status(df, name):
    row = df.set_index("check").loc[name]
    return row.status


@pytest.fixture
def run_checks(load, con):
    def _run(records, run="h", **kw):
        load(records)
        return rl.check(con, run, **kw)
    return _run


def test_healthy_run_passes(run_checks):
    df = run_checks(dataset(vary=0.6, easy=0.2))  # most samples vary: neither easy nor hard ones dominate
    assert df.columns.tolist() == ["check", "status", "value", "threshold", "advice", "details"]
    got = dict(zip(df.check, df.status))
    assert got == {
        "baseline_nonzero": "pass", "attempts_per_sample": "pass", "signal_share": "pass", "saturation": "pass",
        "reward_granularity": "pass", "infra_errors": "pass", "ungraded": "pass", "rejected_records": "pass",
        "grader_consistency": "pass", "graders": "skip", "grader_vs_labels": "skip",
        "suspicious_scores": "pass", "tool_output_size": "pass", "truncation": "skip", "long_tail": "pass",
        "tool_budget": "skip",
        # 120 samples cannot tell a 5-point change in pass rate from noise (test_power_check)
        "dataset_size": "pass", "power": "warn", "split_leakage": "skip", "split_shift": "skip"}
    assert df.set_index("check").loc["signal_share", "value"] == pytest.approx(0.6)
    assert "attempts per sample give 30.0% of samples both a pass and a fail" in df.set_index("check").loc["signal_share", "advice"]
    assert df.set_index("check").loc["saturation", "value"] == pytest.approx(0.4)
    assert not readiness.failed(df)


def test_baseline_zero_fails_and_partial_only_warns(run_checks, load, con):
    df = run_checks([rollout("z", f"s{i}", 0.0) for i in range(20)], run="z")
    assert status(df, "baseline_nonzero") == "fail" and readiness.failed(df)
    load([rollout("p", f"s{i}", 0.5) for i in range(20)])
    assert status(rl.check(con, "p"), "baseline_nonzero") == "warn"


def test_attempts_and_signal_skip(run_checks):
    df = run_checks(dataset(attempts=1))
    assert status(df, "attempts_per_sample") == "warn"
    assert status(df, "signal_share") == "skip"


@pytest.mark.parametrize("vary, expected", [(0.02, "fail"), (0.10, "warn"), (0.20, "pass")])
def test_signal_share_levels(run_checks, vary, expected):
    df = run_checks(dataset(vary=vary, easy=0.3))
    assert status(df, "signal_share") == expected
    advice = df.set_index("check").loc["signal_share", "advice"]
    points = "`rolloutlab curate --run h`" in advice and "rl.curate(con, 'h')" in advice and "[0.2, 0.8]" in advice
    assert points == (expected != "pass")
    assert df.set_index("check").loc["signal_share", "value"] == pytest.approx(round(vary * 120) / 120)


def test_saturation(run_checks):
    df = run_checks(dataset(vary=0.1, easy=0.8))
    row = df.set_index("check").loc["saturation"]
    # 80% always pass and 10% never: together 90% teach nothing
    assert row.status == "warn" and row.value == pytest.approx(0.9)
    assert "mostly too easy" in row.advice and "always pass: 80.0%" in row.details
    # neither kind dominates alone, but together they do (the demo's base: 42.5% + 22%)
    both = run_checks(dataset(run="h2", vary=0.35, easy=0.4), run="h2").set_index("check").loc["saturation"]
    assert both.status == "warn" and both.value == pytest.approx(0.65) and "too easy (always solved) or too hard" in both.advice


def test_reward_granularity(run_checks):
    df = run_checks(dataset(binary=True))
    assert status(df, "reward_granularity") == "warn"


@pytest.mark.parametrize("bad_status, check_name", [("infra_error", "infra_errors"), ("ungraded", "ungraded")])
@pytest.mark.parametrize("n_bad, expected", [(0, "pass"), (8, "warn"), (40, "fail")])
def test_error_shares(run_checks, bad_status, check_name, n_bad, expected):
    records = dataset(n=120) + [rollout("h", f"s{i:03d}", None, ["search"], status=bad_status) for i in range(n_bad)]
    df = run_checks(records)
    row = df.set_index("check").loc[check_name]
    assert row.status == expected
    assert row.value == pytest.approx(n_bad / (360 + n_bad))


def test_grader_consistency(run_checks):
    records = dataset()
    records[-1]["score"] = 0.75  # same answer 'ans-0.5' to s119 as its other attempts, other score
    df = run_checks(records)
    row = df.set_index("check").loc["grader_consistency"]
    assert (row.status, row.value) == ("warn", 1)
    assert row.details == "s119: 'ans-0.5' scored 0.5, 0.75"


def test_suspicious_scores(run_checks):
    records = dataset()
    records.append(rollout("h", "s000", 1.0, ["search"] * 3, answer="  ", rollout_id="empty-answer"))
    records.append(rollout("h", "s001", 1.0, [], rollout_id="no-tools"))
    df = run_checks(records)
    row = df.set_index("check").loc["suspicious_scores"]
    assert (row.status, row.value) == ("warn", 2)
    assert row.details == "empty-answer (empty final answer), no-tools (no tool calls)"


def test_no_tools_is_fine_when_the_run_rarely_uses_tools(run_checks):
    records = dataset(calls=0)
    df = run_checks(records)
    assert status(df, "suspicious_scores") == "pass"
    assert status(df, "tool_output_size") == "skip"


def test_tool_output_size(run_checks):
    df = run_checks(dataset(output=30_000))
    row = df.set_index("check").loc["tool_output_size"]
    assert (row.status, row.value) == ("warn", 30_000)


def test_long_tail_and_tool_budget(run_checks, con):
    records = dataset()
    for r in records[:36]:  # 10% of rollouts with 16 calls
        r["tool_calls"] = [{"tool": "search"}] * 16
    df = run_checks(records, tool_budget=10)
    rows = df.set_index("check")
    assert (rows.loc["long_tail", "status"], rows.loc["long_tail", "value"]) == ("warn", pytest.approx(0.1))
    assert (rows.loc["tool_budget", "status"], rows.loc["tool_budget", "value"]) == ("warn", pytest.approx(0.1))
    assert status(rl.check(con, "h", tool_budget=20), "tool_budget") == "pass"


@pytest.mark.parametrize("n, expected", [(50, "warn"), (5, "fail"), (100, "pass")])
def test_dataset_size(run_checks, n, expected):
    assert status(run_checks(dataset(n=n)), "dataset_size") == expected


def test_split_leakage_and_shift(load, con):
    load(dataset("valid-run", split="valid") + dataset("train-run", n=40, split="train", vary=0, easy=0))
    df = rl.check(con, "valid-run")
    leak = df.set_index("check").loc["split_leakage"]
    assert leak.status == "fail"
    assert leak.value == 40 + 40  # 40 shared ids and their 40 shared prompts
    assert leak.details.startswith("sample ids: s000, s001, s002, s003, s004")
    shift = df.set_index("check").loc["split_shift"]
    assert shift.status == "warn" and "train-run: score" in shift.details


def test_no_leakage_between_disjoint_splits(load, con):
    train = dataset("train-run", n=40, split="train")
    for r in train:
        r["sample_id"] = "t" + r["sample_id"]
        r["prompt"] = "train " + r["prompt"]
    load(dataset("valid-run", split="valid") + train)
    df = rl.check(con, "valid-run")
    assert status(df, "split_leakage") == "pass"
    assert status(df, "split_shift") == "pass"


def truncated_run(n_cut, n=100, run="t"):
    """n counted rollouts (50 samples x 2), the first ``n_cut`` cut at the context window after a
    5,000-character ``cat`` output, the others answered after one 100-character ``search``; plus one
    infra error (not counted)."""
    out = []
    for i in range(n):
        cut = i < n_cut
        tools = ["cat", "search"] if cut else ["search"]
        r = rollout(run, f"s{i // 2:02d}", 0.0 if cut else 1.0, tools, status="truncated" if cut else "ok",
                    stop_reason="context_length_exceeded" if cut else "final_answer", answer=None if cut else "42")
        if cut:
            r["tool_calls"][0]["output_chars"], r["tool_calls"][1]["output_chars"] = 5000, 200
        out.append(r)
    out.append(rollout(run, "s00", 0.0, status="infra_error", stop_reason="error"))
    return out


@pytest.mark.parametrize("n_cut, expected", [(0, "pass"), (2, "pass"), (3, "warn"), (10, "warn"), (11, "fail")])
def test_truncation_check(run_checks, n_cut, expected):
    df = run_checks(truncated_run(n_cut), run="t")
    row = df.set_index("check").loc["truncation"]
    assert (row.status, row.value) == (expected, pytest.approx(n_cut / 100))  # the infra error is not counted
    assert row.threshold == "warn above 2.0%, fail above 10.0%"
    if expected != "pass":
        # cat wrote 5,000 of every 5,200 characters of tool output in the cut rollouts
        assert "Raise the limit or shorten tool outputs" in row.advice and "cat (96.2%)" in row.advice
        assert "search" not in row.advice and "mostly at the context window" in row.advice
        assert row.details.startswith(f"{n_cut} of 100 counted rollouts cut: context {n_cut}")


def test_truncation_thresholds_are_listed_and_overridable(run_checks, con):
    known = readiness.all_thresholds()
    assert (known["truncation_warn"], known["truncation_fail"]) == (0.02, 0.10)
    df = run_checks(truncated_run(3), run="t", truncation_warn=0.05)
    assert status(df, "truncation") == "pass"
    assert status(rl.check(con, "t", truncation_fail=0.025), "truncation") == "fail"


def test_threshold_overrides(run_checks):
    df = run_checks(dataset(), signal_warn=0.5, signal_fail=0.01)
    assert status(df, "signal_share") == "warn"
    with pytest.raises(ValueError, match="unknown threshold"):
        rl.check(None, "h", no_such_threshold=1)


def test_values_serialize_to_json(run_checks):
    df = run_checks(dataset())
    rows = json.loads(df.to_json(orient="records"))
    assert rows[0]["check"] == "baseline_nonzero" and rows[0]["status"] == "pass"


def test_failed_graders_fail_the_infra_check(con, tmp_path):
    """The issue's case: 10% of rollouts had a grader that never answered. They load (never
    rejected), count as infra errors, and the check fails instead of passing on the rest."""
    records = dataset(n=100, attempts=1)
    for r in records[:10]:  # no status given: the failed grade makes it an infra_error
        r.pop("score"), r.pop("status")
        r["grades"] = [{"grader": "answer", "score": None, "error": "grader timed out"}]
    for r in records[10:20]:  # an explicit status is kept
        r["status"], r["grades"] = "infra_error", [{"grader": "answer", "score": None}]
        r.pop("score")
    path = tmp_path / "graded.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert rl.ingest(con, path).loc[0, ["loaded", "rejected"]].tolist() == [100, 0]
    row = rl.check(con, "h").set_index("check").loc["infra_errors"]
    assert (row.status, row.value) == ("fail", pytest.approx(0.20))
    assert status(rl.check(con, "h"), "rejected_records") == "pass"


@pytest.mark.parametrize("bad, expected", [(0, "pass"), (1, "warn"), (6, "fail")])
def test_rejected_records(con, tmp_path, bad, expected):
    good = [json.dumps(r) for r in dataset(n=94, attempts=1)]
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(good + ['{"run": "h", "sample_id": "x", "score": "high"}'] * bad) + "\n")
    rl.ingest(con, path)
    row = rl.check(con, "h").set_index("check").loc["rejected_records"]
    assert row.status == expected
    assert row.value == pytest.approx(bad / (94 + bad))
    if bad:
        assert "rolloutlab rejects --run h" in row.advice and "mixed.jsonl" in row.details
        assert len(rl.rejects(con, run="h")) == bad and len(rl.rejects(con, run="h", limit=1)) == 1


def grades(answer, judge):
    return [{"grader": "answer", "score": answer, "weight": 0.5}, {"grader": "judge", "score": judge, "weight": 0.5}]


def test_graders_check(run_checks, load, con):
    # 12 rollouts: the judge always gives 1; answer and judge disagree on pass/fail on 8 of 12 (> 50%)
    records = [rollout("g", f"s{i}", None, ["search"], grades=grades(1.0 if i < 4 else 0.0, 1.0)) for i in range(12)]
    row = run_checks(records, run="g").set_index("check").loc["graders"]
    assert row.status == "warn" and row.value == 2
    assert "judge always gave 1" in row.details and "answer and judge disagree on 66.7% of 12 rollouts" in row.details
    # the same graders agreeing and varying pass
    agree = [rollout("a", f"s{i}", None, ["search"], grades=grades(float(i % 2), float(i % 2))) for i in range(12)]
    load(agree)
    row = rl.check(con, "a").set_index("check").loc["graders"]
    assert row.status == "pass" and "2 grader(s) vary" in row.advice
    # disagreeing on 3 of 12 (25%, over the 20% line): a warning, never "they agree"
    some = [rollout("d", f"s{i}", None, ["search"], grades=grades(float(i % 2), float(i % 2 if i >= 3 else 1 - i % 2)))
            for i in range(12)]
    load(some)
    row = rl.check(con, "d").set_index("check").loc["graders"]
    assert row.status == "warn" and "answer and judge disagree on 25.0% of 12 rollouts" in row.details
    assert "agree with each other" not in row.advice


def _t_power(delta, var_d, n):
    from scipy.stats import nct, t

    crit, shift = t.ppf(0.975, n - 1), delta / np.sqrt(var_d / n)
    return nct.sf(crit, n - 1, shift) + np.nan_to_num(nct.cdf(-crit, n - 1, shift))


def test_power_check(run_checks, con):
    """The MDE of a paired comparison against a future checkpoint, for compare's primary metric
    (the score) tested alone: one-way ANOVA of the dataset's scores, the assumed correlation 0.5,
    the t-test's power (scipy's noncentral t here). The target is the check's default and says so."""
    from scipy.optimize import brentq

    df = run_checks(dataset(n=120, attempts=3))
    scores = np.array([[1, 0, 0.5]] * 36 + [[1, 1, 1]] * 48 + [[0.5, 0.5, 0.5]] * 36, dtype=float)
    within = scores.var(axis=1, ddof=1).mean()
    between = scores.mean(1).var(ddof=1) - within / 3
    var_d = 2 * between * (1 - 0.5) + 2 * within / 3
    mde = brentq(lambda d: _t_power(d, var_d, 120) - 0.8, 1e-6, 1)
    row = df.set_index("check").loc["power"]
    assert row.status == "warn" and row.value == pytest.approx(mde, rel=1e-6)
    need = next(n for n in range(2, 10_000) if _t_power(0.05, var_d, n) >= 0.8)
    assert f"needs about {need:,} samples × 3 attempts" in row.advice
    assert "the check's target, power_delta = 0.05, a default: pass power_delta= for the change you need" in row.advice
    assert "you hope" not in row.advice
    assert "assumed correlation 0.5" in row.details and "score tested alone" in row.details
    easy = rl.check(con, "h", power_delta=0.25).set_index("check").loc["power"]
    assert easy.status == "pass" and easy.advice.endswith("Enough for 0.25 (the check's target, power_delta = "
                                                          "0.25: pass power_delta= for the change you need).")
    rate = rl.check(con, "h", power_metric="pass@1", power_delta=0.25).set_index("check").loc["power"]
    assert "in pass rate" in rate.advice and "25 points" in rate.advice


def test_power_check_without_variance_says_why(load, con):
    load(dataset(run="flat", n=30, vary=0.0, easy=1.0))
    row = rl.check(con, "flat").set_index("check").loc["power"]
    assert row.status == "skip" and row.advice == rl.power(con, "flat").attrs["no_estimate"]
    assert "every counted rollout of flat has the same score (1)" in row.advice


def _labelled_run(load, con, tmp_path, bias, n=150, grader_bias=0.0, seed=0):
    """200 samples x 3 attempts with a known truth; the reward passes every true pass and a share
    ``bias`` of the true fails; the 'judge' grader the same with ``grader_bias``; n random rollouts
    labelled with the truth."""
    import numpy as np

    rng = np.random.default_rng(seed)
    p = rng.beta(2, 2, 200)
    truth = {}
    records = []
    for i in range(200):
        for j in range(3):
            t = bool(rng.random() < p[i])
            reward = t or bool(rng.random() < bias)
            judge = t or bool(rng.random() < grader_bias)
            rid = f"g-{i}-{j}"
            truth[rid] = t
            records.append(rollout("g", f"s{i:03d}", float(reward), rollout_id=rid,
                                   grades=[{"grader": "judge", "score": float(judge)}]))
            records[-1]["score"] = float(reward)
    load(records)
    from rolloutlab.analysis import labelling as labels

    picked = labels.labelling_sample(con, "g", n=n, seed=seed).rollout_id
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps({"rollout_id": rid, "value": truth[rid], "who": "oracle"}) + "\n"
                            for rid in picked))
    assert labels.import_labels(con, path).loaded[0] == n


def test_grader_vs_labels_skips_without_enough_labels(load, con):
    load(dataset(run="g"))
    assert status(rl.check(con, "g"), "grader_vs_labels") == "skip"
    from rolloutlab.analysis import labelling as labels

    for rid in labels.labelling_sample(con, "g", n=10).rollout_id:
        labels.label(con, rid, "pass")
    row = rl.check(con, "g").set_index("check").loc["grader_vs_labels"]
    assert (row.status, row.value) == ("skip", 10) and "label at least 20" in row.advice


def test_grader_vs_labels_fails_a_biased_reward(load, con, tmp_path):
    _labelled_run(load, con, tmp_path, bias=0.3)
    row = rl.check(con, "g").set_index("check").loc["grader_vs_labels"]
    assert row.status == "fail" and "The reward disagrees with people: (score)" in row.advice
    assert "labels say" in row.advice and "(score): κ" in row.details


@pytest.mark.parametrize("grader_bias, expected", [(0.0, "pass"), (0.3, "warn")])
def test_grader_vs_labels_passes_an_honest_reward_and_warns_on_a_biased_grader(load, con, tmp_path, grader_bias,
                                                                              expected):
    _labelled_run(load, con, tmp_path, bias=0.0, grader_bias=grader_bias)
    row = rl.check(con, "g").set_index("check").loc["grader_vs_labels"]
    assert row.status == expected and row.value == 1.0  # the reward agrees perfectly: kappa 1
    if expected == "warn":
        assert "judge (" in row.advice and "(score)" not in row.advice
    else:
        assert row.advice == "The reward and 1 grader(s) agree with 150 labelled rollouts."
    row = rl.check(con, "g", labels_min=500).set_index("check").loc["grader_vs_labels"]
    assert row.status == "skip"


def test_checks_read_rewards_in_minus_one_to_one(load, con):
    """Issue 36: a baseline that scores -1 everywhere (the bottom of [-1, 1]) earns nothing; one
    whose rewards are -1 or 1 has no partial credit."""
    meta = {"run_meta": {"reward_range": [-1, 1]}}
    load([rollout("never", f"s{i}", -1.0, **meta) for i in range(3) for _ in range(3)]
         + [rollout("binary", f"s{i}", 1.0 if j == i % 3 else -1.0, **meta) for i in range(3) for j in range(3)])
    never = rl.check(con, "never").set_index("check")
    assert never.loc["baseline_nonzero", "status"] == "fail"
    assert never.loc["baseline_nonzero", "threshold"] == "fail when every rollout scores the run's lowest reward (-1)"
    binary = rl.check(con, "binary").set_index("check")
    assert binary.loc["baseline_nonzero", "status"] == "pass"
    assert binary.loc["reward_granularity", "status"] == "warn"
    assert binary.loc["reward_granularity", "advice"].startswith("Scores are only -1/1")
