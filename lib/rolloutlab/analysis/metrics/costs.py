"""What rollouts cost and where they stop: tokens, dollars, truncation, the cost–score frontier
and the budget of a training job (docs/metrics.md, "Cost and truncation").

Dollars come from the logs where a producer wrote them (``rollouts.cost_usd``), else from the run's
model and tokens at the prices of ``prices.toml`` (or yours); every table says which
(``cost_source``: ``logs`` / ``prices``). A model the price table does not know gives NULL — never a
guess, never 0 — and one warning naming it. Platform training fees are never included.

Truncation: a rollout is truncated when it stopped at a limit (``stop_reason`` in
``stop_reasons.LIMITS``: length, context, tool_budget, turn_limit, time_limit), or when its
producer marked it ``truncated`` without saying which limit (``unspecified``). Its reward says
nothing about an answer it never finished.
"""
from __future__ import annotations

import math
import tomllib
import warnings
from pathlib import Path
from typing import Iterable, Mapping

import duckdb
import numpy as np
import pandas as pd

from ... import config
from .. import stats
from ...store.stop_reasons import LIMITS, lit
from .common import params, resolve_runs, run_sql, selected_sql, threshold
from .training import training_metrics_sql

# ---- defaults (config.py) -----------------------------------------------------------------------
PRICES_FILE = config.PRICES_FILE
PRICE_MAX_PER_MTOK = config.PRICE_MAX_PER_MTOK
TRUNCATION_WARN = config.CHECK_THRESHOLDS["truncation_warn"]
TRUNCATION_FAIL = config.CHECK_THRESHOLDS["truncation_fail"]
TRUNCATION_TOOLS_NAMED = config.TRUNCATION_TOOLS_NAMED
REASONING_IN_OUTPUT_FORMATS = config.REASONING_IN_OUTPUT_FORMATS
PRICE_PROVIDER_PREFIXES = config.PRICE_PROVIDER_PREFIXES
COST_N_BOOT = config.COST_N_BOOT
COST_CI = config.COST_CI

PRICE_FIELDS = ("input", "cached_input", "output", "reasoning")
PRICE_COLUMNS = ["model", *PRICE_FIELDS, "aliases", "provider", "as_of", "origin"]
TRAINING_FEES_EXCLUDED = ("platform training fees (RFT bills training time per hour) and model-grader tokens "
                          "are not included")
TRUNCATION_KINDS = (*LIMITS, "unspecified")


class PriceWarning(UserWarning):
    """A model the price table does not know: its computed cost is NULL."""


# ---- the price table -----------------------------------------------------------------------------

def _number(value, where: str) -> float:
    # compared before any float(): an integer of 400 digits has no float
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= PRICE_MAX_PER_MTOK
            or not math.isfinite(value)):
        shown = repr(value)
        shown = shown if len(shown) <= 60 else f"{shown[:60]}… ({len(shown):,} characters)"
        raise ValueError(f"{where} must be a number of dollars per 1M tokens from 0 to {PRICE_MAX_PER_MTOK:,}; "
                         f"got {shown}")
    return float(value)


def _entries(models: Mapping, origin: str, as_of) -> list[dict]:
    if not isinstance(models, Mapping):
        raise ValueError(f"prices ({origin}): 'models' must be a table of model names, each with input and output "
                         f"prices (as in {PRICES_FILE.name}); got {type(models).__name__}")
    out = []
    for model, spec in models.items():
        where = f"price of {model!r} ({origin})"
        if not isinstance(spec, Mapping):
            raise ValueError(f"{where} must be a table of {', '.join(PRICE_FIELDS)}; got {spec!r}")
        unknown = set(spec) - {*PRICE_FIELDS, "aliases", "provider", "note"}
        if unknown:
            raise ValueError(f"{where}: unknown field(s) {', '.join(sorted(map(str, unknown)))}; "
                             f"use {', '.join(PRICE_FIELDS)}, aliases, provider")
        for need in ("input", "output"):
            if need not in spec:
                raise ValueError(f"{where}: '{need}' is required (dollars per 1M tokens)")
        entry = {"model": str(model), "input": _number(spec["input"], f"{where}: input"),
                 "output": _number(spec["output"], f"{where}: output")}
        # a provider without a cache discount bills cached input as input; reasoning is billed as output
        entry["cached_input"] = _number(spec.get("cached_input", entry["input"]), f"{where}: cached_input")
        entry["reasoning"] = _number(spec.get("reasoning", entry["output"]), f"{where}: reasoning")
        aliases = spec.get("aliases", [])
        if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
            raise ValueError(f"{where}: aliases must be a list of model names")
        out.append({**entry, "aliases": list(aliases), "provider": spec.get("provider"),
                    "as_of": None if as_of is None else str(as_of), "origin": origin})
    return out


def _read_toml(path: Path) -> dict:
    with open(path, "rb") as fh:
        return tomllib.load(fh)


def price_table(prices: str | Path | Mapping | None = None) -> pd.DataFrame:
    """The prices in effect: the package's ``prices.toml`` with ``prices`` over it — a TOML file in
    the same layout, or a dict ``{model: {"input": .., "cached_input": .., "output": .., "reasoning": ..}}``
    (USD per 1M tokens; ``cached_input`` defaults to ``input``, ``reasoning`` to ``output``). A
    model given in ``prices`` replaces the package's entry of that name. Columns: model, input,
    cached_input, output, reasoning, aliases, provider, as_of, origin (``package``, the file, or
    ``dict``)."""
    base = _read_toml(PRICES_FILE)
    rows = _entries(base.get("models", {}), "package", base.get("as_of"))
    if prices is not None:
        if isinstance(prices, (str, Path)):
            path = Path(prices)
            if not path.is_file():
                raise ValueError(f"price file {str(path)!r} not found: give a TOML file laid out like "
                                 f"{PRICES_FILE.name} (a [models.\"name\"] table with input and output per 1M tokens)")
            try:
                user = _read_toml(path)
            except tomllib.TOMLDecodeError as e:
                raise ValueError(f"price file {str(path)!r} is not valid TOML: {e}") from None
            extra = _entries(user.get("models", {}), str(path), user.get("as_of"))
        elif isinstance(prices, Mapping):
            if "models" in prices and not isinstance(prices["models"], Mapping):
                _entries(prices["models"], "dict", None)  # raises: says what 'models' must be
            models = prices["models"] if isinstance(prices.get("models"), Mapping) else prices
            extra = _entries(models, "dict", prices.get("as_of") if models is not prices else None)
        else:
            raise TypeError(f"prices must be a path to a TOML file or a dict; got {type(prices).__name__}")
        given = {e["model"].lower() for e in extra}
        rows = [r for r in rows if r["model"].lower() not in given] + extra
    return pd.DataFrame(rows, columns=PRICE_COLUMNS)


def _index(table: pd.DataFrame) -> dict[str, int]:
    """lower-case name or alias -> row of ``table``; the rows given later (an override) win."""
    index: dict[str, int] = {}
    for i, row in enumerate(table.itertuples(index=False)):
        for alias in row.aliases:
            index[alias.lower()] = i
    for i, row in enumerate(table.itertuples(index=False)):
        index[row.model.lower()] = i  # a name beats another entry's alias
    return index


