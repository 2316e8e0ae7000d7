"""Capture, inside a team's tool and grader servers: events, secret redaction, request-body streaming, the ASGI
middleware, decorators, other platforms' graders, the demo server. May import config only (the demo server: demo).

``import rolloutlab.capture`` keeps every name the docs use (``CaptureMiddleware``, ``captured_tool``,
``captured_lambda_reward``, ``redact`` ...): they are re-exported here from their modules."""
from .events import (EventLog, PAGE, Recorder, bound_arguments, check_rollout_id_header, error_text, exception_text,
    field, grader_result, output_chars, tool_arguments)
from .redaction import (REDACTED, TOKEN_FORMATS, looks_like_credential, mask_tokens, redact, redact_head, redact_text,
    redact_training_text, secret_key)
from .streaming import Cut, Held, TAIL_BYTES, nest, peek, peek_tail
from .middleware import CaptureMiddleware, UNAUTHENTICATED
from .decorators import captured_grader, captured_tool
from .platforms import (GEMINI_REWARD_RANGE, GeminiRewardRecorder, LAMBDA_SAMPLE_FIELDS, captured_lambda_reward,
    gemini_reward_middleware, lambda_results, lambda_sample_id, prompt_sample_id)
