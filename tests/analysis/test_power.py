"""rl.power: the paired, clustered sample-size formula against simulated experiments."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit
from scipy.stats import norm

import rolloutlab as rl
from rolloutlab.analysis import stats
from rolloutlab.analysis.power_analysis import detectable_sentence, power

from conftest import rollout

Z = norm.ppf(0.975) + norm.ppf(0.8)


def records(run, scores):
    """scores: (samples, attempts) -> native records, sample ids p0000..."""
    return [rollout(run, f"p{i:04d}", float(s)) for i, row in enumerate(scores) for s in row]


def binary_checkpoints(rng, n, k, gamma=0.25, tau=0.6):
    """Base and candidate pass/fail on the same samples: per-sample logits eta ~ N(0, 1.2²); the
    candidate's are eta + gamma + tau·noise (it gains on average, more on some samples)."""
    eta = rng.normal(0, 1.2, n)
    pb, pc = expit(eta), expit(eta + gamma + tau * rng.normal(0, 1, n))
    return (rng.random((n, k)) < pb[:, None]).astype(float), (rng.random((n, k)) < pc[:, None]).astype(float)


def binary_effect(gamma=0.25, tau=0.6) -> float:
    rng = np.random.default_rng(99)
    eta = rng.normal(0, 1.2, 2_000_000)
    return float((expit(eta + gamma + tau * rng.normal(0, 1, eta.size)) - expit(eta)).mean())


def simulated_power(rng, n, k, experiments, draw) -> tuple[float, np.ndarray]:
    """Share of simulated experiments (n fresh samples x k attempts) whose two-sided z-test of the
    mean per-sample difference (clustered SE, Miller 2024) rejects at 0.05; and the differences."""
    d = np.empty((experiments, n))
    for e in range(experiments):
        b, c = draw(rng, n, k)
        d[e] = c.mean(1) - b.mean(1)
    zs = d.mean(1) / (d.std(1, ddof=1) / np.sqrt(n))
    return float((np.abs(zs) > norm.ppf(0.975)).mean()), d


def test_recommended_samples_reach_the_target_power_with_a_candidate(load, con):
    """Pilot runs of both checkpoints (800 samples x 4 attempts) -> the samples rl.power says
    detect the planted effect with 80% power. Experiments at that size, drawn afresh from the same
    checkpoints, reject in 80% ± 5 points of them: with the z-test the formula assumes, and with
    the sign-flip permutation test compare uses."""
    rng = np.random.default_rng(1)
    delta = binary_effect()
    b, c = binary_checkpoints(rng, 800, 4)
    load(records("base", b) + records("cand", c))
    df = power(con, "base", "cand", delta=delta, metric="pass@1")
    a = df.attrs
    assert a["correlation_source"] == "observed" and 0.7 < a["correlation"] < 1
    n = int(a["samples_needed"])
    assert 250 < n < 600  # the planted design needs ~400 (Var(d) 0.108 / delta² 0.0462²)
    share, d = simulated_power(rng, n, 4, 3000, binary_checkpoints)
    print(f"recommended {n} samples x 4 attempts; z-test power {share:.3f}")
    assert share == pytest.approx(0.8, abs=0.05)
    # compare's own test (the verdict's): the clustered t of the same differences
    zero, ones = np.zeros_like(d.T), np.ones_like(d.T)
    *_, p = stats.ratio_t_tests(zero, ones, d.T, ones)
    print(f"compare's test: power {(p <= 0.05).mean():.3f}")
    assert (p <= 0.05).mean() == pytest.approx(0.8, abs=0.05)
    # the current design: 800 samples; its MDE is the SE of the pilot's differences times ~(z_a + z_b)
    assert a["samples"] == 800 and a["attempts"] == 4
    assert a["se"] == pytest.approx(np.std(c.mean(1) - b.mean(1), ddof=1) / np.sqrt(800), rel=0.05)
    assert a["mde"] == pytest.approx(Z * a["se"], rel=0.003)  # the t quantiles at 799 degrees of freedom
    assert "tested alone" in a["decision"] and "pass@1" in a["decision"]
    assert "±" in detectable_sentence(df) and "correlation 0." in detectable_sentence(df)


