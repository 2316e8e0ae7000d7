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
