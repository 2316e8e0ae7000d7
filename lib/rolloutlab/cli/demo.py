"""The demo's commands: ``synth`` (synthetic logs), ``demo-server`` (the FinQA-like tool and grader
endpoints, captured), ``demo`` (all of it, end to end).
"""
from __future__ import annotations

from pathlib import Path

from .. import config
from .common import EXIT_FAILED, EXIT_OK, _add_db, _for_people, _plain, _print_metrics, _print_table, _writing
from .load import _ingest_report

def cmd_demo_server(args) -> int:
    import os

    from ..capture.demo_server import check_exposure, serve

    token = args.token or os.environ.get(config.DEMO_SERVER_TOKEN_ENV_VAR) or None
    check_exposure(args.host, token)  # before saying it listens: a ValueError is exit 2 with what to do
    print(f"demo tool server (synthetic FinQA) on http://{args.host}:{args.port}: POST /search /list /cat /grade; "
          f"logging to {args.log_dir} (Ctrl-C stops)", flush=True)
    log = serve(port=args.port, log_dir=args.log_dir, host=args.host, rollout_id_header=args.rollout_id_header,
                run=args.run, fail_rate=args.fail_rate, token=token)
    stats = log.stats()
    print(f"logged {stats['events']} events in {len(stats['files'])} file(s), {stats['failures']} failures to log"
          + (f" (last: {stats['last_error']})" if stats["failures"] else "")
          + f"; load them with: rolloutlab ingest {args.log_dir}")
    return EXIT_OK if not stats["failures"] else EXIT_FAILED


def cmd_synth(args) -> int:
    from ..demo import synth

    with _writing(args.out, "--out"):
        if args.format == "rft-endpoint":
            paths = synth.write_endpoint(args.out, samples=args.samples, attempts=args.attempts, seed=args.seed)
        else:
            paths = synth.write_native(args.out, samples=args.samples, attempts=args.attempts,
                                       checkpoints=args.checkpoints, seed=args.seed, messages=not args.no_messages)
    for path in paths:
        print(f"wrote {path} (synthetic)")
    return EXIT_OK


DEMO_SUMMARY = ["run", "rollouts", "samples", "n_excluded", "mean_score", "pass_at_1", "best_of_n",
                "signal_share", "tool_calls_mean", "long_tail_share", "latency_p95"]
# The training step the demo projects endpoint load for, printed and in its report.
DEMO_PLANNED_STEP = config.DEMO_PLANNED_STEP
DEMO_BASE, DEMO_CANDIDATE = "base", "step10"


def _demo_role(run: str, step, split) -> str:
    """What a run of the demo is, in words."""
    if run == DEMO_BASE:
        return f"evaluation of the base checkpoint ({split} split)"
    if run == DEMO_CANDIDATE:
        return f"evaluation of the fine-tuned checkpoint, step {step} ({split} split)"
    if run.startswith("train-step"):
        return f"training rollouts at step {step} (endpoint logs)"
    return "other run in this database"


def _demo_runs(con, source_ids) -> list[str]:
    """The runs the demo's own files loaded (not the capture, not anything else in the database)."""
    rows = con.execute("SELECT DISTINCT run_id FROM rollouts WHERE list_contains(?, source_id)",
                       [[int(v) for v in map(_plain, source_ids) if v is not None]]).fetchall()
    return sorted(r for (r,) in rows)


def _demo_capture(out: Path) -> Path:
    """Drive rollouts against the demo tool server (capture on) and keep its log as one file, so
    that a second demo replaces it instead of adding a second copy. Its grade events (and rollout
    ids) carry the capture run's label, ``config.DEMO_SERVER_RUN``."""
    import shutil
    import tempfile

    from ..capture.demo_server import drive, running

    with tempfile.TemporaryDirectory() as tmp:
        with running(tmp, run=config.DEMO_SERVER_RUN) as url:
            drive(url, rollouts=config.DEMO_DRIVE["rollouts"], concurrency=config.DEMO_DRIVE["concurrency"],
                  prefix=config.DEMO_SERVER_RUN)
        out.mkdir(parents=True, exist_ok=True)
        target = out / "endpoint-events.jsonl"
        with open(target, "wb") as merged:
            for part in sorted(Path(tmp).glob("*.jsonl")):
                with open(part, "rb") as fh:
                    shutil.copyfileobj(fh, merged)
    return target


