"""Resampling helpers against numpy on expanded data."""
from __future__ import annotations

import numpy as np
import pytest

from rolloutlab import stats


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


def test_ratio_bootstrap_and_permutation_paths():
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

    [p] = stats.paired_permutation_p(nb, ones, nc, ones, n_perm=4000, seed=2)
    assert p == pytest.approx(2 * norm.sf(abs(d.sum()) / np.sqrt((d ** 2).sum())), abs=0.003)


def test_paired_ratio_tests_handles_several_metrics_and_ratios():
    # metric 0: per-sample means; metric 1: a ratio of sums (calls / rollouts)
    nb = np.array([[0.0, 6], [1.0, 3], [0.5, 9]])
    db = np.array([[1, 2], [1, 1], [1, 3]], dtype=float)
    nc = np.array([[1.0, 2], [1.0, 1], [1.0, 3]])
    dc = db.copy()
    bounds, _ = stats.paired_bootstrap(nb, db, nc, dc, n_boot=64)
    p = stats.paired_permutation_p(nb, db, nc, dc, n_perm=64)
    # 2^3 = 8 <= 64 swap patterns: exact. Metric 0: d = 1, 0, 0.5 -> |mean| >= 0.5 only for +-(1 + 0.5)
    assert p[0] == pytest.approx(4 / 8)
    assert bounds[1, 0] <= -2 <= bounds[1, 1]  # calls per rollout: 18/6 = 3 -> 6/6 = 1


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
