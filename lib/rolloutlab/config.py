"""Paths and defaults: the only module that knows where things live."""
from __future__ import annotations

import os
from pathlib import Path

# lib/rolloutlab/config.py -> the checkout's root
PROJECT_ROOT = Path(__file__).resolve().parents[2]
DATA_DIR = PROJECT_ROOT / "data"
DEMO_DIR = DATA_DIR / "demo"
DEMO_REPORT = DATA_DIR / "demo-report.html"
PLATFORM_DEMO_DIR = DATA_DIR / "platforms"  # notebook 10: one agent fine-tuned on two platforms (synthetic)
NOTEBOOKS_DIR = PROJECT_ROOT / "notebooks"
NATIVE_SCHEMA = Path(__file__).resolve().parent / "schemas" / "native-rollout.schema.json"

DB_ENV_VAR = "ROLLOUTLAB_DB"
DEBUG_ENV_VAR = "ROLLOUTLAB_DEBUG"  # set: the CLI shows tracebacks of unexpected errors
DEFAULT_DB = DATA_DIR / "rolloutlab.duckdb"

# Producers' own libraries (inspect_ai ...) for the differential tests: venvs of their own, never
# project dependencies, built once here (git-ignored).
PRODUCER_VENVS_DIR = PROJECT_ROOT / ".cache" / "producers"
PRODUCER_PACKAGES = {"inspect_ai": "inspect_ai==0.3.285",
                     # the last vf-eval that writes results.jsonl + metadata.json (0.4 writes v1 traces)
                     "verifiers": "verifiers==0.3.1"}

# Real logs shared with the project; tests skip where absent.
REAL_DATA_ENV_VAR = "ROLLOUTLAB_REAL_DATA"
REAL_DATA_DIR = PROJECT_ROOT.parent / "shared" / "data" / "real"

# Metric defaults (DESIGN.md, "Metric definitions").
PASS_THRESHOLD = 1.0
LONG_TAIL_CALLS = 15

# Readiness checks (readiness.check): every threshold a user can override by keyword.
CHECK_THRESHOLDS = {
    "min_attempts": 3,              # warn below: too few attempts to see variance
    "signal_warn": 0.15,            # share of samples whose score varies
    "signal_fail": 0.05,
    "signal_target": 0.30,          # what signal_plan aims for when it recommends k
    "saturation_warn": 0.50,        # share of samples always passing plus never passing with one score
    "infra_warn": 0.01,             # share of rollouts failed by tools or graders
    "infra_fail": 0.05,
    "ungraded_warn": 0.01,
    "ungraded_fail": 0.05,
    "rejected_warn": 0.0,           # share of input records rejected in the files that loaded the run
    "rejected_fail": 0.05,
    "tool_output_p95_warn": 20_000,  # characters
    "long_tail_warn": 0.05,         # share of rollouts over LONG_TAIL_CALLS calls
    "tool_budget": None,            # calls; the tool_budget check runs only when set
    "tool_budget_warn": 0.05,
    "dataset_warn": 100,            # samples
    "dataset_fail": 10,
    "suspicious_median_calls": 2,   # a full score with no tool calls is suspicious when the median uses this many
    "split_shift_score": 0.15,      # absolute difference in mean score between splits
    "split_shift_ratio": 1.5,       # ratio of tool calls or prompt length between splits
    "grader_min_rollouts": 10,      # graders checks look only at graders (pairs) with this many rollouts
    "grader_disagree_warn": 0.2,    # share of rollouts two graders disagree on pass/fail
    "truncation_warn": 0.02,        # share of counted rollouts cut at a limit (length, context, turns, ...)
    "truncation_fail": 0.10,
    "power_delta": 0.05,            # a default target: the improvement to detect (absolute, in power_metric)
    "power_metric": "score",        # ...in compare's primary metric (the verdict's); or "pass@1"
    "power_alpha": 0.05,            # two-sided significance of the planned comparison
    "power_target": 0.8,            # the chance of detecting it
    "labels_min": 20,               # grader_vs_labels needs this many labelled rollouts
    "kappa_fail": 0.4,              # Cohen's kappa of a grader against the labels (Landis & Koch: "moderate")
    "kappa_warn": 0.6,              # ...("substantial")
    "examples": 5,                  # examples listed in details
}

