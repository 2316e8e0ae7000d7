"""Commands that load and list what is loaded: ``ingest``, ``watch``, ``runs`` (merge, rename, scale),
``rejects``, ``export`` (the Parquet lake).
"""
from __future__ import annotations

import sys
from pathlib import Path

from .. import config
from .common import (EXIT_FAILED, EXIT_OK, NO_RUNS, _add_db, _json_records, _print_json, _print_reasons, _print_table,
                     _printed_as_json_or_empty, _read, _writing, terminal_safe)

def _ingest_report(result) -> None:
    """One line per file — what happened and its counts (read = loaded + duplicates + rejected) —
    then its notes and first rejects, indented, without repeating its path. Files no format claims
    (a README, a notes file beside the logs) are named together in one line."""
    unknown = [row.path for row in result.itertuples() if row.action == "failed" and row.reasons
               and "could not tell the format" in row.reasons[0]]
    for row in result.itertuples():
        if row.path in unknown:
            continue
        if row.action == "empty":
            print(f"{row.path}: empty ({row.format}) - no records: nothing to load")
        else:
            duplicates = f", {row.duplicates} duplicates" if row.duplicates else ""
            runs = list(row.runs) if row.runs is not None else []
            into = (f": run{'s' if len(runs) > 1 else ''} {', '.join(runs[:3])}{' …' if len(runs) > 3 else ''}"
                    if runs else "")
            print(f"{row.path}: {row.action} ({row.format}) - {row.records} records, {row.loaded} loaded"
                  f"{duplicates}, {row.rejected} rejected{into}")
        reasons = [_without_path(reason, row.path) for reason in row.reasons]
        _print_reasons([r for r in reasons if r], row.rejected,
                       f"see all with: rolloutlab rejects --source {row.source_id} --limit 0")
    if unknown:
        from ..ingest.formats import FORMATS

        shown = ", ".join(unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
        print(f"not read: {len(unknown)} file(s) no format claims (not logs?): {shown}. To read one, pass --format "
              f"({', '.join(FORMATS)}).")


def _without_path(reason: str, path: str) -> str:
    """A reason printed under its file's line: ``PATH:12: why`` reads ``line 12: why``, ``PATH: note``
    reads ``note`` (a note that only says the file is empty goes: its line says so)."""
    for prefix in dict.fromkeys((str(path), str(Path(path).resolve()))):
        if reason.startswith(prefix + ":"):
            rest = reason[len(prefix) + 1:]
            line, sep, why = rest.partition(": ")
            if sep and line.isdigit():
                return f"line {line}: {why}"
            rest = rest.lstrip()
            return "" if rest.startswith(("no records in the file", "no simulations in the file")) else rest
    return reason


def _ingest_total(result, db) -> str:
    import pandas as pd

    unread = [a == "failed" and bool(r) and "could not tell the format" in r[0] for a, r in zip(result.action, result.reasons)]
    actions = result.action.where(~pd.Series(unread, index=result.index), "not read").value_counts()
    files = ", ".join(f"{n} {action}" for action, n in actions.items())
    read = result[result.action != "unchanged"]  # what this call read: an unchanged file adds nothing
    duplicates = f", {int(read.duplicates.sum())} duplicates" if read.duplicates.sum() else ""
    return (f"total: {int(read.records.sum())} records read, {int(read.loaded.sum())} loaded{duplicates}, "
            f"{int(read.rejected.sum())} rejected in {len(result)} file(s) ({files}), database {db}")


def cmd_ingest(args) -> int:
    from ..store import database as store
    from ..ingest import ingest

    con = store.connect(args.db)
    try:
        result = ingest(con, args.paths, format=args.format, run=args.run, split=args.split,
                                   step=args.step)
    finally:
        con.close()
    if args.json:
        _print_json(result.to_json(orient="records", indent=2))
    if result.empty:
        print(terminal_safe(f"rolloutlab ingest: {_no_log_files(args.paths)}"), file=sys.stderr)
        return EXIT_FAILED
    if not args.json:
        _ingest_report(result)
        print(_ingest_total(result, config.db_path(args.db)))
    # failure: records were read but none loaded (nor already loaded), or no file could be read at
    # all; a file that holds no records (a tau2 file without simulations) is not a failure
    nothing = (result.records.sum() > 0 and result.loaded.sum() == 0 and result.duplicates.sum() == 0
               and not (result.action == "unchanged").any())
    return EXIT_FAILED if nothing or (result.action == "failed").all() else EXIT_OK


def _no_log_files(paths) -> str:
    """Why an ingest of these folders read nothing: no files below them (hidden ones are skipped),
    and what it looks for (every format's file types)."""
    from ..ingest.formats import file_types

    folders = [Path(p) for p in paths if Path(p).is_dir()]
    hidden = sum(1 for folder in folders for f in folder.rglob("*")
                 if f.is_file() and any(part.startswith(".") for part in f.relative_to(folder).parts))
    where = ", ".join(str(f) for f in folders) or ", ".join(map(str, paths))
    looked = "\n".join(f"  {kind}: {', '.join(formats)}" for kind, formats in file_types())
    return (f"no log files in {where}: {'the folder holds' if len(folders) == 1 else 'the folders hold'} no files "
            + (f"other than {hidden} hidden one(s) (names starting with '.', skipped)" if hidden else "at all")
            + f", nothing was loaded. ingest reads every file below a folder:\n{looked}\n"
            f"  a lake written by `rolloutlab export` (a folder holding {_lake_manifest()})\n"
            "Point it at the folder your trainer, harness or endpoints write their logs to (formats: docs/formats.md).")


def _lake_manifest() -> str:
    from ..store.lake import MANIFEST

    return MANIFEST


def cmd_watch(args) -> int:
    from ..ingest import watch

    for path in args.paths:
        if not Path(path).exists():
            raise ValueError(f"{path}: no such file or folder to watch. Check the path (relative to {Path.cwd()}).")
    return watch.run(args.db, args.paths, args.interval, echo=lambda line: print(line, flush=True), once=args.once,
                     format=args.format, run=args.run, split=args.split, step=args.step)


def cmd_runs(args) -> int:
    from ..store import catalog

    if getattr(args, "runs_action", None):
        return _change_runs(args)
    df = _read(args, lambda con: catalog.runs(con, group=args.group and args.json))
    if not _printed_as_json_or_empty(args, df, NO_RUNS):
        _print_runs(df)
    return EXIT_OK


def _change_runs(args) -> int:
    from ..store import database as store
    from ..ingest.identity import merge_runs, rename_run

    con = store.connect(args.db)
    try:
        if args.runs_action == "scale":
            from ..analysis.metrics.common import set_reward_scale

            if args.reward_range is None and args.pass_threshold is None:
                raise ValueError("runs scale: give --range LOW HIGH and/or --pass-threshold X")
            meta = set_reward_scale(con, args.run, args.reward_range, args.pass_threshold)
            shown = {k: meta[k] for k in ("reward_range", "pass_threshold") if k in meta}
            print(f"run {args.run}: {shown} (every metric of the run uses it; --pass-threshold still wins)")
        elif args.runs_action == "merge":
            name = merge_runs(con, args.names, args.as_)
            print(f"runs {', '.join(args.names)} are now one run: {name} (kept when their files are ingested again)")
        else:
            name = rename_run(con, args.run, args.name)
            print(f"run {args.run} is now {name} (kept when its files are ingested again)")
    finally:
        con.close()
    return EXIT_OK


RUN_TABLE = ["experiment", "run", "evaluation", "model", "step", "split", "rollouts", "samples", "mean_score",
             "reported_score", "rewards", "pass_at", "files", "duplicates_in_sources", "rejected_in_sources", "infra_errors", "without_sample",
             "span"]
ALWAYS_SHOWN = {"run", "model", "step", "split", "rollouts", "samples", "mean_score", "files", "rejected_in_sources",
                "infra_errors", "span"}


def _print_runs(df) -> None:
    """Every run, its experiment's runs together (an experiment is a label: a model on a task, a
    training job over its steps and splits), named once on its first row; columns nobody filled
    are left out. A producer's own figure that differs from the rollouts' is said below."""
    from ..text import fmt

    df = df.copy()
    order = list(dict.fromkeys(df.label))
    df["_group"] = df.label.map({label: i for i, label in enumerate(order)})
    df = df.sort_values("_group", kind="stable")
    df["experiment"] = [label if first else "" for label, first in zip(df.label, ~df.label.duplicated())]
    df["span"] = [_span(a, b) for a, b in zip(df.started_at, df.ended_at)]
    df["mean_score"] = [fmt.number(v) for v in df.mean_score]
    reported = df.reported_score.copy()
    df["reported_score"] = [fmt.number(v) if v == v and v is not None else None for v in reported]
    df["rewards"] = [_rewards(lo, hi, declared) for lo, hi, declared in zip(df.score_min, df.score_max, df.reward_range)]
    df["pass_at"] = [fmt.number(v) if v == v and v is not None else None for v in df.pass_threshold]
    columns = [c for c in RUN_TABLE if c in ALWAYS_SHOWN or _filled(df[c])]
    if len(order) == len(df):  # one run per experiment: the run names them
        columns.remove("experiment") if "experiment" in columns else None
    elif "experiment" not in columns:
        columns.insert(0, "experiment")
    shown = df[columns].astype(object)
    _print_table(shown.where(shown.notna(), "—"),
                 left=[c for c in ("experiment", "run", "evaluation", "model", "split") if c in columns])
    means = df.set_index("run").mean_score
    for run, value in zip(df.run, reported):
        computed = float(means[run]) if means[run] not in ("—", None) else None
        if value == value and value is not None and computed is not None and not _close(value, computed):
            print(f"note: {run}: its producer reports {fmt.number(value)}; its rollouts give {means[run]} "
                  "(infra errors and ungraded rollouts left out)")
    if df.duplicated(["label", "step", "split"]).any():  # evaluations side by side: maybe one
        print(f"{len(df)} runs in {len(order)} experiments; runs that are one evaluation split over files become one "
              "run with: rolloutlab runs merge RUN RUN... --as NAME")


def _rewards(low, high, declared) -> str | None:
    """A run's rewards as shown where they are not the usual [0, 1]: the lowest and highest score
    seen, and the range its producer declared."""
    from ..text import fmt

    declared = list(declared) if hasattr(declared, "__len__") and not isinstance(declared, str) else None
    if declared is None and not (low == low and low is not None and low < 0):
        return None
    seen = f"{fmt.number(low)} to {fmt.number(high)}" if low == low and low is not None else "none scored"
    return seen + (f" (of {fmt.number(declared[0])} to {fmt.number(declared[1])})" if declared else "")


def _filled(column) -> bool:
    return any(v is not None and v == v and v not in (0, "") for v in column)


def _close(reported: float, computed: float) -> bool:
    """A producer's figure agrees with ours when equal to 3 digits, on its scale or in percent."""
    return any(abs(reported - computed * k) <= 5e-3 * max(1.0, abs(reported)) for k in (1, 100))


def _span(start, end) -> str:
    if start is None or start != start:
        return "—"
    text = str(start)[:16]
    return text if end is None or end != end else f"{text} … {str(end)[:16]}"


def cmd_rejects(args) -> int:
    from ..store import catalog
    from ..analysis.metrics import resolve_runs

    def query(con):
        if args.run:
            resolve_runs(con, args.run)  # an unknown run: the error lists the loaded ones
        return catalog.rejects(con, source_id=args.source, run=args.run, limit=args.limit or None)

    df = _read(args, query)
    if args.json:
        _print_json(df.to_json(orient="records", indent=2))
    elif df.empty:
        print("no rejected records")
    else:
        for row in df.itertuples():
            print(f"{row.path}:{row.line_no}: {row.reason}")
        if args.limit and len(df) == args.limit:
            print(f"(first {args.limit}; --limit 0 for all)")
    return EXIT_OK


def cmd_export(args) -> int:
    from ..store.lake import MANIFEST, export

    with _writing(args.to, "--to"):
        df = _read(args, lambda con: export(con, args.to))
    if args.json:
        _print_json(_json_records(df))
        return EXIT_OK
    for row in df.itertuples():
        print(f"{row.table}: {row.rows} rows{' (partitioned by run)' if row.partitioned else ''}")
    print(f"lake: {args.to} (manifest {args.to / MANIFEST}); read it back with: rolloutlab ingest {args.to}")
    return EXIT_OK


def add_ingest(sub) -> None:
    p = sub.add_parser("ingest", help="load log files (a folder means every file in it)")
    p.add_argument("paths", nargs="+", metavar="PATH")
    _add_db(p)
    p.add_argument("--format", default="auto", help="auto (default) or a format name, e.g. native")
    p.add_argument("--run", help="run label for every record (overrides the file's)")
    p.add_argument("--split", help="dataset split for every record (overrides the file's)")
    p.add_argument("--step", type=int, help="training step for every record (overrides the file's)")
    p.add_argument("--json", action="store_true", help="print the per-file results as JSON")


def add_watch(sub) -> None:
    p = sub.add_parser("watch", help="follow growing logs: ingest what is new every few seconds (Ctrl-C stops)")
    p.add_argument("paths", nargs="+", metavar="PATH")
    _add_db(p)
    p.add_argument("--interval", type=float, default=config.WATCH_INTERVAL_S, help="seconds between polls")
    p.add_argument("--once", action="store_true", help="one poll, then exit (for cron and scripts)")
    p.add_argument("--format", default="auto")
    p.add_argument("--run")
    p.add_argument("--split")
    p.add_argument("--step", type=int)


def add_runs(sub) -> None:
    p = sub.add_parser("runs", help="list what is loaded, grouped by experiment; merge or rename runs")
    _add_db(p)
    p.add_argument("--json", action="store_true", help="one record per run (with --group: per experiment)")
    p.add_argument("--group", action="store_true", help="with --json: one record per experiment (label)")
    actions = p.add_subparsers(dest="runs_action", metavar="[merge|rename|scale]")
    m = actions.add_parser("merge", help="make several runs one run (kept across re-ingest)")
    m.add_argument("names", nargs="+", metavar="RUN", help="the runs (two or more; a label names all its runs)")
    m.add_argument("--as", dest="as_", required=True, metavar="NAME", help="the merged run's name")
    _add_db(m, nested=True)
    r = actions.add_parser("rename", help="give a run another name (kept across re-ingest)")
    r.add_argument("run", metavar="RUN")
    r.add_argument("name", metavar="NAME")
    _add_db(r, nested=True)
    r = actions.add_parser("scale", help="a run's reward range and pass threshold (e.g. rewards in [-1, 1])")
    r.add_argument("run", metavar="RUN", help="the run (a label names all its runs)")
    r.add_argument("--range", nargs=2, type=float, metavar=("LOW", "HIGH"), dest="reward_range",
                   help="the rewards' range: a rollout without a score counts as LOW")
    r.add_argument("--pass-threshold", type=float, help="a rollout passes at a score of at least this")
    _add_db(r, nested=True)


def add_rejects(sub) -> None:
    p = sub.add_parser("rejects", help="records that did not load: file, line, reason")
    _add_db(p)
    p.add_argument("--run", help="only the files that loaded this run")
    p.add_argument("--source", type=int, help="only this file (its source_id, from `rolloutlab ingest`)")
    p.add_argument("--limit", type=int, default=50, help="at most this many (default 50; 0 for all)")
    p.add_argument("--json", action="store_true")


def add_export(sub) -> None:
    p = sub.add_parser("export", help="the canonical tables as a Parquet lake (Hive-partitioned by run, zstd)")
    _add_db(p)
    p.add_argument("--to", required=True, type=Path, help="a new (or empty) folder; rolloutlab ingest DIR reads it back")
    p.add_argument("--json", action="store_true")


# each command: the function that adds its parser, the one that runs it
COMMANDS = {"ingest": (add_ingest, cmd_ingest), "watch": (add_watch, cmd_watch), "runs": (add_runs, cmd_runs), "rejects": (add_rejects, cmd_rejects), "export": (add_export, cmd_export)}
