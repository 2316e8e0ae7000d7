"""Commands that measure and compare: ``summary``, ``check``, ``compare``, ``audit``, ``capacity``,
``power``, ``report``.
"""
from __future__ import annotations

from pathlib import Path

from .. import config
from .common import (EXIT_FAILED, EXIT_OK, NO_RUNS, PASS_THRESHOLD_HELP, _add_db, _for_people, _json_records, _plain,
                     _positive_int, _price_warnings, _prices_note, _print_json, _print_metrics, _print_table,
                     _printed_as_json_or_empty, _read, _sentence, _writing)

def cmd_audit(args) -> int:
    from ..text import fmt
    from ..analysis.audit import audit

    df = _read(args, lambda con: audit(con, args.run, base=args.base, pass_threshold=args.pass_threshold))
    total = len(df)
    if args.limit:
        df = df.head(args.limit)
    if not _printed_as_json_or_empty(args, df, f"no suspects in {args.run}"):
        for row in df.itertuples():
            score = "" if row.score != row.score else f"score {fmt.number(row.score)}, "
            print(f"{row.rank}. {row.rollout_id} (sample {row.sample_id}, {score}{row.n_tool_calls} tool calls): "
                  f"{row.reason}\n   {row.details}")
        if total > len(df):
            print(f"(first {len(df)} of {total}; --limit 0 for all)")
    return EXIT_OK


def cmd_capacity(args) -> int:
    import json

    from ..analysis.metrics import capacity, job_cost

    if args.steps is None and args.prices is not None:
        raise ValueError("--prices prices the job cost of --steps N: add --steps N")

    def query(con):
        df = capacity(con, args.run, batch_size=args.batch_size, compute_multiplier=args.compute_multiplier)
        if args.steps is None:
            return df, None
        with _price_warnings("capacity"):
            return df, job_cost(con, args.run, samples=args.batch_size, compute_multiplier=args.compute_multiplier,
                                steps=args.steps, prices=args.prices)

    df, job = _read(args, query)
    if args.json:
        if job is None:  # the documented shape: one record per tool
            _print_json(_json_records(df))
        else:
            _print_json(json.dumps({"capacity": json.loads(_json_records(df)),
                                    "job_cost": json.loads(_json_records(job))}, indent=2))
        return EXIT_OK
    shown = df.drop(columns=["peak_at", "peak_share", "rate_share", "rollouts_per_step", "projected_sandboxes"],
                    errors="ignore")
    _print_table(_for_people(shown))
    if df.attrs["rollouts_per_step"]:
        print(f"\na step of {df.attrs['rollouts_per_step']:,} rollouts started at once (batch size x compute "
              f"multiplier): {df.attrs['rollouts_per_step']:,} sandboxes alive at once; projected peaks assume each "
              "rollout behaves like this run's (docs/metrics.md, Capacity plan)")
    if job is not None:
        _print_job_cost(job)
    return EXIT_OK


def _print_job_cost(job) -> None:
    """``job_cost``'s rows (rollout, step, job) and what they leave out."""
    import pandas as pd

    from ..text import fmt

    a = job.attrs
    print(f"\nrollout cost of a job of {a['steps']:,} step(s) x {a['rollouts_per_step']:,} rollouts "
          f"({a['samples']:,} samples x compute multiplier {a['compute_multiplier']}), from {a['run']}'s cost per "
          f"rollout ({a['rollouts_used']:,} of {a['rollouts']:,} rollouts with a cost"
          + (f", from {a['cost_source']}" if a["cost_source"] else "") + "):")
    if not a["rollouts_used"]:
        print(f"  no rollout of {a['run']} has a cost: log cost_usd, or tokens and a model with a price "
              "(--prices FILE)")
    else:
        ci = f"{int(a['ci'] * 100)}% CI"
        _print_table(pd.DataFrame({
            "scope": job.scope, "rollouts": [fmt.count(v) for v in job.rollouts],
            "cost": [fmt.dollars(v) for v in job.cost_usd],
            ci: [f"{fmt.dollars(lo)} to {fmt.dollars(hi)}" for lo, hi in zip(job.ci_low, job.ci_high)],
            "p50": [fmt.dollars(v) if s == "rollout" else "" for s, v in zip(job.scope, job.p50)],
            "p95": [fmt.dollars(v) if s == "rollout" else "" for s, v in zip(job.scope, job.p95)]}))
        if _prices_note(a):
            print(_prices_note(a))
    print(f"{_sentence(a['excludes'])}.")


