"""Chat transcripts: tool calls of one assistant message share a turn; samples named by prompt."""
from __future__ import annotations



import rolloutlab as rl
from hypothesis import given
from mutations import SETTINGS, assert_ingest_survives, mutated_jsonl, read_jsonl
from conftest import FIXTURES

PATH = FIXTURES / "chat" / "chats.jsonl"


def test_transcripts(con):
    assert rl.detect_format(PATH) == "openai-chat"
    result = rl.ingest(con, PATH)
    assert result.loc[0, ["records", "loaded", "rejected"]].tolist() == [4, 2, 2]
    rows = con.execute("SELECT run_id, sample_id, score, n_tool_calls, n_turns, final_answer FROM rollouts "
                       "ORDER BY source_line").fetchall()
    assert rows[0] == ("gpt-x", "q1", 1.0, 2, 1, "$32M")
    assert rows[1][0] == "chats" and rows[1][1].startswith("prompt:") and rows[1][2:] == (0.0, 0, 0, "no idea")
    assert con.execute("SELECT list(output_chars ORDER BY call_idx) FROM tool_calls").fetchone()[0] == [10, 3]
    reasons = dict(con.execute("SELECT line_no, reason FROM rejects").fetchall())
    assert reasons == {3: 'line 3: field \'score\' must be a number, got string "great"',
                       4: "line 4: missing 'messages' (a list of chat messages)"}
    assert con.execute("SELECT count(*) FROM messages").fetchone()[0] == 6 + 2


@given(mutated_jsonl(read_jsonl(FIXTURES / "chat" / "chats.jsonl")))
@SETTINGS
def test_mutated_transcripts_never_crash(data):
    assert_ingest_survives(data, "chats.jsonl", "openai-chat")
