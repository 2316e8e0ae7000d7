"""Chat messages -> tool calls: turns, pairing of outputs, errors, argument parsing."""
from __future__ import annotations

from rolloutlab.ingest.chat import convert_messages


def test_parallel_calls_share_a_turn_and_outputs_pair_in_order():
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "search", "arguments": '{"q": "x"}'}},
            {"id": "b", "type": "function", "function": {"name": "cat", "arguments": "not json"}}]},
        {"role": "tool", "tool_call_id": "b", "content": "12345"},
        {"role": "tool", "tool_call_id": "a", "content": "abc"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "a", "name": "search", "arguments": {"q": "y"}}]},
        {"role": "tool", "tool_call_id": "a", "content": "boom", "error": {"type": "timeout", "message": "timed out"}},
        {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
    ]
    calls, msgs, answer = convert_messages(messages)
    assert [(c["tool"], c["turn"], c["output_chars"]) for c in calls] == [("search", 0, 3), ("cat", 0, 5),
                                                                          ("search", 1, 4)]
    assert calls[0]["arguments"] == {"q": "x"} and calls[1]["arguments"] == "not json"
    assert (calls[2]["status"], calls[2]["error"]) == ("error", "timeout: timed out")  # what failed, then how
    assert calls[0]["status"] == "ok"
    assert answer == "done" and len(msgs) == 7 and msgs[-1]["turn"] == 2


def test_filter_and_boolean_errors():
    messages = [{"role": "assistant", "tool_calls": [{"id": "1", "name": "x", "requestor": "user"},
                                                     {"id": "2", "name": "y", "requestor": "assistant"}]},
                {"role": "tool", "id": "2", "content": "bad input", "error": True}]
    calls, _, _ = convert_messages(messages, include_call=lambda c: c["requestor"] == "assistant")
    assert [(c["tool"], c["status"], c["error"]) for c in calls] == [("y", "error", "bad input")]


def test_a_result_without_its_call_is_a_call_of_unknown_origin():
    # An Inspect log that kept tool results but not the calls: each is still a call the tools ran,
    # with its error (a timeout must not vanish), named by the tool the message names.
    messages = [
        {"role": "user", "content": "run it"},
        {"role": "tool", "tool_call_id": "gone", "function": "bash", "content": "",
         "error": {"type": "timeout", "message": "Command timed out before completing."}},
        {"role": "tool", "tool_call_id": "gone2", "content": "abc"},
        {"role": "assistant", "content": "gave up"},
    ]
    calls, _, answer = convert_messages(messages)
    assert [(c["tool"], c["status"], c["error"], c["output_chars"], c["arguments"]) for c in calls] == [
        ("bash", "error", "timeout: Command timed out before completing.", 0, None),
        ("(unknown call)", "ok", None, 3, None)]
    assert answer == "gave up"