def price_key(model: str | None, table: pd.DataFrame, index: dict[str, int] | None = None) -> str | None:
    """The price-table model that prices ``model``, or None. Rules, no guessing: the name or an
    alias; ``openai/<m>`` and ``anthropic/<m>`` as ``<m>``; an OpenAI fine-tuned model
    ``ft:<base>:<org>:...`` as ``ft:<base>``."""
    if model is None or not str(model).strip():
        return None
    index = _index(table) if index is None else index
    name = str(model).strip()
    names = [name]
    head, sep, rest = name.partition("/")
    if sep and head.lower() in PRICE_PROVIDER_PREFIXES:
        names.append(rest)
    for n in list(names):
        parts = n.split(":")
        if parts[0].lower() == "ft" and len(parts) >= 3 and parts[1]:
            names.append(f"ft:{parts[1]}")
    for n in names:
        if n.lower() in index:
            return table.model.iloc[index[n.lower()]]
    return None


def needs_price_sql() -> str:
    """Per model of the chosen runs ($runs): the runs, and the rollouts whose cost must be
    computed (tokens known, no cost in the logs)."""
    return """
    SELECT ru.model, list(DISTINCT r.run_id ORDER BY r.run_id) AS runs,
           count(*) FILTER (WHERE r.cost_usd IS NULL AND r.input_tokens IS NOT NULL
                            AND r.output_tokens IS NOT NULL) AS to_price
    FROM rollouts r JOIN runs ru ON ru.run_id = r.run_id
    WHERE list_contains($runs, r.run_id)
    GROUP BY ru.model
    """


def _price_columns(names: list, table: pd.DataFrame, fields) -> tuple[list, list, dict, list]:
    """For model ``names``: those the table prices, their price-table keys, a list per price field
    (in the order of the priced names) and the names without a price."""
    index = _index(table)
    models, keys, cols, unpriced = [], [], {f: [] for f in fields}, []
    for name in names:
        key = price_key(name, table, index)
        if key is None:
            unpriced.append(name)
            continue
        row = table.iloc[index[key.lower()]]
        models.append(name)
        keys.append(key)
        for f in fields:
            cols[f].append(float(row[f]))
    return models, keys, cols, unpriced


def _dates(table: pd.DataFrame, keys: list) -> list[str]:
    """The ``as_of`` dates of the price-table rows named by ``keys`` (a user's file may give none)."""
    return sorted({a for a in table[table.model.isin(keys)].as_of if isinstance(a, str) and a})


def _pricing(con: duckdb.DuckDBPyConnection, labels: list[str], prices, warn: bool = True) -> dict:
    """The price parameters of the priced SQL for the models of ``labels`` — one warning per model
    without a price whose rollouts need one (unless ``warn`` is False: views whose cost rows come
    from here leave the telling to ``rl.cost``) — and the table's ``as_of`` and origins."""
    table = price_table(prices)
    needs = {model: (runs, to_price) for model, runs, to_price in
             run_sql(con, needs_price_sql(), {"runs": labels}).fetchall()}
    models, keys, cols, unpriced = _price_columns(list(needs), table, PRICE_FIELDS)
    for model in unpriced:
        runs, to_price = needs[model]
        if to_price and warn:
            shown = ", ".join(runs[:5]) + (f" and {len(runs) - 5} more" if len(runs) > 5 else "")
            what = f"model {model!r}" if model else "no model name (runs.model is NULL)"
            warnings.warn(f"no price for {what} (runs {shown}): {to_price:,} rollouts without a cost in the "
                          f"logs get a NULL cost; give its price: prices={{{(model or 'MODEL')!r}: "
                          "{'input': ..., 'output': ...}} (USD per 1M tokens) or a prices TOML file",
                          PriceWarning, stacklevel=4)
    return {"models": models, "price_models": keys, "p_input": cols["input"], "p_cached": cols["cached_input"],
            "p_output": cols["output"], "p_reasoning": cols["reasoning"],
            "reasoning_in_output": list(REASONING_IN_OUTPUT_FORMATS),
            "_as_of": _dates(table, keys), "_origin": sorted(set(table[table.model.isin(keys)].origin))}


# ---- per rollout -----------------------------------------------------------------------------------

def truncated_sql(alias: str = "") -> str:
    """Whether a rollout was cut at a limit: its stop reason is one of the limits, or its producer
    marked it truncated without saying which."""
    a = f"{alias}." if alias else ""
    limits = ", ".join(lit(x) for x in LIMITS)
    return (f"({a}stop_reason IN ({limits}) OR ({a}status = 'truncated' "
            f"AND coalesce({a}stop_reason, 'unknown') = 'unknown'))")


def truncation_kind_sql(alias: str = "") -> str:
    a = f"{alias}." if alias else ""
    limits = ", ".join(lit(x) for x in LIMITS)
    return (f"CASE WHEN {a}stop_reason IN ({limits}) THEN {a}stop_reason "
            f"WHEN {truncated_sql(alias)} THEN 'unspecified' END")


def flagged_sql() -> str:
    """Every rollout of the chosen runs ($runs) with ``excluded``, ``s`` (selected_sql), whether it
    passed ($threshold), whether it was truncated and at which limit, and the run's model."""
    return f"""
    SELECT sel.rollout_id, sel.run_id, sel.sample_id, sel.attempt, sel.status, sel.stop_reason, sel.stop_reason_raw,
           sel.excluded,
           sel.s, sel.s >= sel.pass_at AS passed, {truncated_sql('sel')} AS truncated,
           {truncation_kind_sql('sel')} AS truncation_kind, sel.n_tool_calls, sel.n_turns,
           sel.input_tokens, sel.output_tokens, sel.reasoning_tokens, sel.cost_usd AS logged_cost_usd,
           sel.cached_input_tokens, sel.source_id, ru.model
    FROM ({selected_sql()}) sel LEFT JOIN runs ru ON ru.run_id = sel.run_id
    """


def priced_sql() -> str:
    """``flagged_sql`` with dollars: ``priced_cost_usd`` from the tokens at the model's prices (bound
    as parallel lists: $models, $price_models, $p_input, $p_cached, $p_output, $p_reasoning; USD
    per 1M tokens, looked up by the model's place in $models — the same SQL runs on Spark), NULL
    without a price or without input and output tokens; ``cost_usd`` the logged cost where there is
    one, else the priced one; ``cost_source`` 'logs' / 'prices' / NULL. Cached input (a subset of
    input) is billed at the cached price; reasoning at the reasoning price, apart from output
    except in the formats of $reasoning_in_output, whose output count includes it."""
    at = "list_extract($p_{name}::DOUBLE[], i.idx)"
    return f"""
    WITH f AS ({flagged_sql()}),
    i AS (SELECT f.*, CASE WHEN f.model IS NOT NULL THEN CAST(nullif(list_position($models::VARCHAR[], f.model), 0) AS INTEGER) END
                      AS idx FROM f),
    priced AS (
        SELECT i.* EXCLUDE (idx), list_extract($price_models::VARCHAR[], i.idx) AS price_model,
               CASE WHEN i.idx IS NULL OR i.input_tokens IS NULL OR i.output_tokens IS NULL THEN NULL
                    ELSE ((i.input_tokens - coalesce(i.cached_input_tokens, 0)) * {at.format(name='input')}
                          + coalesce(i.cached_input_tokens, 0) * {at.format(name='cached')}
                          + (CASE WHEN list_contains($reasoning_in_output::VARCHAR[], src.format)
                                  THEN greatest(i.output_tokens - coalesce(i.reasoning_tokens, 0), 0)
                                  ELSE i.output_tokens END) * {at.format(name='output')}
                          + coalesce(i.reasoning_tokens, 0) * {at.format(name='reasoning')}) / 1e6 END
                   AS priced_cost_usd
        FROM i LEFT JOIN sources src ON src.source_id = i.source_id)
    SELECT *, coalesce(logged_cost_usd, priced_cost_usd) AS cost_usd,
           CASE WHEN logged_cost_usd IS NOT NULL THEN 'logs' WHEN priced_cost_usd IS NOT NULL THEN 'prices'
           END AS cost_source
    FROM priced
    """


