"""Resampling helpers against numpy on expanded data."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from rolloutlab.analysis import stats


@pytest.mark.parametrize("q", [0.0, 0.1, 0.5, 0.95, 0.99, 1.0])
def test_weighted_quantile_equals_quantile_of_repeated_values(q):
    values = np.array([1.0, 2.0, 4.0, 8.0, 16.0])
    weights = np.array([3, 0, 2, 1, 4])
    expanded = np.repeat(values, weights)
    got = stats.weighted_quantile_sorted(values, np.cumsum(weights), q)
    assert got == pytest.approx(np.quantile(expanded, q))


def test_cluster_bootstrap_is_seeded_and_brackets_the_estimate():
    rng = np.random.default_rng(1)
    values = rng.lognormal(0, 1, 600)
    clusters = np.repeat(np.arange(200), 3)
    a = stats.cluster_bootstrap_quantiles(values, clusters, [0.5, 0.95], n_boot=300, seed=5)
    b = stats.cluster_bootstrap_quantiles(values, clusters, [0.5, 0.95], n_boot=300, seed=5)
    assert np.array_equal(a, b)
    for (lo, hi), q in zip(a, [0.5, 0.95]):
        assert lo < np.quantile(values, q) < hi
    assert a[1, 1] - a[1, 0] > a[0, 1] - a[0, 0]  # the tail is less certain than the median


def test_clustered_ci_is_wider_when_attempts_are_copies():
    # 50 samples x 4 identical attempts: only 50 independent values, not 200
    base = np.random.default_rng(2).normal(10, 3, 50)
    values = np.repeat(base, 4)
    by_sample = stats.cluster_bootstrap_quantiles(values, np.repeat(np.arange(50), 4), [0.5], n_boot=400)
    naive = stats.cluster_bootstrap_quantiles(values, np.arange(200), [0.5], n_boot=400)
    assert (by_sample[0, 1] - by_sample[0, 0]) > (naive[0, 1] - naive[0, 0])


def test_degenerate_inputs():
    assert np.isnan(stats.cluster_bootstrap_quantiles(np.array([]), np.array([]), [0.5])).all()
    one = stats.cluster_bootstrap_quantiles(np.array([3.0, np.nan]), np.array(["a", "b"]), [0.5], n_boot=10)
    assert one.tolist() == [[3.0, 3.0]]


def test_resample_counts_rows_are_draws_of_n():
    chunks = list(stats.resample_counts(7, 450, seed=3, chunk=200))
    assert [c.shape for c in chunks] == [(200, 7), (200, 7), (50, 7)]
    assert all((c.sum(axis=1) == 7).all() for c in chunks)


def test_band_quantile_equals_the_full_computation():
    rng = np.random.default_rng(4)
    n_samples = 300
    codes = rng.integers(0, n_samples, 2000)
    values = rng.lognormal(1, 0.8, 2000)
    order = np.argsort(values)
    sv, sc = values[order], codes[order]
    weights = next(stats.resample_counts(n_samples, 64, seed=9))
    for q in (0.5, 0.95, 0.99):
        def full(w):
            return stats.weighted_quantile_sorted(sv, np.cumsum(w[sc]), q)
        got = stats.Band(sv, sc, n_samples, q).quantiles(weights)
        want = np.array([full(w) for w in weights])
        assert np.allclose(got, want)


def test_ratio_bootstrap_and_sign_flip_paths():
    rng = np.random.default_rng(6)
    nb = rng.random(200)
    nc = nb + 0.05 + rng.normal(0, 0.2, 200)
    ones = np.ones(200)
    [[lo, hi]], _ = stats.paired_bootstrap(nb, ones, nc, ones, n_boot=1000, seed=1)
    d = nc - nb
    se = d.std(ddof=1) / np.sqrt(200)
    assert lo == pytest.approx(d.mean() - 1.96 * se, abs=0.01) and hi == pytest.approx(d.mean() + 1.96 * se, abs=0.01)
    # Monte Carlo p (2^200 patterns): the sign-flip sum has variance sum(d^2) under the null
    from scipy.stats import norm

    [p], [lo], [hi] = stats.signflip_tests(d, n_perm=4000, seed=2)
    assert p == pytest.approx(2 * norm.sf(abs(d.sum()) / np.sqrt((d ** 2).sum())), abs=0.003)
    # its interval is the t interval's, up to the Monte Carlo error of the patterns
    assert lo == pytest.approx(d.mean() - 1.97 * se, abs=0.003) and hi == pytest.approx(d.mean() + 1.97 * se, abs=0.003)


def _exact_signflip_p(d, delta):
    """The exact two-sided sign-flip p-value of mean(d) = delta, by enumerating every pattern."""
    x = np.asarray(d, dtype=float) - delta
    observed = abs(x.sum())
    flips = [abs(np.dot(signs, x)) for signs in itertools.product((1, -1), repeat=len(x))]
    return sum(f >= observed - 1e-9 for f in flips) / len(flips)


def test_sign_flip_interval_inverts_the_exact_test():
    """Small cases against brute-force enumeration: p(0) is the exact sign-flip p-value, and the
    interval's edges are where the exact test of mean(d) = delta starts to reject."""
    d = np.array([1.0, 0.0, -0.5, 1.0, 0.75, 0.5])
    [p], [lo], [hi] = stats.signflip_tests(d, n_perm=2000, ci=0.95)
    # |d| = 1, 1, 0.75, 0.5, 0.5 (and a 0): as extreme as the observed 2.75 when at most 0.5 of them (or
    # at least 3.25) change sign: 3 + 3 subsets, x2 for the 0
    assert p == pytest.approx(_exact_signflip_p(d, 0.0)) == pytest.approx(12 / 64)
    for edge, inward in ((lo, 1), (hi, -1)):
        assert _exact_signflip_p(d, edge + inward * 1e-6) > 0.05 >= _exact_signflip_p(d, edge - inward * 1e-6)
    assert lo < 0 < hi  # p = 0.19: not significant, and the interval says the same
    # 5 samples: the smallest attainable p is 2/32 > 0.05, so no difference can be rejected
    [p5], [lo5], [hi5] = stats.signflip_tests(d[:5], n_perm=2000)
    assert p5 == pytest.approx(8 / 32) and (lo5, hi5) == (-np.inf, np.inf)
    # columns with absent samples, and every sample moving by the same amount
    cols = np.column_stack([d, np.full(6, 0.25)])
    present = np.column_stack([[True, True, True, True, True, False], np.ones(6, dtype=bool)])
    p2, lo2, hi2 = stats.signflip_tests(cols, present, n_perm=2000)
    assert p2[0] == pytest.approx(_exact_signflip_p(d[:5], 0.0))
    assert p2[1] == pytest.approx(2 / 64) and lo2[1] == pytest.approx(0.25) and hi2[1] == pytest.approx(0.25)


