"""Stop reasons in one vocabulary: every producer's word mapped, unknown words kept raw, and a
version-7 database upgraded in place."""
from __future__ import annotations

import json

import duckdb
import pytest

import rolloutlab as rl
from rolloutlab.store import stop_reasons
from rolloutlab import store


@pytest.mark.parametrize("raw, want", [
    ("final_answer", "stop"), ("agent_stop", "stop"), ("STOP", "stop"), ("length", "length"),
    ("max_tokens", "length"), ("model_length", "context"), ("context_window_exceeded", "context"),
    ("limit: context", "context"), ("max_steps", "turn_limit"), ("limit: message", "turn_limit"),
    ("max_tool_calls", "tool_budget"), ("timeout", "time_limit"), ("limit: time", "time_limit"),
    ("user_stop", "user_stop"), ("infrastructure_error", "error"), ("exception", "error"),
    ("something new", "unknown"), (None, "unknown")])
def test_every_word_maps_to_the_vocabulary(raw, want):
    got = duckdb.connect().execute(f"SELECT {stop_reasons.stop_reason_sql('x')} FROM (SELECT ?::VARCHAR AS x)",
                                   [raw]).fetchone()[0]
    assert got == want and got in stop_reasons.VOCABULARY


def test_the_vocabulary_has_no_word_twice():
    words = [w for ws in stop_reasons.WORDS.values() for w in ws]
    assert len(words) == len(set(words)) and set(stop_reasons.WORDS) | {"unknown"} == set(stop_reasons.VOCABULARY)
    assert set(stop_reasons.LIMITS) <= set(stop_reasons.VOCABULARY)


def test_version_7_keeps_the_producers_words_and_gains_the_vocabulary(db_path, tmp_path):
    path = tmp_path / "n.jsonl"
    path.write_text("".join(json.dumps({"run": "r", "sample_id": f"s{i}", "score": 1, "stop_reason": w}) + "\n"
                            for i, w in enumerate(["max_tokens", "final_answer", "odd"])))
    c = rl.connect(db_path)
    rl.ingest(c, path)
    # back to version 7: the raw word in stop_reason, no labels, no stop_reason_raw
    c.execute("UPDATE rollouts SET stop_reason = stop_reason_raw")
    c.execute("ALTER TABLE rollouts DROP COLUMN stop_reason_raw")
    c.execute("DROP TABLE labels")
    c.execute("UPDATE rolloutlab_meta SET value = '7' WHERE key = 'schema_version'")
    c.close()
    c = rl.connect(db_path)
    assert c.execute("SELECT stop_reason_raw, stop_reason FROM rollouts ORDER BY 1").fetchall() == [
        ("final_answer", "stop"), ("max_tokens", "length"), ("odd", "unknown")]
    assert c.execute("SELECT count(*) FROM labels").fetchone() == (0,)
    assert c.execute("SELECT value FROM rolloutlab_meta WHERE key = 'schema_version'").fetchone() == \
        (str(store.SCHEMA_VERSION),)
    c.close()


# the words of every major provider (issue 35): each from its own documentation of the field
PROVIDER_WORDS = [
    # OpenAI Chat Completions finish_reason / Responses incomplete_details.reason
    ("stop", "stop"), ("length", "length"), ("tool_calls", "stop"), ("content_filter", "error"),
    ("max_output_tokens", "length"),
    # Anthropic stop_reason
    ("end_turn", "stop"), ("max_tokens", "length"), ("stop_sequence", "stop"), ("tool_use", "stop"),
    ("refusal", "error"), ("model_context_window_exceeded", "context"),
    # Gemini finishReason (upper case)
    ("STOP", "stop"), ("MAX_TOKENS", "length"), ("SAFETY", "error"), ("RECITATION", "error"),
    ("MALFORMED_FUNCTION_CALL", "error"), ("TOO_MANY_TOOL_CALLS", "tool_budget"), ("OTHER", "unknown"),
    # Bedrock Converse stopReason
    ("guardrail_intervened", "error"), ("content_filtered", "error"),
    # Inspect, tau2, vLLM / verl / TRL
    ("model_length", "context"), ("limit: working", "time_limit"), ("max_steps", "turn_limit"), ("abort", "error"),
    # verifiers' stop_condition (its environments' @stop methods)
    ("max_turns_reached", "turn_limit"), ("prompt_too_long", "context"), ("has_error", "error"),
    ("no_tools_called", "stop"), ("state_completed", "stop")]


@pytest.mark.parametrize("raw, want", PROVIDER_WORDS)
def test_every_major_providers_word(raw, want):
    got = duckdb.connect().execute(f"SELECT {stop_reasons.stop_reason_sql('x')} FROM (SELECT ?::VARCHAR AS x)",
                                   [raw]).fetchone()[0]
    assert got == want


def test_a_run_cut_at_anthropics_context_limit_fails_the_check(con, tmp_path):
    # 12 of 100 rollouts stopped at model_context_window_exceeded: 12% truncated, over the 10% line
    path = tmp_path / "a.jsonl"
    path.write_text("".join(json.dumps({"run": "r", "sample_id": f"s{i}", "score": 1.0, "stop_reason": w}) + "\n"
                            for i, w in enumerate(["model_context_window_exceeded"] * 12 + ["end_turn"] * 88)))
    rl.ingest(con, path)
    row = rl.truncation(con, "r").iloc[0]
    assert (row.truncated, row.context, row.truncated_share) == (12, 12, 0.12)
    check = rl.check(con, "r").set_index("check").loc["truncation"]
    assert check.status == "fail" and check.value == pytest.approx(0.12)


def test_words_nobody_knows_are_counted_and_named_wherever_truncation_is_reported(con, db_path, tmp_path, capsys):
    from rolloutlab.cli import main

    words = ["pause_turn"] * 7 + ["OTHER"] * 2 + ["max_tokens"] * 1 + ["end_turn"] * 90
    path = tmp_path / "a.jsonl"
    path.write_text("".join(json.dumps({"run": "r", "sample_id": f"s{i}", "score": 1.0, "stop_reason": w}) + "\n"
                            for i, w in enumerate(words)))
    rl.ingest(con, path)
    row = rl.truncation(con, "r").iloc[0]
    assert (row.truncated, row.unknown_stop) == (1, 9)
    assert [(w["word"], w["n"]) for w in row.unknown_words] == [("pause_turn", 7), ("OTHER", 2)]
    check = rl.check(con, "r").set_index("check").loc["truncation"]
    # 1% known, but up to 10% if the words nobody knows are limits: a warning, and the words named
    assert check.status == "warn" and "'pause_turn' (7), 'OTHER' (2)" in check.details
    assert "up to 10.0% were cut" in check.advice
    con.close()
    assert main(["truncation", "--db", str(db_path)]) == 0
    out = capsys.readouterr().out
    assert "r: 9 rollouts stopped for reasons rolloutlab does not know, counted neither as cut nor as not cut: " \
           "'pause_turn' (7), 'OTHER' (2)" in out
