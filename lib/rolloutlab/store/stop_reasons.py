"""Why a rollout stopped, in one small vocabulary across every format.

Each producer has its own words (tau2's ``max_steps``, Inspect's ``model_length`` and
``limit: message``, OpenAI's ``length``, build-hour ``error``s). ``rollouts.stop_reason`` holds
one of ``VOCABULARY``; ``rollouts.stop_reason_raw`` keeps the producer's own word. A rollout cut by
a limit (``length``, ``context``, ``tool_budget``, ``turn_limit``, ``time_limit``) was truncated:
its reward says nothing about the answer it never finished.
"""
from __future__ import annotations


def lit(text: str) -> str:
    """An SQL string literal for a word of this module (never user input)."""
    return "'" + text.replace("'", "''") + "'"

VOCABULARY = ("stop", "length", "context", "tool_budget", "turn_limit", "time_limit", "user_stop", "error", "unknown")
LIMITS = ("length", "context", "tool_budget", "turn_limit", "time_limit")

# The producers' words (compared in lower case) for each; anything else is 'unknown', its word
# kept raw and reported with its count wherever truncation is (metrics.costs.truncation). Sources:
# OpenAI Chat Completions ``finish_reason`` and Responses ``incomplete_details.reason``; Anthropic
# ``stop_reason``; Gemini ``finishReason``; Bedrock Converse ``stopReason``; Inspect's StopReason
# and sample limits; tau2's termination reasons; vLLM / verl / TRL (``length``, ``abort``); verifiers'
# ``stop_condition`` (the names of its environments' @stop methods).
WORDS = {
    "stop": ("stop", "end_turn", "final_answer", "agent_stop", "completed", "complete", "done", "success",
             "finished", "graded", "eos", "stop_sequence", "end", "answer",
             "tool_calls", "function_call", "tool_use",  # the model stopped to call its tools: no limit hit
             "no_tools_called", "state_completed"),  # verifiers' stop conditions (ToolEnv, MultiTurnEnv)
    "length": ("length", "max_tokens", "max_output_tokens", "max_new_tokens", "token_limit", "limit: token",
               "output_length", "max_completion_tokens"),
    "context": ("context", "context_window_exceeded", "context_length_exceeded", "model_length", "limit: context",
                "prompt_too_long", "context_length", "model_context_window_exceeded", "max_input_tokens"),
    "tool_budget": ("tool_budget", "max_tool_calls", "tool_limit", "too_many_tool_calls", "tool_call_limit",
                    "limit: cost", "budget_exceeded"),
    "turn_limit": ("max_steps", "max_turns", "turn_limit", "max_iterations", "limit: message", "message_limit",
                   "step_limit", "max_rounds", "max_turns_reached"),
    "time_limit": ("timeout", "time_limit", "limit: time", "limit: working", "max_time", "timed_out"),
    "user_stop": ("user_stop", "user_stopped", "user_end"),
    "error": ("error", "exception", "runtime_error", "infrastructure_error", "agent_error", "user_error",
              "unexpected_error", "tool_error", "too_many_errors", "content_filter", "limit: operator",
              "limit: custom", "refusal", "abort", "has_error",
              # filtered or refused by a provider's safety system, or a call the model could not make
              "content_filtered", "guardrail_intervened", "safety", "recitation", "blocklist", "prohibited_content",
              "spii", "image_safety", "malformed_function_call", "unexpected_tool_call"),
}
def stop_reason_sql(raw: str) -> str:
    """The vocabulary's word for the producer's word ``raw`` (an SQL expression); NULL stays
    'unknown'."""
    whens = " ".join(f"WHEN lower(trim({raw})) IN ({', '.join(lit(w) for w in words)}) THEN {lit(kind)}"
                     for kind, words in WORDS.items())
    return f"(CASE {whens} ELSE 'unknown' END)"