def test_ratio_t_tests_by_hand_and_against_scipy():
    from scipy import stats as sps

    # calls per rollout, 3 samples: base 17 calls / 6 rollouts, candidate 1 per rollout everywhere
    nb, db = np.array([6.0, 2, 9]), np.array([2.0, 1, 3])
    nc, dc = db.copy(), db.copy()
    diff, se, lo, hi, p = stats.ratio_t_tests(nb, db, nc, dc)
    # psi_i = -(nb_i - 17/6 db_i) / 2 = -1/6, 5/12, -1/4; se = sqrt(sum psi^2 / (3 * 2))
    assert diff[0] == pytest.approx(1 - 17 / 6)
    assert se[0] == pytest.approx(np.sqrt((1 / 36 + 25 / 144 + 1 / 16) / 6))
    t = diff[0] / se[0]
    assert p[0] == pytest.approx(2 * sps.t.sf(abs(t), 2))
    assert (lo[0], hi[0]) == pytest.approx((diff[0] - sps.t.ppf(0.975, 2) * se[0], diff[0] + sps.t.ppf(0.975, 2) * se[0]))
    # per-sample means (denominators 1): the one-sample t-test of the differences
    rng = np.random.default_rng(1)
    b, c = rng.random(25), rng.random(25) + 0.1
    diff, se, lo, hi, p = stats.ratio_t_tests(b, np.ones(25), c, np.ones(25))
    ref = sps.ttest_1samp(c - b, 0.0)
    ci = ref.confidence_interval(0.95)
    assert p[0] == pytest.approx(ref.pvalue) and (lo[0], hi[0]) == pytest.approx((ci.low, ci.high))
    # nothing moved: p = 1; every sample moved alike: the exact sign-flip floor 2^(1-n), and its
    # interval: unbounded while that floor is above 0.05 (3 samples), the one number from 6 samples on
    _, _, _, _, p_same = stats.ratio_t_tests(nb, db, nb, db)
    _, _, lo3, hi3, p3 = stats.ratio_t_tests(np.array([6.0, 3, 9]), db, nc, dc)
    assert p_same[0] == 1.0 and p3[0] == pytest.approx(0.25) and (lo3[0], hi3[0]) == (-np.inf, np.inf)
    _, _, lo6, hi6, p6 = stats.ratio_t_tests(np.tile([6.0, 3, 9], 2), np.tile(db, 2), np.tile(nc, 2), np.tile(dc, 2))
    assert p6[0] == pytest.approx(1 / 32) and lo6[0] == hi6[0] == pytest.approx(-2.0)


