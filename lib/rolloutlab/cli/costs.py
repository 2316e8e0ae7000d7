"""Commands about what it costs: ``cost``, ``tokens``, ``truncation``.
"""
from __future__ import annotations

from pathlib import Path

from ..text import fmt
from .common import (EXIT_OK, NO_RUNS, PASS_THRESHOLD_HELP, _add_db, _price_warnings, _prices_note,
                     _print_metrics, _print_table, _printed_as_json_or_empty, _read, _sentence)

COST_COLUMNS = ["model", "price_model", "cost_source", "rollouts", "samples", "cost_coverage", "cost_total",
                "cost_per_rollout", "cost_per_sample", "cost_per_solved", "mean_score", "passes", "truncated",
                "cost_truncated", "n_excluded", "cost_excluded", "input_tokens", "output_tokens", "reasoning_tokens"]
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
    if _printed_as_json_or_empty(args, df, "no rollouts to cost: rolloutlab ingest PATH" if args.by != "sample"
                                 else "no counted rollouts"):
        return EXIT_OK
    if args.by == "sample":
        pos = {r: i for i, r in enumerate(dict.fromkeys(df.run))}
        ordered = df.assign(_pos=df.run.map(pos)).sort_values(["_pos", "cost_usd", "sample_id"],
                                                              ascending=[True, False, True], kind="stable")
        shown = ordered[COST_SAMPLE_COLUMNS]
        if args.limit:
            shown = shown.head(args.limit)
        _print_table(fmt.table(shown))
        if len(shown) < len(df):
            print(f"(the {len(shown)} costliest samples of {len(df):,}; --limit 0 for all)")
    else:
        _print_metrics(_by_run(df, COST_COLUMNS, args.by))
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


def cmd_tokens(args) -> int:
    from ..analysis.metrics import tokens

    df = _read(args, lambda con: tokens(con, args.run, by=args.by, include_errors=args.include_errors))
    if _printed_as_json_or_empty(args, df, NO_RUNS if args.by in ("run", "step")
                                 else f"no tool calls in {', '.join(args.run) if args.run else 'any run'}"):
        return EXIT_OK
    if args.by in ("run", "step"):
        _print_metrics(_by_run(df, TOKEN_COLUMNS, args.by))
        print("\nper counted rollout (infra errors and ungraded left out; --include-errors counts them)")
    else:
        _print_table(fmt.table(df.drop(columns=["unit"], errors="ignore")))
        print("\ntool output in characters: tool results carry no token counts"
              + ("; the canonical tables hold no tokens per turn" if args.by == "turn" else ""))
    return EXIT_OK


def cmd_truncation(args) -> int:
    from ..analysis.metrics import truncation

    df = _read(args, lambda con: truncation(con, args.run, by=args.by, include_errors=args.include_errors))
    if _printed_as_json_or_empty(args, df, NO_RUNS):
        return EXIT_OK
    _print_metrics(df.drop(columns=["step_known", "unknown_words"], errors="ignore"))
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


def add_cost(sub) -> None:
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


def add_tokens(sub) -> None:
    p = sub.add_parser("tokens", help="token accounting per run, step, tool or turn")
    _add_db(p)
    p.add_argument("--run", action="append", help="run label (repeat for several; default: all)")
    p.add_argument("--by", choices=("run", "step", "tool", "turn"), default="run")
    p.add_argument("--include-errors", action="store_true")
    p.add_argument("--json", action="store_true")


def add_truncation(sub) -> None:
    p = sub.add_parser("truncation", help="rollouts cut at a limit (output tokens, context, tools, turns, time)")
    _add_db(p)
    p.add_argument("--run", action="append", help="run label (repeat for several; default: all)")
    p.add_argument("--by", choices=("run", "step"), default="run")
    p.add_argument("--include-errors", action="store_true")
    p.add_argument("--json", action="store_true")


# each command: the function that adds its parser, the one that runs it
COMMANDS = {"cost": (add_cost, cmd_cost), "tokens": (add_tokens, cmd_tokens), "truncation": (add_truncation, cmd_truncation)}
