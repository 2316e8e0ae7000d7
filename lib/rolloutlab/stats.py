"""Resampling statistics on numpy arrays (vectorized over rows; loops only over resamples)."""
from __future__ import annotations

import math

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
    if not keep.any() or n_boot <= 0:
        return np.full((len(qs), 2), np.nan)
    _, codes = np.unique(np.asarray(clusters)[keep], return_inverse=True)
    n_clusters = int(codes.max()) + 1
    sorted_values = SortedValues(values[keep], codes, n_clusters)
    reps = np.vstack([np.column_stack([sorted_values.quantiles(q, w) for q in qs])
                      for w in resample_counts(n_clusters, n_boot, seed)])
    return np.array([percentile_interval(reps[:, i], ci) for i in range(len(qs))])


def cluster_bootstrap_quantiles_shared(scopes: dict[str, tuple[np.ndarray, np.ndarray, int]], n_clusters: int,
                                       qs: list[float], seed: int = 0, ci: float = 0.95) -> dict[str, np.ndarray]:
    """``cluster_bootstrap_quantiles`` for several scopes over one set of clusters (a run's rollouts
    and each tool's calls, clustered by dataset sample): every scope's resample r weighs the
    clusters the same way, so one stream of weights serves them all. ``scopes``: name -> (values
    sorted ascending, their cluster codes in 0..n_clusters-1, resamples wanted). Returns name ->
    (len(qs), 2) bounds."""
    live = {name: (SortedValues(v, c, n_clusters, presorted=True), n) for name, (v, c, n) in scopes.items()
            if len(v) and n > 0}
    reps: dict[str, list] = {name: [] for name in live}
    done = 0
    for weights in resample_counts(n_clusters, max((n for _, n in live.values()), default=0), seed):
        for name, (sorted_values, wanted) in live.items():
            if done < wanted:
                take = weights[: wanted - done]
                reps[name].append(np.column_stack([sorted_values.quantiles(q, take) for q in qs]))
        done += len(weights)
    out = {}
    for name in scopes:
        if name not in live:
            out[name] = np.full((len(qs), 2), np.nan)
            continue
        stacked = np.vstack(reps[name])
        out[name] = np.array([percentile_interval(stacked[:, i], ci) for i in range(len(qs))])
    return out


def percentile_interval(reps: np.ndarray, ci: float) -> tuple[float, float]:
    """The central ``ci`` interval of bootstrap replicates (NaN when none is defined)."""
    reps = reps[~np.isnan(reps)]
    if reps.size == 0:
        return float("nan"), float("nan")
    alpha = (1 - ci) / 2
    lo, hi = np.quantile(reps, [alpha, 1 - alpha])
    return float(lo), float(hi)


# Above this many samples, resampling uses Poisson(1) weights (see resample_counts).
POISSON_ABOVE = 5000
_LEVELS = 1 << 16
# Poisson(1) quantile function at 65,536 evenly spaced levels: a uint16 draw becomes a weight.
_POISSON_TABLE = np.searchsorted(
    np.cumsum([math.exp(-1) / math.factorial(k) for k in range(20)]),
    (np.arange(_LEVELS) + 0.5) / _LEVELS).astype(np.float32)


def resample_counts(n: int, n_boot: int, seed: int, chunk: int = 50):
    """Yield (m, n) float32 matrices of bootstrap weights for n samples, m resamples at a time.

    Up to POISSON_ABOVE samples: multinomial counts, i.e. n draws with replacement. Above: the
    Poisson bootstrap (each sample weighted by an independent Poisson(1) count; Hanley &
    MacGibbon 2006), equivalent at that size and twice as fast. Small chunks keep the work in the
    CPU cache.
    """
    rng = np.random.default_rng(seed)
    done = 0
    offsets = (np.arange(chunk, dtype=np.int64) * n)[:, None]
    while done < n_boot:
        m = min(chunk, n_boot - done)
        if n > POISSON_ABOVE:
            yield _POISSON_TABLE[rng.integers(0, _LEVELS, size=(m, n), dtype=np.uint16)]
        else:
            draws = rng.integers(0, n, size=(m, n), dtype=np.int64)
            draws += offsets[:m]
            yield np.bincount(draws.ravel(), minlength=m * n).reshape(m, n).astype(np.float32)
        done += m