def test_paired_quantile_bootstrap_matches_a_direct_resampling():
    rng = np.random.default_rng(8)
    n_samples = 80
    codes_b, codes_c = np.repeat(np.arange(n_samples), 3), np.repeat(np.arange(n_samples), 2)
    vb, vc = rng.lognormal(2, 0.5, len(codes_b)), rng.lognormal(1.5, 0.5, len(codes_c))
    b, c = stats.SortedValues(vb, codes_b, n_samples), stats.SortedValues(vc, codes_c, n_samples)
    _, [[lo, hi]] = stats.paired_bootstrap(np.zeros(n_samples), np.ones(n_samples), np.zeros(n_samples),
                                           np.ones(n_samples), [(b, c, 0.9)], n_boot=300, seed=4)
    # the same draws, done the slow way: expand every resample and take numpy's quantile
    reps = []
    for w in stats.resample_counts(n_samples, 300, seed=4):
        for row in w.astype(int):
            reps.append(np.quantile(np.repeat(vc, row[codes_c]), 0.9) - np.quantile(np.repeat(vb, row[codes_b]), 0.9))
    assert (lo, hi) == pytest.approx(tuple(np.quantile(reps, [0.025, 0.975])))


def test_shared_resamples_give_each_scope_what_its_own_bootstrap_gives():
    rng = np.random.default_rng(11)
    clusters = np.repeat(np.arange(60), 5)
    a = np.sort(rng.lognormal(size=300))
    b_idx = np.sort(rng.choice(300, size=120, replace=False))
    b_values, b_codes = rng.lognormal(size=120), clusters[b_idx]
    order = np.argsort(b_values, kind="stable")
    a_codes = clusters[np.argsort(rng.random(300))]  # any clustering of the sorted values
    shared = stats.cluster_bootstrap_quantiles_shared(
        {"a": (a, a_codes, 300), "b": (b_values[order], b_codes[order], 120)}, 60, [0.5, 0.9], seed=4)
    # scope a draws the first 300 resamples of the stream, b its first 120: as alone, with the same seed
    assert np.allclose(shared["a"], stats.cluster_bootstrap_quantiles(a, a_codes, [0.5, 0.9], n_boot=300, seed=4))
    weights = np.vstack(list(stats.resample_counts(60, 120, seed=4)))
    sv = stats.SortedValues(b_values, b_codes, 60)
    reps = np.column_stack([sv.quantiles(q, weights) for q in (0.5, 0.9)])
    want = np.array([stats.percentile_interval(reps[:, i], 0.95) for i in range(2)])
    assert np.allclose(shared["b"], want)
    assert np.isnan(stats.cluster_bootstrap_quantiles_shared({"c": (np.array([]), np.array([]), 10)}, 60, [0.5])["c"]).all()


# --- multiplicity ----------------------------------------------------------------------------

def holm_by_definition(p):
    """Holm 1979 step-down, written from its definition: the i-th smallest p (1-based) gets
    max over j <= i of (m - j + 1) p_(j), capped at 1."""
    idx = [i for i, x in enumerate(p) if not np.isnan(x)]
    m = len(idx)
    ranked = sorted(idx, key=lambda i: p[i])
    out = [np.nan] * len(p)
    for pos, i in enumerate(ranked):
        out[i] = min(1.0, max((m - j) * p[ranked[j]] for j in range(pos + 1)))
    return out