# Reward-hacking audit (audit.audit): every knob a user can override by keyword.
AUDIT_SETTINGS = {
    "generic_min_samples": 5,       # one answer scoring a pass on this many different samples...
    "answer_space_min": 0.2,        # ...in a run whose distinct answers are at least this share of its samples
    "few_calls_ratio": 0.25,        # a pass with at most this share of the honest passes' median tool calls
    "few_calls_min_gap": 2,         # ...and at least this many calls fewer
    "sample_median_min": 3,         # honest calls of a sample from its own passes when it has this many
    "disagree_min_corr": 0.3,       # full marks against zero counts for graders that usually agree this much
    "grader_fall": 0.5,             # with a base: a grader's per-sample mean falling by this much...
    "score_rise": 0.05,             # ...while the sample's score rose by at least this much
    "collapse_ratio": 0.4,          # tool calls below this share of what the run-wide change predicts
}
# An answer that talks to its grader (prompt injection into a model judge). Lower-cased answers
# are searched with these regular expressions.
AUDIT_INJECTION_PATTERNS = [
    r"\b(dear|note (to|for) the|attention,?|to the) (grader|evaluator|judge|reviewer|scorer|marker)s?\b",
    r"\b(grader|evaluator|judge|reviewer|scorer|marker)s?\s*[,:]\s*(please|this|the|give|award|mark|score)",
    r"\b(give|award|assign|grant)( me| this| it)?( answer| response)? (a )?(full|perfect|maximum|max|top|highest|high) "
    r"(marks?|scores?|points?|credit|rating|grade)",
    r"\b(full|perfect|maximum) (marks|credit)\b",
    r"\b(score|rate|grade|mark) (this|it|me) (as )?(correct|right|1(\.0)?|10|100|perfect|full)\b",
    r"\bignore (all |any |the |your )?(previous|prior|above|earlier|preceding|grading) (instructions|rubric|criteria)",
]

# Ingest: longest single JSONL record we accept (a rollout with long transcripts).
MAX_LINE_BYTES = 64 * 1024 * 1024
# A native file larger than this loads a chunk of lines at a time, in the same transaction, each
# chunk parsed and checked outside it, so an ingest's memory is that of a chunk, not of the file.
# Each chunk has a fixed cost; one under ~2 row groups (245,760 lines) parses on one core.
NATIVE_CHUNK_BYTES = 1024 * 1024 * 1024
# DuckDB's memory while a large native file's lines are parsed and checked in the transaction
# (which keeps them until the commit): past it they spill to disk. A 566 MB file then peaks at
# ~0.95 GB instead of ~1.8 GB (DuckDB's own load of it: ~0.5 GB), no slower (docs/benchmarks.md).
STAGING_MEMORY_LIMIT = "700MB"
# Format detection reads the file's first record whole, up to this many bytes (a capture log's
# first call may carry large arguments); beyond it, pass --format.
SNIFF_MAX_BYTES = 16 * 1024 * 1024
# Zip members (Inspect .eval) are decompressed as a stream and refused past either limit: a member
# larger than this, or one that grows more than ZIP_MAX_RATIO times its compressed size once past
# ZIP_RATIO_FROM_BYTES (small members may compress very well without harm). docs/security.md.
ZIP_MEMBER_MAX_BYTES = 256 * 1024 * 1024  # decoding a member holds several times its size in memory
ZIP_MAX_RATIO = 200
ZIP_RATIO_FROM_BYTES = 16 * 1024 * 1024
# Values outside these are rejected with the field named: timestamps outside the window (a year
# 294246 or a BC date is a broken clock, not a rollout), and non-finite numbers.
TIMESTAMP_MIN = "1990-01-01"
TIMESTAMP_MAX = "2100-01-01"
# Formats mapped record by record (tau-bench, tau2, inspect) load this many records at a time;
# a folder of small files loads their records this many at a time (ingest.batch), or fewer when
# their lines reach BATCH_BYTES (memory: a batch is held a few times over while it loads).
CONVERT_BATCH_RECORDS = 5000
BATCH_BYTES = 128 * 1024 * 1024
# A native file up to this size joins the batch of a call's many files; a larger one loads alone.
BATCH_FILE_MAX_BYTES = 16 * 1024 * 1024
# Readers never block writers (store.SharedReader): a reading handle holds the database file only
# while it queries, and lets go after this many idle seconds.
READER_IDLE_S = 0.25
# How long a reader waits for a writer to finish, and after how long it says it is waiting.
READER_WAIT_S = 600.0
READER_WARN_S = 2.0
# How long a writer waits for readers (and other writers) to let go of the file.
WRITER_WAIT_S = 120.0
LOCK_POLL_S = 0.05
# DuckDB's memory for a writing connection: beyond it, a large ingest spills to disk (beside the
# database) instead of growing with the file. $ROLLOUTLAB_MEMORY_LIMIT overrides ("4GB").
WRITER_MEMORY_LIMIT = "2GB"
# rolloutlab watch: seconds between polls of the logs; rl.live: seconds between redraws
WATCH_INTERVAL_S = 10.0
LIVE_EVERY_S = 10.0

