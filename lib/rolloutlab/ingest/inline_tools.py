"""Tool calls written inline in a completion's text, as Hermes-style chat templates write them
(Qwen, Hermes, and the verl / TRL agent loops that use them):

    I'll look it up.<tool_call>
    {"name": "search", "arguments": {"query": "acme 10-k"}}
    </tool_call>user
    <tool_response>
    Acme revenue: $28.9M
    </tool_response>
    assistant
    The revenue was $28.9M.

Only the completion is parsed, never the prompt (a chat template puts example calls and the tool
definitions there). Calls with no tool response between them were issued together (one turn);
the responses that follow a turn answer its calls in order. The final answer is the text after
the last tool response, without the chat roles that decoding left in.
"""
from __future__ import annotations

import json
import re

from .convert import parse_json_arguments

BLOCK = re.compile(r"<tool_call>\s*(?P<call>.*?)\s*</tool_call>|<tool_response>\s*(?P<response>.*?)\s*</tool_response>",
                   re.S)
# what decoding leaves of the chat roles between turns: special tokens (when kept), role lines
SPECIAL_TOKENS = re.compile(r"<\|(im_start|im_end|endoftext|eot_id|start_header_id|end_header_id)\|>")
ROLE_LINES = re.compile(r"^\s*(assistant|user|tool)\s*$", re.M)
UNPARSED = "(unparsed)"


def _call(text: str, turn: int) -> dict:
    """One call block: {"name", "arguments"} JSON; a block that is not is kept as an unparsed
    call with an error (the model wrote a malformed call)."""
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    if not isinstance(body, dict) or not isinstance(body.get("name"), str):
        return {"turn": turn, "tool": UNPARSED, "arguments": text[:2000], "status": "error",
                "error": "malformed tool call: not a JSON object with a string 'name'"}
    return {"turn": turn, "tool": body["name"], "arguments": parse_json_arguments(body.get("arguments")),
            "status": "ok", "error": None}


def parse_completion(text: str) -> tuple[list[dict], str]:
    """(native tool calls, final answer) of a completion's text."""
    calls: list[dict] = []
    turn, answered, last_end = -1, 0, 0
    previous = None
    for m in BLOCK.finditer(text or ""):
        if m.group("call") is not None:
            if previous != "call":
                turn += 1
            calls.append(_call(m.group("call"), turn))
            previous = "call"
        else:
            if answered < len(calls):  # the earliest call without a response
                calls[answered]["output_chars"] = len(m.group("response"))
                answered += 1
            previous = "response"
        last_end = m.end()
    tail = (text or "")[last_end:] if calls else (text or "")
    answer = ROLE_LINES.sub("", SPECIAL_TOKENS.sub("", tail)).strip()
    return calls, answer
