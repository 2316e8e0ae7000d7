"""Stop reasons in one vocabulary: every producer's word mapped, unknown words kept raw, and a
version-7 database upgraded in place."""
from __future__ import annotations

import json

import duckdb
import pytest

import rolloutlab as rl
from rolloutlab import stop_reasons, store


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