def _priced(con, labels, prices, include_errors=False, pass_threshold=None, warn: bool = True) -> tuple[dict, dict]:
    """(the parameters of the priced SQL, pricing meta) for ``labels``; warns once per unknown
    model."""
    pricing = _pricing(con, labels, prices, warn)
    meta = {k[1:]: pricing.pop(k) for k in ("_as_of", "_origin")}
    return params(labels, include_errors, threshold=threshold(pass_threshold), **pricing), meta


def rollout_costs_sql() -> str:
    return f"""
    SELECT rollout_id, run_id AS run, sample_id, attempt, status, excluded, model, price_model,
           input_tokens, output_tokens, reasoning_tokens, logged_cost_usd, priced_cost_usd, cost_usd,
           cost_source, truncated, truncation_kind, s AS score, passed
    FROM ({priced_sql()}) ORDER BY list_position($runs, run_id), sample_id, attempt, rollout_id
    """


def rollout_costs(con: duckdb.DuckDBPyConnection, runs: str | Iterable[str] | None = None, prices=None,
                  pass_threshold: float | None = None) -> pd.DataFrame:
    """One row per rollout of the runs (every one: ``excluded`` says which statistics leave out):
    model and the price-table model that priced it, tokens, ``logged_cost_usd`` (the logs'),
    ``priced_cost_usd`` (tokens × prices), ``cost_usd`` (the logged one where there is one) and
    ``cost_source``, truncation, score and pass."""
    labels = resolve_runs(con, runs, expand=True)
    p, meta = _priced(con, labels, prices, pass_threshold=pass_threshold)
    df = run_sql(con, rollout_costs_sql(), p).df()
    df.attrs.update(prices_as_of=meta["as_of"], price_origin=meta["origin"], excludes=TRAINING_FEES_EXCLUDED)
    return df


# ---- tokens ---------------------------------------------------------------------------------------

def _step_columns_sql() -> str:
    """split, step (a run without one at step 0) and step_known of runs ``ru``, as ``by_step``."""
    return ("coalesce(ru.split, '(no split)') AS split, coalesce(ru.step, 0) AS step, "
            "ru.step IS NOT NULL AS step_known")


def tokens_run_sql() -> str:
    """Per run ($runs): token counts of the counted rollouts ($include_errors) where known, and the
    tool output they took in (characters: tokens of tool results are not logged)."""
    return f"""
    WITH f AS ({flagged_sql()}),
    inc AS (SELECT * FROM f WHERE $include_errors OR NOT excluded),
    chars AS (SELECT t.rollout_id, sum(t.output_chars) AS tool_output_chars
              FROM tool_calls t JOIN inc USING (rollout_id) GROUP BY t.rollout_id),
    per AS (SELECT inc.*, c.tool_output_chars,
                   CASE WHEN input_tokens IS NOT NULL OR output_tokens IS NOT NULL
                        THEN coalesce(input_tokens, 0) + coalesce(output_tokens, 0) + coalesce(reasoning_tokens, 0)
                   END AS total_tokens
            FROM inc LEFT JOIN chars c USING (rollout_id)),
    agg AS (
        SELECT run_id, any_value(model) AS model, count(*) AS rollouts, count(total_tokens) AS rollouts_with_tokens,
               sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens,
               sum(reasoning_tokens) AS reasoning_tokens, sum(total_tokens) AS total_tokens,
               avg(input_tokens) AS input_tokens_mean, avg(output_tokens) AS output_tokens_mean,
               avg(reasoning_tokens) AS reasoning_tokens_mean, avg(total_tokens) AS total_tokens_mean,
               quantile_cont(total_tokens, 0.5) AS total_tokens_p50, quantile_cont(total_tokens, 0.95) AS total_tokens_p95,
               avg(coalesce(tool_output_chars, 0)) AS tool_output_chars_mean,
               sum(total_tokens) FILTER (WHERE truncated) / nullif(sum(total_tokens), 0) AS truncated_token_share
        FROM per GROUP BY run_id),
    all_runs AS (SELECT DISTINCT run_id FROM f)
    SELECT a.run_id AS run, {_step_columns_sql()}, coalesce(g.model, ru.model) AS model,
           coalesce(g.rollouts, 0) AS rollouts, coalesce(g.rollouts_with_tokens, 0) AS rollouts_with_tokens,
           g.* EXCLUDE (run_id, model, rollouts, rollouts_with_tokens)
    FROM all_runs a LEFT JOIN agg g USING (run_id) LEFT JOIN runs ru ON ru.run_id = a.run_id
    """


def tokens_tool_sql() -> str:
    """Per run and tool: the output each tool's results added to the context, in characters."""
    return f"""
    WITH f AS ({flagged_sql()}),
    inc AS (SELECT * FROM f WHERE $include_errors OR NOT excluded),
    n AS (SELECT run_id, count(*) AS rollouts FROM inc GROUP BY run_id),
    c AS (SELECT inc.run_id, t.rollout_id, t.tool, t.output_chars, inc.truncated
          FROM tool_calls t JOIN inc USING (rollout_id))
    SELECT c.run_id AS run, c.tool, count(*) AS calls, count(DISTINCT c.rollout_id) AS rollouts_using,
           sum(c.output_chars) AS output_chars, avg(c.output_chars) AS output_chars_per_call,
           sum(c.output_chars) / any_value(n.rollouts) AS output_chars_per_rollout,
           sum(c.output_chars) / nullif(sum(sum(c.output_chars)) OVER (PARTITION BY c.run_id), 0) AS output_share,
           coalesce(sum(c.output_chars) FILTER (WHERE c.truncated), 0) AS output_chars_truncated,
           'characters' AS unit
    FROM c JOIN n USING (run_id)
    GROUP BY c.run_id, c.tool
    ORDER BY list_position($runs, c.run_id), output_chars DESC NULLS LAST, c.tool
    """


