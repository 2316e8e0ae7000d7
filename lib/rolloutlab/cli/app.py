"""The ``rolloutlab`` command: ``main`` parses the command line (each group of commands adds its own
parsers) and runs the command. Heavy libraries (plotting, notebooks) are imported only where used.
"""
from __future__ import annotations

import argparse
import sys

from .. import config
from . import costs, demo, load, measure, training
from .common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, _TerminalSafe, terminal_safe

GROUPS = (load, measure, costs, training, demo)
# the order `rolloutlab --help` lists the commands in
ORDER = ("ingest", "watch", "runs", "rejects", "summary", "check", "compare", "audit", "export", "capacity", "curate",
         "power", "labels", "cost", "tokens", "truncation", "failure-modes", "demo-server", "report", "synth", "demo")
COMMANDS = {name: run for group in GROUPS for name, (_, run) in group.COMMANDS.items()}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rolloutlab", description="Agent RFT rollout logs in DuckDB.")
    sub = parser.add_subparsers(dest="command", required=True)
    adders = {name: add for group in GROUPS for name, (add, _) in group.COMMANDS.items()}
    for name in ORDER:
        adders[name](sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    stdout = sys.stdout
    sys.stdout = _TerminalSafe(stdout)
    try:
        return _run(args)
    finally:
        sys.stdout = stdout


def _run(args) -> int:
    import os

    from ..store.database import StoreError
    from ..ingest import IngestError, IngestFailed

    try:
        return COMMANDS[args.command](args)
    except BrokenPipeError:  # `rolloutlab runs | head -1`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return EXIT_OK
    except IngestFailed as exc:
        print(terminal_safe(f"rolloutlab {args.command}: {exc}"), file=sys.stderr)
        return EXIT_FAILED
    except (StoreError, IngestError, ValueError) as exc:  # UnknownRunError is a ValueError
        print(terminal_safe(f"rolloutlab {args.command}: {exc}"), file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:
        if os.environ.get(config.DEBUG_ENV_VAR):
            raise
        print(terminal_safe(f"rolloutlab {args.command}: unexpected error ({type(exc).__name__}: {exc}). This is a "
                            f"defect of rolloutlab: run again with {config.DEBUG_ENV_VAR}=1 for the traceback and "
                            "report it."), file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