# Capture (rolloutlab.capture): what the tool and grader endpoints log.
# Where the rollout id is read when no header is configured: the build-hour tool server reads
# `id` (and `call_id`) from the JSON body; a dotted path reaches into nested objects.
CAPTURE_ROLLOUT_ID_FIELD = "id"
CAPTURE_SAMPLE_ID_FIELD = "item.id"  # grader requests: the dataset item's id
CAPTURE_FINAL_ANSWER_FIELD = "model_sample"  # grader requests: the model's answer
# A log file is closed and a new one started past this size (whole lines only).
CAPTURE_MAX_BYTES = 256 * 1024 * 1024
# Response bodies up to this size are read for the output's size and the grader's score.
CAPTURE_BODY_LIMIT = 1024 * 1024
CAPTURE_ERROR_CHARS = 500  # an error response's body is kept up to this many characters
# Redaction (docs/security.md). A key (any depth, also inside JSON text, case-insensitive) is
# redacted when one of its words (split at _ - . space and camelCase) is one of these, or when it
# contains one of the substrings. Words, not substrings, for "key"/"auth"/"token": "keywords",
# "author" and "max_tokens" are not secrets and stay readable.
CAPTURE_REDACT_KEY_WORDS = ("token", "key", "auth", "pwd", "otp", "jwt", "oauth", "sessionid")
CAPTURE_REDACT_KEY_SUBSTRINGS = ("secret", "password", "passwd", "passphrase", "credential", "cookie", "bearer",
                                 "apikey", "authorization", "privatekey", "accesskey", "accesstoken",
                                 "refreshtoken", "authtoken", "idtoken", "sessiontoken", "clientsecret")
# Exact field names, kept for callers that passed their own list (redact_fields=...).
CAPTURE_REDACT_FIELDS = ("password", "passwd", "secret", "token", "access_token", "api_key", "apikey",
                         "authorization", "credentials", "private_key")
# Request bodies: at most this much of a request is held to read its rollout id and arguments
# (the rest streams through to the endpoint untouched); logged arguments and final answers are cut
# to this many characters with a marker (the sizes logged stay exact).
CAPTURE_REQUEST_HOLD_BYTES = 1024 * 1024
# ...and this much of its end, where its ids may come after a huge field
CAPTURE_REQUEST_TAIL_BYTES = 64 * 1024
# a long request's head is scanned this many JSON tokens far for its ids
CAPTURE_PEEK_TOKENS = 20_000
# redaction reads JSON this deep; deeper values are replaced, never logged unread
CAPTURE_REDACT_MAX_DEPTH = 64
CAPTURE_ARGUMENTS_CHARS = 64 * 1024
CAPTURE_ANSWER_CHARS = 64 * 1024
# Headers that are never read as a rollout id (headers are otherwise never logged).
CAPTURE_CREDENTIAL_HEADERS = ("authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key",
                              "api-key", "x-auth-token")
