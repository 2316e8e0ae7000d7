"""Hermes-style tool calls inline in completion text (verl, TRL)."""
from __future__ import annotations

from rolloutlab.ingest.inline_tools import parse_completion


def test_turns_parallel_calls_responses_and_the_answer():
    text = ('Let me look.<tool_call>\n{"name": "search", "arguments": {"q": "acme"}}\n</tool_call>'
            '<tool_call>\n{"name": "list", "arguments": "{\\"folder\\": \\"acme\\"}"}\n</tool_call>user\n'
            '<tool_response>\nthree hits\n</tool_response>\n<tool_response>\n10k.txt\n</tool_response>\nassistant\n'
            '<tool_call>\n{"name": "cat", "arguments": {"path": "acme/10k.txt"}}\n</tool_call>'
            '<|im_end|>\n<|im_start|>user\n<tool_response>\nrevenue $28.9M\n</tool_response><|im_end|>\n'
            '<|im_start|>assistant\nThe revenue was $28.9M.<|im_end|>')
    calls, answer = parse_completion(text)
    assert [(c["tool"], c["turn"], c["arguments"], c.get("output_chars")) for c in calls] == [
        ("search", 0, {"q": "acme"}, len("three hits")), ("list", 0, {"folder": "acme"}, len("10k.txt")),
        ("cat", 1, {"path": "acme/10k.txt"}, len("revenue $28.9M"))]
    assert answer == "The revenue was $28.9M."


def test_no_calls_and_a_malformed_call():
    assert parse_completion("  $17.7M\n") == ([], "$17.7M")
    calls, answer = parse_completion("<tool_call>\n{not json}\n</tool_call>user\n<tool_response>\nerror\n"
                                     "</tool_response>\nassistant\nI cannot tell.")
    assert [(c["tool"], c["status"], c["arguments"]) for c in calls] == [("(unparsed)", "error", "{not json}")]
    assert calls[0]["error"].startswith("malformed tool call") and answer == "I cannot tell."
    # a call without a response (the model stopped) keeps no output size
    calls, _ = parse_completion('<tool_call>{"name": "search", "arguments": {}}</tool_call>')
    assert calls[0]["tool"] == "search" and "output_chars" not in calls[0]