def tokens_turn_sql() -> str:
    """Per run and turn: the tool output added in that turn and accumulated up to it (characters),
    over the rollouts with calls in that turn."""
    return f"""
    WITH f AS ({flagged_sql()}),
    inc AS (SELECT * FROM f WHERE $include_errors OR NOT excluded),
    per_turn AS (SELECT inc.run_id, t.rollout_id, t.turn_idx AS turn, count(*) AS calls,
                        sum(t.output_chars) AS chars
                 FROM tool_calls t JOIN inc USING (rollout_id) WHERE t.turn_idx IS NOT NULL
                 GROUP BY inc.run_id, t.rollout_id, t.turn_idx),
    cum AS (SELECT *, sum(chars) OVER (PARTITION BY rollout_id ORDER BY turn ROWS UNBOUNDED PRECEDING) AS so_far
            FROM per_turn)
    SELECT run_id AS run, turn, count(*) AS rollouts, sum(calls) AS calls, avg(chars) AS output_chars_mean,
           avg(so_far) AS cumulative_output_chars_mean, quantile_cont(so_far, 0.95) AS cumulative_output_chars_p95,
           'characters' AS unit
    FROM cum GROUP BY run_id, turn ORDER BY list_position($runs, run_id), turn
    """


TOKEN_VIEWS = {"run": tokens_run_sql, "step": tokens_run_sql, "tool": tokens_tool_sql, "turn": tokens_turn_sql}


def _order_runs(df: pd.DataFrame, labels: list[str], by: str) -> pd.DataFrame:
    if df.empty:
        return df
    if by == "step":
        df = df.sort_values(["split", "step", "run"], kind="stable")
    else:
        pos = {r: i for i, r in enumerate(labels)}
        df = df.sort_values("run", key=lambda s: s.map(pos), kind="stable")
        df = df.drop(columns=[c for c in ("split", "step", "step_known") if c in df.columns])
    return df.reset_index(drop=True)


def tokens(con: duckdb.DuckDBPyConnection, runs: str | Iterable[str] | None = None, by: str = "run",
           include_errors: bool = False) -> pd.DataFrame:
    """Token accounting of the counted rollouts.

    ``by="run"``: per run — rollouts, rollouts_with_tokens, totals and means of input, output,
    reasoning and all tokens, total_tokens_p50/p95 per rollout, tool_output_chars_mean (tool
    results, characters), truncated_token_share (tokens spent on truncated rollouts).
    ``by="step"``: the same with split, step, step_known, ordered as ``by_step``.
    ``by="tool"``: per run and tool — calls, rollouts_using, output_chars (what the tool's results
    added to the context), per call and per rollout, output_share of the run's tool output,
    output_chars_truncated (in truncated rollouts); in characters (``unit``): tool results carry
    no token counts. ``by="turn"``: per run and turn — rollouts with calls in it, calls, tool output
    added (output_chars_mean) and accumulated so far (cumulative_output_chars_mean/_p95), in
    characters: the canonical tables hold no tokens per turn.
    Grader tokens of a training job: ``job_usage``."""
    if by not in TOKEN_VIEWS:
        raise ValueError(f"by must be one of {', '.join(TOKEN_VIEWS)}; got {by!r}")
    labels = resolve_runs(con, runs, expand=True)
    df = run_sql(con, TOKEN_VIEWS[by](), params(labels, include_errors, threshold=threshold(None))).df()
    return _order_runs(df, labels, by) if by in ("run", "step") else df


# ---- dollars ------------------------------------------------------------------------------------

def cost_sql() -> str:
    """Per run ($runs): dollars of the counted rollouts ($include_errors), with the rollouts each
    cost came from (logs / prices), per rollout, per sample, per solved sample (cost ÷ passing
    rollouts, $threshold), on truncated rollouts, and on the rollouts left out."""
    return f"""
    WITH p AS ({priced_sql()}),
    inc AS (SELECT * FROM p WHERE $include_errors OR NOT excluded),
    left_out AS (SELECT run_id, count(*) AS n_excluded, sum(cost_usd) AS cost_excluded
                 FROM p WHERE excluded AND NOT $include_errors GROUP BY run_id),
    per_sample AS (SELECT run_id, sample_id, sum(cost_usd) AS c FROM inc
                   WHERE sample_id IS NOT NULL AND cost_usd IS NOT NULL GROUP BY run_id, sample_id),
    by_sample AS (SELECT run_id, count(*) AS samples_costed, avg(c) AS cost_per_sample FROM per_sample GROUP BY run_id),
    agg AS (
        SELECT run_id, any_value(price_model) AS price_model, count(*) AS rollouts,
               count(DISTINCT sample_id) AS samples, count(cost_usd) AS rollouts_costed,
               count(*) FILTER (WHERE cost_source = 'logs') AS cost_from_logs,
               count(*) FILTER (WHERE cost_source = 'prices') AS cost_from_prices,
               sum(cost_usd) AS cost_total, avg(cost_usd) AS cost_per_rollout,
               count(*) FILTER (WHERE passed) AS passes,
               count(*) FILTER (WHERE passed AND cost_usd IS NOT NULL) AS passes_costed,
               avg(s) AS mean_score, count(*) FILTER (WHERE truncated) AS truncated,
               sum(cost_usd) FILTER (WHERE truncated) AS cost_truncated,
               sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens,
               sum(reasoning_tokens) AS reasoning_tokens
        FROM inc GROUP BY run_id),
    all_runs AS (SELECT DISTINCT run_id FROM p)
    SELECT a.run_id AS run, {_step_columns_sql()}, ru.model, g.price_model,
           CASE WHEN g.cost_from_logs > 0 AND g.cost_from_prices > 0 THEN 'logs+prices'
                WHEN g.cost_from_logs > 0 THEN 'logs' WHEN g.cost_from_prices > 0 THEN 'prices' END AS cost_source,
           coalesce(g.rollouts, 0) AS rollouts, coalesce(g.samples, 0) AS samples,
           coalesce(g.rollouts_costed, 0) AS rollouts_costed,
           g.rollouts_costed / nullif(g.rollouts, 0) AS cost_coverage,
           coalesce(g.cost_from_logs, 0) AS cost_from_logs, coalesce(g.cost_from_prices, 0) AS cost_from_prices,
           g.cost_total, g.cost_per_rollout, s.cost_per_sample,
           g.cost_total / nullif(g.passes_costed, 0) AS cost_per_solved,
           g.mean_score, coalesce(g.passes, 0) AS passes, coalesce(g.passes_costed, 0) AS passes_costed,
           coalesce(g.truncated, 0) AS truncated, g.cost_truncated,
           coalesce(l.n_excluded, 0) AS n_excluded, l.cost_excluded,
           g.input_tokens, g.output_tokens, g.reasoning_tokens
    FROM all_runs a LEFT JOIN agg g USING (run_id) LEFT JOIN by_sample s USING (run_id)
    LEFT JOIN left_out l USING (run_id) LEFT JOIN runs ru ON ru.run_id = a.run_id
    """


