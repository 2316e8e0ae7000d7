"""Simulations of the decisions rolloutlab's statistics make (not timings): does each interval keep
its level, each test its false-positive rate, each sample-size plan its power? Monte-Carlo
experiments through the library's own code, every number with its Monte-Carlo standard error.

    python bench/simulations.py [--reps 2000] [--only compare,power,ppi,failure_modes] [--seed 0]

- compare: coverage of the primary metric's CI and the false-positive rate of its test at 30 and
  150 samples, under an exchangeable null (the candidate is the base checkpoint again) and two
  non-exchangeable ones (a candidate that differs sample by sample with the same mean), through
  ``compare.paired_table`` (compare's numbers from per-sample arrays: the clustered t), beside the
  alternatives tried (the percentile bootstrap compare used before, the exact sign-flip test and its
  inverted interval); the secondary family's family-wise error and secondary tests under the null.
- primary_null: the primary test's false-positive rate alone, with five times the experiments.
- power: rl.power's recommendation from each of 20 pilots ingested into a store, then fresh
  experiments of that size decided by compare's test of the primary metric (and, for the record,
  by the sign-flip test).
- ppi: coverage of the prediction-powered interval (``stats.ppi_mean``, what grader_calibration
  computes) at 20, 60 and 150 labels, for three graders.
- failure_modes: the null rate of the failure-mode diff belongs to that module's owners; this
  section runs ``failures.null_diff_rate`` when the library has it and says it skipped otherwise.

Results are recorded in docs/benchmarks.md ("Simulations"). The standard error of a share p over
R experiments is sqrt(p (1 - p) / R).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import rolloutlab as rl
from rolloutlab.analysis import stats
from rolloutlab.demo import synth
from rolloutlab.analysis.compare import paired_table

from common import machine


def share(hits: float, reps: int) -> str:
    """A share with its Monte-Carlo standard error: 95.1% ± 0.5."""
    p = hits / reps
    return f"{100 * p:.1f}% ± {100 * math.sqrt(max(p * (1 - p), 1e-12) / reps):.1f}"


# --- compare --------------------------------------------------------------------------------------

def expected_score(p: np.ndarray) -> np.ndarray:
    """A sample's expected score: 1 when it passes, 0.5 in 30% of its failures."""
    return p + (1 - p) * 0.15


GRADERS = ("judge", "blind")  # a grader that follows the score, and one that ignores the answer


# Scenarios: (base pass probabilities, candidate's) -> arrays; samples' p ~ Beta(0.5, 0.5): many
# always / never solved, as in real evaluations.
def exchangeable(p, _):
    return p


def decisive(p, _):
    """Non-exchangeable null: the candidate is more decisive (0.99 where the base leans to a pass,
    0.01 elsewhere); by the symmetry of Beta(0.5, 0.5) its mean score equals the base's."""
    return np.where(p > 0.5, 0.99, 0.01)


def skewed(p, a):
    """Non-exchangeable null: 8% of the samples gain a lot (+0.9), the rest lose a little (a,
    calibrated so that the mean difference is 0): per-sample differences far from symmetric."""
    gain = (p * 1e6) % 1 < 0.08  # a pseudo-random 8%, independent of how hard the sample is
    return np.where(gain, np.clip(p + 0.9, 0, 1), np.clip(p - a, 0, 1))


def improved(p, _):
    """Not a null: every sample 0.1 more likely to pass (for coverage of a non-zero difference)."""
    return np.clip(p + 0.1, 0, 1)


def population_difference(scenario, a: float, n: int = 4_000_000, seed: int = 99) -> float:
    p = np.random.default_rng(seed).beta(0.5, 0.5, n)
    return float((expected_score(scenario(p, a)) - expected_score(p)).mean())


def calibrate_skew() -> float:
    lo, hi = 0.0, 0.5
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if population_difference(skewed, mid) > 0 else (lo, mid)
    return (lo + hi) / 2