# rolloutlab demo-server
DEMO_SERVER_HOST = "127.0.0.1"
DEMO_SERVER_PORT = 8765
DEMO_SERVER_RUN = "demo-server-capture"  # the run label its grade events carry: a side run of the demo
# The training step the demo prints and its report projects (batch size x compute multiplier).
DEMO_PLANNED_STEP = {"batch_size": 64, "compute_multiplier": 4}
DEMO_SERVER_TOKEN_ENV_VAR = "ROLLOUTLAB_DEMO_TOKEN"  # the bearer token, when --token is not given
# Hosts that reach only this machine: binding anywhere else needs a token.
LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")
DEMO_SERVER_DIR = DATA_DIR / "demo-server"
DEMO_TOOL_LATENCY_S = (0.002, 0.03)  # each demo tool call waits a uniform time in this range
DEMO_DRIVE = {"rollouts": 48, "concurrency": 16}  # what `rolloutlab demo` sends to the demo server

# compare: the primary metric (tested alone at alpha: the verdict, and what rl.power plans for), and
# which adjusted p-value marks a secondary row significant (holm: family-wise error rate; bh: false
# discovery rate; none: the raw p-value).
COMPARE_PRIMARY = "score"
COMPARE_ADJUSTMENT = "holm"

# grader_calibration: lam of the prediction-powered estimate (1 = classic PPI; None tunes it on the
# data, which covers below its level even at 150 labels), and the fewest labels at which its
# interval was measured to keep its level (docs/benchmarks.md, "Simulations").
PPI_LAMBDA = 1.0
PPI_MIN_LABELS = 20

# rl.power: the planned test's level and power, the attempts per sample of the equal-cost table,
# and (without a candidate) the assumed correlation of two checkpoints' per-sample true means.
POWER_ALPHA = 0.05
POWER_TARGET = 0.8
POWER_ATTEMPTS = (1, 2, 4, 8)
POWER_ASSUMED_CORRELATION = 0.5

# Labels (rl.label, import_labels): bounds on what a label holds, and the random subset to label.
LABEL_NOTE_MAX_CHARS = 10_000
LABEL_WHO_MAX_CHARS = 200
LABEL_ID_MAX_CHARS = 1_000
LABEL_SAMPLE_SIZE = 150
# a sheet to label holds each rollout's prompt, reference and answer, cut at this many characters
LABEL_SHEET_TEXT_CHARS = 4_000
LABEL_SHOWN_REJECTS = 5

# Cost (metrics/costs.py): the price table shipped with the package (USD per 1M tokens, dated;
# rl.cost(prices=...) takes your own file or dict), the tools the truncation check names, the
# formats whose output_tokens already count reasoning (Inspect's ModelUsage), the providers whose
# "<provider>/<model>" names are priced as <model>, and the resamples of cost CIs.
PRICES_FILE = Path(__file__).resolve().parent / "analysis" / "metrics" / "prices.toml"
# a price above this (USD per 1M tokens) is a typo, not a model: the most expensive list prices are ~$600
PRICE_MAX_PER_MTOK = 100_000
JOB_STEPS_MAX = 1_000_000  # capacity --steps: a job longer than this is a typo
TRUNCATION_TOOLS_NAMED = 3
REASONING_IN_OUTPUT_FORMATS = ("inspect",)
PRICE_PROVIDER_PREFIXES = ("openai", "anthropic")
COST_N_BOOT = 1000
COST_CI = 0.95

# Capacity plan: calls per second are counted in windows of this many seconds.
CAPACITY_RATE_WINDOW_S = 1.0
IN_FLIGHT_POINTS = 400  # rl.in_flight: windows the run's span is cut into (each keeps its peak)
# The training step the report projects when none is given: the build-hour job's batch_size and
# compute_multiplier (openai/build-hours 20-agent-rft, Agentic_RFT_Train.ipynb).
CAPACITY_PLANNED_STEP = {"batch_size": 16, "compute_multiplier": 1}

# Headless Chromium for `rolloutlab report --pdf`: $ROLLOUTLAB_CHROMIUM, else the first of these on
# PATH, started with the flags a sandbox-less container needs.
CHROMIUM_ENV_VAR = "ROLLOUTLAB_CHROMIUM"
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-sync",
                 "--disable-background-networking", "--disable-component-update"]