def test_equal_cost_table_matches_simulated_standard_errors(load, con):
    """The trade-off at the pilot's cost (800 samples x 4 attempts = 3,200 rollouts per run):
    1 attempt on 3,200 samples, 2 on 1,600, 8 on 400. The table's SE of the mean difference is
    the spread of simulated experiments of that shape within 10%."""
    rng = np.random.default_rng(2)
    b, c = binary_checkpoints(rng, 800, 4)
    load(records("base", b) + records("cand", c))
    df = power(con, "base", "cand", metric="pass@1").set_index("attempts")
    assert df.samples.to_dict() == {1.0: 3200, 2.0: 1600, 4.0: 800, 8.0: 400}
    assert df.current.to_dict() == {1.0: False, 2.0: False, 4.0: True, 8.0: False}
    assert df.beyond_run_samples.to_dict() == {1.0: True, 2.0: True, 4.0: False, 8.0: False}
    assert df.loc[1.0, "design_effect"] == pytest.approx(1.0)
    for k in (1, 8):
        _, d = simulated_power(rng, int(df.loc[float(k), "samples"]), k, 600, binary_checkpoints)
        assert df.loc[float(k), "se"] == pytest.approx(d.mean(1).std(ddof=1), rel=0.1)
    # per-sample variance dominates here (samples differ far more than attempts): more samples
    # buy more than more attempts at the same cost
    assert df.loc[1.0, "mde"] < df.loc[4.0, "mde"] < df.loc[8.0, "mde"]


def continuous_checkpoints(delta, rho=0.5, sd_between=0.15, sd_within=0.25):
    def draw(rng, n, k):
        mb = rng.normal(0.5, sd_between, n)
        mc = 0.5 + delta + rho * (mb - 0.5) + np.sqrt(1 - rho ** 2) * sd_between * rng.normal(0, 1, n)
        return mb[:, None] + rng.normal(0, sd_within, (n, k)), mc[:, None] + rng.normal(0, sd_within, (n, k))
    return draw


def test_without_a_candidate_the_assumed_correlation_is_stated_and_used(load, con):
    """Only the base is run (600 samples x 3 attempts of partial-credit scores). A candidate that
    varies like it, with the assumed correlation 0.5 of per-sample means and a planted gain of
    0.03: experiments at the recommended size reject in 80% ± 5 points of them."""
    rng = np.random.default_rng(3)
    draw = continuous_checkpoints(0.03)
    b, _ = draw(rng, 600, 3)
    load(records("base", b))
    df = power(con, "base", delta=0.03)
    a = df.attrs
    assert (a["correlation"], a["correlation_source"]) == (0.5, "assumed")
    assert a["between_base"] == pytest.approx(0.15 ** 2, rel=0.15) and a["within_base"] == pytest.approx(0.25 ** 2, rel=0.1)
    n = int(a["samples_needed"])
    assert n == pytest.approx(Z ** 2 * (0.15 ** 2 + 2 * 0.25 ** 2 / 3) / 0.03 ** 2, rel=0.1)  # ~560
    share, _ = simulated_power(rng, n, 3, 3000, draw)
    print(f"no candidate: recommended {n} samples x 3 attempts; power {share:.3f}")
    assert share == pytest.approx(0.8, abs=0.05)
    assert "correlation 0.5, assumed" in detectable_sentence(df)
    # a stated correlation is used as given
    given = power(con, "base", delta=0.03, correlation=0.9).attrs
    assert given["correlation_source"] == "given" and given["samples_needed"] < a["samples_needed"]