def compare_section(reps: int, seed: int) -> dict:
    a = calibrate_skew()
    scenarios = {"exchangeable null": exchangeable, "non-exchangeable null: more decisive": decisive,
                 "non-exchangeable null: skewed gains": skewed, "every sample +0.1 (coverage)": improved}
    targets = {name: population_difference(f, a) for name, f in scenarios.items()}
    targets["non-exchangeable null: more decisive"] = 0.0  # exactly, by the symmetry of Beta(0.5, 0.5)
    print(f"skewed scenario: the rest lose {a:.4f}; population mean differences "
          + ", ".join(f"{k}: {v:+.2e}" for k, v in targets.items()))
    results = {}
    for name, scenario in scenarios.items():
        for n in (30, 150):
            rng = np.random.default_rng([seed, n, len(name)])
            tally = dict.fromkeys(["covered", "rejected", "disagree", "old_covered", "old_rejected", "old_disagree",
                                   "flip_covered", "flip_rejected", "secondary_any", "calls_rejected",
                                   "latency_rejected", "judge_rejected"], 0)
            t0 = time.perf_counter()
            for r in range(reps):
                p = rng.beta(0.5, 0.5, n)
                rate = rng.gamma(3, 1.5, n)
                nb, db, sb = synth.compare_arrays(rng, p, rate, 3, GRADERS)
                nc, dc, sc = synth.compare_arrays(rng, scenario(p, a), rate, 3, GRADERS)
                df = paired_table(nb, db, nc, dc, sb, sc, GRADERS, n_boot=1000, seed=r).set_index("metric")
                row = df.loc["score"]
                target = targets[name]
                tally["covered"] += row.ci_low <= target <= row.ci_high
                tally["rejected"] += bool(row.significant)
                tally["disagree"] += bool(row.significant) != (row.ci_low > 0 or row.ci_high < 0)
                # before: a percentile-bootstrap CI beside the permutation p-value, the verdict read from the CI
                [[lo, hi]], _ = stats.paired_bootstrap(nb[:, 0], db[:, 0], nc[:, 0], dc[:, 0], n_boot=1000, seed=r)
                old_verdict = lo > 0 or hi < 0
                tally["old_covered"] += lo <= target <= hi
                tally["old_rejected"] += old_verdict
                # the exact alternative: the sign-flip test and the interval that inverts it; its p is
                # the permutation p-value compare printed beside the percentile CI before
                [fp], [flo], [fhi] = stats.signflip_tests(nc[:, 0] - nb[:, 0], n_perm=2000, seed=r)
                tally["flip_covered"] += flo <= target <= fhi
                tally["flip_rejected"] += fp <= 0.05
                tally["old_disagree"] += old_verdict != (fp <= 0.05)
                if scenario is exchangeable:  # every metric's null holds: the secondary tests too
                    tally["secondary_any"] += bool(df.significant[df.family == "secondary"].any())
                    tally["calls_rejected"] += df.loc["tool_calls_per_rollout", "p_value"] <= 0.05
                    tally["latency_rejected"] += df.loc["latency_p95", "p_value"] <= 0.05
                    tally["judge_rejected"] += df.loc["grader:judge", "p_value"] <= 0.05
            seconds = time.perf_counter() - t0
            results[f"{name}, {n} samples"] = {k: v / reps for k, v in tally.items()} | {"reps": reps,
                                                                                          "seconds": seconds}
            line = (f"{name:40s} n={n:3d}: CI covers {share(tally['covered'], reps)}, "
                    f"significant in {share(tally['rejected'], reps)}, CI and test disagree {tally['disagree']}; "
                    f"sign-flip covers {share(tally['flip_covered'], reps)}, rejects {share(tally['flip_rejected'], reps)}; "
                    f"before: percentile CI covers {share(tally['old_covered'], reps)}, its verdict fires "
                    f"{share(tally['old_rejected'], reps)}, disagrees with the p beside it in "
                    f"{share(tally['old_disagree'], reps)}")
            if scenario is exchangeable:
                line += (f"; any secondary significant (Holm) {share(tally['secondary_any'], reps)}, "
                         f"tool calls (clustered t) {share(tally['calls_rejected'], reps)}, "
                         f"latency p95 (bootstrap) {share(tally['latency_rejected'], reps)}, "
                         f"grader:judge (clustered t) {share(tally['judge_rejected'], reps)}")
            print(line + f" [{seconds:.0f} s]", flush=True)
    return results