def cost(con: duckdb.DuckDBPyConnection, runs: str | Iterable[str] | None = None, prices=None, by: str = "run",
         pass_threshold: float | None = None, include_errors: bool = False) -> pd.DataFrame:
    """Dollars per run, over the counted rollouts (infra errors and ungraded left out, as
    everywhere; ``cost_excluded`` says what they cost).

    Per rollout the cost is the logs' (``cost_usd``) where given, else its tokens at the prices of
    its run's model (``price_table(prices)``); ``cost_source`` says which (``logs``, ``prices``,
    ``logs+prices``), ``cost_from_logs`` / ``cost_from_prices`` how many rollouts each, and
    ``cost_coverage`` the share with any cost. A model without a price: NULL, and one warning
    naming it. Columns: cost_total (sum where known), cost_per_rollout (mean where known),
    cost_per_sample (mean over samples of a sample's summed cost: what one sample costs at this
    many attempts), cost_per_solved (cost_total ÷ passing rollouts with a cost: the expected cost
    of one pass), cost_truncated (spent on truncated rollouts), tokens. ``by="step"`` adds split,
    step, step_known and orders as ``by_step``. Training fees are not included (``attrs``).
    Per training step from a job's usage events: ``job_usage``."""
    if by not in ("run", "step"):
        raise ValueError(f"by must be 'run' or 'step'; got {by!r}")
    labels = resolve_runs(con, runs, expand=True)
    p, meta = _priced(con, labels, prices, include_errors, pass_threshold)
    df = _order_runs(run_sql(con, cost_sql(), p).df(), labels, by)
    df.attrs.update(prices_as_of=meta["as_of"], price_origin=meta["origin"], excludes=TRAINING_FEES_EXCLUDED,
                    pass_threshold=p["threshold"], include_errors=include_errors)
    return df


def cost_per_sample_sql() -> str:
    """One row per (run, sample) of the counted rollouts: what ``compare`` resamples — sums whose
    ratios are the cost metrics (cost_usd / n_cost per rollout, cost_usd / passes_costed per
    solved sample, truncated / rollouts the truncated share)."""
    return f"""
    SELECT run_id AS run, sample_id, count(*) AS rollouts, avg(s) AS score_mean,
           count(*) FILTER (WHERE passed) AS passes, sum(cost_usd) AS cost_usd, count(cost_usd) AS n_cost,
           count(*) FILTER (WHERE passed AND cost_usd IS NOT NULL) AS passes_costed,
           count(*) FILTER (WHERE cost_source = 'logs') AS n_cost_logs,
           count(*) FILTER (WHERE cost_source = 'prices') AS n_cost_prices,
           count(*) FILTER (WHERE truncated) AS truncated,
           sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens,
           sum(reasoning_tokens) AS reasoning_tokens
    FROM ({priced_sql()})
    WHERE ($include_errors OR NOT excluded) AND sample_id IS NOT NULL
    GROUP BY run_id, sample_id
    ORDER BY list_position($runs, run_id), sample_id
    """


def cost_per_sample_frame(con: duckdb.DuckDBPyConnection, runs: str | Iterable[str] | None = None, prices=None,
                          pass_threshold: float | None = None, include_errors: bool = False) -> pd.DataFrame:
    """One row per (run, sample_id) of the counted rollouts: rollouts, score_mean, passes, cost_usd
    (summed where known), n_cost (rollouts with a cost), passes_costed, n_cost_logs,
    n_cost_prices, truncated, tokens. Ratios of sums over samples give cost_per_rollout
    (cost_usd / n_cost), cost_per_solved (cost_usd / passes_costed) and the truncated share
    (truncated / rollouts): a paired bootstrap over samples (``compare``) resamples these rows."""
    labels = resolve_runs(con, runs, expand=True)
    p, meta = _priced(con, labels, prices, include_errors, pass_threshold)
    df = run_sql(con, cost_per_sample_sql(), p).df()
    df.attrs.update(prices_as_of=meta["as_of"], price_origin=meta["origin"], excludes=TRAINING_FEES_EXCLUDED)
    return df


# ---- the cost–score frontier ----------------------------------------------------------------------

FRONTIER_COLUMNS = ["run", "model", "cost_source", "samples", "rollouts", "score", "score_ci_low", "score_ci_high",
                    "pass_at_1", "cost_per_rollout", "cost_per_rollout_ci_low", "cost_per_rollout_ci_high",
                    "cost_per_solved", "cost_per_solved_ci_low", "cost_per_solved_ci_high", "pareto",
                    "pareto_per_solved"]


def _bootstrap_ratios(num: np.ndarray, den: np.ndarray, n_boot: int, seed: int, ci: float) -> np.ndarray:
    """(columns, 2): percentile CIs of sum(num)/sum(den) per column, resampling rows (samples)."""
    if len(num) == 0 or n_boot <= 0:
        return np.full((num.shape[1], 2), np.nan)
    reps = []
    for w in stats.resample_counts(len(num), n_boot, seed):
        with np.errstate(divide="ignore", invalid="ignore"):
            r = (w @ num) / (w @ den)
        reps.append(np.where(np.isfinite(r), r, np.nan))
    reps = np.vstack(reps)
    return np.array([stats.percentile_interval(reps[:, j], ci) for j in range(num.shape[1])])


def pareto(cost_values, score_values) -> list:
    """For each point: True when no other point costs no more and scores no less, one of them
    strictly; None where cost or score is missing (never on the frontier, never dominated)."""
    pts = [(c, s) for c, s in zip(cost_values, score_values)]
    out = []
    for i, (c, s) in enumerate(pts):
        if c is None or s is None or (isinstance(c, float) and math.isnan(c)) or \
                (isinstance(s, float) and math.isnan(s)):
            out.append(None)
            continue
        dominated = any(j != i and not (math.isnan(c2) or math.isnan(s2)) and c2 <= c and s2 >= s
                        and (c2 < c or s2 > s) for j, (c2, s2) in enumerate(pts)
                        if c2 is not None and s2 is not None)
        out.append(not dominated)
    return out


def run_models_sql() -> str:
    return "SELECT run_id, model FROM runs WHERE list_contains($runs, run_id)"


