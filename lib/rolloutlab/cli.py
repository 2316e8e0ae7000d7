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

    p = sub.add_parser("runs", help="list what is loaded")
    _add_db(p)
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("synth", help="write synthetic native JSONL (demo data; clearly synthetic)")
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--samples", type=int, default=200)
    p.add_argument("--attempts", type=int, default=3)
    p.add_argument("--checkpoints", default="base,step10", help="comma-separated: base, stepN ...")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-messages", action="store_true", help="leave out message transcripts")

    p = sub.add_parser("demo", help="synthesize demo logs, ingest them, print a summary")
    _add_db(p)
    p.add_argument("--out", type=Path, default=config.DEMO_DIR, help="where the demo logs go")
    return parser


def _print_table(df) -> None:
    import pandas as pd

    with pd.option_context("display.max_columns", None, "display.width", 160):
        print(df.to_string(index=False))


def _ingest_report(result) -> None:
    for row in result.itertuples():
        print(f"{row.path}: {row.action} ({row.format}) - {row.records} records, "
              f"{row.loaded} loaded, {row.rejected} rejected")
        for reason in row.reasons:
            print(f"    {reason}")
        if row.rejected > len(row.reasons):
            print(f"    ... see all with: SELECT * FROM rejects WHERE source_id = {row.source_id}")


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
    else:
        _ingest_report(result)
        print(f"total: {int(result.records.sum())} records, {int(result.loaded.sum())} loaded, "
              f"{int(result.rejected.sum())} rejected, database {config.db_path(args.db)}")
    nothing = result.loaded.sum() == 0 and not (result.action == "unchanged").any()
    return EXIT_FAILED if nothing or (result.action == "failed").all() else EXIT_OK


def cmd_runs(args) -> int:
    from . import catalog, store

    con = store.connect(args.db, read_only=True)
    try:
        df = catalog.runs(con)
    finally:
        con.close()
    if args.json:
        print(df.to_json(orient="records", indent=2))
    elif df.empty:
        print("no runs loaded yet: rolloutlab ingest PATH")
    else:
        _print_table(df)
    return EXIT_OK


def cmd_synth(args) -> int:
    from . import synth

    paths = synth.write_native(args.out, samples=args.samples, attempts=args.attempts,
                               checkpoints=args.checkpoints, seed=args.seed, messages=not args.no_messages)
    for path in paths:
        print(f"wrote {path} (synthetic)")
    return EXIT_OK


def cmd_demo(args) -> int:
    from . import catalog, store, synth
    from .ingest import ingest

    paths = synth.write_native(args.out)
    con = store.connect(args.db)
    try:
        result = ingest(con, paths)
        _ingest_report(result)
        print()
        _print_table(catalog.runs(con))
    finally:
        con.close()
    print(f"\nsynthetic demo logs: {args.out}\ndatabase: {config.db_path(args.db)}"
          "\nnext: make lab (notebooks), or rolloutlab runs")
    return EXIT_OK


COMMANDS = {"ingest": cmd_ingest, "runs": cmd_runs, "synth": cmd_synth, "demo": cmd_demo}


def main(argv: list[str] | None = None) -> int:
    from .store import StoreError
    from .ingest import IngestError

    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except (StoreError, IngestError, ValueError) as exc:
        print(f"rolloutlab {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