# rolloutlab.spark: the master of the local session it starts when given none.
SPARK_MASTER = "local[2]"

# How many reject reasons the CLI prints per ingest.
SHOWN_REJECTS = 5


def db_path(db: str | os.PathLike | None = None) -> Path:
    """The database to open: the argument, else $ROLLOUTLAB_DB, else data/rolloutlab.duckdb."""
    if db is not None:
        return Path(db)
    env = os.environ.get(DB_ENV_VAR)
    return Path(env) if env else DEFAULT_DB


def wait_s(kind: str) -> float:
    """How long a ``reader`` or a ``writer`` waits for the file: $ROLLOUTLAB_READER_WAIT_S /
    $ROLLOUTLAB_WRITER_WAIT_S, else the defaults above."""
    default = READER_WAIT_S if kind == "reader" else WRITER_WAIT_S
    return float(os.environ.get(f"ROLLOUTLAB_{kind.upper()}_WAIT_S", default))


def limit(name: str) -> int:
    """A size limit of this module (ZIP_MEMBER_MAX_BYTES, ...), or $ROLLOUTLAB_<NAME> when set:
    the limits guard against hostile input, and a genuine log may need more (docs/security.md)."""
    env = os.environ.get(f"ROLLOUTLAB_{name}")
    return int(env) if env else int(globals()[name])


def real_data_dir() -> Path:
    env = os.environ.get(REAL_DATA_ENV_VAR)
    return Path(env) if env else REAL_DATA_DIR


def progress_disabled() -> bool | None:
    """Progress bars stay quiet in CI and when output is not a terminal."""
    if os.environ.get("CI"):
        return True
    return None  # tqdm decides from the stream (None = off when not a TTY)


# failure modes (analysis/failure_modes.py) and trajectory diffs (analysis/trajectories.py)
FAILURE_MODES_K_MAX = 12            # k is chosen in 2..min(K_MAX, sqrt(failures / 2)) by silhouette (k= overrides)
FAILURE_MODES_SILHOUETTE_SAMPLE = 2000  # failures the silhouette of each k is measured on
FAILURE_MODES_LINKAGE_MAX = 4000    # average linkage: distinct failure vectors linked (a seeded sample beyond)
FAILURE_MODES_MIN_SIZE = 3          # HDBSCAN's smallest mode; also: fewer failures than 2x this -> one mode
FAILURE_MODES_MIN_SEPARATION = 0.12  # the tree is cut where modes lie this far apart (cosine: the weighted share that differs)
FAILURE_MODES_EXAMPLES = 3          # example rollout ids per mode, the most typical first
FAILURE_MODES_LABEL_FEATURES = 3    # features named in a mode's label
FAILURE_MODES_LABEL_MIN_SHARE = 0.5  # a feature names a mode only when at least this share of it has it...
FAILURE_MODES_LABEL_MIN_DIFF = 0.2   # ...and this much more of it than of the other failures
FAILURE_MODES_N_BOOT = 1000         # bootstrap resamples (over samples) for the CIs of mode shares
FAILURE_MODES_VERDICT_RESIDUAL = 0.1  # "fixed"/"new": the smaller side at most this share of the larger
FAILURE_MODES_TEXT_CHARS = 8000     # characters of each tool output / user message searched for the answer's values
FAILURE_MODES_INFRA_GROUPS = 8      # infra modes: the most common normalised errors, the rest pooled
# feature blocks' weights in the joint vector; a block's weight is shared by its fields that vary
FAILURE_MODES_WEIGHTS = {"path": 1.0, "process": 1.0, "answer": 2.0}
# the diff: verdicts from permutation p-values (swapping a sample's base and candidate attempts),
# adjusted across modes; the modes fitted blind to the runs on every sample (0), or on the other
# samples with this share held out to count and test on
FAILURE_MODES_HOLDOUT = 0.0
FAILURE_MODES_ADJUST = "holm"       # or "bh" (Benjamini-Hochberg)
FAILURE_MODES_ALPHA = 0.05
FAILURE_MODES_N_PERM = 2000
# the optional labeller: the team's own model behind an OpenAI-compatible endpoint (off by default)
LABELER_URL_ENV_VAR = "ROLLOUTLAB_LABELER_URL"      # e.g. http://127.0.0.1:8000/v1
LABELER_MODEL_ENV_VAR = "ROLLOUTLAB_LABELER_MODEL"
LABELER_KEY_ENV_VAR = "ROLLOUTLAB_LABELER_API_KEY"  # sent as a bearer token when set; never shown
LABELER_TIMEOUT_S = 30.0
LABELER_MAX_RESPONSE_BYTES = 256 * 1024
LABELER_MAX_LABEL_CHARS = 80