def test_one_attempt_per_sample_plans_only_the_current_design(load, con):
    rng = np.random.default_rng(4)
    b, c = rng.random((300, 1)), rng.random((300, 1)) * 0.8 + 0.2
    load(records("base", b) + records("cand", c))
    df = power(con, "base", "cand", delta=0.1)
    now = df[df.current].iloc[0]
    d = c[:, 0] - b[:, 0]
    # with one attempt, Var(d_i) is the observed variance of the differences
    assert now.se == pytest.approx(np.std(d, ddof=1) / np.sqrt(300))
    assert now.mde == pytest.approx(Z * now.se, rel=0.005)  # t at 299 degrees of freedom, near z
    z_need = np.ceil(Z ** 2 * np.var(d, ddof=1) / 0.1 ** 2)
    assert z_need <= now.samples_needed <= z_need + 2
    assert df[~df.current].se.isna().all() and df.attrs["single_attempt"]


def test_what_if_design_and_errors(load, con):
    rng = np.random.default_rng(5)
    b, c = binary_checkpoints(rng, 200, 3)
    load(records("base", b) + records("cand", c))
    a = power(con, "base", "cand", samples=1000, attempts=2).attrs
    assert (a["samples"], a["attempts"], a["rollouts"]) == (1000, 2.0, 2000.0)
    var_d = (a["between_base"] + a["between_candidate"] - 2 * a["covariance"]
             + (a["within_base"] + a["within_candidate"]) / 2)
    assert a["se"] == pytest.approx(np.sqrt(var_d / 1000))
    with pytest.raises(ValueError, match="use one of score, pass@1"):
        power(con, "base", metric="latency")
    with pytest.raises(rl.UnknownRunError):
        power(con, "nope")


def test_no_variance_no_estimate_and_one_sentence(load, con):
    """Every score equal: no detectable difference, no power, no sample size (not "±0", "100%",
    "about 2 samples"); one sample: the same kind of sentence. The CLI, readiness and the report
    say exactly that sentence."""
    from rolloutlab.analysis.readiness import check
    from rolloutlab.views.report import power_sentence

    load(records("flat", np.full((40, 3), 0.7)) + records("flat2", np.full((40, 3), 0.7))
         + records("one", [[0.2, 0.9, 0.4]]))
    df = power(con, "flat", "flat2", delta=0.1)
    a = df.attrs
    assert a["no_estimate"].startswith("No estimate of the differences this comparison could detect: every counted "
                                       "rollout of flat and flat2 has the same score (0.7)")
    assert np.isnan(a["mde"]) and np.isnan(a["power_at_delta"]) and np.isnan(a["samples_needed"])
    assert df[["mde", "power", "samples_needed"]].isna().all().all()
    assert detectable_sentence(df) == a["no_estimate"]
    one = power(con, "one", delta=0.1).attrs
    assert one["no_estimate"] == ("No estimate of the differences this comparison could detect: 1 sample with a "
                                  "counted rollout, and a variance needs 2 or more.")
    alone = power(con, "flat").attrs["no_estimate"]
    row = check(con, "flat").set_index("check").loc["power"]
    assert row.status == "skip" and row.advice == alone
    assert power_sentence(con, "flat", "flat2") == a["no_estimate"]


def test_delta_outside_the_scale_is_refused(load, con):
    rng = np.random.default_rng(6)
    b, c = binary_checkpoints(rng, 50, 2)
    load(records("base", b) + records("cand", c) + records("wide", rng.uniform(-1, 1, (30, 2))))
    with pytest.raises(ValueError, match=r"delta=5 cannot be a difference in score: the scores of base and cand are "
                                         r"on a scale of \[0, 1\], so give a delta between −1 and \+1, not 0"):
        power(con, "base", "cand", delta=5)
    with pytest.raises(ValueError, match=r"pass@1 is a share \(0.05 = 5 points\)"):
        power(con, "base", delta=5, metric="pass@1")
    with pytest.raises(ValueError, match="not 0"):
        power(con, "base", delta=0.0)
    # rewards on -1..1: a difference up to 2
    assert power(con, "wide", delta=1.5).attrs["delta"] == 1.5
    with pytest.raises(ValueError, match=r"scale of \[-1, 1\], so give a delta between −2 and \+2"):
        power(con, "wide", delta=2.5)
