"""The ``rolloutlab`` command. Heavy libraries (plotting, notebooks) are imported only where used."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import config

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _add_db(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", help=f"DuckDB file (default: ${config.DB_ENV_VAR} or {config.DEFAULT_DB})")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rolloutlab", description="Agent RFT rollout logs in DuckDB.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("ingest", help="load log files (a folder means every file in it)")
    p.add_argument("paths", nargs="+", metavar="PATH")
    _add_db(p)
    p.add_argument("--format", default="auto", help="auto (default) or a format name, e.g. native")
    p.add_argument("--run", help="run label for every record (overrides the file's)")
    p.add_argument("--split", help="dataset split for every record (overrides the file's)")
    p.add_argument("--step", type=int, help="training step for every record (overrides the file's)")
    p.add_argument("--json", action="store_true", help="print the per-file results as JSON")

    p = sub.add_parser("watch", help="follow growing logs: ingest what is new every few seconds (Ctrl-C stops)")
    p.add_argument("paths", nargs="+", metavar="PATH")
    _add_db(p)
    p.add_argument("--interval", type=float, default=config.WATCH_INTERVAL_S, help="seconds between polls")
    p.add_argument("--once", action="store_true", help="one poll, then exit (for cron and scripts)")
    p.add_argument("--format", default="auto")
    p.add_argument("--run")
    p.add_argument("--split")
    p.add_argument("--step", type=int)

    p = sub.add_parser("runs", help="list what is loaded")
    _add_db(p)
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("rejects", help="records that did not load: file, line, reason")
    _add_db(p)
    p.add_argument("--run", help="only the files that loaded this run")
    p.add_argument("--source", type=int, help="only this file (its source_id, from `rolloutlab ingest`)")
    p.add_argument("--limit", type=int, default=50, help="at most this many (default 50; 0 for all)")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("summary", help="per-run scores, signal, pass@k, tool use, latency, tokens")
    _add_db(p)
    p.add_argument("--run", action="append", help="run label (repeat for several; default: all)")
    p.add_argument("--pass-threshold", type=float, default=config.PASS_THRESHOLD)
    p.add_argument("--include-errors", action="store_true", help="count infra errors and ungraded as score 0")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("check", help="readiness checks of one run; exit 1 when a check fails")
    _add_db(p)
    p.add_argument("--run", required=True)
    p.add_argument("--pass-threshold", type=float, default=config.PASS_THRESHOLD)
    p.add_argument("--tool-budget", type=int, help="also check the share of rollouts over N tool calls")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("compare", help="base vs candidate: paired differences with confidence intervals")
    _add_db(p)
    p.add_argument("--base", required=True)
    p.add_argument("--candidate", required=True)
    p.add_argument("--pass-threshold", type=float, default=config.PASS_THRESHOLD)
    p.add_argument("--n-boot", type=int, default=2000, help="bootstrap resamples (and permutations)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--include-errors", action="store_true")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("audit", help="reward-hacking suspects of one run, most suspect first")
    _add_db(p)
    p.add_argument("--run", required=True)
    p.add_argument("--base", help="an earlier checkpoint on the same samples (adds the checks that compare)")
    p.add_argument("--pass-threshold", type=float, default=config.PASS_THRESHOLD)
    p.add_argument("--limit", type=int, default=20, help="at most this many (default 20; 0 for all)")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("export", help="the canonical tables as a Parquet lake (Hive-partitioned by run, zstd)")
    _add_db(p)
    p.add_argument("--to", required=True, type=Path, help="a new (or empty) folder; rolloutlab ingest DIR reads it back")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("capacity", help="the load one run put on each tool endpoint, and a planned step's")
    _add_db(p)
    p.add_argument("--run", required=True)
    p.add_argument("--batch-size", type=int, help="samples per training step (projects the step's load)")
    p.add_argument("--compute-multiplier", type=int, help="rollouts per sample (default 1); needs --batch-size")
    p.add_argument("--json", action="store_true")

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

    p = sub.add_parser("synth", help="write synthetic native JSONL (demo data; clearly synthetic)")
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--samples", type=int, default=200)
    p.add_argument("--attempts", type=int, default=3)
    p.add_argument("--checkpoints", default="base,step10", help="comma-separated: base, stepN ...")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-messages", action="store_true", help="leave out message transcripts")
    p.add_argument("--format", choices=("native", "rft-endpoint"), default="native",
                   help="native JSONL, or a training run as Agent RFT endpoint logs (steps 0-10)")

    p = sub.add_parser("demo", help="synthesize demo logs, ingest them, print a summary")
    _add_db(p)
    p.add_argument("--out", type=Path, default=config.DEMO_DIR, help="where the demo logs go")
    p.add_argument("--report", type=Path, default=config.DEMO_REPORT, help="where the demo report goes")
    return parser


def _print_table(df) -> None:
    import pandas as pd

    with pd.option_context("display.max_columns", None, "display.width", 160):
        print(df.to_string(index=False))


def _metric_format(name: str):
    """How a metric of ``rl.summary`` reads for people: shares as percentages, costs in dollars,
    counts with separators, the rest to 3 significant digits."""
    from . import fmt

    if name.endswith("_share") or name.startswith(("pass_at_", "pass_hat_")) or name == "repeat_rate":
        return fmt.share
    if name.startswith("cost"):
        return fmt.dollars
    return fmt.value


def _print_metrics(df) -> None:
    """Runs as columns, metrics as rows, numbers as people read them (``fmt``; --json keeps them whole)."""
    table = df.set_index("run").T
    table = table.apply(lambda col: [_metric_format(m)(_plain(v)) for m, v in zip(table.index, col)])
    _print_table(table.reset_index(names="metric"))


def _plain(v):
    """numpy scalars as Python ones, so that ``fmt`` tells counts from measurements; pandas' NA
    and NaT as None (missing)."""
    import numpy as np

    from .htmltext import missing

    if missing(v):
        return None
    return v.item() if isinstance(v, np.generic) else v


def _for_people(df):
    """A copy of ``df`` with every cell as text for people (``fmt.value``); the frame is untouched."""
    from . import fmt

    return df.apply(lambda col: col.map(lambda v: fmt.value(_plain(v))).astype(object))


def _ingest_report(result) -> None:
    for row in result.itertuples():
        print(f"{row.path}: {row.action} ({row.format}) - {row.records} records, "
              f"{row.loaded} loaded, {row.rejected} rejected")
        for reason in row.reasons:
            print(f"    {reason}")
        if row.rejected > len(row.reasons):
            print(f"    ... see all with: rolloutlab rejects --source {row.source_id} --limit 0")


def cmd_ingest(args) -> int:
    from . import store
    from .ingest import ingest

    con = store.connect(args.db)
    try:
        result = ingest(con, args.paths, format=args.format, run=args.run, split=args.split,
                                   step=args.step)
    finally:
        con.close()
    if args.json:
        print(result.to_json(orient="records", indent=2))
    if result.empty:
        print(f"rolloutlab ingest: {_no_log_files(args.paths)}", file=sys.stderr)
        return EXIT_FAILED
    if not args.json:
        _ingest_report(result)
        print(f"total: {int(result.records.sum())} records, {int(result.loaded.sum())} loaded, "
              f"{int(result.rejected.sum())} rejected, database {config.db_path(args.db)}")
    # failure: records were read but none loaded, or no file could be read at all; a file that
    # holds no records (a tau2 file without simulations) is not a failure
    nothing = result.records.sum() > 0 and result.loaded.sum() == 0 and not (result.action == "unchanged").any()
    return EXIT_FAILED if nothing or (result.action == "failed").all() else EXIT_OK


# What ``ingest`` reads, by file type (the formats detect themselves from a file's first record;
# docs/formats.md). Every format of ingest.formats.FORMATS is named here (tests/test_cli.py).
LOG_FILE_TYPES = [
    ("JSON lines (.jsonl, or any name)", ["native", "rft-endpoint", "buildhours", "openai-chat", "openai-evals",
                                          "openai-finetune", "verl", "art (history.jsonl)"]),
    ("JSON (.json)", ["tau-bench", "tau2", "inspect", "openai-evals", "openai-finetune"]),
    ("Inspect logs (.eval)", ["inspect"]),
    ("Parquet (.parquet)", ["trl (completions_*.parquet)", "art (trajectories)"]),
]


def _no_log_files(paths) -> str:
    """Why an ingest of these folders read nothing: no files below them (hidden ones are skipped),
    and what it looks for."""
    folders = [Path(p) for p in paths if Path(p).is_dir()]
    hidden = sum(1 for folder in folders for f in folder.rglob("*")
                 if f.is_file() and any(part.startswith(".") for part in f.relative_to(folder).parts))
    where = ", ".join(str(f) for f in folders) or ", ".join(map(str, paths))
    looked = "\n".join(f"  {kind}: {', '.join(formats)}" for kind, formats in LOG_FILE_TYPES)
    return (f"no log files in {where}: {'the folder holds' if len(folders) == 1 else 'the folders hold'} no files "
            + (f"other than {hidden} hidden one(s) (names starting with '.', skipped)" if hidden else "at all")
            + f", nothing was loaded. ingest reads every file below a folder:\n{looked}\n"
            f"  a lake written by `rolloutlab export` (a folder holding {_lake_manifest()})\n"
            "Point it at the folder your trainer, harness or endpoints write their logs to (formats: docs/formats.md).")


def _lake_manifest() -> str:
    from .lake import MANIFEST

    return MANIFEST


def cmd_watch(args) -> int:
    from . import watch

    for path in args.paths:
        if not Path(path).exists():
            raise ValueError(f"{path}: no such file or folder to watch. Check the path (relative to {Path.cwd()}).")
    return watch.run(args.db, args.paths, args.interval, echo=lambda line: print(line, flush=True), once=args.once,
                     format=args.format, run=args.run, split=args.split, step=args.step)


def cmd_runs(args) -> int:
    from . import catalog

    df = _read(args, catalog.runs)
    if args.json:
        print(df.to_json(orient="records", indent=2))
    elif df.empty:
        print("no runs loaded yet: rolloutlab ingest PATH")
    else:
        _print_table(df)
    return EXIT_OK


def cmd_rejects(args) -> int:
    from . import catalog
    from .metrics import resolve_runs

    def query(con):
        if args.run:
            resolve_runs(con, args.run)  # an unknown run: the error lists the loaded ones
        return catalog.rejects(con, source_id=args.source, run=args.run, limit=args.limit or None)

    df = _read(args, query)
    if args.json:
        print(df.to_json(orient="records", indent=2))
    elif df.empty:
        print("no rejected records")
    else:
        for row in df.itertuples():
            print(f"{row.path}:{row.line_no}: {row.reason}")
        if args.limit and len(df) == args.limit:
            print(f"(first {args.limit}; --limit 0 for all)")
    return EXIT_OK


def cmd_audit(args) -> int:
    from . import fmt
    from .audit import audit

    df = _read(args, lambda con: audit(con, args.run, base=args.base, pass_threshold=args.pass_threshold))
    total = len(df)
    if args.limit:
        df = df.head(args.limit)
    if args.json:
        print(_json_records(df))
    elif df.empty:
        print(f"no suspects in {args.run}")
    else:
        for row in df.itertuples():
            score = "" if row.score != row.score else f"score {fmt.number(row.score)}, "
            print(f"{row.rank}. {row.rollout_id} (sample {row.sample_id}, {score}{row.n_tool_calls} tool calls): "
                  f"{row.reason}\n   {row.details}")
        if total > len(df):
            print(f"(first {len(df)} of {total}; --limit 0 for all)")
    return EXIT_OK


def cmd_export(args) -> int:
    from .lake import MANIFEST, export

    df = _read(args, lambda con: export(con, args.to))
    if args.json:
        print(_json_records(df))
        return EXIT_OK
    for row in df.itertuples():
        print(f"{row.table}: {row.rows} rows{' (partitioned by run)' if row.partitioned else ''}")
    print(f"lake: {args.to} (manifest {args.to / MANIFEST}); read it back with: rolloutlab ingest {args.to}")
    return EXIT_OK


def cmd_capacity(args) -> int:
    from .metrics import capacity

    df = _read(args, lambda con: capacity(con, args.run, batch_size=args.batch_size,
                                          compute_multiplier=args.compute_multiplier))
    if args.json:
        print(_json_records(df))
        return EXIT_OK
    shown = df.drop(columns=["peak_at", "peak_share", "rate_share", "rollouts_per_step", "projected_sandboxes"],
                    errors="ignore")
    _print_table(_for_people(shown))
    if df.attrs["rollouts_per_step"]:
        print(f"\na step of {df.attrs['rollouts_per_step']:,} rollouts started at once (batch size x compute "
              f"multiplier): {df.attrs['rollouts_per_step']:,} sandboxes alive at once; projected peaks assume each "
              "rollout behaves like this run's (docs/metrics.md, Capacity plan)")
    return EXIT_OK


def cmd_demo_server(args) -> int:
    import os

    from .demo_server import check_exposure, serve

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


def _read(args, query):
    """Run ``query(con)`` on the database opened read-only, and close it."""
    from . import store

    con = store.connect(args.db, read_only=True)
    try:
        return query(con)
    finally:
        con.close()


def _json_records(df) -> str:
    return df.to_json(orient="records", indent=2, double_precision=10, date_format="iso")


def cmd_summary(args) -> int:
    from .metrics import summary

    df = _read(args, lambda con: summary(con, args.run, pass_threshold=args.pass_threshold,
                                         include_errors=args.include_errors))
    if args.json:
        print(_json_records(df))
    elif df.empty:
        print("no runs loaded yet: rolloutlab ingest PATH")
    else:
        _print_metrics(df)
        if df["n_excluded"].sum():
            print(f"\n{int(df['n_excluded'].sum())} infra-error / ungraded rollouts excluded from score "
                  "statistics (--include-errors counts them as 0)")
    return EXIT_OK


def cmd_check(args) -> int:
    from .readiness import check, failed
    from .report import check_value

    df = _read(args, lambda con: check(con, args.run, pass_threshold=args.pass_threshold,
                                       tool_budget=args.tool_budget))
    if args.json:
        print(_json_records(df))
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
        "metrics": json.loads(df.to_json(orient="records", double_precision=10)),
    }


def cmd_compare(args) -> int:
    import json

    import pandas as pd

    from . import fmt
    from .compare import compare
    from .report import significance, unit_diff, unit_interval, unit_value

    df = _read(args, lambda con: compare(con, args.base, args.candidate, pass_threshold=args.pass_threshold,
                                         n_boot=args.n_boot, seed=args.seed, include_errors=args.include_errors))
    if args.json:
        print(json.dumps(compare_json(df), indent=2))
        return EXIT_OK
    a = df.attrs
    print(f"{a['base']} -> {a['candidate']}: {a['shared_samples']:,} shared samples "
          f"(only in {a['base']}: {a['base_only']:,}, only in {a['candidate']}: {a['candidate_only']:,})\n")
    units = df.unit if "unit" in df else [None] * len(df)
    shown = pd.DataFrame({
        "metric": df.metric, "base": [unit_value(v, u) for v, u in zip(df.base, units)],
        "candidate": [unit_value(v, u) for v, u in zip(df.candidate, units)],
        "diff": [unit_diff(v, u) for v, u in zip(df["diff"], units)],
        "ci": [unit_interval(lo, hi, u) for lo, hi, u in zip(df.ci_low, df.ci_high, units)],
        "p": [fmt.pvalue(p).removeprefix("p = ").replace("p < ", "< ") for p in df.p_value],
        "sig": ["*" if s else "" for s in df.significant]})
    _print_table(shown.rename(columns={"ci": f"{int(a['ci'] * 100)}% CI of diff"}))
    print(f"\nper sample (mean score): {a['wins']:,} wins, {a['ties']:,} ties, {a['losses']:,} losses. "
          f"* = {significance(df).removeprefix('significant: ')} CIs: paired bootstrap over samples, "
          f"{a['n_boot']:,} resamples, seed {a['seed']}.")
    return EXIT_OK


def cmd_report(args) -> int:
    from .report import find_chromium, write_pdf, write_report

    chromium = find_chromium() if args.pdf else None  # before any work: no Chromium, no file written
    path = _read(args, lambda con: write_report(con, args.base, args.candidate, args.output, n_boot=args.n_boot,
                                                batch_size=args.batch_size, compute_multiplier=args.compute_multiplier))
    print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB, self-contained: open it in any browser)")
    if args.pdf:
        pdf = write_pdf(path, chromium=chromium)
        print(f"wrote {pdf} ({pdf.stat().st_size / 1e6:.1f} MB, printed by {chromium})")
    return EXIT_OK


def cmd_synth(args) -> int:
    from . import synth

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

    from .demo_server import drive, running

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
    from . import catalog, fmt, store, synth
    from .ingest import ingest
    from .compare import compare
    from .metrics import summary
    from .readiness import check
    from .report import write_report
    from .audit import audit
    from .metrics import capacity

    base, candidate, side = DEMO_BASE, DEMO_CANDIDATE, config.DEMO_SERVER_RUN
    step = DEMO_PLANNED_STEP
    # base and step10 are graded by an exact answer, a model judge and a format check, with a few
    # reward hacks planted in step10 for the audit to find (SYNTHETIC)
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
        _print_table(_for_people(listed.drop(columns=["model", "checkpoint"])))
        print("\nsummary (rolloutlab summary):")
        _print_metrics(summary(con, listed.run.tolist())[DEMO_SUMMARY])
        print()
        checks = check(con, base)
        print(f"readiness of {base}: " + ", ".join(f"{n} {s}" for s, n in checks.status.value_counts().items())
              + f" (rolloutlab check --run {base})")
        diff = compare(con, base, candidate, n_boot=1000).set_index("metric")
        score, calls, p95 = (diff.loc[m] for m in ("score", "tool_calls_per_rollout", "latency_p95"))
        print(f"{base} -> {candidate}: score {fmt.number(score.base)} -> {fmt.number(score.candidate)} "
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
        report = write_report(con, base, candidate, args.report, **step)
        print(f"report: {report} ({base} -> {candidate}; endpoint load projected for a step of "
              f"{step['batch_size']} x {step['compute_multiplier']})")
    finally:
        con.close()
    print(f"\nsynthetic demo logs: {args.out}\ndatabase: {config.db_path(args.db)}"
          "\nnext: make lab (notebooks), or rolloutlab runs")
    return EXIT_OK


COMMANDS = {"ingest": cmd_ingest, "watch": cmd_watch, "runs": cmd_runs, "rejects": cmd_rejects, "summary": cmd_summary, "check": cmd_check,
            "compare": cmd_compare, "audit": cmd_audit, "report": cmd_report,
            "export": cmd_export, "capacity": cmd_capacity, "demo-server": cmd_demo_server, "synth": cmd_synth, "demo": cmd_demo}


def main(argv: list[str] | None = None) -> int:
    import os

    from .store import StoreError
    from .ingest import IngestError, IngestFailed

    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except BrokenPipeError:  # `rolloutlab runs | head -1`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return EXIT_OK
    except IngestFailed as exc:
        print(f"rolloutlab {args.command}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except (StoreError, IngestError, ValueError) as exc:  # UnknownRunError is a ValueError
        print(f"rolloutlab {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:
        if os.environ.get(config.DEBUG_ENV_VAR):
            raise
        print(f"rolloutlab {args.command}: unexpected error ({type(exc).__name__}: {exc}). This is a defect "
              f"of rolloutlab: run again with {config.DEBUG_ENV_VAR}=1 for the traceback and report it.",
              file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