POWER_HEADLINE = ["base", "candidate", "metric", "delta", "alpha", "target_power", "samples", "attempts",
                  "rollouts", "mde", "se", "samples_needed", "power_at_delta", "correlation", "correlation_source",
                  "observed_diff", "single_attempt", "no_estimate", "decision"]


def cmd_power(args) -> int:
    import json

    import pandas as pd

    from ..text import fmt
    from ..analysis.power_analysis import advice, detectable_sentence, power, size

    df = _read(args, lambda con: power(con, args.base, args.candidate, delta=args.delta, alpha=args.alpha,
                                       power=args.power, metric=args.metric, pass_threshold=args.pass_threshold,
                                       include_errors=args.include_errors))
    a = df.attrs
    if args.json:
        headline = json.loads(pd.Series({k: _plain(a[k]) for k in POWER_HEADLINE}).to_json(double_precision=10))
        _print_json(json.dumps({**headline, "designs": json.loads(_json_records(df))}, indent=2))
        return EXIT_OK
    if a["no_estimate"]:  # no table of blanks: the reason, as every view says it
        print(detectable_sentence(df))
        return EXIT_OK
    shown = {"attempts": df.attempts.map(fmt.number), "samples": df.samples.map(fmt.count),
             "rollouts": df.rollouts.map(fmt.number), "design_effect": df.design_effect.map(fmt.number),
             "se": [fmt.MISSING if v != v else size(v, a["metric"]) for v in df.se],
             "mde": [fmt.MISSING if v != v else "±" + size(v, a["metric"]) for v in df.mde]}
    if args.delta is not None:
        shown.update({f"power at {size(args.delta, a['metric'], signed=True)}": df.power.map(fmt.share),
                      "samples_needed": df.samples_needed.map(fmt.count),
                      "rollouts_needed": df.rollouts_needed.map(fmt.count)})
    shown[""] = ["<- now" if c else "more samples than the run has" if b else ""
                 for c, b in zip(df.current, df.beyond_run_samples)]
    what = f"{a['base']} vs {a['candidate']}" if a["candidate"] else a["base"]
    print(f"{what}: {a['metric']}, designs at the same rollouts per run "
          f"({fmt.number(a['rollouts'])} = {fmt.count(a['samples'])} samples x {fmt.number(a['attempts'])} attempts)\n")
    _print_table(pd.DataFrame(shown))
    print()
    print(detectable_sentence(df))
    more = advice(df)
    if more:
        print(more[0].upper() + more[1:] + ".")
    print(f"Planned for {a['decision']}.")
    if a["single_attempt"]:
        print("One attempt per sample: the variance between samples and between attempts cannot be told apart, "
              "so only the current design is evaluated; run 2 or more attempts per sample to see the others.")
    return EXIT_OK


def cmd_summary(args) -> int:
    from ..analysis.metrics import summary

    df = _read(args, lambda con: summary(con, args.run, pass_threshold=args.pass_threshold,
                                         include_errors=args.include_errors))
    if not _printed_as_json_or_empty(args, df, NO_RUNS):
        _print_metrics(df)
        if df["n_excluded"].sum():
            print(f"\n{int(df['n_excluded'].sum())} infra-error / ungraded rollouts excluded from score "
                  "statistics (--include-errors counts them at the run's lowest reward)")
    return EXIT_OK


def cmd_check(args) -> int:
    from ..analysis.readiness import check, check_value, failed

    df = _read(args, lambda con: check(con, args.run, pass_threshold=args.pass_threshold,
                                       tool_budget=args.tool_budget))
    if args.json:
        _print_json(_json_records(df))
    else:
        for row in df.itertuples():
            value = check_value(row.check, row.value)
            value = f" ({value})" if value else ""
            print(f"{row.status.upper():5} {row.check}{value}: {row.advice}")
            if row.details:
                print(f"      {row.details}")
    return EXIT_FAILED if failed(df) else EXIT_OK


