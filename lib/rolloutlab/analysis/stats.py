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
        # per row, searchsorted(row, r, side="right") of its sorted cumulative counts: how many are <= r
        i_lo = (cum <= r_lo[:, None]).sum(1) + self.lo
        i_hi = (cum <= r_hi[:, None]).sum(1) + self.lo
        ok = np.where(inside)[0]
        out[ok] = values[i_lo[ok]] + (h[ok] - r_lo[ok]) * (values[i_hi[ok]] - values[i_lo[ok]])
        for b in np.where(~inside)[0]:  # rare: the resample's quantile left the band
            out[b] = weighted_quantile_sorted(values, np.cumsum(weights[b][self.codes]), q) if total[b] > 0 \
                else np.nan
        return out


def paired_bootstrap(num_b, den_b, num_c, den_c, quantiles=(), n_boot: int = 2000, seed: int = 0,
                     ci: float = 0.95, with_p: bool = False):
    """Percentile-bootstrap CIs of paired differences, resampling shared samples with replacement
    (one draw serves every metric, so they are consistent with each other):

    - ratio metrics, columns of (n_samples, M) arrays: sum(num_c)/sum(den_c) - sum(num_b)/sum(den_b);
    - ``quantiles``: (SortedValues base, SortedValues candidate, q) triples: quantile_c - quantile_b.

    Returns (ratio_bounds of shape (M, 2), quantile_bounds of shape (len(quantiles), 2)), and
    with ``with_p`` also the bootstrap p-values of each (``bootstrap_p``): (..., ratio_p, quantile_p).
    """
    nb, db, nc, dc = (_as_columns(x) for x in (num_b, den_b, num_c, den_c))
    n, m = nb.shape
    if n == 0 or n_boot <= 0:
        empty = np.full((m, 2), np.nan), np.full((len(quantiles), 2), np.nan)
        return (*empty, np.full(m, np.nan), np.full(len(quantiles), np.nan)) if with_p else empty
    # float32 sums are precise to ~1e-7 relative, far below the bootstrap's own spread
    stacked = np.hstack([nb, db, nc, dc]).astype(np.float32)
    ratio_reps, quantile_reps = [], []
    for w in resample_counts(n, n_boot, seed):
        s = (w @ stacked).astype(np.float64)
        ratio_reps.append(_ratio_diffs(s[:, :m], s[:, m:2 * m], s[:, 2 * m:3 * m], s[:, 3 * m:]))
        quantile_reps.append(np.column_stack([c.quantiles(q, w) - b.quantiles(q, w) for b, c, q in quantiles])
                             if quantiles else np.empty((len(w), 0)))
    ratio_reps, quantile_reps = np.vstack(ratio_reps), np.vstack(quantile_reps)
    bounds = (np.array([percentile_interval(ratio_reps[:, j], ci) for j in range(m)]).reshape(m, 2),
              np.array([percentile_interval(quantile_reps[:, j], ci) for j in range(len(quantiles))]).reshape(-1, 2))
    if not with_p:
        return bounds
    return (*bounds, bootstrap_p(ratio_reps), bootstrap_p(quantile_reps) if quantiles else np.empty(0))


