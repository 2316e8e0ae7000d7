"""The ``rolloutlab`` command. Heavy libraries (plotting, notebooks) are imported only where used."""
from __future__ import annotations

import argparse
import contextlib
import re
import shlex
import sys
from pathlib import Path

from .. import config

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

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


# The layouts ``curate --out`` writes: rolloutlab.datasets.EXPORT_FORMATS (not imported here: it
# loads pyarrow; tests/test_cli.py checks they agree).
CURATE_FORMATS = ("openai-rft", "verl", "trl", "jsonl", "bedrock-nova", "gemini-rl", "verifiers")


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

    p = sub.add_parser("rejects", help="records that did not load: file, line, reason")
    _add_db(p)
    p.add_argument("--run", help="only the files that loaded this run")
    p.add_argument("--source", type=int, help="only this file (its source_id, from `rolloutlab ingest`)")
    p.add_argument("--limit", type=int, default=50, help="at most this many (default 50; 0 for all)")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("summary", help="per-run scores, signal, pass@k, tool use, latency, tokens")
    _add_db(p)
    p.add_argument("--run", action="append", help="run label (repeat for several; default: all)")
    p.add_argument("--pass-threshold", type=float, default=None, help=PASS_THRESHOLD_HELP)
    p.add_argument("--include-errors", action="store_true", help="count infra errors and ungraded as score 0")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("check", help="readiness checks of one run; exit 1 when a check fails")
    _add_db(p)
    p.add_argument("--run", required=True)
    p.add_argument("--pass-threshold", type=float, default=None, help=PASS_THRESHOLD_HELP)
    p.add_argument("--tool-budget", type=int, help="also check the share of rollouts over N tool calls")
    p.add_argument("--json", action="store_true")

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

    p = sub.add_parser("audit", help="reward-hacking suspects of one run, most suspect first")
    _add_db(p)
    p.add_argument("--run", required=True)
    p.add_argument("--base", help="an earlier checkpoint on the same samples (adds the checks that compare)")
    p.add_argument("--pass-threshold", type=float, default=None, help=PASS_THRESHOLD_HELP)
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
    p.add_argument("--steps", type=_positive_int(config.JOB_STEPS_MAX), metavar="N",
                   help="also the rollout cost of a job of N such steps (from this run's cost per rollout; "
                        "training fees not included)")
    p.add_argument("--prices", type=Path, metavar="FILE", help="a prices TOML file over the package's (with --steps)")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("curate", help="which samples to train on next (by learning signal); with --out, the "
                                      "training files")
    _add_db(p)
    p.add_argument("--run", required=True, action="append",
                   help="run label (repeat for a training run's steps: each sample is judged at its latest)")
    p.add_argument("--band", nargs=2, type=float, metavar=("LO", "HI"),
                   help=f"keep samples whose pass rate (or mean score) lies in [LO, HI] "
                        f"(default {' '.join(map(str, config.CURATE_DEFAULTS['band']))})")
    p.add_argument("--on", choices=("pass_rate", "mean_score"), help="what the band reads (default pass_rate)")
    p.add_argument("--min-attempts", type=int, metavar="N", help="fewer counted attempts: few_attempts "
                                                    f"(default {config.CURATE_DEFAULTS['min_attempts']})")
    p.add_argument("--validation-share", type=float, metavar="X",
                   help="share of the kept samples for validation, by whole groups "
                        f"(default {config.CURATE_DEFAULTS['validation_share']})")
    p.add_argument("--seed", type=int, metavar="S", help="which groups go to validation (default 0)")
    p.add_argument("--drop-suspects", action="store_true", help="samples with a rollout the audit flags: suspect")
    p.add_argument("--audit-base", metavar="RUN", help="with --drop-suspects: the base run the audit compares with")
    p.add_argument("--no-keep-validation", action="store_true",
                   help="split by --validation-share even samples other runs evaluated on a validation split")
    p.add_argument("--pass-threshold", type=float, default=None, help=PASS_THRESHOLD_HELP)
    p.add_argument("--out", type=Path, metavar="DIR",
                   help="write the kept samples' train / validation files and curation.json here")
    p.add_argument("--to", choices=CURATE_FORMATS, help="layout of the files (with --out; default openai-rft)")
    p.add_argument("--limit", type=int, default=20, help="without --out: at most this many samples shown "
                                                         "(default 20; 0 for all)")
    p.add_argument("--json", action="store_true", help="the samples (with --out: curation.json) as JSON")

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

    p = sub.add_parser("labels", help="people's judgements of rollouts: export, import, a random sample to label")
    lsub = p.add_subparsers(dest="labels_command", required=True, metavar="{export,import,sample}")
    q = lsub.add_parser("export", help="write the stored labels to a CSV or JSONL file")
    _add_db(q)
    q.add_argument("--out", required=True, type=Path, metavar="FILE", help="FILE.csv or FILE.jsonl")
    q.add_argument("--run", help="only the labels of this run's rollouts")
    q = lsub.add_parser("import", help="load labels from a CSV or JSONL file (writes to the database)")
    q.add_argument("file", type=Path, metavar="FILE", help="columns of `labels export`; value (pass / fail or a "
                                                           "number) and rollout_id required")
    _add_db(q)
    q.add_argument("--who", metavar="NAME", help="labeller for the records that name none")
    q.add_argument("--json", action="store_true")
    q = lsub.add_parser("sample", help="a seeded random sample of a run's rollouts to label (unbiased estimates "
                                       "need a random subset)")
    _add_db(q)
    q.add_argument("--run", required=True)
    q.add_argument("--n", type=int, default=config.LABEL_SAMPLE_SIZE, help="rollouts (default %(default)s)")
    q.add_argument("--seed", type=int, default=0)
    q.add_argument("--include-labelled", action="store_true", help="also rollouts someone labelled already")
    q.add_argument("--with-score", action="store_true",
                   help="show the grader's score too (left out by default: a labeller who sees it leans toward it)")
    q.add_argument("--out", type=Path, metavar="FILE",
                   help="a labelling sheet (FILE.csv or FILE.jsonl) to fill in and import")
    q.add_argument("--json", action="store_true")

    p = sub.add_parser("cost", help="dollars per run, per sample or per step (logged costs, else tokens x prices)")
    _add_db(p)
    p.add_argument("--run", action="append", help="run label (repeat for several; default: all)")
    p.add_argument("--by", choices=("run", "sample", "step"), default="run")
    p.add_argument("--prices", type=Path, metavar="FILE",
                   help="a prices TOML file over the package's (USD per 1M tokens)")
    p.add_argument("--pass-threshold", type=float, default=None, help=PASS_THRESHOLD_HELP)
    p.add_argument("--include-errors", action="store_true", help="count infra errors and ungraded rollouts too")
    p.add_argument("--limit", type=int, default=50, help="--by sample: at most this many rows (default 50; 0 for all)")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("tokens", help="token accounting per run, step, tool or turn")
    _add_db(p)
    p.add_argument("--run", action="append", help="run label (repeat for several; default: all)")
    p.add_argument("--by", choices=("run", "step", "tool", "turn"), default="run")
    p.add_argument("--include-errors", action="store_true")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("truncation", help="rollouts cut at a limit (output tokens, context, tools, turns, time)")
    _add_db(p)
    p.add_argument("--run", action="append", help="run label (repeat for several; default: all)")
    p.add_argument("--by", choices=("run", "step"), default="run")
    p.add_argument("--include-errors", action="store_true")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("failure-modes", help="failing rollouts grouped into modes; with --candidate, how the "
                                             "modes changed")
    _add_db(p)
    p.add_argument("--run", required=True, help="the run (the base, with --candidate)")
    p.add_argument("--candidate", help="compare: modes fitted on both runs' failures, a verdict per mode")
    p.add_argument("--k", type=int, help="number of modes, 1 to the number of model failures (default: the best "
                                         "silhouette)")
    p.add_argument("--method", choices=("average", "kmeans", "hdbscan"), default="average")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--per", choices=("rollouts", "failures"), default="rollouts",
                   help="with --candidate: what the verdicts read (default: share of rollouts)")
    p.add_argument("--adjust", choices=("holm", "bh"), default=config.FAILURE_MODES_ADJUST,
                   help="with --candidate: the adjustment of the p-values across modes (default: holm)")
    p.add_argument("--alpha", type=float, default=config.FAILURE_MODES_ALPHA,
                   help="with --candidate: a change is called when its adjusted p-value is at most this")
    p.add_argument("--holdout", type=float, default=config.FAILURE_MODES_HOLDOUT,
                   help="with --candidate: the share of samples held out of the fit to count and test on "
                        "(default 0: fitted blind to the runs, tested by permutation)")
    p.add_argument("--n-perm", type=int, default=config.FAILURE_MODES_N_PERM,
                   help="with --candidate: permutations for the p-values")
    p.add_argument("--labeler", action="store_true",
                   help=f"name the modes with the team's own model at ${config.LABELER_URL_ENV_VAR} "
                        f"(${config.LABELER_MODEL_ENV_VAR}; OpenAI-compatible)")
    p.add_argument("--pass-threshold", type=float, default=None, help=PASS_THRESHOLD_HELP)
    p.add_argument("--n-boot", type=int, default=config.FAILURE_MODES_N_BOOT, help="bootstrap resamples for the CIs")
    p.add_argument("--examples", type=int, default=3, help="example rollout ids shown per mode (default 3)")
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
    read = result[result.action != "unchanged"]
    nothing = (read.records.sum() > 0 and read.loaded.sum() == 0 and read.duplicates.sum() == 0
               and not (result.action == "unchanged").any())
    return EXIT_FAILED if nothing or (result.action == "failed").all() else EXIT_OK