def compare_json(df) -> dict:
    """The stable --json shape of ``rolloutlab compare`` (docs/metrics.md)."""
    import json

    a = df.attrs
    return {
        "base": a["base"], "candidate": a["candidate"],
        "samples": {"shared": a["shared_samples"], "base_only": a["base_only"],
                    "candidate_only": a["candidate_only"], "unscored": a["unscored"]},
        "win_tie_loss": {"wins": a["wins"], "ties": a["ties"], "losses": a["losses"]},
        "settings": {k: a[k] for k in ("pass_threshold", "n_boot", "seed", "ci", "include_errors")},
        "decision": {"primary": a["primary"], "primary_method": a["primary_method"], "alpha": round(a["alpha"], 12),
                     "adjustment": a["adjustment"], "significant_from": a["significant_from"],
                     "secondary_tests": a["tests"], "duplicates": a["duplicates"], "constant": a["constant"]},
        "metrics": json.loads(df.to_json(orient="records", double_precision=10)),
    }


def cmd_compare(args) -> int:
    import json

    import pandas as pd

    from ..text import fmt
    from ..analysis.compare import DUPLICATE, MEAN_OF_SAMPLE_MEANS, PRIMARY, CONSTANT, compare, significance
    from ..text.fmt import unit_diff, unit_interval, unit_value

    df = _read(args, lambda con: compare(con, args.base, args.candidate, pass_threshold=args.pass_threshold,
                                         n_boot=args.n_boot, seed=args.seed, include_errors=args.include_errors,
                                         primary=args.primary))
    if args.json:
        _print_json(json.dumps(compare_json(df), indent=2))
        return EXIT_OK
    a = df.attrs
    print(f"{a['base']} -> {a['candidate']}: {a['shared_samples']:,} shared samples "
          f"(only in {a['base']}: {a['base_only']:,}, only in {a['candidate']}: {a['candidate_only']:,})\n")
    units = df.unit if "unit" in df else [None] * len(df)
    role = {PRIMARY: "primary", DUPLICATE: f"= {a['primary']}", CONSTANT: "constant"}
    shown = pd.DataFrame({
        "metric": [f"score ({MEAN_OF_SAMPLE_MEANS})" if m == "score" else m for m in df.metric],
        "base": [unit_value(v, u) for v, u in zip(df.base, units)],
        "candidate": [unit_value(v, u) for v, u in zip(df.candidate, units)],
        "diff": [unit_diff(v, u) for v, u in zip(df["diff"], units)],
        "ci": [unit_interval(lo, hi, u) for lo, hi, u in zip(df.ci_low, df.ci_high, units)],
        "p": [fmt.pvalue(p).removeprefix("p = ").replace("p < ", "< ") for p in df.p_value],
        "sig": ["*" if s else "" for s in df.significant],
        "test": [role.get(f, "") for f in df.family]})
    _print_table(shown.rename(columns={"ci": f"{int(a['ci'] * 100)}% CI of diff"}))
    print(f"\nper sample (each sample's mean score): {a['wins']:,} wins, {a['ties']:,} ties, "
          f"{a['losses']:,} losses. * = {significance(df).removeprefix('significant: ')} Each p and its CI come "
          f"from one test: a clustered t over samples for the means and ratios, a percentile bootstrap "
          f"({a['n_boot']:,} resamples, seed {a['seed']}) for latency percentiles.")
    return EXIT_OK


def cmd_report(args) -> int:
    from ..views.report import find_chromium, write_pdf, write_report

    chromium = find_chromium() if args.pdf else None  # before any work: no Chromium, no file written
    with _writing(args.output, "-o"):
        path = _read(args, lambda con: write_report(con, args.base, args.candidate, args.output, n_boot=args.n_boot,
                                                    batch_size=args.batch_size,
                                                    compute_multiplier=args.compute_multiplier))
    print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB, self-contained: open it in any browser)")
    if args.pdf:
        with _writing(path.with_suffix(".pdf"), "-o"):
            pdf = write_pdf(path, chromium=chromium)
        print(f"wrote {pdf} ({pdf.stat().st_size / 1e6:.1f} MB, printed by {chromium})")
    return EXIT_OK


def add_summary(sub) -> None:
    p = sub.add_parser("summary", help="per-run scores, signal, pass@k, tool use, latency, tokens")
    _add_db(p)
    p.add_argument("--run", action="append", help="run label (repeat for several; default: all)")
    p.add_argument("--pass-threshold", type=float, default=None, help=PASS_THRESHOLD_HELP)
    p.add_argument("--include-errors", action="store_true", help="count infra errors and ungraded rollouts at the run's lowest reward")
    p.add_argument("--json", action="store_true")