def sign_patterns(n: int, n_perm: int, seed: int = 0):
    """Sign patterns for paired tests of n samples, as (k, n) arrays of flips (1 where a sample's
    difference changes sign, else 0), and whether they are exhaustive: every one of the 2^n patterns
    when 2^n <= n_perm (float64), else n_perm random ones from random bits, 200 at a time (float32;
    with the +1 correction the identity pattern counts as one more). Returns (iterator, exact)."""
    exact = n < 63 and 2 ** n <= n_perm
    if exact:
        return iter([((np.arange(2 ** n)[:, None] >> np.arange(n)) & 1).astype(np.float64)]), True
    rng = np.random.default_rng(seed + 1)

    def chunks():
        for k in (min(200, n_perm - i) for i in range(0, n_perm, 200)):
            bits = np.unpackbits(np.frombuffer(rng.bytes(k * ((n + 7) // 8)), dtype=np.uint8).reshape(k, -1),
                                 axis=1)[:, :n]
            yield bits.astype(np.float32)
    return chunks(), False


def paired_permutation_p(num_b, den_b, num_c, den_c, n_perm: int = 2000, seed: int = 0) -> np.ndarray:
    """Two-sided paired permutation p-values of ratio-metric differences (columns), swapping a
    sample's base and candidate sums (for per-sample means: the sign-flip test) on the patterns of
    ``sign_patterns``: exact when 2^n <= n_perm, else Monte Carlo with the +1 correction. The
    failure-mode diff tests its modes' shares with it (a ratio per run, not a mean of differences)."""
    nb, db, nc, dc = (_as_columns(x) for x in (num_b, den_b, num_c, den_c))
    n, m = nb.shape
    if n == 0:
        return np.full(m, np.nan)
    tot = (nb.sum(0), db.sum(0), nc.sum(0), dc.sum(0))
    observed = _ratio_diffs(*tot)
    patterns, exact = sign_patterns(n, n_perm, seed)
    dtype, tol = (np.float64, 1e-9) if exact else (np.float32, 1e-5)  # ties within the sums' precision
    delta_num, delta_den = (nb - nc).astype(dtype), (db - dc).astype(dtype)  # what a swap moves to the candidate
    extreme, total = np.zeros(m), 0
    for swaps in patterns:
        moved_num = (swaps @ delta_num).astype(np.float64)
        moved_den = (swaps @ delta_den).astype(np.float64)
        stat = _ratio_diffs(tot[0] - moved_num, tot[1] - moved_den, tot[2] + moved_num, tot[3] + moved_den)
        extreme += (np.abs(stat) >= np.abs(observed) * (1 - tol) - 1e-12).sum(0)
        total += len(swaps)
    p = extreme / total if exact else (extreme + 1) / (total + 1)
    return np.where(np.isnan(observed), np.nan, p)


def signflip_tests(diffs, present=None, n_perm: int = 2000, seed: int = 0, ci: float = 0.95):
    """Two-sided paired sign-flip tests of mean(d) = 0, one per column of per-sample differences
    ``diffs`` (n samples, m columns; ``present`` marks the samples each column holds), with the
    confidence interval that inverts the same test: every delta whose test of mean(d) = delta is
    not rejected at 1 − ``ci``. So the interval excludes 0 exactly when p <= 1 − ci, and the
    verdict read from one never contradicts the other.

    The statistic is sum_i eps_i (d_i − delta) over the present samples, eps_i = ±1; studentizing
    it changes nothing (sum (eps_i d_i)^2 does not depend on the signs). Exact over all 2^n
    patterns when 2^n <= ``n_perm`` (then the interval is unbounded when the smallest attainable
    p exceeds the level: with 5 samples, 2 / 32 > 0.05), else ``n_perm`` seeded random patterns with
    the +1 correction (p >= 1 / (n_perm + 1)). Every delta is tested on the same patterns.

    Exact where the t-test is approximate, but conservative with the ties of pass/fail data (a few
    points of power lost at 30-40 samples): compare uses the clustered t (``ratio_t_tests``) so that
    rl.power's plan is the test's; bench/simulations.py measures both.

    Returns (p, ci_low, ci_high), arrays of m; NaN for a column without a present sample."""
    d = _as_columns(diffs)
    n, m = d.shape
    mask = np.ones_like(d, dtype=bool) if present is None else _as_columns(present).astype(bool)
    d = np.where(mask, d, 0.0)
    n_j = mask.sum(0).astype(float)
    if n == 0:
        return (np.full(m, np.nan),) * 3
    patterns, exact = sign_patterns(n, n_perm, seed)
    dtype = np.float64 if exact else np.float32
    a_parts, s_parts = [], []
    d_t, mask_t = d.astype(dtype), mask.astype(dtype)
    for flips in patterns:  # what the flipped samples hold: their differences, and how many they are
        a_parts.append((flips @ d_t).astype(np.float64))
        s_parts.append((flips @ mask_t).astype(np.float64))
    total = d.sum(0)
    # A = sum eps_i d_i = total − 2 (flipped part); S = sum eps_i over the present samples
    big_a, big_s = total - 2 * np.vstack(a_parts), n_j - 2 * np.vstack(s_parts)
    scale = np.abs(d).sum(0)
    # exact p-values in float64; Monte Carlo ones from float32 sums, with a tolerance for ties to match
    tol = 1e-9 if exact else 1e-5
    alpha = 1 - ci
    p_out, lo_out, hi_out = np.full(m, np.nan), np.full(m, np.nan), np.full(m, np.nan)
    for j in range(m):
        if n_j[j] == 0:
            continue
        a, s, big_d, nj = big_a[:, j], big_s[:, j], total[j], n_j[j]

        def p_at(delta: float, a=a, s=s, big_d=big_d, nj=nj, j=j) -> float:
            slack = tol * (scale[j] + nj * abs(delta)) + 1e-12
            extreme = int((np.abs(a - delta * s) >= np.abs(big_d - nj * delta) - slack).sum())
            return extreme / len(a) if exact else (extreme + 1) / (len(a) + 1)

        est = big_d / nj
        spread = float(np.std(d[mask[:, j], j], ddof=1)) / math.sqrt(nj) if nj > 1 else 0.0
        step = max(spread, 1e-9 * max(1.0, abs(est)))
        p_out[j] = p_at(0.0)
        lo_out[j], hi_out[j] = (_invert(p_at, est, -step, alpha), _invert(p_at, est, step, alpha))
    return p_out, lo_out, hi_out


def _invert(p_at, start: float, step: float, alpha: float) -> float:
    """The edge of {delta : p_at(delta) > alpha} from ``start`` (p = 1 there) in the direction
    of ``step``: doubling steps until rejected, then bisection. ±inf when never rejected."""
    inside, k = start, 0
    outside = start + step
    while p_at(outside) > alpha:
        inside, k = outside, k + 1
        if k > 60:
            return math.copysign(math.inf, step)
        outside = start + step * 2 ** k
    for _ in range(60):
        mid = (inside + outside) / 2
        if mid in (inside, outside):
            break
        if p_at(mid) > alpha:
            inside = mid
        else:
            outside = mid
    return float(inside)


def ratio_t_tests(num_b, den_b, num_c, den_c, ci: float = 0.95):
    """Paired tests of ratio-metric differences, sum(num_c)/sum(den_c) − sum(num_b)/sum(den_b),
    one per column, with samples as clusters: the linearised (delta-method) per-sample
    contribution psi_i = (num_c,i − R_c den_c,i) / mean(den_c) − (num_b,i − R_b den_b,i) / mean(den_b)
    gives the clustered standard error se = sd(psi) / sqrt(n) (Miller 2024; for per-sample means it
    is sd(d_i) / sqrt(n)), and one t statistic, diff / se with n − 1 degrees of freedom, gives
    both the two-sided p-value and the CI diff ± t_{n−1} se (they never disagree).

    A column whose every sample moves by the same amount (se = 0) gets the sign-flip test's
    smallest p, 2^(1−n) (1 when nothing moved), and its interval: that amount where p <= 1 − ci,
    else unbounded. Returns (diff, se, ci_low, ci_high, p), arrays; NaN where a run's denominators
    sum to 0 or fewer than 2 samples."""
    from scipy.stats import t as student

    nb, db, nc, dc = (_as_columns(x) for x in (num_b, den_b, num_c, den_c))
    n, m = nb.shape
    nan = np.full(m, np.nan)
    if n < 2:
        diff = _ratio_diffs(nb.sum(0), db.sum(0), nc.sum(0), dc.sum(0)) if n else nan
        return diff, nan, nan.copy(), nan.copy(), nan.copy()
    sb, sdb, sc, sdc = nb.sum(0), db.sum(0), nc.sum(0), dc.sum(0)
    with np.errstate(divide="ignore", invalid="ignore"):
        rb, rc = sb / sdb, sc / sdc
        psi = (nc - rc * dc) / (sdc / n) - (nb - rb * db) / (sdb / n)
        se = np.sqrt((psi ** 2).sum(0) / (n * (n - 1)))
        diff = rc - rb
        tstat = diff / se
    half = student.ppf(0.5 + ci / 2, n - 1) * se
    p = 2 * student.sf(np.abs(tstat), n - 1)
    still = se <= 1e-12 * np.maximum(1.0, np.abs(diff))
    p = np.where(still, np.where(np.abs(diff) <= 1e-12, 1.0, 2.0 ** (1 - n)), p)
    # the sign-flip test's interval there: that one number where it rejects every other, else unbounded
    half = np.where(still, np.where(p <= 1 - ci, 0.0, np.inf), half)
    bad = np.isnan(diff)
    p, half = np.where(bad, np.nan, p), np.where(bad, np.nan, half)
    return diff, np.where(bad, np.nan, se), diff - half, diff + half, p


def bootstrap_p(reps: np.ndarray) -> np.ndarray:
    """Two-sided percentile-bootstrap p-values of "the difference is 0", per column of bootstrap
    replicates (rows): 2 × the smaller share of replicates on either side of 0, with the +1
    correction, capped at 1. It inverts the percentile interval: the central 1 − p interval has 0
    at its edge (Efron & Tibshirani 1993, ch. 15-16). NaN for a column without replicates."""
    reps = _as_columns(reps)
    ok = ~np.isnan(reps)
    b = ok.sum(0)
    below = ((reps <= 0) & ok).sum(0)
    above = ((reps >= 0) & ok).sum(0)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.minimum(1.0, 2 * (np.minimum(below, above) + 1) / (b + 1))
    return np.where(b > 0, p, np.nan)


# ---------------------------------------------------------------------------------------------
# Multiplicity: many metrics tested in one comparison


def _adjusted(p, step) -> np.ndarray:
    """Adjusted p-values of the non-NaN ``p``: ``step(sorted p, m)`` in ascending order, capped at
    1; NaN p-values are not part of the family and stay NaN."""
    p = np.asarray(p, dtype=float)
    out = np.full(p.shape, np.nan)
    keep = np.flatnonzero(~np.isnan(p))
    m = len(keep)
    if m == 0:
        return out
    order = keep[np.argsort(p[keep], kind="stable")]
    out[order] = np.minimum(1.0, step(p[order], m))
    return out


def holm(p) -> np.ndarray:
    """Holm's step-down adjusted p-values (family-wise error rate, valid under any dependence;
    Holm 1979). NaN p-values are not part of the family and stay NaN."""
    return _adjusted(p, lambda ps, m: np.maximum.accumulate((m - np.arange(m)) * ps))


def bh(p) -> np.ndarray:
    """Benjamini-Hochberg q-values (false discovery rate; Benjamini & Hochberg 1995): the step-up
    adjusted p-values min over j >= i of m p_(j) / j. NaN p-values stay NaN."""
    return _adjusted(p, lambda ps, m: np.minimum.accumulate((m * ps / np.arange(1, m + 1))[::-1])[::-1])


# ---------------------------------------------------------------------------------------------
# Power and sample size of a paired, clustered comparison of means (docs/metrics.md, "Power")


def z(q: float) -> float:
    """The standard normal quantile."""
    from scipy.stats import norm

    return float(norm.ppf(q))


def variance_components(values, clusters) -> dict:
    """One-way random-effects decomposition of rollout values clustered in samples (method of
    moments): y_ij = mu + b_i + e_ij. ``between`` estimates Var(b_i) (the variance of the samples'
    true means), ``within`` Var(e_ij) (attempt-to-attempt, pooled over samples with 2+
    attempts, NaN when none has two). Also: samples, rollouts, the mean, the variance of the
    observed per-sample means (ddof 1) and the harmonic mean of attempts per sample."""
    values = np.asarray(values, dtype=float)
    _, codes = np.unique(np.asarray(clusters), return_inverse=True)
    g = int(codes.max()) + 1 if len(codes) else 0
    if g == 0:
        return {"samples": 0, "rollouts": 0, "mean": np.nan, "between": np.nan, "within": np.nan,
                "var_means": np.nan, "attempts": np.nan}
    n = np.bincount(codes, minlength=g).astype(float)
    means = np.bincount(codes, values, minlength=g) / n
    ss = np.bincount(codes, (values - means[codes]) ** 2, minlength=g)
    dof = (n - 1).sum()
    within = float(ss.sum() / dof) if dof > 0 else np.nan
    var_means = float(np.var(means, ddof=1)) if g > 1 else np.nan
    inv_k = float(np.mean(1 / n))
    between = max(var_means - (within if not np.isnan(within) else 0.0) * inv_k, 0.0) if g > 1 else np.nan
    return {"samples": g, "rollouts": int(n.sum()), "mean": float(values.mean()), "between": between,
            "within": within, "var_means": var_means, "attempts": 1 / inv_k}


def paired_variance(between_b: float, between_c: float, cov_bc: float, within_b: float, within_c: float,
                    attempts_b: float, attempts_c: float | None = None) -> float:
    """Var(d_i) of one sample's difference of means, d_i = mean_j y_c,ij − mean_j y_b,ij, with
    ``attempts`` per sample in each run: Var(mu_b) + Var(mu_c) − 2 Cov(mu_b, mu_c) + sigma²_w,b / k_b
    + sigma²_w,c / k_c (attempt noise is independent between runs; Miller 2024, sections 3-5)."""
    attempts_c = attempts_b if attempts_c is None else attempts_c
    return float(between_b + between_c - 2 * cov_bc + within_b / attempts_b + within_c / attempts_c)


def power_at(delta: float, var_d: float, samples: float, alpha: float = 0.05) -> float:
    """Probability that compare's test of the mean difference (two-sided at ``alpha`` on
    ``samples`` paired samples) rejects when the true difference is ``delta``: the one-sample t-test
    on d_i, by the noncentral t distribution (df = n − 1, noncentrality delta / sqrt(Var(d) / n);
    the power of statsmodels' TTestPower): the test compare applies to its primary metric
    (``ratio_t_tests``; docs/benchmarks.md, "Simulations"). NaN without a variance (0 or NaN) or with
    fewer than 2 samples: no estimate."""
    from scipy.stats import nct, t as student

    if samples < 2 or np.isnan(var_d) or np.isnan(delta) or var_d <= 0:
        return float("nan")
    df = samples - 1
    crit = student.ppf(1 - alpha / 2, df)
    shift = abs(delta) / math.sqrt(var_d / samples)
    upper, lower = float(nct.sf(crit, df, shift)), float(nct.cdf(-crit, df, shift))
    # far in the tails scipy's noncentral t can return NaN: the upper tail is then 1, the lower 0
    upper = upper if math.isfinite(upper) else 1.0
    lower = lower if math.isfinite(lower) else 0.0
    return min(1.0, upper + lower)


def samples_needed(var_d: float, delta: float, alpha: float = 0.05, power: float = 0.8) -> float:
    """The fewest samples (at least 2) at which ``power_at`` reaches ``power`` for a true mean
    difference ``delta``; near (z_{1−alpha/2} + z_power)² Var(d) / delta² for large n. NaN without a
    variance or for delta = 0."""
    if delta == 0 or np.isnan(var_d) or np.isnan(delta) or var_d <= 0:
        return float("nan")
    n = max(math.ceil((z(1 - alpha / 2) + z(power)) ** 2 * var_d / delta ** 2 - 1e-9), 2)
    while n > 2 and power_at(delta, var_d, n - 1, alpha) >= power:  # the z guess can overshoot by a sample
        n -= 1
    while power_at(delta, var_d, n, alpha) < power:
        n += 1 if n < 1000 else max(1, n // 1000)
    return float(n)


def mde(var_d: float, samples: float, alpha: float = 0.05, power: float = 0.8) -> float:
    """Minimum detectable effect on ``samples`` paired samples: the true difference at which
    ``power_at`` equals ``power`` (about (t_{1−alpha/2} + t_power) sqrt(Var(d) / n)). NaN without a
    variance or with fewer than 2 samples."""
    from scipy.optimize import brentq

    if samples < 2 or np.isnan(var_d) or var_d <= 0:
        return float("nan")
    se = math.sqrt(var_d / samples)
    guess = (z(1 - alpha / 2) + z(power)) * se
    hi = guess * 2
    while power_at(hi, var_d, samples, alpha) < power:
        hi *= 2
    return float(brentq(lambda d: power_at(d, var_d, samples, alpha) - power, 0.0, hi, xtol=1e-12 * hi))


# ---------------------------------------------------------------------------------------------
# Means clustered in samples, and prediction-powered inference


def cluster_codes(*cluster_arrays) -> list[np.ndarray]:
    """Integer codes over the union of the given arrays of cluster keys (one code per key)."""
    joined = np.concatenate([np.asarray(c, dtype=object).astype(str) for c in cluster_arrays]) \
        if cluster_arrays else np.array([])
    _, codes = np.unique(joined, return_inverse=True)
    out, start = [], 0
    for c in cluster_arrays:
        out.append(codes[start: start + len(c)])
        start += len(c)
    return out


def clustered_mean(values, codes) -> tuple[float, float]:
    """Mean of values and its cluster-robust standard error (clusters = samples; Miller 2024 eq. 4
    with the G / (G − 1) small-sample factor): sqrt(sum_i (sum_j (y_ij − ybar))²) / N."""
    values = np.asarray(values, dtype=float)
    if len(values) == 0:
        return float("nan"), float("nan")
    mean = float(values.mean())
    codes = np.asarray(codes)
    psi = np.bincount(codes, values - mean) / len(values)
    g = int((np.bincount(codes) > 0).sum())
    se = math.sqrt(g / (g - 1) * float((psi ** 2).sum())) if g > 1 else float("nan")
    return mean, se


def ppi_influence(f, y, codes, n_codes: int, lam: float | None = None) -> tuple[float, np.ndarray, float]:
    """The prediction-powered mean (Angelopoulos et al. 2023, Science 382; power-tuned as PPI++,
    Angelopoulos, Duchi & Zrnic 2023) of the true outcome y from a prediction f on every unit and y
    on a labelled subset:

        theta = lam · mean_N(f) + mean_n(y − lam · f)

    ``f``: predictions of all N units (the graded rollouts); ``y``: the labels, NaN where a unit is
    not labelled; ``codes``: each unit's cluster (sample) in 0..n_codes-1. Any fixed ``lam``
    gives an unbiased estimate when the labelled units are a random subset: lam = 1 is PPI,
    lam = 0 the labels alone; None picks the lam in [0, 1] that minimises the estimated variance.

    Returns (theta, per-cluster influence psi with Var(theta) ≈ G/(G−1) · sum psi², lam). The
    influence is taken over clusters so that attempts at one sample (and labelled and unlabelled
    attempts of one sample) are not counted as independent, and so that a difference of two runs
    on the same samples is paired by subtracting their psi."""
    f, y, codes = np.asarray(f, dtype=float), np.asarray(y, dtype=float), np.asarray(codes)
    lab = ~np.isnan(y)
    big_n, n = len(f), int(lab.sum())
    if big_n == 0 or n == 0:
        return float("nan"), np.zeros(n_codes), float("nan")
    f_bar, fl_bar, y_bar = f.mean(), f[lab].mean(), y[lab].mean()
    # theta(lam) = y_bar + lam (f_bar − fl_bar); psi(lam) = u + lam v per cluster
    u = np.bincount(codes[lab], y[lab] - y_bar, minlength=n_codes) / n
    v = (np.bincount(codes, f - f_bar, minlength=n_codes) / big_n
         - np.bincount(codes[lab], f[lab] - fl_bar, minlength=n_codes) / n)
    if lam is None:
        vv = float((v ** 2).sum())
        lam = float(np.clip(-(u * v).sum() / vv, 0.0, 1.0)) if vv > 0 else 1.0
    return float(y_bar + lam * (f_bar - fl_bar)), u + lam * v, float(lam)


def influence_se(psi: np.ndarray) -> float:
    """Standard error from per-cluster influence values: sqrt(G/(G−1) · sum psi²), G = len(psi)
    (every cluster that holds a unit)."""
    g = len(psi)
    return math.sqrt(g / (g - 1) * float((psi ** 2).sum())) if g > 1 else float("nan")


def rectifier_floor(f, y, lam: float) -> float:
    """A floor under the variance of the labelled part of a prediction-powered mean,
    mean_n(y − lam · f), for pass / fail labels and verdicts: the variance of y − lam f over the
    labelled units plus two pseudo-units, one that the labels pass and the grader fails (1) and one
    the other way round (−lam), divided by n + 2 — the adjustment of Bonett & Price (2012) for a
    difference of paired proportions, which keeps a Wald interval near its level at 20 labels where
    the plain one covers ~88% (a grader that made no mistake on 20 labels is not a perfect one).
    ``f``, ``y``: the labelled units' verdicts and labels. NaN without labels."""
    f, y = np.asarray(f, dtype=float), np.asarray(y, dtype=float)
    if len(y) == 0 or lam is None or np.isnan(lam):
        return float("nan")
    r = np.concatenate([y - lam * f, [1.0, -lam]])
    return float(r.var() / len(r))


def ppi_variance(f, y, codes, n_codes: int, psi: np.ndarray, lam: float, floor: bool = True) -> float:
    """Var(theta) of ``ppi_influence``: the cluster-robust G/(G−1) · sum psi² over the clusters
    holding a unit; with ``floor``, at least ``rectifier_floor`` of the labelled units plus
    lam² × the clustered variance of mean_N(f) (docs/metrics.md, "Few labels")."""
    f, y, codes = np.asarray(f, dtype=float), np.asarray(y, dtype=float), np.asarray(codes)
    present = np.unique(codes)
    se = influence_se(psi[present])
    var = se ** 2
    if not floor:
        return var
    lab = ~np.isnan(y)
    psi_f = np.bincount(codes, f - f.mean(), minlength=n_codes) / len(f) if len(f) else np.zeros(n_codes)
    full = influence_se(psi_f[present]) ** 2 if len(present) > 1 else 0.0
    return float(np.nanmax([var, rectifier_floor(f[lab], y[lab], lam) + lam ** 2 * full]))


def ppi_mean(f, y, clusters=None, lam: float | None = 1.0, ci: float = 0.95, floor: bool = True) -> dict:
    """``ppi_influence`` with its normal CI: {estimate, se, ci_low, ci_high, lam, n_labelled, n}.
    Without ``clusters`` every unit is its own cluster. ``lam`` = 1 (classic PPI) by default: the
    data-tuned lam (None) covers below its level even at 150 labels (docs/benchmarks.md); ``floor``:
    the small-label variance floor of ``ppi_variance``."""
    f = np.asarray(f, dtype=float)
    clusters = np.arange(len(f)) if clusters is None else clusters
    [codes] = cluster_codes(clusters)
    g = int(codes.max()) + 1 if len(codes) else 0
    theta, psi, lam = ppi_influence(f, y, codes, g, lam)
    se = math.sqrt(ppi_variance(f, y, codes, g, psi, lam, floor)) if g > 1 and not math.isnan(theta) else math.nan
    half = z(0.5 + ci / 2) * se
    return {"estimate": theta, "se": se, "ci_low": theta - half, "ci_high": theta + half, "lam": lam,
            "n_labelled": int((~np.isnan(np.asarray(y, dtype=float))).sum()), "n": len(f)}


# ---------------------------------------------------------------------------------------------
# Agreement of a binary grader with binary labels


def wilson(successes: float, n: float, ci: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a proportion (Wilson 1927)."""
    if n <= 0:
        return float("nan"), float("nan")
    zz = z(0.5 + ci / 2)
    p = successes / n
    centre = (p + zz ** 2 / (2 * n)) / (1 + zz ** 2 / n)
    half = zz * math.sqrt(p * (1 - p) / n + zz ** 2 / (4 * n ** 2)) / (1 + zz ** 2 / n)
    return float(centre - half), float(centre + half)


def cohen_kappa(table, ci: float = 0.95) -> tuple[float, float, float, float]:
    """Cohen's kappa of a square confusion table (rows: rater A, columns: rater B; counts) with
    the large-sample standard error of Fleiss, Cohen & Everitt (1969) and its normal CI.
    Returns (kappa, se, ci_low, ci_high); NaN where kappa is undefined (chance agreement 1)."""
    t = np.asarray(table, dtype=float)
    n = t.sum()
    if n == 0:
        return (float("nan"),) * 4
    p = t / n
    rows, cols = p.sum(1), p.sum(0)
    po, pe = float(np.trace(p)), float(rows @ cols)
    if pe >= 1 - 1e-12:
        return (float("nan"),) * 4
    kappa = (po - pe) / (1 - pe)
    k = len(t)
    diag = sum(p[i, i] * ((1 - pe) - (rows[i] + cols[i]) * (1 - po)) ** 2 for i in range(k))
    off = (1 - po) ** 2 * sum(p[i, j] * (cols[i] + rows[j]) ** 2 for i in range(k) for j in range(k) if i != j)
    var = (diag + off - (po * pe - 2 * pe + po) ** 2) / (n * (1 - pe) ** 4)
    se = math.sqrt(max(var, 0.0))
    half = z(0.5 + ci / 2) * se
    return float(kappa), se, float(kappa - half), float(kappa + half)