# What ``ingest`` reads, by file type (the formats detect themselves from a file's first record;
# docs/formats.md). Every format of ingest.formats.FORMATS is named here (tests/test_cli.py).
LOG_FILE_TYPES = [
    ("JSON lines (.jsonl, or any name)", ["native", "rft-endpoint", "buildhours", "openai-chat", "openai-evals",
                                          "openai-finetune", "verl", "art (history.jsonl)",
                                          "verifiers (vf-eval results.jsonl)", "gemini-metrics"]),
    ("JSON (.json)", ["tau-bench", "tau2", "inspect", "openai-evals", "openai-finetune",
                      "verifiers (metadata.json, read with its results.jsonl)"]),
    ("Inspect logs (.eval)", ["inspect"]),
    ("Parquet (.parquet)", ["trl (completions_*.parquet)", "art (trajectories)"]),
    ("CSV (.csv)", ["bedrock-metrics (step_wise_training_metrics.csv, validation_metrics.csv)", "gemini-metrics"]),
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
    if args.json:
        _print_json(_json_records(df))
    elif df.empty:
        print("no runs loaded yet: rolloutlab ingest PATH")
    else:
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


def cmd_audit(args) -> int:
    from ..text import fmt
    from ..analysis.audit import audit

    df = _read(args, lambda con: audit(con, args.run, base=args.base, pass_threshold=args.pass_threshold))
    total = len(df)
    if args.limit:
        df = df.head(args.limit)
    if args.json:
        _print_json(_json_records(df))
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


def _kinds_format(shares=(), dollars=(), counts=(), numbers=()):
    """``format_of(column)`` for ``_print_metrics`` and ``_people_table``: the named columns by
    their kind (a name ending in ``_share`` is a share), the rest by ``fmt.value``."""
    from ..text import fmt

    def format_of(name: str):
        if name in shares or name.endswith("_share"):
            return fmt.share
        if name in dollars:
            return fmt.dollars
        if name in counts:
            return fmt.count
        if name in numbers:
            return fmt.number
        return fmt.formatter(name)

    return format_of


def _people_table(df, format_of):
    """``df`` with every cell as text, column by column through ``format_of(column)``."""
    return df.apply(lambda col: col.map(lambda v: format_of(col.name)(_plain(v))).astype(object))


def _one_or_several(runs: list[str]):
    return runs[0] if len(runs) == 1 else runs


_CURATE_WORDS = [("keep_validation=False", "--no-keep-validation"), ("validation_share", "--validation-share")]


def _cli_words(text: str) -> str:
    """The library's parameter names in a message as the command line spells them."""
    for python, cli in _CURATE_WORDS:
        text = text.replace(python, cli)
    return text


def _print_verdicts(label: str, counts: dict, samples: int, attrs: dict) -> None:
    import pandas as pd

    from ..text import fmt

    band = attrs["band"]
    shown = (f"{fmt.share(band[0])}-{fmt.share(band[1])} pass rate" if attrs["on"] == "pass_rate"
             else f"mean score {fmt.number(band[0])}-{fmt.number(band[1])}")
    print(f"{label}: {samples:,} samples (keep: {shown}, at least {attrs['min_attempts']} attempts)")
    _print_table(pd.DataFrame({"verdict": list(counts), "samples": [fmt.count(n) for n in counts.values()],
                               "share": [fmt.share(n / samples) if samples else fmt.MISSING
                                         for n in counts.values()]}))


def _forecast_line(rows: list[dict]) -> str | None:
    """The forecast of ``curation.json`` in one line."""
    from ..text import fmt

    rows = [r for r in rows if r.get("expected_signal_share") is not None]
    if not rows:
        return None
    text = ("expected signal share of the kept samples (attempts per sample: share): "
            + ", ".join(f"{r['k']}: {fmt.share(r['expected_signal_share'])}" for r in rows))
    best = next((r for r in rows if r.get("recommended")), None)
    target = fmt.share(rows[0]["target"])
    return text + (f"; {target} reached at {best['k']} attempts per sample (the compute multiplier to ask for)"
                   if best else f"; no number of attempts reaches {target}")


def cmd_curate(args) -> int:
    import json

    import pandas as pd

    from ..text import fmt

    if args.to and args.out is None:
        raise ValueError("--to is the layout of the files --out writes: add --out DIR")
    if args.audit_base and not args.drop_suspects:
        raise ValueError("--audit-base is the base run of --drop-suspects' audit: add --drop-suspects")
    run = _one_or_several(args.run)
    options = dict(band=tuple(args.band) if args.band else None, on=args.on, min_attempts=args.min_attempts,
                   drop_suspects=args.drop_suspects, audit_base=args.audit_base,
                   validation_share=args.validation_share, seed=args.seed, keep_validation=not args.no_keep_validation,
                   pass_threshold=args.pass_threshold)
    label = ", ".join(args.run)
    if args.out is None:
        from ..analysis.curation import curate

        df = _read(args, lambda con: curate(con, run, **options))
        if args.json:
            _print_json(_json_records(df))
            return EXIT_OK
        a = df.attrs
        _print_verdicts(label, a["counts"], a["samples"], a)
        print(f"kept: {a['splits']['train']:,} train, {a['splits']['validation']:,} validation "
              f"(by whole groups of the same or near-duplicate prompts)")
        if a.get("advice"):
            print(f"nothing to train on: {a['advice']}")
        if len(df):
            shown = df.head(args.limit) if args.limit else df
            print()
            _print_table(pd.DataFrame({
                "sample_id": shown.sample_id, "verdict": shown.verdict, "split": shown.split.map(fmt.value),
                "attempts": shown.attempts.map(fmt.count), "pass_rate": shown.pass_rate.map(fmt.share),
                "reason": shown.reason}), left=("reason",))
            if len(shown) < len(df):
                print(f"(first {len(shown)} of {len(df)}; --limit 0 for all)")
        if a.get("advice"):
            return EXIT_FAILED
        print(f"\nwrite the kept samples as training files: rolloutlab curate "
              f"--run {' --run '.join(map(shlex.quote, args.run))} "
              f"... --out DIR --to {'|'.join(CURATE_FORMATS)}")
        return EXIT_OK

    from ..exports.training_files import write_curated

    with _writing(args.out, "--out"):
        manifest = _read(args, lambda con: write_curated(con, run, args.out, to=args.to or "openai-rft", **options))
    if args.json:
        _print_json(json.dumps(manifest, indent=2, ensure_ascii=False))
    else:
        _print_verdicts(label, manifest["counts"], manifest["samples"], manifest["parameters"])
        print()
        for split, facts in manifest["files"].items():
            if split == "curation":
                continue
            print(f"wrote {facts['path']} ({facts['rows']:,} {split} samples, {facts['bytes']:,} bytes, "
                  f"{manifest['to']})")
        print(f"wrote {manifest['files']['curation']} (what was curated, how, and from which files)")
        for why, what in manifest["not_exported"].items():
            print(f"not exported: {what['samples']:,} kept samples, {why.replace('_', ' ')} "
                  f"(e.g. {', '.join(what['examples'])})")
        line = _forecast_line(manifest["forecast"])
        if line:
            print(line)
    for warning in manifest["warnings"]:
        print(terminal_safe(f"rolloutlab curate: warning: {_cli_words(warning)}"), file=sys.stderr)
    return EXIT_OK if sum(manifest["exported"].values()) else EXIT_FAILED


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


def _table_file(path: Path, df) -> None:
    """``df`` as CSV (text cells that start like a formula get a leading ') or JSON lines, by the
    file's extension."""
    from ..analysis.labelling import EXPORT_FORMATS, _safe_cell

    kind = EXPORT_FORMATS.get(path.suffix.lower())
    if kind is None:
        raise ValueError(f"{path}: name it .csv or .jsonl")
    if path.is_dir():
        raise ValueError(f"{path} is a folder: give a file name for the sheet (.csv or .jsonl)")
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "csv":
        import pandas as pd

        text = [c for c in df.columns if not (pd.api.types.is_numeric_dtype(df[c]) or pd.api.types.is_bool_dtype(df[c]))]
        safe = df.assign(**{c: df[c].map(_safe_cell) for c in text})
        # \r\n ends a row, so a \r or \n inside a cell is quoted, never a new row
        safe.to_csv(path, index=False, lineterminator="\r\n")
    else:
        path.write_text(df.to_json(orient="records", lines=True, double_precision=10) + ("\n" if len(df) else ""))


def cmd_labels(args) -> int:
    return {"export": _labels_export, "import": _labels_import, "sample": _labels_sample}[args.labels_command](args)


def _labels_export(args) -> int:
    from ..analysis.labelling import export_labels

    with _writing(args.out, "--out"):
        df = _read(args, lambda con: export_labels(con, args.out, run=args.run))
    whose = f" of {args.run}'s rollouts" if args.run else ""
    print(f"wrote {args.out}: {len(df):,} labels{whose}, {df.rollout_id.nunique():,} rollouts, "
          f"{df.who.nunique():,} labellers" + ("" if len(df) else " (none stored yet: rolloutlab labels sample, "
                                                                  "then rolloutlab labels import FILE)"))
    return EXIT_OK


def _labels_import(args) -> int:
    from ..store import database as store
    from ..analysis.labelling import import_labels

    path = config.db_path(args.db)
    if not path.exists():  # a new, empty database would take the labels and match no rollout
        raise store.StoreError(f"No database at {path}. Import labels into the database that holds the rollouts "
                               f"(--db DB), or create it first: rolloutlab ingest PATH --db {path}")
    con = store.connect(args.db)  # writes, as ingest does
    try:
        result = import_labels(con, args.file, who=args.who)
    finally:
        con.close()
    row = result.iloc[0]
    if args.json:
        _print_json(_json_records(result))
    else:
        print(f"{row.path}: {row.records:,} records, {row.loaded:,} labels loaded, {row.duplicates:,} already "
              f"stored, {row.rejected:,} rejected")
        _print_reasons(row.reasons, row.rejected, f"and {row.rejected - len(row.reasons):,} more")
        if row.unknown_rollouts:
            print(f"{row.unknown_rollouts:,} labelled rollouts are not in {path}: their labels apply once they are "
                  "ingested")
    return EXIT_FAILED if row.records and not (row.loaded or row.duplicates) else EXIT_OK


def _clipped(text, n: int) -> str:
    text = "" if text is None or (isinstance(text, float) and text != text) else " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _labels_sample(args) -> int:
    from ..analysis.labelling import labelling_sample

    if args.n < 1:
        raise ValueError(f"--n {args.n}: give 1 or more rollouts")
    df = _read(args, lambda con: labelling_sample(con, args.run, n=args.n, seed=args.seed,
                                                  unlabelled_only=not args.include_labelled,
                                                  with_score=args.with_score))
    if args.out is not None:
        sheet = df.assign(value=None, note=None, who=None)
        with _writing(args.out, "--out"):
            _table_file(args.out, sheet)
    if args.json:
        _print_json(_json_records(df))
        return EXIT_OK
    if df.empty:
        print(f"no {'' if args.include_labelled else 'unlabelled '}counted rollouts in {args.run}"
              + ("" if args.include_labelled else " (--include-labelled draws from every one)"))
        return EXIT_OK
    if args.out is None:
        shown = df.drop(columns=["prompt", "reference", "open_with"]).assign(
            final_answer=[_clipped(a, 60) for a in df.final_answer])
        _print_table(_for_people(shown), left=("final_answer",))
    print(f"{len(df):,} rollouts of {args.run} drawn at random (seed {args.seed})"
          + ("" if len(df) == args.n else f", all there are of {args.n:,} asked for") + ".")
    if args.out is not None:
        print(f"wrote {args.out}: each rollout's prompt, reference and final answer (open_with opens its trajectory "
              "in the explorer); fill in value (pass / fail or a score) and note, then: "
              f"rolloutlab labels import {shlex.quote(str(args.out))} --who NAME")
    else:
        print("label every one of them (a hand-picked subset biases the estimates); --out FILE writes a sheet to "
              "fill in and import")
    return EXIT_OK


COST_COLUMNS = ["model", "price_model", "cost_source", "rollouts", "samples", "cost_coverage", "cost_total",
                "cost_per_rollout", "cost_per_sample", "cost_per_solved", "mean_score", "passes", "truncated",
                "cost_truncated", "n_excluded", "cost_excluded", "input_tokens", "output_tokens", "reasoning_tokens"]
COST_DOLLARS = ("cost_total", "cost_per_rollout", "cost_per_sample", "cost_per_solved", "cost_truncated",
                "cost_excluded", "cost_usd")
COST_SAMPLE_COLUMNS = ["run", "sample_id", "rollouts", "score_mean", "passes", "cost_usd", "n_cost", "truncated"]


def _by_run(df, columns: list[str], by: str) -> "object":
    step = ["split", "step"] if by == "step" else []
    return df[["run", *step, *[c for c in columns if c in df.columns]]]


def cmd_cost(args) -> int:
    from ..analysis.metrics import cost, cost_per_sample_frame

    def query(con):
        with _price_warnings("cost"):
            if args.by == "sample":
                return cost_per_sample_frame(con, args.run, prices=args.prices, pass_threshold=args.pass_threshold,
                                             include_errors=args.include_errors)
            return cost(con, args.run, prices=args.prices, by=args.by, pass_threshold=args.pass_threshold,
                        include_errors=args.include_errors)

    df = _read(args, query)
    if args.json:
        _print_json(_json_records(df))
        return EXIT_OK
    if df.empty:
        print("no rollouts to cost: rolloutlab ingest PATH" if args.by != "sample" else "no counted rollouts")
        return EXIT_OK
    format_of = _kinds_format(shares=("cost_coverage",), dollars=COST_DOLLARS)
    if args.by == "sample":
        pos = {r: i for i, r in enumerate(dict.fromkeys(df.run))}
        ordered = df.assign(_pos=df.run.map(pos)).sort_values(["_pos", "cost_usd", "sample_id"],
                                                              ascending=[True, False, True], kind="stable")
        shown = ordered[COST_SAMPLE_COLUMNS]
        if args.limit:
            shown = shown.head(args.limit)
        _print_table(_people_table(shown, format_of))
        if len(shown) < len(df):
            print(f"(the {len(shown)} costliest samples of {len(df):,}; --limit 0 for all)")
    else:
        _print_metrics(_by_run(df, COST_COLUMNS, args.by), format_of)
        if df.n_excluded.sum():
            print(f"\n{int(df.n_excluded.sum()):,} infra-error / ungraded rollouts left out (cost_excluded: what they "
                  "cost; --include-errors counts them)")
    a = df.attrs
    print(("\n" if args.by == "sample" or not df.n_excluded.sum() else "")
          + "cost: the logs' cost_usd where given, else tokens x prices"
          + (f"; {_prices_note(a)}" if _prices_note(a) else "")
          + f". {_sentence(a['excludes'])}.")
    return EXIT_OK


TOKEN_COLUMNS = ["model", "rollouts", "rollouts_with_tokens", "input_tokens_mean", "output_tokens_mean",
                 "reasoning_tokens_mean", "total_tokens_mean", "total_tokens_p50", "total_tokens_p95",
                 "total_tokens", "tool_output_chars_mean", "truncated_token_share"]


def _printed_as_json_or_empty(args, df, empty: str) -> bool:
    """--json prints the records; an empty frame prints ``empty``. True when nothing more is to print."""
    if args.json:
        _print_json(_json_records(df))
        return True
    if df.empty:
        print(empty)
        return True
    return False


def cmd_tokens(args) -> int:
    from ..analysis.metrics import tokens

    df = _read(args, lambda con: tokens(con, args.run, by=args.by, include_errors=args.include_errors))
    if _printed_as_json_or_empty(args, df, "no runs loaded yet: rolloutlab ingest PATH" if args.by in ("run", "step")
                                 else f"no tool calls in {', '.join(args.run) if args.run else 'any run'}"):
        return EXIT_OK
    format_of = _kinds_format(shares=("output_share",))
    if args.by in ("run", "step"):
        _print_metrics(_by_run(df, TOKEN_COLUMNS, args.by), format_of)
        print("\nper counted rollout (infra errors and ungraded left out; --include-errors counts them)")
    else:
        _print_table(_people_table(df.drop(columns=["unit"], errors="ignore"), format_of))
        print(f"\ntool output in characters: tool results carry no token counts"
              + ("; the canonical tables hold no tokens per turn" if args.by == "turn" else ""))
    return EXIT_OK


def cmd_truncation(args) -> int:
    from ..analysis.metrics import truncation

    df = _read(args, lambda con: truncation(con, args.run, by=args.by, include_errors=args.include_errors))
    if _printed_as_json_or_empty(args, df, "no runs loaded yet: rolloutlab ingest PATH"):
        return EXIT_OK
    _print_metrics(df.drop(columns=["step_known", "unknown_words"], errors="ignore"), _kinds_format())
    from ..analysis.metrics.costs import unknown_words_text

    for run, n, words in zip(df.run, df.unknown_stop, df.unknown_words):
        if n:
            print(f"\n{run}: {n:,} rollouts stopped for reasons rolloutlab does not know, counted neither as cut nor "
                  f"as not cut: {unknown_words_text(words)}")
    blind = df.run[(df.with_stop_reason == 0) & (df.truncated == 0)].tolist()
    if blind:
        print(f"\nno stop reason in the logs of {', '.join(blind)}: truncation cannot be told there (log why each "
              "rollout stopped: stop_reason)")
    print("\ntruncated: cut at a limit (length: output tokens, context, tool_budget, turn_limit, time_limit) or "
          "marked truncated without one (unspecified); a cut rollout's reward says nothing about its answer")
    return EXIT_OK


def _examples(ids, n: int) -> str:
    ids = list(ids)
    return ", ".join(ids[:n]) + (f" (+{len(ids) - n} more)" if len(ids) > n else "")


def _mode_json(df) -> str:
    """The modes without the per-rollout frame (``attrs``), lists kept as lists."""
    out = df.copy()
    out.attrs = {}
    return _json_records(out)


def cmd_failure_modes(args) -> int:
    import pandas as pd

    from ..text import fmt
    from ..analysis.failure_modes import diff_sentence, failure_modes, failure_modes_diff

    if args.examples < 0:
        raise ValueError(f"--examples {args.examples}: give 0 or more")
    if args.k is not None and args.k < 1:  # before opening anything: the range's top needs the data
        raise ValueError(f"--k {args.k}: give a number of modes from 1 to the number of model failures, or leave "
                         "--k out to choose it by silhouette")
    labeler = None
    if args.labeler:
        from ..analysis.failure_labeler import endpoint_labeler

        labeler = endpoint_labeler()
    if args.candidate is None:
        df = _read(args, lambda con: failure_modes(con, args.run, pass_threshold=args.pass_threshold, k=args.k,
                                                   method=args.method, seed=args.seed, n_boot=args.n_boot,
                                                   labeler=labeler))
    else:
        df = _read(args, lambda con: failure_modes_diff(con, args.run, args.candidate,
                                                        pass_threshold=args.pass_threshold, k=args.k,
                                                        method=args.method, seed=args.seed, n_boot=args.n_boot,
                                                        per=args.per, holdout=args.holdout, adjust=args.adjust,
                                                        alpha=args.alpha, n_perm=args.n_perm, labeler=labeler))
    for error in df.attrs.get("labeler_errors", []):
        print(terminal_safe(f"rolloutlab failure-modes: the labeller failed for {error}; the automatic label stays"),
              file=sys.stderr)
    if args.json:
        _print_json(_mode_json(df))
        return EXIT_OK
    a = df.attrs
    ci = f"{int(a['ci'] * 100)}% CI"
    how = (f"{a.get('method', args.method)}" + (" linkage" if a.get("method", args.method) == "average" else "")
           + (f", k = {a['k']} model modes" if "k" in a else "")
           + (f" by {a['k_chosen_by']}" if "k_chosen_by" in a else ""))
    if args.candidate is None:
        print(f"{a['run']}: {a['failures']:,} failing of {a['rollouts']:,} rollouts, {len(df)} modes ({how})")
        if df.empty:
            return EXIT_OK
        print()
        _print_table(pd.DataFrame({
            "mode": df["mode"], "kind": df.kind, "rollouts": df.rollouts.map(fmt.count),
            "share_of_failures": df.share_of_failures.map(fmt.share),
            ci: [f"{fmt.share(lo)}-{fmt.share(hi)}" if lo == lo else fmt.MISSING
                 for lo, hi in zip(df.share_ci_low, df.share_ci_high)],
            "label": df.label}), left=("label",))
        if args.examples:
            print("\nexamples (most typical first):")
            for row in df.itertuples():
                print(f"  {row.mode}: {_examples(row.examples, args.examples)}")
    else:
        tested = ("every sample" if a["in_sample"] else
                  f"{a['samples_tested']:,} samples held out of the fit ({a['samples_fitted']:,} fitted)")
        print(f"{a['base']} -> {a['candidate']}: {a['base_failures']:,} of {a['base_rollouts']:,} and "
              f"{a['candidate_failures']:,} of {a['candidate_rollouts']:,} rollouts fail; {len(df)} modes "
              f"fitted on both ({how}); counted and tested on {tested}; verdicts: permutation p-values, "
              f"{a['adjust_words']} adjustment across modes, alpha {a['alpha']:g}")
        if df.empty:
            print(diff_sentence(df))
            return EXIT_OK
        print()
        b, c, d = (("base_rate", "candidate_rate", "rate_diff") if a["per"] == "rollouts"
                   else ("base_share", "candidate_share", "diff"))
        unit = "of rollouts" if a["per"] == "rollouts" else "of failures"
        _print_table(pd.DataFrame({
            "mode": df["mode"], "kind": df.kind, a["base"]: df.base_rollouts.map(fmt.count),
            a["candidate"]: df.candidate_rollouts.map(fmt.count),
            f"share {unit}": [f"{fmt.share(x)} -> {fmt.share(y)}" for x, y in zip(df[b], df[c])],
            f"{ci} of diff (points)": [fmt.interval(lo * 100, hi * 100) for lo, hi in
                                       zip(df[f"{d}_ci_low"], df[f"{d}_ci_high"])],
            "p adjusted": [fmt.number(x) for x in df.p_adjusted],
            "verdict": df.verdict, "label": df.label}), left=("label",))
        if args.examples:
            print("\nexamples (most typical first):")
            for row in df.itertuples():
                for run, ids in ((a["base"], row.examples_base), (a["candidate"], row.examples_candidate)):
                    if len(ids):
                        print(f"  {row.mode} in {run}: {_examples(ids, args.examples)}")
        print("\n" + diff_sentence(df))
    print("\nA mode is a pattern failing rollouts share, not a cause: read its examples to find the cause.")
    return EXIT_OK


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


def cmd_summary(args) -> int:
    from ..analysis.metrics import summary

    df = _read(args, lambda con: summary(con, args.run, pass_threshold=args.pass_threshold,
                                         include_errors=args.include_errors))
    if args.json:
        _print_json(_json_records(df))
    elif df.empty:
        print("no runs loaded yet: rolloutlab ingest PATH")
    else:
        _print_metrics(df)
        if df["n_excluded"].sum():
            print(f"\n{int(df['n_excluded'].sum())} infra-error / ungraded rollouts excluded from score "
                  "statistics (--include-errors counts them as 0)")
    return EXIT_OK


def cmd_check(args) -> int:
    from ..analysis.readiness import check, failed
    from ..views.report import check_value

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


COMMANDS = {"ingest": cmd_ingest, "watch": cmd_watch, "runs": cmd_runs, "rejects": cmd_rejects, "summary": cmd_summary, "check": cmd_check,
            "compare": cmd_compare, "audit": cmd_audit, "report": cmd_report,
            "export": cmd_export, "capacity": cmd_capacity, "curate": cmd_curate, "power": cmd_power,
            "labels": cmd_labels, "cost": cmd_cost, "tokens": cmd_tokens, "truncation": cmd_truncation,
            "failure-modes": cmd_failure_modes, "demo-server": cmd_demo_server, "synth": cmd_synth, "demo": cmd_demo}


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