def add_check(sub) -> None:
    p = sub.add_parser("check", help="readiness checks of one run; exit 1 when a check fails")
    _add_db(p)
    p.add_argument("--run", required=True)
    p.add_argument("--pass-threshold", type=float, default=None, help=PASS_THRESHOLD_HELP)
    p.add_argument("--tool-budget", type=int, help="also check the share of rollouts over N tool calls")
    p.add_argument("--json", action="store_true")


def add_compare(sub) -> None:
    p = sub.add_parser("compare", help="base vs candidate: paired differences with confidence intervals")
    _add_db(p)
    p.add_argument("--base", required=True)
    p.add_argument("--candidate", required=True)
    p.add_argument("--pass-threshold", type=float, default=None, help=PASS_THRESHOLD_HELP)
    p.add_argument("--n-boot", type=int, default=2000, help="bootstrap resamples (latency percentiles)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--include-errors", action="store_true")
    p.add_argument("--primary", metavar="METRIC", default=config.COMPARE_PRIMARY,
                   help=f"the metric tested alone, the verdict's (default {config.COMPARE_PRIMARY}); the others "
                        "are adjusted as one family")
    p.add_argument("--json", action="store_true")


def add_audit(sub) -> None:
    p = sub.add_parser("audit", help="reward-hacking suspects of one run, most suspect first")
    _add_db(p)
    p.add_argument("--run", required=True)
    p.add_argument("--base", help="an earlier checkpoint on the same samples (adds the checks that compare)")
    p.add_argument("--pass-threshold", type=float, default=None, help=PASS_THRESHOLD_HELP)
    p.add_argument("--limit", type=int, default=20, help="at most this many (default 20; 0 for all)")
    p.add_argument("--json", action="store_true")


def add_capacity(sub) -> None:
    p = sub.add_parser("capacity", help="the load one run put on each tool endpoint, and a planned step's")
    _add_db(p)
    p.add_argument("--run", required=True)
    p.add_argument("--batch-size", type=int, help="samples per training step (projects the step's load)")
    p.add_argument("--compute-multiplier", type=int, help="rollouts per sample (default 1); needs --batch-size")
    p.add_argument("--steps", type=_positive_int(config.JOB_STEPS_MAX), metavar="N",
                   help="also the rollout cost of a job of N such steps (from this run's cost per rollout; "
                        "training fees not included)")
    p.add_argument("--prices", type=Path, metavar="FILE", help="a prices TOML file over the package's (with --steps)")
    p.add_argument("--json", action="store_true")


def add_power(sub) -> None:
    p = sub.add_parser("power", help="which differences a base vs candidate comparison can detect, and the "
                                     "samples and attempts it needs")
    _add_db(p)
    p.add_argument("--base", required=True)
    p.add_argument("--candidate", help="its covariance with the base comes from the shared samples (default: "
                                       f"assumed correlation {config.POWER_ASSUMED_CORRELATION})")
    p.add_argument("--delta", type=float, help="the difference to detect: adds power at it and samples needed")
    p.add_argument("--alpha", type=float, default=config.POWER_ALPHA, help="two-sided significance level")
    p.add_argument("--power", type=float, default=config.POWER_TARGET, help="the probability of detecting it")
    p.add_argument("--metric", choices=("score", "pass@1"), default="score")
    p.add_argument("--pass-threshold", type=float, default=None, help=PASS_THRESHOLD_HELP)
    p.add_argument("--include-errors", action="store_true")
    p.add_argument("--json", action="store_true")


def add_report(sub) -> None:
    p = sub.add_parser("report", help="a self-contained HTML report: base vs candidate")
    _add_db(p)
    p.add_argument("--base", required=True)
    p.add_argument("--candidate", required=True)
    p.add_argument("-o", "--output", required=True, type=Path)
    p.add_argument("--n-boot", type=int, default=2000)
    p.add_argument("--batch-size", type=int, help="the training step the endpoint-load section projects "
                   f"(default {config.CAPACITY_PLANNED_STEP['batch_size']})")
    p.add_argument("--compute-multiplier", type=int, help="with --batch-size (default 1)")
    p.add_argument("--pdf", action="store_true", help="also print it to a PDF beside the HTML (OUTPUT with .pdf; "
                                                      "needs Chromium)")


# each command: the function that adds its parser, the one that runs it
COMMANDS = {"summary": (add_summary, cmd_summary), "check": (add_check, cmd_check), "compare": (add_compare, cmd_compare), "audit": (add_audit, cmd_audit), "capacity": (add_capacity, cmd_capacity), "power": (add_power, cmd_power), "report": (add_report, cmd_report)}