def ratio(num: np.ndarray, den: np.ndarray) -> float:
    total = den.sum()
    return float(num.sum() / total) if total else float("nan")


def _ratio_diffs(sums_b_num, sums_b_den, sums_c_num, sums_c_den) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return sums_c_num / sums_c_den - sums_b_num / sums_b_den


def _as_columns(x) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    return x[:, None] if x.ndim == 1 else x


class SortedValues:
    """Values of one run sorted once, with the shared-sample code of each, for quantile resampling."""

    def __init__(self, values, codes, n_samples: int, presorted: bool = False):
        values = np.asarray(values, dtype=float)
        if presorted:  # sorted by the database already
            self.values, self.codes = values, np.asarray(codes)
        else:
            order = np.argsort(values, kind="stable")
            self.values, self.codes = values[order], np.asarray(codes)[order]
        self.n_samples = n_samples
        self._bands: dict[float, Band] = {}

    def quantiles(self, q: float, weights: np.ndarray) -> np.ndarray:
        if q not in self._bands:
            self._bands[q] = Band(self.values, self.codes, self.n_samples, q)
        return self._bands[q].quantiles(weights)



class Band:
    """quantile_cont of resamples, looking only at a band of ranks around q (resamples whose
    quantile leaves the band are computed in full). The per-sample counts below and inside the
    band are computed once."""

    def __init__(self, sorted_values, sorted_codes, n_samples: int, q: float):
        n = len(sorted_values)
        # a resampled quantile's rank moves by ~sqrt(q(1-q)/samples): 5 of those, plus a margin
        width = min(0.5, 5 * np.sqrt(q * (1 - q) / max(n_samples, 1)) + 20 / max(n, 1))
        self.lo = max(int(np.floor((q - width) * n)), 0)
        hi = min(int(np.ceil((q + width) * n)), n)
        self.values, self.codes, self.q = sorted_values, sorted_codes, q
        self.below = np.bincount(sorted_codes[: self.lo], minlength=n_samples).astype(np.float32)
        self.per_sample = np.bincount(sorted_codes, minlength=n_samples).astype(np.float32)
        self.band_codes = sorted_codes[self.lo: hi]

    def quantiles(self, weights: np.ndarray) -> np.ndarray:
        q, values = self.q, self.values
        # float32 counts stay exact below 2^24 rollouts
        w_below = (weights @ self.below).astype(np.float64)
        total = (weights @ self.per_sample).astype(np.float64)
        cum = w_below[:, None] + np.cumsum(weights[:, self.band_codes], axis=1, dtype=np.float64)
        h = q * (total - 1)
        r_lo = np.floor(h)
        r_hi = np.minimum(r_lo + 1, total - 1)
        out = np.empty(len(weights))
        inside = (r_lo >= w_below) & (r_hi < cum[:, -1]) & (total > 0)
        i_lo = np.array([np.searchsorted(row, r, side="right") for row, r in zip(cum, r_lo)]) + self.lo
        i_hi = np.array([np.searchsorted(row, r, side="right") for row, r in zip(cum, r_hi)]) + self.lo
        ok = np.where(inside)[0]
        out[ok] = values[i_lo[ok]] + (h[ok] - r_lo[ok]) * (values[i_hi[ok]] - values[i_lo[ok]])
        for b in np.where(~inside)[0]:  # rare: the resample's quantile left the band
            out[b] = weighted_quantile_sorted(values, np.cumsum(weights[b][self.codes]), q) if total[b] > 0 \
                else np.nan
        return out