def primary_null_section(reps: int, seed: int) -> dict:
    """The primary test's false-positive rate alone, with 5 x reps experiments per size (the score
    column only, so it is cheap): the precision the compare section's 2,000 cannot give."""
    results = {}
    for n in (30, 150):
        rng = np.random.default_rng([seed, 7, n])
        experiments = 5 * reps
        d = np.empty((n, experiments))
        for r in range(experiments):
            p, rate = rng.beta(0.5, 0.5, n), rng.gamma(3, 1.5, n)
            nb, _, _ = synth.compare_arrays(rng, p, rate, 3, ())
            nc, _, _ = synth.compare_arrays(rng, p, rate, 3, ())
            d[:, r] = nc[:, 0] - nb[:, 0]
        zero, ones = np.zeros_like(d), np.ones_like(d)
        *_, pv = stats.ratio_t_tests(zero, ones, d, ones)
        hits = int((pv <= 0.05).sum())
        results[f"{n} samples"] = {"false_positive_rate": hits / experiments, "experiments": experiments}
        print(f"exchangeable null, {n} samples x 3: the score's test rejects in {share(hits, experiments)} "
              f"({experiments:,} experiments)", flush=True)
    return results


# --- power ----------------------------------------------------------------------------------------

def expit(x):
    return 1 / (1 + np.exp(-x))


def binary_pair(gamma: float, tau: float = 0.6):
    """Pass/fail checkpoints on the same samples: logits eta ~ N(0, 1.2²), the candidate's
    eta + gamma + tau · noise (it gains on average, more on some samples)."""
    def draw(rng, n, k):
        eta = rng.normal(0, 1.2, n)
        pb, pc = expit(eta), expit(eta + gamma + tau * rng.normal(0, 1, n))
        return (rng.random((n, k)) < pb[:, None]).astype(float), (rng.random((n, k)) < pc[:, None]).astype(float)

    def effect():
        eta = np.random.default_rng(7).normal(0, 1.2, 4_000_000)
        return float((expit(eta + gamma + tau * np.random.default_rng(8).normal(0, 1, eta.size)) - expit(eta)).mean())
    return draw, effect()


def continuous_pair(delta: float, rho: float = 0.5, sd_between: float = 0.15, sd_within: float = 0.25):
    """Partial-credit scores; the candidate's per-sample means correlate rho with the base's."""
    def draw(rng, n, k):
        mb = rng.normal(0.5, sd_between, n)
        mc = 0.5 + delta + rho * (mb - 0.5) + math.sqrt(1 - rho ** 2) * sd_between * rng.normal(0, 1, n)
        return mb[:, None] + rng.normal(0, sd_within, (n, k)), mc[:, None] + rng.normal(0, sd_within, (n, k))
    return draw, delta


def pilot_store(folder: Path, runs: dict[str, np.ndarray]):
    """The pilot's rollouts ingested into a fresh store, as a user's logs would be."""
    path = folder / "pilot.jsonl"
    with path.open("w") as f:
        for run, scores in runs.items():
            for i, row in enumerate(scores):
                for j, s in enumerate(row):
                    f.write(json.dumps({"run": run, "sample_id": f"p{i:05d}", "rollout_id": f"{run}-{i}-{j}",
                                        "score": float(s), "status": "ok", "latency_s": 1.0, "tool_calls": []}) + "\n")
    con = rl.connect(folder / "pilot.duckdb")
    rl.ingest(con, path, progress=False)
    return con