def bh_by_definition(p):
    """Benjamini-Hochberg: q_(i) = min over j >= i of m p_(j) / j, capped at 1."""
    idx = [i for i, x in enumerate(p) if not np.isnan(x)]
    m = len(idx)
    ranked = sorted(idx, key=lambda i: p[i])
    out = [np.nan] * len(p)
    for pos, i in enumerate(ranked):
        out[i] = min(1.0, min(m * p[ranked[j]] / (j + 1) for j in range(pos, m)))
    return out


@pytest.mark.parametrize("seed", range(5))
def test_holm_and_bh_match_their_definitions(seed):
    rng = np.random.default_rng(seed)
    p = rng.uniform(0, 0.2, 15) ** 2
    p[[2, 9]] = np.nan  # rows without a test are not in the family
    p[4] = p[5]  # a tie
    assert np.allclose(stats.holm(p), holm_by_definition(p), equal_nan=True)
    assert np.allclose(stats.bh(p), bh_by_definition(p), equal_nan=True)
    assert np.isnan(stats.holm(p)[[2, 9]]).all()
    assert (stats.bh(p)[~np.isnan(p)] <= stats.holm(p)[~np.isnan(p)] + 1e-15).all()  # BH is never stricter


def test_holm_and_bh_known_values():
    p = np.array([0.01, 0.04, 0.03, 0.005])
    # sorted 0.005, 0.01, 0.03, 0.04 -> Holm 4*0.005, 3*0.01, 2*0.03, 1*0.04 -> running max 0.02, 0.03, 0.06, 0.06
    assert stats.holm(p).tolist() == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # BH: 4*0.005/1, 4*0.01/2, 4*0.03/3, 4*0.04/4 = 0.02, 0.02, 0.04, 0.04
    assert stats.bh(p).tolist() == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert np.isnan(stats.holm([np.nan])).all() and stats.bh([]).size == 0


def test_bootstrap_p_counts_replicates_beyond_zero():
    reps = np.column_stack([np.r_[-np.ones(10), np.ones(89)],  # 10 of 99 at or below 0
                            np.ones(99), np.full(99, np.nan)])
    p = stats.bootstrap_p(reps)
    assert p[0] == pytest.approx(2 * 11 / 100) and p[1] == pytest.approx(2 / 100) and np.isnan(p[2])


# --- power -----------------------------------------------------------------------------------

def test_variance_components_recover_planted_values():
    rng = np.random.default_rng(3)
    n, k = 4000, 4
    means = rng.normal(0.5, 0.2, n)                     # between-sample variance 0.04
    values = means[:, None] + rng.normal(0, 0.3, (n, k))  # within 0.09
    vc = stats.variance_components(values.ravel(), np.repeat(np.arange(n), k))
    assert vc["between"] == pytest.approx(0.04, rel=0.05) and vc["within"] == pytest.approx(0.09, rel=0.03)
    assert (vc["samples"], vc["rollouts"], vc["attempts"]) == (n, n * k, k)
    one = stats.variance_components(values[:, 0], np.arange(n))
    assert np.isnan(one["within"]) and one["var_means"] == pytest.approx(np.var(values[:, 0], ddof=1))


def test_sample_size_against_published_t_test_values():
    """compare decides by a test of the mean difference that behaves as the one-sample t-test, so
    power follows the noncentral t (as statsmodels' TTestPower and G*Power): for effect size 0.5,
    alpha 0.05 two-sided, 80% power, 34 samples (power 0.8078); for 0.2, 199 samples (Cohen 1988,
    G*Power's one-sample t-test). The z formula says 32 and 197."""
    assert stats.samples_needed(1.0, 0.5) == 34 and stats.power_at(0.5, 1.0, 34) == pytest.approx(0.8078, abs=5e-4)
    assert stats.power_at(0.5, 1.0, 33) < 0.8
    assert stats.samples_needed(1.0, 0.2) == 199 and stats.samples_needed(4.0, -0.4) == 199  # scale-free, signless
    assert stats.power_at(stats.mde(0.3, 400), 0.3, 400) == pytest.approx(0.8, abs=1e-9)
    assert stats.mde(1.0, 34) < 0.5 < stats.mde(1.0, 33)
    assert stats.power_at(0.0, 0.3, 400) == pytest.approx(0.05)
    # no variance, or fewer than 2 samples: no estimate (never "100% power" or "2 samples")
    for got in (stats.power_at(0.1, 0.0, 100), stats.samples_needed(0.0, 0.1), stats.mde(0.0, 100),
                stats.mde(0.3, 1), stats.power_at(0.1, 0.3, 1)):
        assert np.isnan(got)
    assert stats.paired_variance(0.04, 0.05, 0.03, 0.09, 0.08, 4, 2) == pytest.approx(0.04 + 0.05 - 0.06 + 0.0225 + 0.04)