def paired_bootstrap(num_b, den_b, num_c, den_c, quantiles=(), n_boot: int = 2000, seed: int = 0,
                     ci: float = 0.95):
    """Percentile-bootstrap CIs of paired differences, resampling shared samples with replacement
    (one draw serves every metric, so they are consistent with each other):

    - ratio metrics, columns of (n_samples, M) arrays: sum(num_c)/sum(den_c) - sum(num_b)/sum(den_b);
    - ``quantiles``: (SortedValues base, SortedValues candidate, q) triples: quantile_c - quantile_b.

    Returns (ratio_bounds of shape (M, 2), quantile_bounds of shape (len(quantiles), 2)).
    """
    nb, db, nc, dc = (_as_columns(x) for x in (num_b, den_b, num_c, den_c))
    n, m = nb.shape
    if n == 0 or n_boot <= 0:
        return np.full((m, 2), np.nan), np.full((len(quantiles), 2), np.nan)
    # float32 sums are precise to ~1e-7 relative, far below the bootstrap's own spread
    stacked = np.hstack([nb, db, nc, dc]).astype(np.float32)
    ratio_reps, quantile_reps = [], []
    for w in resample_counts(n, n_boot, seed):
        s = (w @ stacked).astype(np.float64)
        ratio_reps.append(_ratio_diffs(s[:, :m], s[:, m:2 * m], s[:, 2 * m:3 * m], s[:, 3 * m:]))
        quantile_reps.append(np.column_stack([c.quantiles(q, w) - b.quantiles(q, w) for b, c, q in quantiles])
                             if quantiles else np.empty((len(w), 0)))
    ratio_reps, quantile_reps = np.vstack(ratio_reps), np.vstack(quantile_reps)
    return (np.array([percentile_interval(ratio_reps[:, j], ci) for j in range(m)]).reshape(m, 2),
            np.array([percentile_interval(quantile_reps[:, j], ci) for j in range(len(quantiles))]).reshape(-1, 2))


def paired_permutation_p(num_b, den_b, num_c, den_c, n_perm: int = 2000, seed: int = 0) -> np.ndarray:
    """Two-sided paired permutation p-values of ratio-metric differences (columns), swapping base
    and candidate within samples (for per-sample means: the sign-flip test). Exhaustive when
    2^n <= n_perm, else Monte Carlo with the +1 correction."""
    nb, db, nc, dc = (_as_columns(x) for x in (num_b, den_b, num_c, den_c))
    n, m = nb.shape
    if n == 0:
        return np.full(m, np.nan)
    tot = (nb.sum(0), db.sum(0), nc.sum(0), dc.sum(0))
    observed = _ratio_diffs(*tot)
    delta_num, delta_den = nb - nc, db - dc  # what swapping a sample moves from base to candidate
    exact = 2 ** n <= n_perm
    rng = np.random.default_rng(seed + 1)
    if exact:
        chunks = [((np.arange(2 ** n)[:, None] >> np.arange(n)) & 1)]
    else:  # random swap patterns from random bits, 200 at a time
        chunks = (np.unpackbits(np.frombuffer(rng.bytes(k * ((n + 7) // 8)), dtype=np.uint8)
                                .reshape(k, -1), axis=1)[:, :n]
                  for k in (min(200, n_perm - i) for i in range(0, n_perm, 200)))
    extreme, total = np.zeros(m), 0
    # exact p-values on small n in float64; Monte Carlo ones in float32 (twice as fast), with a
    # tolerance for ties that matches the precision
    dtype, tol = (np.float64, 1e-9) if exact else (np.float32, 1e-5)
    delta_num, delta_den = delta_num.astype(dtype), delta_den.astype(dtype)
    for swaps in chunks:
        swaps = swaps.astype(dtype)
        moved_num = (swaps @ delta_num).astype(np.float64)
        moved_den = (swaps @ delta_den).astype(np.float64)
        stat = _ratio_diffs(tot[0] - moved_num, tot[1] - moved_den, tot[2] + moved_num, tot[3] + moved_den)
        extreme += (np.abs(stat) >= np.abs(observed) * (1 - tol) - 1e-12).sum(0)
        total += len(swaps)
    p = extreme / total if exact else (extreme + 1) / (total + 1)
    return np.where(np.isnan(observed), np.nan, p)