def power_section(reps: int, seed: int, pilots: int = 20) -> dict:
    """Per case, ``pilots`` pilot experiments ingested into one store; rl.power's recommendation
    from each; then reps / pilots fresh experiments at each recommendation, decided by compare's
    test of the primary metric. The achieved power includes the pilots' own noise, as a user's
    would."""
    cases = {
        "pass/fail, with a candidate (800 x 4 pilots)": (binary_pair(0.25), 800, 4, True, "pass@1"),
        "partial credit, no candidate (assumed correlation 0.5 = planted; 600 x 3 pilots)":
            (continuous_pair(0.03), 600, 3, False, "score"),
        "pass/fail, a large effect: a small experiment (400 x 2 pilots)": (binary_pair(1.2), 400, 2, True, "pass@1"),
    }
    per_pilot = max(reps // pilots, 1)
    results = {}
    for name, ((draw, delta), n_pilot, k, with_candidate, metric) in cases.items():
        rng = np.random.default_rng([seed, n_pilot, k])
        runs = {}
        for i in range(pilots):
            b, c = draw(rng, n_pilot, k)
            runs[f"base{i:02d}"] = b
            if with_candidate:
                runs[f"cand{i:02d}"] = c
        with tempfile.TemporaryDirectory() as tmp:
            con = pilot_store(Path(tmp), runs)
            needed = [int(rl.power(con, f"base{i:02d}", f"cand{i:02d}" if with_candidate else None, delta=delta,
                                   metric=metric).attrs["samples_needed"]) for i in range(pilots)]
            con.close()
        hits = flips = 0
        for n in needed:
            d = np.empty((n, per_pilot))
            for r in range(per_pilot):
                bb, cc = draw(rng, n, k)
                d[:, r] = cc.mean(1) - bb.mean(1)
            # compare's decision on the primary metric: the clustered t of the per-sample differences
            zero, ones = np.zeros_like(d), np.ones_like(d)
            *_, p = stats.ratio_t_tests(zero, ones, d, ones)
            hits += int((p <= 0.05).sum())
            flips += int((stats.signflip_tests(d, n_perm=2000, seed=seed)[0] <= 0.05).sum())
        total = per_pilot * pilots
        results[name] = {"delta": delta, "attempts": k, "samples_needed": needed, "power": hits / total,
                         "sign_flip_power": flips / total, "experiments": total}
        print(f"{name}: delta {delta:.4f} -> rl.power recommends {int(np.median(needed))} samples x {k} (median of "
              f"{pilots} pilots, {min(needed)}-{max(needed)}); compare's test rejects in {share(hits, total)} "
              f"(target 80%; the sign-flip test {share(flips, total)})", flush=True)
    return results


# --- PPI ------------------------------------------------------------------------------------------

def ppi_section(reps: int, seed: int) -> dict:
    graders = {"passes 30% of true fails": (0.3, 0.0, (2, 2)), "15% false passes, 10% false fails": (0.15, 0.1, (2, 2)),
               "rare passes (Beta(1, 4)), 10% errors each way": (0.1, 0.1, (1, 4))}
    variants = {"lam = 1 + floor (default)": dict(lam=1.0, floor=True), "lam = 1, no floor": dict(lam=1.0, floor=False),
                "lam tuned, no floor (before)": dict(lam=None, floor=False)}
    samples, k = 300, 3
    clusters = np.repeat(np.arange(samples), k)
    results = {}
    for gname, (fp, fn, ab) in graders.items():
        for n_lab in (20, 60, 150):
            rng = np.random.default_rng([seed, n_lab, int(fp * 100)])
            hits = dict.fromkeys(variants, 0)
            width = dict.fromkeys(variants, 0.0)
            target = ab[0] / sum(ab)  # the population's true pass rate
            for _ in range(reps):
                p = rng.beta(*ab, samples)
                truth = rng.random((samples, k)) < p[:, None]
                u = rng.random((samples, k))
                f = np.where(truth, u >= fn, u < fp).ravel().astype(float)
                y = np.full(f.size, np.nan)
                lab = rng.choice(f.size, n_lab, replace=False)
                y[lab] = truth.ravel()[lab]
                for v, kw in variants.items():
                    got = stats.ppi_mean(f, y, clusters, **kw)
                    hits[v] += got["ci_low"] <= target <= got["ci_high"]
                    width[v] += (got["ci_high"] - got["ci_low"]) / reps
            results[f"{gname}, {n_lab} labels"] = {v: {"coverage": hits[v] / reps, "width": width[v]} for v in variants}
            print(f"{gname:48s} {n_lab:3d} labels: " + "; ".join(
                f"{v} {share(hits[v], reps)} (width {width[v]:.3f})" for v in variants), flush=True)
    return results


# --- failure modes (a hook) ---------------------------------------------------------------------

def failure_modes_section(reps: int, seed: int) -> dict:
    from rolloutlab.analysis import failure_modes as failures

    hook = getattr(failures, "null_diff_rate", None)
    if hook is None:
        print("failure_modes: skipped (the failure-mode diff's null rate is measured by its own work; "
              "define rolloutlab.analysis.failure_modes.null_diff_rate(reps, seed) -> dict and it runs here)")
        return {"skipped": True}
    result = hook(reps=reps, seed=seed)
    print(f"failure_modes: {result}")
    return result


SECTIONS = {"compare": compare_section, "primary_null": primary_null_section, "power": power_section,
            "ppi": ppi_section, "failure_modes": failure_modes_section}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=2000, help="experiments per cell")
    ap.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    print(f"{machine()}; {args.reps} experiments per cell\n")
    out = {}
    for name in args.only.split(","):
        if name not in SECTIONS:
            sys.exit(f"unknown section {name!r}: use {', '.join(SECTIONS)}")
        print(f"== {name}")
        out[name] = SECTIONS[name](args.reps, args.seed)
        print()
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