# --- agreement and PPI -----------------------------------------------------------------------

def test_cohen_kappa_matches_sklearn_and_its_se_a_bootstrap():
    from sklearn.metrics import cohen_kappa_score

    rng = np.random.default_rng(5)
    a = rng.random(400) < 0.6
    b = np.where(rng.random(400) < 0.8, a, rng.random(400) < 0.5)
    table = [[(a & b).sum(), (a & ~b).sum()], [(~a & b).sum(), (~a & ~b).sum()]]
    kappa, se, lo, hi = stats.cohen_kappa(table)
    assert kappa == pytest.approx(cohen_kappa_score(a, b))
    i = rng.integers(0, 400, (4000, 400))  # bootstrap of the rollouts, kappa from its definition
    ra, rb = a[i], b[i]
    po = (ra == rb).mean(1)
    pe = ra.mean(1) * rb.mean(1) + (1 - ra.mean(1)) * (1 - rb.mean(1))
    assert se == pytest.approx(np.std((po - pe) / (1 - pe)), rel=0.1)
    assert lo < kappa < hi and hi - lo == pytest.approx(2 * 1.959964 * se)


def test_wilson_matches_scipy():
    from scipy.stats import binomtest

    ci = binomtest(37, 50).proportion_ci(0.95, method="wilson")
    assert stats.wilson(37, 50) == pytest.approx((ci.low, ci.high))


def test_ppi_estimate_and_se_by_hand():
    """lam = 1, every unit its own cluster: theta = mean_all(f) + mean_lab(y - f); the variance is
    the textbook Var(f)/N + Var(y - f)/n (Angelopoulos et al. 2023) up to the labelled units being
    part of all N (their covariance is of order n / N)."""
    rng = np.random.default_rng(7)
    big_n, n = 20000, 300
    truth = rng.random(big_n) < 0.55
    f = (truth | (rng.random(big_n) < 0.3)).astype(float)
    y = np.full(big_n, np.nan)
    lab = rng.choice(big_n, n, replace=False)
    y[lab] = truth[lab]
    got = stats.ppi_mean(f, y, lam=1.0)
    rect = y[lab] - f[lab]
    assert got["estimate"] == pytest.approx(f.mean() + rect.mean())
    textbook = np.sqrt(f.var(ddof=1) / big_n + rect.var(ddof=1) / n)
    assert got["se"] == pytest.approx(textbook, rel=0.03)
    labels_only = stats.ppi_mean(f, y, lam=0.0)
    assert labels_only["estimate"] == pytest.approx(y[lab].mean())
    assert labels_only["se"] == pytest.approx(y[lab].std(ddof=1) / np.sqrt(n), rel=0.01)
    tuned = stats.ppi_mean(f, y, lam=None, floor=False)  # power tuning is never less precise than either end
    assert 0 <= tuned["lam"] <= 1 and tuned["se"] <= min(got["se"], labels_only["se"]) + 1e-12


