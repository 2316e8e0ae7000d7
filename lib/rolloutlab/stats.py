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
    order = keep[np.argsort(p[keep], kind="stable")]
    scaled = m * p[order] / np.arange(1, m + 1)
    out[order] = np.minimum(1.0, np.minimum.accumulate(scaled[::-1])[::-1])
    return out


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


def mde(var_d: float, samples: float, alpha: float = 0.05, power: float = 0.8) -> float:
    """Minimum detectable effect of a two-sided z-test of mean(d) = 0 on ``samples`` paired
    samples: (z_{1−alpha/2} + z_power) × sqrt(Var(d) / n)."""
    if samples <= 0 or np.isnan(var_d):
        return float("nan")
    return float((z(1 - alpha / 2) + z(power)) * math.sqrt(max(var_d, 0.0) / samples))


def samples_needed(var_d: float, delta: float, alpha: float = 0.05, power: float = 0.8) -> float:
    """Samples for a two-sided z-test to detect a true mean difference ``delta`` with probability
    ``power``: ceil((z_{1−alpha/2} + z_power)² Var(d) / delta²) (at least 2)."""
    if delta == 0 or np.isnan(var_d) or np.isnan(delta):
        return float("nan")
    n = (z(1 - alpha / 2) + z(power)) ** 2 * max(var_d, 0.0) / delta ** 2
    return float(max(math.ceil(n - 1e-9), 2))


def power_at(delta: float, var_d: float, samples: float, alpha: float = 0.05) -> float:
    """Probability that a two-sided z-test at ``alpha`` rejects when the true difference is ``delta``."""
    from scipy.stats import norm

    if samples <= 0 or np.isnan(var_d) or np.isnan(delta):
        return float("nan")
    if var_d <= 0:
        return 1.0 if delta != 0 else alpha
    shift = abs(delta) / math.sqrt(var_d / samples)
    za = z(1 - alpha / 2)
    return float(norm.sf(za - shift) + norm.cdf(-za - shift))


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


def ppi_mean(f, y, clusters=None, lam: float | None = None, ci: float = 0.95) -> dict:
    """``ppi_influence`` with its normal CI: {estimate, se, ci_low, ci_high, lam, n_labelled, n}.
    Without ``clusters`` every unit is its own cluster."""
    f = np.asarray(f, dtype=float)
    clusters = np.arange(len(f)) if clusters is None else clusters
    [codes] = cluster_codes(clusters)
    g = int(codes.max()) + 1 if len(codes) else 0
    theta, psi, lam = ppi_influence(f, y, codes, g, lam)
    se = influence_se(psi)
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