def frontier(con: duckdb.DuckDBPyConnection, runs: str | Iterable[str] | None = None, prices=None,
             pass_threshold: float | None = None, include_errors: bool = False, n_boot: int = COST_N_BOOT,
             seed: int = 0, ci: float = COST_CI) -> pd.DataFrame:
    """The cost–score frontier: one row per run — score (mean over samples of the sample's mean
    score, as ``compare``'s), pass_at_1, cost_per_rollout and cost_per_solved, each with a
    percentile-bootstrap CI resampling samples (seeded), and ``pareto`` / ``pareto_per_solved``:
    no other run costs no more (per rollout / per solved sample) and scores no less, one of them
    strictly. A run without a cost is on neither frontier (``pareto`` NA)."""
    labels = resolve_runs(con, runs, expand=True)
    per = cost_per_sample_frame(con, labels, prices, pass_threshold, include_errors)
    meta = per.attrs
    models = dict(run_sql(con, run_models_sql(), {"runs": labels}).fetchall())
    rows = []
    for i, run in enumerate(labels):
        d = per[per.run == run]
        n = len(d)
        num = np.column_stack([d.score_mean.to_numpy(float), (d.passes / d.rollouts).to_numpy(float),
                               d.cost_usd.fillna(0).to_numpy(float), d.cost_usd.fillna(0).to_numpy(float)]) \
            if n else np.empty((0, 4))
        den = np.column_stack([np.ones(n), np.ones(n), d.n_cost.to_numpy(float), d.passes_costed.to_numpy(float)]) \
            if n else np.empty((0, 4))
        point = [stats.ratio(num[:, j], den[:, j]) if n else math.nan for j in range(4)]
        if n and den[:, 2].sum() == 0:
            point[2] = point[3] = math.nan
        bounds = _bootstrap_ratios(num, den, n_boot, seed + i, ci)
        logs, priced = int(d.n_cost_logs.sum()), int(d.n_cost_prices.sum())
        source = ("logs+prices" if logs and priced else "logs" if logs else "prices" if priced else None)
        rows.append({"run": run, "model": models.get(run), "cost_source": source, "samples": n,
                     "rollouts": int(d.rollouts.sum()), "score": point[0], "score_ci_low": bounds[0, 0],
                     "score_ci_high": bounds[0, 1], "pass_at_1": point[1],
                     "cost_per_rollout": point[2], "cost_per_rollout_ci_low": bounds[2, 0],
                     "cost_per_rollout_ci_high": bounds[2, 1], "cost_per_solved": point[3],
                     "cost_per_solved_ci_low": bounds[3, 0], "cost_per_solved_ci_high": bounds[3, 1]})
    df = pd.DataFrame(rows, columns=[c for c in FRONTIER_COLUMNS if c not in ("pareto", "pareto_per_solved")])
    df["pareto"] = pd.array(pareto(df.cost_per_rollout.tolist(), df.score.tolist()), dtype="boolean")
    df["pareto_per_solved"] = pd.array(pareto(df.cost_per_solved.tolist(), df.score.tolist()), dtype="boolean")
    df.attrs.update(prices_as_of=meta.get("prices_as_of"), price_origin=meta.get("price_origin"),
                    excludes=TRAINING_FEES_EXCLUDED, n_boot=n_boot, seed=seed, ci=ci,
                    pass_threshold=threshold(pass_threshold), include_errors=include_errors)
    return df[FRONTIER_COLUMNS]


# ---- the budget of a training job ---------------------------------------------------------------

def job_cost_sql() -> str:
    """Per cluster (dataset sample; a rollout without one is its own) of every rollout of $runs —
    failed rollouts cost tokens too: the summed cost and the rollouts with one."""
    return f"""
    SELECT coalesce(sample_id, 'rollout:' || rollout_id) AS cluster, sum(cost_usd) AS cost_usd,
           count(cost_usd) AS n_cost, count(*) AS rollouts,
           count(*) FILTER (WHERE cost_source = 'logs') AS n_cost_logs,
           count(*) FILTER (WHERE cost_source = 'prices') AS n_cost_prices,
           list(cost_usd) FILTER (WHERE cost_usd IS NOT NULL) AS costs
    FROM ({priced_sql()}) GROUP BY ALL ORDER BY cluster
    """


def run_samples_sql() -> str:
    return "SELECT count(DISTINCT sample_id) FROM rollouts WHERE run_id = $run"


def job_cost(con: duckdb.DuckDBPyConnection, run: str, samples: int | None = None,
             compute_multiplier: int | None = None, steps: int | None = None, prices=None,
             n_boot: int = COST_N_BOOT, seed: int = 0, ci: float = COST_CI) -> pd.DataFrame:
    """The rollout cost of a planned training job, from this run's own cost per rollout.

    A step runs ``samples × compute_multiplier`` rollouts (``samples``: dataset samples per step,
    the batch size — ``capacity``'s ``batch_size``; default the run's samples; multiplier default
    1), the job ``steps`` steps (default 1). Every rollout of the run counts (a failed rollout
    spent tokens too). Rows ``scope``: ``rollout``, ``step``, ``job`` — rollouts, cost_usd
    (rollouts × the run's mean cost per rollout), ci_low / ci_high (percentile bootstrap of the
    mean, resampling the run's samples, seeded: the uncertainty of the run's cost per rollout),
    p50 / p95 (of one rollout; the rollout row only), ``excludes``: platform training fees (RFT
    bills training time per hour) and model-grader tokens are NOT included."""
    label = resolve_runs(con, run)[0]
    if samples is None:
        samples = int(run_sql(con, run_samples_sql(), {"run": label}).fetchone()[0])
    multiplier = 1 if compute_multiplier is None else int(compute_multiplier)
    n_steps = 1 if steps is None else int(steps)
    for name, value in (("samples", samples), ("compute_multiplier", multiplier), ("steps", n_steps)):
        if value < 1:
            raise ValueError(f"{name} must be 1 or more; got {value}")
    p, meta = _priced(con, [label], prices)
    per = run_sql(con, job_cost_sql(), p).df()
    num = per.cost_usd.fillna(0).to_numpy(float)[:, None]
    den = per.n_cost.to_numpy(float)[:, None]
    mean = stats.ratio(num[:, 0], den[:, 0]) if len(per) else math.nan
    lo, hi = _bootstrap_ratios(num, den, n_boot, seed, ci)[0] if len(per) else (math.nan, math.nan)
    # a sample none of whose rollouts has a cost gives no list (NULL), not an empty one
    costs = np.array([c for cs in per.costs if isinstance(cs, (list, np.ndarray)) for c in cs], dtype=float)
    p50, p95 = (np.quantile(costs, [0.5, 0.95]) if costs.size else (math.nan, math.nan))
    per_step = int(samples) * multiplier
    rows = []
    for scope, n in (("rollout", 1), ("step", per_step), ("job", per_step * n_steps)):
        rows.append({"scope": scope, "rollouts": n, "cost_usd": mean * n, "ci_low": lo * n, "ci_high": hi * n,
                     "p50": float(p50) if scope == "rollout" else math.nan,
                     "p95": float(p95) if scope == "rollout" else math.nan, "excludes": TRAINING_FEES_EXCLUDED})
    df = pd.DataFrame(rows)
    logs, priced = int(per.n_cost_logs.sum()), int(per.n_cost_prices.sum())
    df.attrs.update(run=label, samples=int(samples), compute_multiplier=multiplier, steps=n_steps,
                    rollouts_per_step=per_step, rollouts_used=int(den.sum()), rollouts=int(per.rollouts.sum()),
                    cost_source=("logs+prices" if logs and priced else "logs" if logs else "prices" if priced else None),
                    prices_as_of=meta["as_of"], price_origin=meta["origin"], excludes=TRAINING_FEES_EXCLUDED,
                    n_boot=n_boot, seed=seed, ci=ci)
    return df


# ---- a training job's own usage events ----------------------------------------------------------

JOB_TOKEN_METRICS = {"model_grader_prompt_tokens": "input_tokens", "model_grader_cached_tokens": "cached_input_tokens",
                     "model_grader_completion_tokens": "output_tokens",
                     "model_grader_reasoning_tokens": "reasoning_tokens"}


