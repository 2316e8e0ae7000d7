"""The record-by-record bridge: failures keep their place and location; helpers."""
from __future__ import annotations

from rolloutlab.ingest import convert
from rolloutlab.ingest.context import LoadContext


def test_load_items_numbers_records_in_source_order(con, tmp_path):
    src = tmp_path / "src.json"
    src.write_text("{}")
    items = [convert.Item("rec 0", record={"run": "r", "sample_id": "a", "score": 1.0}),
             convert.Item("rec 1", reason="broken", raw={"x": 1}),
             convert.Item("rec 2", record={"run": "r", "sample_id": "b", "score": "bad"})]
    con.execute("BEGIN")
    result = convert.load_items(LoadContext(con, src, 1, "src-L"), items)
    staged = con.execute("SELECT line_no, raw, reason FROM _rl_rejects ORDER BY line_no").fetchall()
    lines = con.execute("SELECT sample_id, source_line FROM rollouts").fetchall()
    con.execute("ROLLBACK")
    assert (result.n_records, result.n_rejected) == (3, 2)
    assert staged[0] == (2, '{"x": 1}', "rec 1: broken")
    assert staged[1][0] == 3 and staged[1][2] == "rec 2: field 'score' must be a number, got string \"bad\""
    assert lines == [("a", 1)]


def test_classify_error_and_text_of():
    assert convert.classify_error("HTTP 503 Service Unavailable") == "infra_error"
    assert convert.classify_error("Request timed out") == "infra_error"
    assert convert.classify_error("unknown tool 'grep'") == "model_error"
    assert convert.classify_error(None) == "model_error"
    assert convert.text_of([{"type": "text", "text": "a"}, {"type": "image"}, "b"]) == "a\nb"
    assert convert.text_of({"k": 1}) == '{"k": 1}'
    assert convert.parse_json_arguments('{"a": 1}') == {"a": 1} and convert.parse_json_arguments("x") == "x"


def test_batches_keep_source_numbering(con, tmp_path):
    src = tmp_path / "src.json"
    src.write_text("{}")
    items = [convert.Item(f"rec {i}", record={"run": "r", "sample_id": f"s{i}", "score": 1.0}) for i in range(5)]
    items[3] = convert.Item("rec 3", reason="broken", raw="x")
    items[4].record["score"] = "bad"
    con.execute("BEGIN")
    result = convert.load_items(LoadContext(con, src, 1, "src-L"), items, batch=2)
    staged = con.execute("SELECT line_no, reason FROM _rl_rejects ORDER BY line_no").fetchall()
    lines = con.execute("SELECT sample_id, source_line FROM rollouts ORDER BY source_line").fetchall()
    con.execute("ROLLBACK")
    assert (result.n_records, result.n_rejected) == (5, 2)
    assert staged == [(4, "rec 3: broken"), (5, "rec 4: field 'score' must be a number, got string \"bad\"")]
    assert lines == [("s0", 1), ("s1", 2), ("s2", 3)]