def cmd_demo(args) -> int:
    from ..store import catalog, database as store
    from ..text import fmt
    from ..demo import synth
    from ..ingest import ingest
    from ..analysis.compare import MEAN_OF_SAMPLE_MEANS, compare
    from ..analysis.metrics import summary
    from ..analysis.readiness import check
    from ..views.report import write_report
    from ..analysis.audit import audit
    from ..analysis.metrics import capacity

    base, candidate, side = DEMO_BASE, DEMO_CANDIDATE, config.DEMO_SERVER_RUN
    step = DEMO_PLANNED_STEP
    # base and step10 are graded by an exact answer, a model judge and a format check, with a few
    # reward hacks planted in step10 for the audit to find (SYNTHETIC)
    with _writing(args.out, "--out"):
        native, _ = synth.write_judged(args.out / "native", samples=200, attempts=3, messages=True, hack_rate=0.02)
        paths = native + synth.write_endpoint(args.out / "endpoint")
    con = store.connect(args.db)
    try:
        result = ingest(con, paths)
        _ingest_report(result)
        # the tables show the runs these files loaded: the same on every demo, whatever else (the
        # capture below, a run of your own) the database holds
        runs = _demo_runs(con, result.source_id)
        listed = catalog.runs(con)
        listed = listed[listed.run.isin(runs)]
        listed = listed.assign(what=[_demo_role(r, s, sp) for r, s, sp in zip(listed.run, listed.step, listed.split)])
        print("\nruns of the demo (rolloutlab runs):")
        shown = ["run", "step", "split", "rollouts", "samples", "mean_score", "rejected_in_sources", "infra_errors",
                 "without_sample", "what"]
        _print_table(_for_people(listed[shown]))
        print("\nsummary (rolloutlab summary):")
        _print_metrics(summary(con, listed.run.tolist())[DEMO_SUMMARY])
        print()
        checks = check(con, base)
        print(f"readiness of {base}: " + ", ".join(f"{n} {s}" for s, n in checks.status.value_counts().items())
              + f" (rolloutlab check --run {base})")
        diff = compare(con, base, candidate, n_boot=1000).set_index("metric")
        score, calls, p95 = (diff.loc[m] for m in ("score", "tool_calls_per_rollout", "latency_p95"))
        print(f"{base} -> {candidate}: score ({MEAN_OF_SAMPLE_MEANS}) {fmt.number(score.base)} -> "
              f"{fmt.number(score.candidate)} "
              f"({fmt.signed(score['diff'])}, 95% CI {fmt.interval(score.ci_low, score.ci_high)}, "
              f"{fmt.pvalue(score.p_value)}), tool calls {fmt.number(calls.base)} -> {fmt.number(calls.candidate)}, "
              f"P95 latency {fmt.seconds(p95.base)} -> {fmt.seconds(p95.candidate)} "
              f"(rolloutlab compare --base {base} --candidate {candidate})")
        suspects = audit(con, candidate, base=base)
        print(f"reward-hacking suspects in {candidate}: {len(suspects):,} "
              f"(rolloutlab audit --run {candidate} --base {base})")
        captured = _demo_capture(args.out / "captured")
        _ingest_report(ingest(con, [captured], progress=False))
        plan = capacity(con, side, **step).set_index("tool").loc["(all)"]
        n = step["batch_size"] * step["compute_multiplier"]
        print(f"side run {side}: {config.DEMO_DRIVE['rollouts']} rollouts driven against the demo tool server "
              "(endpoint capture; no split, no step: not in the tables above, the report or its training curves), "
              f"peak {fmt.value(_plain(plan.peak_calls_in_flight))} calls in flight; a step of {step['batch_size']} x "
              f"{step['compute_multiplier']} = {n:,} rollouts would peak at "
              f"{fmt.value(_plain(plan.projected_peak_calls_in_flight))} calls in flight, "
              f"{fmt.number(plan.projected_peak_calls_per_s)} calls/s (rolloutlab capacity --run {side} "
              f"--batch-size {step['batch_size']} --compute-multiplier {step['compute_multiplier']})")
        with _writing(args.report, "--report"):
            report = write_report(con, base, candidate, args.report, **step)
        print(f"report: {report} ({base} -> {candidate}; endpoint load projected for a step of "
              f"{step['batch_size']} x {step['compute_multiplier']})")
    finally:
        con.close()
    print(f"\nsynthetic demo logs: {args.out}\ndatabase: {config.db_path(args.db)}"
          "\nnext: make lab (notebooks), or rolloutlab runs")
    return EXIT_OK


def add_demo_server(sub) -> None:
    p = sub.add_parser("demo-server", help="the demo's FinQA-like tool and grader endpoints, logging every call "
                                           "(rft-endpoint events) until Ctrl-C")
    p.add_argument("--port", type=int, default=config.DEMO_SERVER_PORT)
    p.add_argument("--host", default=config.DEMO_SERVER_HOST)
    p.add_argument("--log-dir", type=Path, default=config.DEMO_SERVER_DIR, help="where the event logs go")
    p.add_argument("--rollout-id-header", help="read the rollout id from this header (default: the body's 'id')")
    p.add_argument("--run", default=config.DEMO_SERVER_RUN, help="run label of the grade events")
    p.add_argument("--fail-rate", type=float, default=0.0, help="share of tool calls answered 503 (infra failures)")
    p.add_argument("--token", help=f"require 'Authorization: Bearer TOKEN' on every route (default: "
                                   f"${config.DEMO_SERVER_TOKEN_ENV_VAR}); required to bind beyond loopback")


def add_synth(sub) -> None:
    p = sub.add_parser("synth", help="write synthetic native JSONL (demo data; clearly synthetic)")
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--samples", type=int, default=200)
    p.add_argument("--attempts", type=int, default=3)
    p.add_argument("--checkpoints", default="base,step10", help="comma-separated: base, stepN ...")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-messages", action="store_true", help="leave out message transcripts")
    p.add_argument("--format", choices=("native", "rft-endpoint"), default="native",
                   help="native JSONL, or a training run as Agent RFT endpoint logs (steps 0-10)")


def add_demo(sub) -> None:
    p = sub.add_parser("demo", help="synthesize demo logs, ingest them, print a summary")
    _add_db(p)
    p.add_argument("--out", type=Path, default=config.DEMO_DIR, help="where the demo logs go")
    p.add_argument("--report", type=Path, default=config.DEMO_REPORT, help="where the demo report goes")


# each command: the function that adds its parser, the one that runs it
COMMANDS = {"demo-server": (add_demo_server, cmd_demo_server), "synth": (add_synth, cmd_synth), "demo": (add_demo, cmd_demo)}