def job_usage_sql() -> str:
    """Per (job, step, split, grader model) from ``training_metrics`` ($job or every job): the
    model graders' tokens (``model_graders_token_usage`` of OpenAI job events: prompt tokens,
    cached among them, completion tokens; reasoning counted inside completion) and their dollars
    at the model's prices (bound lists, as ``priced_sql``); beside them the sampling token means
    the job reports for the step (``reasoning_tokens_mean``, ``completion_tokens_mean``)."""
    picks = ", ".join(f'max(value) FILTER (WHERE metric = {lit(m)}) AS "{c}"' for m, c in JOB_TOKEN_METRICS.items())
    names = ", ".join(lit(m) for m in JOB_TOKEN_METRICS)
    return f"""
    WITH m AS ({training_metrics_sql()}),
    price AS (
        SELECT unnest($models::VARCHAR[]) AS model, unnest($price_models::VARCHAR[]) AS price_model,
               unnest($p_input::DOUBLE[]) AS p_input, unnest($p_cached::DOUBLE[]) AS p_cached,
               unnest($p_output::DOUBLE[]) AS p_output),
    g AS (SELECT job, step, split, grader AS grader_model, {picks}
          FROM m WHERE grader <> '' AND metric IN ({names}) GROUP BY job, step, split, grader),
    s AS (SELECT job, step, split,
                 max(value) FILTER (WHERE metric = 'reasoning_tokens_mean') AS sampling_reasoning_tokens_mean,
                 max(value) FILTER (WHERE metric = 'completion_tokens_mean') AS sampling_completion_tokens_mean
          FROM m WHERE grader = '' AND metric IN ('reasoning_tokens_mean', 'completion_tokens_mean')
          GROUP BY job, step, split)
    SELECT coalesce(g.job, s.job) AS job, coalesce(g.step, s.step) AS step, coalesce(g.split, s.split) AS split,
           g.grader_model, p.price_model, g.input_tokens, g.cached_input_tokens, g.output_tokens, g.reasoning_tokens,
           CASE WHEN p.price_model IS NULL OR g.input_tokens IS NULL THEN NULL
                ELSE ((g.input_tokens - coalesce(g.cached_input_tokens, 0)) * p.p_input
                      + coalesce(g.cached_input_tokens, 0) * p.p_cached
                      + coalesce(g.output_tokens, 0) * p.p_output) / 1e6 END AS grader_cost_usd,
           g.input_tokens IS NOT NULL AND g.output_tokens IS NULL AS grader_output_unknown,
           s.sampling_reasoning_tokens_mean, s.sampling_completion_tokens_mean
    FROM g FULL OUTER JOIN s ON g.job = s.job AND g.step = s.step AND g.split = s.split
    LEFT JOIN price p ON p.model = g.grader_model
    ORDER BY job, split, step, grader_model
    """


def job_graders_sql() -> str:
    """The grader models whose tokens the job usage events of $job (NULL: every job) report."""
    names = ", ".join(lit(m) for m in JOB_TOKEN_METRICS)
    return f"""SELECT DISTINCT grader FROM training_metrics
               WHERE grader <> '' AND metric IN ({names}) AND ($job IS NULL OR job = $job) ORDER BY grader"""


def job_usage(con: duckdb.DuckDBPyConnection, job: str | None = None, prices=None) -> pd.DataFrame:
    """Per training step and split of a job (OpenAI fine-tuning job events, ``training_metrics``):
    the model graders' tokens (input = prompt tokens, cached among them, output = completion
    tokens) and ``grader_cost_usd`` at the grader model's prices (NULL, with one warning, for a
    model without one). ``grader_output_unknown``: the events give no completion tokens, so the
    cost counts the prompt tokens only (a lower bound). Beside them the sampling tokens per rollout
    the job reports. Sampling is paid by the platform's training fee, which is not included here
    (nor anywhere)."""
    graders = [g for (g,) in run_sql(con, job_graders_sql(), {"job": job}).fetchall()]
    table = price_table(prices)
    models, keys, cols, unpriced = _price_columns(graders, table, ("input", "cached_input", "output"))
    for g in unpriced:
        warnings.warn(f"no price for grader model {g!r} (job usage events): its grader cost is NULL; give its "
                      f"price: prices={{{g!r}: {{'input': ..., 'output': ...}}}} (USD per 1M tokens)",
                      PriceWarning, stacklevel=2)
    p = {"job": job, "models": models, "price_models": keys, "p_input": cols["input"],
         "p_cached": cols["cached_input"], "p_output": cols["output"]}
    df = run_sql(con, job_usage_sql(), p).df()
    df.attrs.update(prices_as_of=_dates(table, keys),
                    excludes=TRAINING_FEES_EXCLUDED.replace(" and model-grader tokens", ""))
    return df


# ---- truncation -----------------------------------------------------------------------------------

def truncation_sql() -> str:
    """Per run ($runs): counted rollouts ($include_errors), how many were truncated and at which
    limit, how many name any stop reason, and the share of tokens spent on truncated ones."""
    kinds = ", ".join(f'count(*) FILTER (WHERE truncation_kind = {lit(k)}) AS "{k}"' for k in TRUNCATION_KINDS)
    return f"""
    WITH f AS ({flagged_sql()}),
    inc AS (SELECT *, CASE WHEN input_tokens IS NOT NULL OR output_tokens IS NOT NULL
                           THEN coalesce(input_tokens, 0) + coalesce(output_tokens, 0) + coalesce(reasoning_tokens, 0)
                      END AS total_tokens
            FROM f WHERE $include_errors OR NOT excluded),
    agg AS (SELECT run_id, count(*) AS rollouts, count(*) FILTER (WHERE truncated) AS truncated, {kinds},
                   count(*) FILTER (WHERE coalesce(stop_reason, 'unknown') <> 'unknown') AS with_stop_reason,
                   count(*) FILTER (WHERE {_unknown_word('inc')}) AS unknown_stop,
                   sum(total_tokens) FILTER (WHERE truncated) / nullif(sum(total_tokens), 0) AS truncated_token_share
            FROM inc GROUP BY run_id),
    words AS (  -- the producers' words the vocabulary does not know, most frequent first
        SELECT run_id, list({{'word': word, 'n': n}} ORDER BY n DESC, word) AS unknown_words FROM (
            SELECT run_id, stop_reason_raw AS word, count(*) AS n FROM inc WHERE {_unknown_word('inc')}
            GROUP BY ALL) GROUP BY run_id),
    all_runs AS (SELECT DISTINCT run_id FROM f)
    SELECT a.run_id AS run, {_step_columns_sql()}, coalesce(g.rollouts, 0) AS rollouts,
           coalesce(g.truncated, 0) AS truncated, g.truncated / nullif(g.rollouts, 0) AS truncated_share,
           {", ".join(f'coalesce(g."{k}", 0) AS "{k}"' for k in TRUNCATION_KINDS)},
           coalesce(g.with_stop_reason, 0) AS with_stop_reason, coalesce(g.unknown_stop, 0) AS unknown_stop,
           w.unknown_words, g.truncated_token_share
    FROM all_runs a LEFT JOIN agg g USING (run_id) LEFT JOIN runs ru ON ru.run_id = a.run_id
    LEFT JOIN words w USING (run_id)
    """