def test_ppi_covers_the_true_rate_when_the_grader_is_biased():
    """The issue's case at the level of the estimator: a grader that passes 30% of truly failing
    rollouts, 150 random labels, 400 seeds. The prediction-powered CI covers the true pass rate
    (the run's own, and the population's) in >= 90% of seeds; the grader's naive CI almost never."""
    rng = np.random.default_rng(11)
    samples, k, n_lab, seeds = 300, 3, 150, 400
    covered_run = covered_pop = naive = 0
    for _ in range(seeds):
        p = rng.beta(2, 2, samples)  # population true rate: E p = 0.5
        truth = rng.random((samples, k)) < p[:, None]
        f = (truth | (rng.random((samples, k)) < 0.3)).ravel().astype(float)
        truth = truth.ravel()
        clusters = np.repeat(np.arange(samples), k)
        y = np.full(len(f), np.nan)
        lab = rng.choice(len(f), n_lab, replace=False)
        y[lab] = truth[lab]
        r = stats.ppi_mean(f, y, clusters)
        covered_run += r["ci_low"] <= truth.mean() <= r["ci_high"]
        covered_pop += r["ci_low"] <= 0.5 <= r["ci_high"]
        mean, se = stats.clustered_mean(f, clusters)
        naive += mean - 1.96 * se <= truth.mean() <= mean + 1.96 * se
    assert covered_run / seeds >= 0.90 and covered_pop / seeds >= 0.90
    assert naive / seeds <= 0.01


def test_rectifier_floor_by_hand():
    # labels agree with the grader on all 3: y - f = 0, 0, 0, plus the pseudo-units 1 and -1
    assert stats.rectifier_floor([1.0, 1.0, 0.0], [1.0, 1.0, 0.0], 1.0) == pytest.approx((2 / 5) / 5)
    # lam = 0 (the labels alone): y = 1, 1, 0 plus 1 and 0
    assert stats.rectifier_floor([1.0, 1.0, 0.0], [1.0, 1.0, 0.0], 0.0) == pytest.approx(np.var([1, 1, 0, 1, 0]) / 5)
    assert np.isnan(stats.rectifier_floor([], [], 1.0))


def test_ppi_with_20_labels_keeps_its_level():
    """The issue's small-label case: a grader that passes 30% of the truly failing rollouts, 20
    random labels of 300 samples x 3 attempts. The plain interval (lam tuned, no floor) covers the
    true rate in ~88% of 1,000 seeds; with lam = 1 and the Bonett-Price floor at least 93.5%
    (95% minus 2 standard errors of 1,000 seeds: bench/simulations.py measures 95.6% over 2,000)."""
    rng = np.random.default_rng(20)
    samples, k, n_lab, seeds = 300, 3, 20, 1000
    covered = plain = 0
    clusters = np.repeat(np.arange(samples), k)
    for _ in range(seeds):
        p = rng.beta(2, 2, samples)
        truth = rng.random((samples, k)) < p[:, None]
        f = (truth | (rng.random((samples, k)) < 0.3)).ravel().astype(float)
        y = np.full(f.size, np.nan)
        lab = rng.choice(f.size, n_lab, replace=False)
        y[lab] = truth.ravel()[lab]
        r = stats.ppi_mean(f, y, clusters)
        covered += r["ci_low"] <= 0.5 <= r["ci_high"]
        old = stats.ppi_mean(f, y, clusters, lam=None, floor=False)
        plain += old["ci_low"] <= 0.5 <= old["ci_high"]
    assert covered / seeds >= 0.935 and plain / seeds <= 0.92


def test_paired_permutation_p_of_ratio_metrics():
    # exact: 3 samples, 2^3 = 8 swap patterns. Metric 0 (per-sample means): d = 1, 0, 0.5 ->
    # |mean| >= 0.5 for the patterns that keep 1 and 0.5 on one side: 4 of 8
    nb = np.array([[0.0, 6], [1.0, 3], [0.5, 9]])
    db = np.array([[1, 2], [1, 1], [1, 3]], dtype=float)
    nc = np.array([[1.0, 2], [1.0, 1], [1.0, 3]])
    p = stats.paired_permutation_p(nb, db, nc, db.copy(), n_perm=64)
    assert p[0] == pytest.approx(4 / 8)
    # Monte Carlo (2^200 patterns): the sign-flip sum has variance sum(d^2) under the null
    from scipy.stats import norm

    rng = np.random.default_rng(6)
    b = rng.random(200)
    c = b + 0.05 + rng.normal(0, 0.2, 200)
    d, ones = c - b, np.ones(200)
    [p] = stats.paired_permutation_p(b, ones, c, ones, n_perm=4000, seed=2)
    assert p == pytest.approx(2 * norm.sf(abs(d.sum()) / np.sqrt((d ** 2).sum())), abs=0.003)