def labeler_settings() -> dict:
    """The labeller's endpoint, model and key from the environment (None where unset)."""
    return {"url": os.environ.get(LABELER_URL_ENV_VAR) or None, "model": os.environ.get(LABELER_MODEL_ENV_VAR) or None,
            "api_key": os.environ.get(LABELER_KEY_ENV_VAR) or None}


DIFF_OUTPUT_CHARS = 300             # trajectory_diff: characters of each call's output compared and shown
DIFF_MAX_CELLS = 250_000            # larger alignments use difflib instead of Needleman-Wunsch

# curation (curation.py)
CURATE_DEFAULTS = {
    "band": (0.2, 0.8),           # keep samples whose pass rate (or mean score) lies in [lo, hi]
    "on": "pass_rate",            # or "mean_score", for continuous rewards
    "min_attempts": 2,            # fewer counted attempts say nothing about a sample's pass rate
    "validation_share": 0.1,      # of the kept samples, by whole groups
    "seed": 0,                    # which groups go to validation
    "mask_numbers": False,        # group prompts that differ only in their numbers
    "near_duplicate_threshold": 0.8,  # Jaccard similarity of character 5-gram sets
}
VALIDATION_SPLITS = ("valid", "validation", "val", "eval", "test", "dev")  # split names, lower-cased
SHINGLE_CHARS = 5            # near-duplicates: sets of character 5-grams of the normalised prompt
FORECAST_KS = (1, 2, 3, 4, 8, 16, 32)
FORECAST_Z = 1.959963984540054  # a 95% interval

# training files (datasets.py)
OPENAI_RFT_MAX_FILE_BYTES = 512 * 1024 * 1024  # the Files API takes an upload of at most 512 MB
OPENAI_RFT_RESERVED = ("messages", "tools")    # the only reserved keys of an RFT line
REFERENCE_FIELD = "reference_answer"           # a plain-text reference, as {{item.reference_answer}}
SAMPLE_ID_FIELD = "id"                         # {{item.id}}: what capture reads as the sample id
VERL_ABILITY = "agent"
VERL_REWARD_STYLE = "rule"
TRL_REFERENCE_COLUMN = "ground_truth"          # a column TRL passes to reward functions by name
NOT_EXPORTED_EXAMPLES = 5
# Amazon Bedrock reinforcement fine-tuning (Nova): Bedrock user guide, "Prepare data for Amazon
# Nova models" (at least 100 records) and the Nova 2 Lite bounds (at most 20,000 rows).
BEDROCK_NOVA_MIN_RECORDS = 100
BEDROCK_NOVA_MAX_RECORDS = 20_000
BEDROCK_NOVA_SAMPLE_FIELD = "sample_id"        # an extra top-level key: the reward Lambda gets it in `metadata`
# Gemini RL tuning dataset page: at most 5,000 training and 500 validation examples, 1 GB per file.
GEMINI_RL_MAX_TRAIN = 5_000
GEMINI_RL_MAX_VALIDATION = 500
GEMINI_RL_MAX_FILE_BYTES = 1024 ** 3
GEMINI_RL_SAMPLE_REFERENCE = "sample_id"       # references.sample_id: the line may hold no other key

# Inspect logs
INSPECT_PROGRESS_MIN_SAMPLES = 2_000  # a .eval with this many samples shows a bar of its own, when ingest shows one

# zip archives
READ_AHEAD_MEMBERS = 16  # members read ahead of the reader (memory: this many members at most)
