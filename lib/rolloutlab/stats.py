"""Resampling statistics on numpy arrays (vectorized over rows; loops only over resamples)."""
from __future__ import annotations

import numpy as np


def weighted_quantile_sorted(sorted_values: np.ndarray, cum_weights: np.ndarray, q: float) -> float:
    """quantile_cont (linear interpolation) of the multiset where sorted_values[i] appears
    weights[i] times; ``cum_weights`` is the cumulative sum of those integer weights."""
    total = cum_weights[-1]
    h = q * (total - 1)
    lo = np.floor(h)
    i_lo = np.searchsorted(cum_weights, lo, side="right")
    i_hi = np.searchsorted(cum_weights, min(lo + 1, total - 1), side="right")
    return float(sorted_values[i_lo] + (h - lo) * (sorted_values[i_hi] - sorted_values[i_lo]))


def cluster_bootstrap_quantiles(values: np.ndarray, clusters: np.ndarray, qs: list[float],
                                n_boot: int = 1000, seed: int = 0, ci: float = 0.95) -> np.ndarray:
    """Percentile-bootstrap CIs of quantiles, resampling clusters (dataset samples) with
    replacement so that repeated attempts at one sample are not counted as independent.

    Returns an array of shape (len(qs), 2): the (low, high) bounds for each quantile.
    """
    values = np.asarray(values, dtype=float)
    keep = ~np.isnan(values)
    values = values[keep]
    if values.size == 0 or n_boot <= 0:
        return np.full((len(qs), 2), np.nan)
    _, codes = np.unique(np.asarray(clusters)[keep], return_inverse=True)
    order = np.argsort(values, kind="stable")
    sorted_values, sorted_codes = values[order], codes[order]
    n_clusters = int(codes.max()) + 1
    rng = np.random.default_rng(seed)
    reps = np.empty((n_boot, len(qs)))
    for b in range(n_boot):  # one resample per iteration; the rows are handled by numpy
        counts = np.bincount(rng.integers(0, n_clusters, n_clusters), minlength=n_clusters)
        cum = np.cumsum(counts[sorted_codes])
        if cum[-1] == 0:
            reps[b] = np.nan
            continue
        reps[b] = [weighted_quantile_sorted(sorted_values, cum, q) for q in qs]
    alpha = (1 - ci) / 2
    return np.nanquantile(reps, [alpha, 1 - alpha], axis=0).T
