"""What every command shares: exit codes, terminal-safe printing (a log's text never drives the
terminal), tables for people, JSON output, ``--db``, writing a file whole or not at all.
"""
from __future__ import annotations

import argparse
import contextlib
import re
import sys

from .. import config

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
NO_RUNS = "no runs loaded yet: rolloutlab ingest PATH"

# Control characters from logs (escape sequences that retitle or clear a terminal, a bare \r that
# overwrites a line) are shown as \xNN: everything a command prints passes through here.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


# Control characters JSON writers leave raw inside strings (DEL and C1: JSON escapes only those
# below 0x20), and any other that is not JSON's whitespace
_RAW_IN_JSON = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def json_escaped(text: str) -> str:
    """JSON text with the control characters its strings still hold raw written as ``\\u00XX``
    escapes: the same JSON, which ``terminal_safe`` leaves as it is."""
    return _RAW_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _print_json(text: str) -> None:
    print(json_escaped(text))


def _printed_as_json_or_empty(args, df, empty: str) -> bool:
    """--json prints the records; an empty frame prints ``empty``. True when nothing more is to print."""
    if args.json:
        _print_json(_json_records(df))
        return True
    if df.empty:
        print(empty)
        return True
    return False


@contextlib.contextmanager
def _writing(path, flag: str):
    """An output path that cannot be written (read-only, /sys, /proc, no such folder, a full disk)
    is the user's to change, never a defect: a ValueError naming it (exit 2)."""
    import duckdb

    try:
        yield
    except OSError as exc:
        where = f": {exc.filename}" if exc.filename and str(exc.filename) != str(path) else ""
        raise ValueError(f"cannot write {path} ({exc.strerror or exc}{where}); give {flag} a path you can "
                         "write to") from None
    except duckdb.IOException as exc:
        raise ValueError(f"cannot write {path} ({str(exc).splitlines()[0]}); give {flag} a path you can "
                         "write to") from None


class _TerminalSafe:
    """A text stream that writes through ``terminal_safe`` (JSON output is escaped for JSON first,
    ``json_escaped``: nothing is left for this filter to change in it)."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(terminal_safe(text))

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _positive_int(limit: int):
    def parse(text: str) -> int:
        value = int(text)
        if not 1 <= value <= limit:
            raise argparse.ArgumentTypeError(f"{value:,}: give a whole number from 1 to {limit:,}")
        return value
    return parse


PASS_THRESHOLD_HELP = ("a rollout passes at a score of at least this (default: the run's own, set by its producer "
                       f"or `runs scale`, else {config.PASS_THRESHOLD:g})")


def _add_db(p: argparse.ArgumentParser, nested: bool = False) -> None:
    """``--db``; on a subcommand of a command that has one too (``runs merge``), without a default
    of its own, so that ``runs --db X merge ...`` and ``runs merge ... --db X`` both mean X."""
    p.add_argument("--db", help=f"DuckDB file (default: ${config.DB_ENV_VAR} or {config.DEFAULT_DB})",
                   **({"default": argparse.SUPPRESS} if nested else {}))


def _print_table(df, left=()) -> None:
    """``df`` without its index; the ``left`` columns (text: labels, reasons) aligned left."""
    import pandas as pd

    formatters, names = {}, {}
    for col in left:
        width = max([len(str(col)), *(len(str(v)) for v in df[col])])
        names[col] = str(col).ljust(width)
        formatters[names[col]] = lambda v, w=width: f"{str(v):<{w}}"
    with pd.option_context("display.max_columns", None, "display.width", 160):
        print(df.rename(columns=names).to_string(index=False, formatters=formatters or None))


def _metric_format(name: str):
    """How a metric of ``rl.summary`` reads for people: ``fmt.formatter`` of its name (shares as
    percentages, costs in dollars, latencies in seconds), as in the notebooks and the report."""
    from ..text import fmt

    return fmt.formatter(name)


def _print_metrics(df, format_of=_metric_format) -> None:
    """Runs as columns, metrics as rows, numbers as people read them (``fmt``; --json keeps them
    whole). ``format_of(metric)``: the ``fmt`` function of a metric's row. The two means of a score
    carry their names (``_mean_names``)."""
    table = df.set_index("run").T
    table = table.apply(lambda col: [format_of(m)(_plain(v)) for m, v in zip(table.index, col)])
    names = _mean_names()
    table.index = [names.get(m, m) for m in table.index]
    _print_table(table.reset_index(names="metric"))


def _mean_names() -> dict:
    from ..analysis.compare import MEAN_OF_SAMPLE_MEANS, MEAN_OVER_ROLLOUTS

    return {"mean_score": f"mean_score ({MEAN_OVER_ROLLOUTS})",
            "mean_of_sample_means": f"mean_of_sample_means ({MEAN_OF_SAMPLE_MEANS}: compare's score)"}


def _plain(v):
    """numpy scalars as Python ones, so that ``fmt`` tells counts from measurements; pandas' NA
    and NaT as None (missing)."""
    import numpy as np

    from ..text.htmltext import missing

    if missing(v):
        return None
    return v.item() if isinstance(v, np.generic) else v


def _for_people(df):
    """A copy of ``df`` with every cell as text for people (``fmt.value``); the frame is untouched."""
    from ..text import fmt

    return df.apply(lambda col: col.map(lambda v: fmt.value(_plain(v))).astype(object))


def _print_reasons(reasons, rejected: int, more: str) -> None:
    """The reasons shown, indented, then ``more`` when fewer were shown than were rejected."""
    for reason in reasons:
        print(f"    {reason}")
    if rejected > len(reasons):
        print(f"    ... {more}")


def _prices_note(attrs: dict) -> str:
    """``prices as of DATE (ORIGIN)`` of a cost frame's ``attrs`` ('' when no price was used).
    A prices file without ``as_of`` leaves a NaN among the dates: only text is a date."""
    dates = [d for d in attrs.get("prices_as_of") or [] if isinstance(d, str)]
    origins = [o for o in attrs.get("price_origin") or [] if isinstance(o, str)]
    if not origins:
        return ""
    return f"prices {'as of ' + ', '.join(dates) + ' ' if dates else ''}({', '.join(origins)})"


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


# ---- curate, power, labels, cost, tokens, truncation, failure-modes ---------------------------


@contextlib.contextmanager
def _price_warnings(command: str):
    """A model without a price warns once per call (``metrics.costs``): each distinct warning goes
    to stderr once, in the command's words; other warnings are shown as Python shows them."""
    import warnings

    from ..analysis.metrics import PriceWarning
    from ..analysis.metrics.costs import PRICES_FILE

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PriceWarning)
        try:
            yield
        finally:
            seen = set()
            for w in caught:
                if not issubclass(w.category, PriceWarning):
                    warnings.showwarning(w.message, w.category, w.filename, w.lineno)
                    continue
                text = str(w.message)
                if text not in seen:
                    seen.add(text)
                    print(terminal_safe(f"rolloutlab {command}: warning: {text}; on the command line: --prices "
                                        f"FILE, a TOML file laid out like {PRICES_FILE}"), file=sys.stderr)


def _read(args, query):
    """Run ``query(con)`` on the database opened read-only, and close it."""
    from ..store import database as store

    con = store.connect(args.db, read_only=True)
    try:
        return query(con)
    finally:
        con.close()


def _json_records(df) -> str:
    return df.to_json(orient="records", indent=2, double_precision=10, date_format="iso")