def _unknown_word(alias: str) -> str:
    """A rollout whose producer named why it stopped in a word the vocabulary does not know:
    never counted as not truncated without saying so."""
    return (f"({alias}.stop_reason = 'unknown' AND {alias}.stop_reason_raw IS NOT NULL "
            f"AND NOT {alias}.truncated)")


def unknown_words_text(words) -> str:
    """``'pause_turn' (12), 'OTHER' (3)`` from a frame's ``unknown_words``."""
    words = list(words) if words is not None and not (isinstance(words, float) and words != words) else []
    return ", ".join(f"'{w['word']}' ({int(w['n']):,})" for w in words[:8]) + (" …" if len(words) > 8 else "")


def truncation(con: duckdb.DuckDBPyConnection, runs: str | Iterable[str] | None = None, by: str = "run",
               include_errors: bool = False) -> pd.DataFrame:
    """Truncated share per run (``by="step"``: with split, step, step_known, ordered as
    ``by_step``): counted rollouts, truncated (cut at a limit, or marked truncated without one),
    truncated_share, the count per limit (length, context, tool_budget, turn_limit, time_limit,
    unspecified), with_stop_reason (rollouts whose stop reason is known: 0 means the logs cannot
    tell), unknown_stop and unknown_words (rollouts whose producer named a stop reason the
    vocabulary does not know, and those words with their counts: maybe truncated, maybe not),
    truncated_token_share (tokens spent on truncated rollouts)."""
    if by not in ("run", "step"):
        raise ValueError(f"by must be 'run' or 'step'; got {by!r}")
    labels = resolve_runs(con, runs, expand=True)
    df = run_sql(con, truncation_sql(), params(labels, include_errors, threshold=threshold(None))).df()
    return _order_runs(df, labels, by)


def truncation_tools_sql() -> str:
    """Per tool: its output characters in the run's ($runs) counted truncated rollouts — those cut
    by the context or the output limit when there are any ($context_only) — and their share."""
    return f"""
    WITH f AS ({flagged_sql()}),
    cut AS (SELECT rollout_id FROM f WHERE ($include_errors OR NOT excluded) AND truncated
            AND (NOT $context_only OR truncation_kind IN ('context', 'length')))
    SELECT t.tool, sum(t.output_chars) AS output_chars, count(*) AS calls,
           sum(t.output_chars) / nullif(sum(sum(t.output_chars)) OVER (), 0) AS share
    FROM tool_calls t JOIN cut USING (rollout_id)
    GROUP BY t.tool HAVING sum(t.output_chars) > 0 ORDER BY output_chars DESC, t.tool
    """


def truncation_examples_sql() -> str:
    return f"""
    SELECT rollout_id FROM ({flagged_sql()})
    WHERE ($include_errors OR NOT excluded) AND truncated ORDER BY sample_id, attempt, rollout_id LIMIT $examples
    """


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


LIMIT_WORDS = {"length": "the output token limit", "context": "the context window", "tool_budget": "the tool budget",
               "turn_limit": "the turn limit", "time_limit": "the time limit",
               "unspecified": "a limit the logs do not name"}


def truncation_check(con: duckdb.DuckDBPyConnection, run: str, warn: float | None = None, fail: float | None = None,
                     examples: int = 5, include_errors: bool = False) -> dict:
    """The readiness check ``truncation``, as a row of ``check``: check, status (warn above
    ``warn``, 2%; fail above ``fail``, 10%; skip when nothing is counted or no rollout names a
    stop reason), value (the truncated share), threshold, advice (raise the limit or shorten tool
    outputs, naming the tools whose outputs fill the cut rollouts' context), details (counts per
    limit, example rollout ids)."""
    warn = TRUNCATION_WARN if warn is None else float(warn)
    fail = TRUNCATION_FAIL if fail is None else float(fail)
    thr = f"warn above {_pct(warn)}, fail above {_pct(fail)}"
    row = truncation(con, run, include_errors=include_errors).iloc[0]
    label = row["run"]

    def out(status, value, advice, details=""):
        return {"check": "truncation", "status": status, "value": math.nan if value is None else float(value),
                "threshold": thr, "advice": advice, "details": details}

    if row.rollouts == 0:
        return out("skip", None, "No counted rollouts (every rollout an infra error or ungraded).")
    if row.truncated == 0 and row.with_stop_reason == 0:
        return out("skip", None, "The logs give no stop reason for any rollout, so truncation cannot be told: "
                   "log why each rollout stopped (stop_reason: max_tokens, context_length_exceeded, max_turns ...).")
    share = float(row.truncated_share)
    counts = {k: int(row[k]) for k in TRUNCATION_KINDS if row[k]}
    unknown = int(row.unknown_stop)
    at_most = (row.truncated + unknown) / row.rollouts
    maybe = (f" {unknown:,} rollouts stopped for reasons rolloutlab does not know ({unknown_words_text(row.unknown_words)}):"
             f" if they are limits, up to {_pct(at_most)} were cut — tell rolloutlab "
             "what they mean (stop_reasons.WORDS) or check the producer's docs." if unknown else "")
    if not counts:
        if unknown and at_most > warn:
            return out("warn", share, "No rollout was cut at a known limit, but" + maybe,
                       f"unknown stop reasons: {unknown_words_text(row.unknown_words)}")
        return out("pass", share, "No rollout was cut at a limit." + maybe)
    kinds = ", ".join(f"{k} {n:,}" for k, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    p = params([label], include_errors, threshold=threshold(None), examples=int(examples),
               context_only=bool(counts.get("context") or counts.get("length")))
    ids = [r for (r,) in run_sql(con, truncation_examples_sql(), p).fetchall()]
    details = f"{int(row.truncated):,} of {int(row.rollouts):,} counted rollouts cut: {kinds}"
    if ids:
        details += f"; e.g. {', '.join(ids)}"
    main = max(counts, key=lambda k: (counts[k], k))
    tools = run_sql(con, truncation_tools_sql(), p).df()
    named, covered = [], 0.0
    for t in tools.itertuples():
        if len(named) >= TRUNCATION_TOOLS_NAMED or (named and covered >= 0.5):
            break
        named.append(f"{t.tool} ({_pct(t.share)})")
        covered += t.share
    where = "cut at the context window or the output limit" if p["context_only"] else "cut"
    tool_text = (f"shorten tool outputs: in the rollouts {where}, {', '.join(named)} wrote most of the tool output"
                 if named else "shorten tool outputs (no tool output sizes are logged for the cut rollouts)")
    advice = (f"{_pct(share)} of rollouts were cut, mostly at {LIMIT_WORDS[main]}: a cut rollout's reward says "
              f"nothing about the answer it never finished. Raise the limit or {tool_text}.{maybe}")
    if unknown:
        details += f"; unknown stop reasons: {unknown_words_text(row.unknown_words)}"
    if share > fail:
        return out("fail", share, advice, details)
    if share > warn or at_most > warn:  # what it does not know could put it over the line
        return out("warn", share, advice, details)
    return out("pass", share, f"{_pct(share)} of rollouts were cut (mostly at {LIMIT_WORDS[main]}): "
               f"few enough not to skew the reward.{maybe}", details)
