"""Training files from a curation (docs/formats.md, "Exports"): the kept samples' prompts and
references in the layout a trainer reads, split as ``curate`` split them, and ``curation.json``.

Only the dataset's prompt and reference are written (``samples.prompt``, ``samples.reference``),
never anything a rollout produced, with secrets in their text redacted and nothing else changed.
A kept sample without a usable prompt, or whose record is not valid JSON in UTF-8 (NaN, a lone
surrogate), is counted under ``not_exported`` with the reason, never written. The files of an export are replaced all
together or not at all (``write_curated``).

Layouts (``to``), each as ``train`` and ``validation`` files:
- ``openai-rft`` (JSONL): OpenAI reinforcement fine-tuning lines, ``messages`` ending with the
  user turn, the reference's fields at the top level (``{{item.<field>}}``) and ``id``;
- ``verl`` (Parquet): verl's RL dataset, ``data_source``, ``prompt`` (chat messages), ``ability``,
  ``reward_model`` {``style``, ``ground_truth``}, ``extra_info``;
- ``trl`` (Parquet): a conversational prompt-only dataset for TRL's GRPO, ``prompt``,
  ``ground_truth``, ``sample_id`` and the reference's fields as columns;
- ``jsonl``: rolloutlab's own, ``sample_id``, ``prompt`` (messages), ``reference``, ``split``,
  ``group`` and the sample's statistics;
- ``bedrock-nova`` (JSONL): Amazon Bedrock reinforcement fine-tuning of Nova models, ``messages``
  (system kept), ``reference_answer`` (the reference, one key), ``id`` and ``sample_id`` (which the
  reward Lambda receives in ``metadata``); at least 100 training records;
- ``gemini-rl`` (JSONL): Gemini reinforcement tuning, ``systemInstruction``, ``contents`` (roles
  user / model, text parts) and ``references`` (text values only, the sample id among them);
- ``verifiers`` (JSONL): a verifiers / prime-rl environment's dataset, ``prompt`` (messages),
  ``answer`` (text) and ``info`` (JSON text holding the sample id and an object reference).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..capture.redaction import REDACTED, redact_training_text
from ..store.catalog import run_sources_sql
from ..analysis.curation import curate
from ..store.folders import replace_files
from ..analysis.prompts import missing as _missing, prompt_messages
from ..analysis.metrics.common import run_sql
from ..version import __version__
from ..config import BEDROCK_NOVA_MAX_RECORDS, BEDROCK_NOVA_MIN_RECORDS, BEDROCK_NOVA_SAMPLE_FIELD, GEMINI_RL_MAX_FILE_BYTES, GEMINI_RL_MAX_TRAIN, GEMINI_RL_MAX_VALIDATION, GEMINI_RL_SAMPLE_REFERENCE, OPENAI_RFT_MAX_FILE_BYTES, OPENAI_RFT_RESERVED, REFERENCE_FIELD, SAMPLE_ID_FIELD, VERL_ABILITY, VERL_REWARD_STYLE, TRL_REFERENCE_COLUMN, NOT_EXPORTED_EXAMPLES

EXPORT_FORMATS = ("openai-rft", "verl", "trl", "jsonl", "bedrock-nova", "gemini-rl", "verifiers")
JSONL_FORMATS = ("openai-rft", "jsonl", "bedrock-nova", "gemini-rl", "verifiers")
CURATION_FILE = "curation.json"
STAGING_TAG = "curate"  # the set is written into .OUT.curate-PID-… beside the folder, then swapped in
SPLITS = ("train", "validation")

# roles a prompt may hold, and how each layout names them
_ROLES = {"openai-rft": {"system": "developer", "developer": "developer", "user": "user", "assistant": "assistant"},
          "chat": {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"},
          "gemini": {"system": "system", "developer": "system", "user": "user", "assistant": "model"}}
OPENAI_RFT_CHECKS = [
    "every line is one JSON object with a non-empty `messages` array",
    "the last message is the user turn",
    "roles are developer, user or assistant (a system prompt is written as developer)",
    "every message's content is non-empty text (text only: no image, audio or file parts)",
    "no reference field is named `messages` or `tools` (the format's reserved keys)",
    f"each file is at most {OPENAI_RFT_MAX_FILE_BYTES // (1024 * 1024)} MB (the Files API's upload limit)",
    "a validation file is written beside the training file",
]


BEDROCK_NOVA_CHECKS = [
    "every line is one JSON object with a non-empty `messages` array and a `reference_answer`",
    "roles are system, user or assistant (a developer prompt is written as system), a system message "
    "only first, at least one user message",
    "every message is `{role, content}` with non-empty text content (text only)",
    "`reference_answer` is non-empty text or a non-empty JSON object (what the reward Lambda reads)",
    "`id` and `sample_id` are the sample id, non-empty text (`sample_id` reaches the Lambda in `metadata`)",
    f"the training file holds {BEDROCK_NOVA_MIN_RECORDS:,} to {BEDROCK_NOVA_MAX_RECORDS:,} records",
]
GEMINI_RL_CHECKS = [
    "every line is one JSON object of `systemInstruction`, `contents` and `references` only",
    "`contents` roles are user or model (an assistant turn is written as model), the last one user",
    "every part is `{text}` with non-empty text; system and developer prompts go to `systemInstruction`",
    f"`references` maps names to text (objects and numbers as JSON text); `{GEMINI_RL_SAMPLE_REFERENCE}` "
    "is the sample id",
    f"at most {GEMINI_RL_MAX_TRAIN:,} training and {GEMINI_RL_MAX_VALIDATION:,} validation examples, "
    f"each file at most {GEMINI_RL_MAX_FILE_BYTES // 1024 ** 3} GB",
]
VERIFIERS_CHECKS = [
    "every line is one JSON object: `prompt` (chat messages), `answer` (text), `info` (JSON text)",
    "`info` holds the sample id (`sample_id`) and an object reference's fields (`reference`)",
]
CHECKS = {"openai-rft": OPENAI_RFT_CHECKS, "bedrock-nova": BEDROCK_NOVA_CHECKS, "gemini-rl": GEMINI_RL_CHECKS,
          "verifiers": VERIFIERS_CHECKS}


def export_rows_sql() -> str:
    """Prompt, reference and data source of the picked (run, sample) pairs: the sample row of the
    run's split first, then one with a prompt."""
    return """
    WITH picked AS (SELECT unnest($pick_runs) AS run_id, unnest($pick_samples) AS sample_id),
    rows AS (
        SELECT p.sample_id, s.prompt, s.reference, json_extract_string(s.meta, '$.data_source') AS data_source,
               (s.split IS NOT DISTINCT FROM r.split)::INTEGER * 2 + (nullif(trim(s.prompt), '') IS NOT NULL)::INTEGER
                   AS preference
        FROM picked p JOIN runs r ON r.run_id = p.run_id JOIN samples s ON s.sample_id = p.sample_id)
    SELECT sample_id, arg_max(prompt, preference) AS prompt, arg_max(reference, preference) AS reference,
           arg_max(data_source, preference) AS data_source
    FROM rows GROUP BY sample_id ORDER BY sample_id
    """


def provenance_sql() -> str:
    """The files the exported samples came from: those that loaded the run's rollouts (and their
    endpoint events), and those that provide the samples' rows."""
    return f"""
    SELECT s.source_id, s.path, s.format, s.sha256 FROM sources s
    WHERE s.source_id IN ({run_sources_sql()})
       OR s.source_id IN (SELECT source_id FROM sample_sources WHERE list_contains($samples, sample_id))
    ORDER BY s.source_id
    """


def reference_fields(reference: str | None) -> dict[str, Any]:
    """A reference that is a JSON object is its fields; any other reference is one text field."""
    if _missing(reference):
        return {}
    text = str(reference).strip()
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        if isinstance(value, dict):
            return value
    return {REFERENCE_FIELD: str(reference)}


def _roles(messages: list[dict], layout: str) -> list[dict]:
    names = _ROLES[layout]
    return [{"role": names[m["role"]], "content": m["content"]} for m in messages]


def openai_rft_problem(line: dict) -> str | None:
    """Why a line breaks the documented rules of an RFT dataset line (None: it does not)."""
    messages = line.get("messages")
    if not isinstance(messages, list) or not messages:
        return "no messages"
    if any(not isinstance(m, dict) or m.get("role") not in ("developer", "user", "assistant") for m in messages):
        return "a role other than developer, user or assistant"
    if any(not isinstance(m.get("content"), str) or not m["content"].strip() for m in messages):
        return "a message without text"
    if messages[-1]["role"] != "user":
        return "the last message is not the user turn"
    if "tools" in line:
        return "a reference field named tools"
    return None


def _openai_rft(row, messages) -> tuple[dict | None, str | None]:
    fields = reference_fields(row.reference)
    if any(k in fields for k in OPENAI_RFT_RESERVED):
        return None, "reserved_field"
    line = {"messages": _roles(messages, "openai-rft"), **fields}
    line.setdefault(SAMPLE_ID_FIELD, row.sample_id)
    problem = openai_rft_problem(line)
    return (None, "openai_rft_rule") if problem else (line, None)


def bedrock_nova_problem(line: dict) -> str | None:
    """Why a line breaks the documented rules of a Bedrock Nova RFT record (None: it does not):
    the Bedrock user guide's fields, and the field rules of AWS's own validator (amzn-nova-forge,
    ``RFTDatasetSample``: message keys role / content only here, a system message first)."""
    messages = line.get("messages")
    if not isinstance(messages, list) or not messages:
        return "no messages"
    if any(not isinstance(m, dict) or set(m) != {"role", "content"} for m in messages):
        return "a message that is not {role, content}"
    roles = [m["role"] for m in messages]
    if any(r not in ("system", "user", "assistant") for r in roles):
        return "a role other than system, user or assistant"
    if "system" in roles[1:]:
        return "a system message after the first"
    if "user" not in roles:
        return "no user message"
    if any(not isinstance(m["content"], str) or not m["content"].strip() for m in messages):
        return "a message without text"
    ref = line.get("reference_answer")
    if not ((isinstance(ref, str) and ref.strip()) or (isinstance(ref, dict) and ref)):
        return "no reference_answer"
    if any(not isinstance(line.get(k), str) or not line[k] for k in ("id", BEDROCK_NOVA_SAMPLE_FIELD)):
        return "an id that is not non-empty text"
    return None


def _bedrock_nova(row, messages) -> tuple[dict | None, str | None]:
    if _missing(row.reference) or not str(row.reference).strip():
        return None, "no_reference"  # the reward Lambda reads reference_answer: Bedrock requires it
    fields = reference_fields(row.reference)
    reference = fields[REFERENCE_FIELD] if set(fields) == {REFERENCE_FIELD} else fields
    line = {"messages": _roles(messages, "chat"), "reference_answer": reference, "id": str(row.sample_id),
            BEDROCK_NOVA_SAMPLE_FIELD: str(row.sample_id)}
    return (None, "bedrock_nova_rule") if bedrock_nova_problem(line) else (line, None)


def gemini_rl_problem(line: dict) -> str | None:
    """Why a line breaks the rules of a Gemini reinforcement tuning example (None: it does not).
    google-genai's ``ReinforcementTuningExample`` checks the keys and kinds (tests validate every
    line with it); the roles it leaves to the service are checked here."""
    if set(line) - {"systemInstruction", "contents", "references"}:
        return "a key other than systemInstruction, contents, references"
    contents = line.get("contents")
    if not isinstance(contents, list) or not contents:
        return "no contents"
    if any(c.get("role") not in ("user", "model") for c in contents):
        return "a contents role other than user or model"
    if contents[-1]["role"] != "user":
        return "the last turn is not the user's"
    parts = [p for c in contents + [line.get("systemInstruction") or {"parts": []}] for p in c["parts"]]
    if any(set(p) != {"text"} or not isinstance(p["text"], str) or not p["text"].strip() for p in parts):
        return "a part that is not non-empty text"
    refs = line.get("references")
    if not isinstance(refs, dict) or any(not isinstance(k, str) or not isinstance(v, str) for k, v in refs.items()):
        return "references that are not text"
    return None


def _gemini_rl(row, messages) -> tuple[dict | None, str | None]:
    fields = reference_fields(row.reference)
    if GEMINI_RL_SAMPLE_REFERENCE in fields:
        return None, "reserved_field"
    # references map names to text: objects, numbers and booleans as their JSON text
    try:
        references = {str(k): v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, allow_nan=False)
                      for k, v in fields.items()}
    except ValueError:
        return None, "non_finite_number"
    references[GEMINI_RL_SAMPLE_REFERENCE] = str(row.sample_id)
    named = _roles(messages, "gemini")
    system = [{"text": m["content"]} for m in named if m["role"] == "system"]
    line = {**({"systemInstruction": {"role": "system", "parts": system}} if system else {}),
            "contents": [{"role": m["role"], "parts": [{"text": m["content"]}]} for m in named if m["role"] != "system"],
            "references": references}
    return (None, "gemini_rl_rule") if gemini_rl_problem(line) else (line, None)


def _verifiers(row, messages) -> tuple[dict | None, str | None]:
    fields = reference_fields(row.reference)
    text = fields.get(REFERENCE_FIELD) if set(fields) == {REFERENCE_FIELD} else None
    info = {"sample_id": str(row.sample_id), **({"reference": fields} if fields and text is None else {})}
    try:
        answer = text if text is not None else (
            json.dumps(fields, ensure_ascii=False, sort_keys=True, allow_nan=False) if fields else "")
        info_text = json.dumps(info, ensure_ascii=False, sort_keys=True, allow_nan=False)
    except ValueError:
        return None, "non_finite_number"
    return {"prompt": _roles(messages, "chat"), "answer": answer, "info": info_text}, None


def _verl(row, messages, index: int) -> dict:
    return {"data_source": row.data_source if isinstance(row.data_source, str) else row.run,
            "prompt": _roles(messages, "chat"), "ability": VERL_ABILITY,
            "reward_model": {"style": VERL_REWARD_STYLE, "ground_truth": _text_or_none(row.reference)},
            "extra_info": {"split": row.split, "index": index, "sample_id": row.sample_id, "group": row.group,
                           "run": row.run, "pass_rate": _float(row.pass_rate), "attempts": int(row.attempts)}}


def _trl(row, messages) -> dict:
    record = {"prompt": _roles(messages, "chat"), TRL_REFERENCE_COLUMN: _text_or_none(row.reference),
              "sample_id": row.sample_id}
    for key, value in reference_fields(row.reference).items():
        if key == REFERENCE_FIELD and not _text_or_none(row.reference).lstrip().startswith("{"):
            continue  # a plain-text reference is ground_truth already
        record[f"reference_{key}" if key in record else key] = value
    return record


def _jsonl(row, messages) -> dict:
    fields = reference_fields(row.reference)
    reference = fields.get(REFERENCE_FIELD) if set(fields) == {REFERENCE_FIELD} else (fields or None)
    return {"sample_id": row.sample_id, "prompt": _roles(messages, "chat"), "reference": reference,
            "split": row.split, "group": row.group, "run": row.run, "attempts": int(row.attempts),
            "pass_rate": _float(row.pass_rate), "mean_score": _float(row.mean_score)}


def _text_or_none(value) -> str | None:
    return None if _missing(value) else str(value)


def _float(value) -> float | None:
    return None if _missing(value) else float(value)


_MESSAGES = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
VERL_SCHEMA = pa.schema([
    ("data_source", pa.string()), ("prompt", _MESSAGES), ("ability", pa.string()),
    ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
    ("extra_info", pa.struct([("split", pa.string()), ("index", pa.int64()), ("sample_id", pa.string()),
                              ("group", pa.string()), ("run", pa.string()), ("pass_rate", pa.float64()),
                              ("attempts", pa.int64())])),
])


def _exact_double(value) -> bool:
    """Whether a number is a double exactly (9007199254740993 is not: it would be ...992.0)."""
    try:
        return isinstance(value, float) or float(value) == value
    except OverflowError:
        return False


def _uniform(values: list) -> pa.Array:
    """One Parquet type per column, every value as it was: all text, all booleans, all integers
    (int64, so 42 stays 42 and 9007199254740993 stays itself), or numbers that are all doubles
    exactly (float64); any other column holds its values' JSON text (which says every value
    exactly: an integer past int64 too)."""
    present = [v for v in values if v is not None]
    kinds = {bool if isinstance(v, bool) else int if isinstance(v, int) else float if isinstance(v, float)
             else str if isinstance(v, str) else object for v in present}
    if kinds == {int}:
        if all(-2**63 <= v < 2**63 for v in present):
            return pa.array(values, type=pa.int64())
    elif kinds <= {int, float} and kinds and all(_exact_double(v) for v in present):
        return pa.array([None if v is None else float(v) for v in values], type=pa.float64())
    elif len(kinds) <= 1 and object not in kinds:
        return pa.array(values)
    return pa.array([None if v is None else json.dumps(v, ensure_ascii=False, sort_keys=True) for v in values],
                    type=pa.string())


def _trl_table(records: list[dict]) -> pa.Table:
    columns = list(dict.fromkeys(k for r in records for k in r)) or ["prompt", TRL_REFERENCE_COLUMN, "sample_id"]
    fixed = {"prompt": _MESSAGES, TRL_REFERENCE_COLUMN: pa.string(), "sample_id": pa.string()}
    arrays, fields = [], []
    for name in columns:
        values = [r.get(name) for r in records]
        if name in fixed:
            arrays.append(pa.array(values, type=fixed[name]))
        else:
            arrays.append(_uniform(values))
        fields.append(pa.field(name, arrays[-1].type))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def _jsonl_bytes(records: list[dict]) -> bytes:
    return "".join(_json_line(r) for r in records).encode("utf-8")


def _json_line(record: dict) -> str:
    return json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n"


def _record_problem(record: dict, fields: dict) -> str | None:
    """Why a record cannot be written as valid JSON in UTF-8 (None: it can): a NaN or infinite
    number (JSON has none; Python would write a bare ``NaN``) or text that is not Unicode (a lone
    surrogate such as ``\\ud800``, which no UTF-8 file can hold)."""
    try:
        json.dumps([record, fields], ensure_ascii=False, allow_nan=False).encode("utf-8")
    except UnicodeEncodeError:
        return "invalid_unicode"
    except ValueError:
        return "non_finite_number"
    return None


def _redact_values(value):
    """``value`` (a reference's parsed JSON) with ``redact_training_text`` applied to every text in it."""
    if isinstance(value, str):
        return redact_training_text(value)
    if isinstance(value, dict):
        return {k: _redact_values(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_values(v) for v in value]
    return value


def _redacted_reference(reference):
    """The reference with secrets in its text redacted: a JSON object's values (its keys stay:
    ``answer_key`` is a grader's field, not a secret), any other reference as text."""
    if _missing(reference):
        return reference
    text = str(reference)
    if text.strip().startswith("{"):
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        if isinstance(value, dict):
            cleaned = _redact_values(value)
            return text if cleaned == value else json.dumps(cleaned, ensure_ascii=False)
    return redact_training_text(text)


def _file_facts(path: Path, data_path: Path, rows: int) -> dict:
    data = data_path.read_bytes()
    return {"path": str(path), "rows": rows, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _output_folder(out) -> Path:
    """``out``, a folder or a path where one can be; its parent folders made."""
    target = Path(out)
    if target.exists() and not target.is_dir():
        raise ValueError(f"{target} is a file, not a folder: give a folder for the training files")
    try:
        target.absolute().parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise ValueError(f"{target}: a part of this path is a file, not a folder: "
                         "give a folder for the training files") from None
    return target


# what an export of an earlier version (files replaced one by one) left when it was killed
_OLD_TEMPORARY = re.compile(r"\.[a-z0-9_]{8}\.tmp")


def _remove_old_temporary_files(target: Path) -> None:
    if target.is_dir():
        for entry in os.scandir(target):
            if _OLD_TEMPORARY.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
                os.unlink(entry.path)


def _check_counts(to: str, rows: dict[str, int]) -> None:
    """A platform's documented bounds on the number of records, checked before anything is
    written: a clear error with what to do, never a file the platform refuses at upload."""
    train, validation = rows["train"], rows["validation"]
    if to == "bedrock-nova" and not BEDROCK_NOVA_MIN_RECORDS <= train <= BEDROCK_NOVA_MAX_RECORDS:
        raise ValueError(f"Bedrock reinforcement fine-tuning takes {BEDROCK_NOVA_MIN_RECORDS:,} to "
                         f"{BEDROCK_NOVA_MAX_RECORDS:,} training records; this curation gives {train:,} (and "
                         f"{validation:,} for validation). " + (
                             "Curate more samples: widen the band, curate a run with more samples, or lower "
                             "validation_share" if train < BEDROCK_NOVA_MIN_RECORDS else
                             "Narrow the band or curate fewer samples") + " (nothing was written)")
    if to == "gemini-rl" and (train > GEMINI_RL_MAX_TRAIN or validation > GEMINI_RL_MAX_VALIDATION):
        raise ValueError(f"Gemini reinforcement tuning takes at most {GEMINI_RL_MAX_TRAIN:,} training and "
                         f"{GEMINI_RL_MAX_VALIDATION:,} validation examples; this curation gives {train:,} and "
                         f"{validation:,}: narrow the band, lower validation_share, or curate fewer samples "
                         "(nothing was written)")


def _database(con) -> str | None:
    try:
        row = con.execute("SELECT path FROM duckdb_databases() WHERE database_name = current_database()").fetchone()
    except duckdb.Error:
        return None
    return row[0] if row else None


def write_curated(con: duckdb.DuckDBPyConnection, run: str | Sequence[str], out: str | os.PathLike,
                  to: str = "openai-rft", **curate_options) -> dict:
    """Curate ``run`` (``curate_options`` are ``curate``'s) and write the kept samples into
    ``out``: train and validation files in the layout ``to`` (one of ``EXPORT_FORMATS``) and
    ``curation.json`` (run, parameters, counts per verdict, seed, what was and was not exported
    and why, how many records had secrets redacted, the forecast, the database and the source
    files). Returns what ``curation.json`` holds.

    Secrets in the text of a prompt or of a reference's values (``capture.redact_training_text``:
    the token formats of the common providers, ``password=…`` pairs whose value looks like a
    credential, passwords in URLs) are written as ``[redacted]``, and nothing else is changed
    ("Answer key: B" stays); ``redacted.records`` counts the exported records that had any. A
    record that cannot be valid JSON in UTF-8 (a NaN or infinite number, a lone surrogate in its
    text) is not exported: it is counted under ``not_exported`` (``non_finite_number``,
    ``invalid_unicode``) like a sample without a usable prompt.

    All or nothing: the set (train, validation, curation.json) is written into a fresh folder
    beside ``out``, flushed to disk, and swapped in with one rename (``folders.replace_files``:
    ``renameat2(RENAME_EXCHANGE)`` on Linux), so ``out`` holds the whole old set or the whole new
    one whenever the process dies, and curation.json's hashes always match the files beside it.
    What a killed export left (its staging folder) is removed by the next one. When one step fails
    (a file over ``OPENAI_RFT_MAX_FILE_BYTES``, a full disk), ``out`` is left as it was. Entries of
    other names in ``out`` are kept (carried over as hard links); a symlink at one of the set's
    names is replaced, its target left alone. Where no folder can be swapped (another OS, a mount
    point, a parent folder this process cannot write) the files are replaced one by one,
    curation.json last. ``out`` must be a folder or not exist yet (ValueError when it is a file).
    """
    from ..analysis.curation import forecast

    if to not in EXPORT_FORMATS:
        raise ValueError(f"to={to!r}: use one of {', '.join(EXPORT_FORMATS)}")
    curated = curate(con, run, **curate_options)
    kept = curated[curated.verdict.eq("keep")]
    rows = run_sql(con, export_rows_sql(), {"pick_runs": list(kept.run) or [""],
                                            "pick_samples": list(kept.sample_id) or [""]}).df()
    kept = kept.merge(rows, on="sample_id", how="left").sort_values(["split", "sample_id"], kind="stable")

    records: dict[str, list[dict]] = {s: [] for s in SPLITS}
    skipped: dict[str, list[str]] = {}
    redacted = 0
    for row in kept.itertuples(index=False):
        messages, why = prompt_messages(row.prompt)
        record = None
        if messages is not None:
            cleaned = [{**m, "content": redact_training_text(m["content"])} for m in messages]
            reference = _redacted_reference(row.reference)
            changed = cleaned != messages or not (reference is row.reference or reference == row.reference)
            messages, row = cleaned, row._replace(reference=reference)
            if to == "openai-rft":
                record, why = _openai_rft(row, messages)
            elif to == "verl":
                record = _verl(row, messages, len(records[row.split]))
            elif to == "trl":
                record = _trl(row, messages)
            elif to == "bedrock-nova":
                record, why = _bedrock_nova(row, messages)
            elif to == "gemini-rl":
                record, why = _gemini_rl(row, messages)
            elif to == "verifiers":
                record, why = _verifiers(row, messages)
            else:
                record = _jsonl(row, messages)
            if record is not None:
                why = _record_problem(record, reference_fields(row.reference))
                record = None if why else record
        if record is None:
            skipped.setdefault(why, []).append(row.sample_id)
        else:
            records[row.split].append(record)
            redacted += changed

    if not records["train"]:  # an empty training file is never a success
        why = curated.attrs["advice"] or (
            f"none of the {len(kept)} kept samples could be exported ({', '.join(skipped) or 'no kept samples'})")
        raise ValueError(f"nothing to train on, so nothing was written to {out}: {why}")
    target = _output_folder(out)
    names = {split: f"{split}.{'jsonl' if to in JSONL_FORMATS else 'parquet'}" for split in SPLITS}
    _check_counts(to, {s: len(records[s]) for s in SPLITS})
    for name in [*names.values(), CURATION_FILE]:
        if (target / name).is_dir() and not (target / name).is_symlink():
            raise ValueError(f"{target / name} is a folder: move it away, {name} is a file this export writes")
    # TRL: one table for both splits, so that both files have the same columns and types (a
    # reference field only the train samples have is a column of the validation file too)
    trl_table = _trl_table(records["train"] + records["validation"]) if to == "trl" else None
    writers = {}  # split: what writes its file
    for split in SPLITS:
        if to in JSONL_FORMATS:
            data = _jsonl_bytes(records[split])
            limit = {"openai-rft": (OPENAI_RFT_MAX_FILE_BYTES, "the Files API accepts"),
                     "gemini-rl": (GEMINI_RL_MAX_FILE_BYTES, "Gemini tuning accepts")}.get(to)
            if limit and len(data) > limit[0]:
                raise ValueError(f"the {split} file would be {len(data):,} bytes, over the "
                                 f"{limit[0]:,} bytes {limit[1]}: "
                                 "narrow the band or curate fewer samples (nothing was written)")
            writers[split] = lambda f, d=data: f.write(d)
        else:
            table = (pa.Table.from_pylist(records[split], schema=VERL_SCHEMA) if to == "verl"
                     else trl_table.slice(0 if split == "train" else len(records["train"]), len(records[split])))
            writers[split] = lambda f, t=table: pq.write_table(t, f)
    exported_ids = sorted(kept.sample_id[~kept.sample_id.isin({i for ids in skipped.values() for i in ids})])
    attrs = curated.attrs
    sources = pd.concat([run_sql(con, provenance_sql(), {"run": r, "samples": exported_ids or [""]}).df()
                         for r in attrs["runs"]]).drop_duplicates("source_id").sort_values("source_id")
    plan = forecast(con, curated)
    warnings = []
    if to == "openai-rft" and not records["validation"]:
        warnings.append("the validation file is empty: an RFT job needs validation samples "
                        "(raise validation_share, or curate a run with more kept samples)")
    if skipped:
        warnings.append(f"{sum(map(len, skipped.values()))} kept samples were not exported: "
                        + ", ".join(f"{len(v)} {k.replace('_', ' ')}" for k, v in sorted(skipped.items())))
    if redacted:
        warnings.append(f"{redacted} exported records had secrets in their prompt or reference, "
                        f"written as {REDACTED}: check them before training")
    files: dict[str, dict] = {}  # filled as the files are written
    manifest = {
        "run": attrs["run"], "runs": attrs["runs"], "to": to, "seed": attrs["seed"],
        "parameters": {k: attrs[k] for k in ("band", "on", "min_attempts", "drop_suspects", "audit_base",
                                             "validation_share", "seed", "mask_numbers",
                                             "near_duplicate_threshold", "keep_validation", "pass_threshold",
                                             "include_errors")},
        "samples": attrs["samples"], "counts": attrs["counts"],
        "grouping": {k: attrs[k] for k in ("groups", "groups_with_several_samples", "same_prompt_samples",
                                           "near_duplicate_pairs", "near_duplicate_samples", "pinned_validation")},
        "exported": {s: len(records[s]) for s in SPLITS},
        "not_exported": {k: {"samples": len(v), "examples": v[:NOT_EXPORTED_EXAMPLES]} for k, v in sorted(skipped.items())},
        "without_reference": int(sum(_missing(r) for r in kept.reference)),
        "redacted": {"records": redacted},
        "files": files,
        "checks": CHECKS.get(to, []),
        "forecast": json.loads(plan.to_json(orient="records")),
        "warnings": warnings,
        "database": _database(con),
        "sources": json.loads(sources.to_json(orient="records")),
        "rolloutlab_version": __version__,
        "written_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }

    def write(folder: Path) -> None:
        """The set into an empty, fresh folder: the files, then curation.json with their hashes."""
        for split in SPLITS:
            with open(folder / names[split], "xb") as f:
                writers[split](f)
            files[split] = _file_facts(target / names[split], folder / names[split], len(records[split]))
        text = json.dumps(manifest, indent=2, ensure_ascii=False) + "\n"
        with open(folder / CURATION_FILE, "xb") as f:
            f.write(text.encode("utf-8", errors="backslashreplace"))  # a sample id not Unicode stays readable

    _remove_old_temporary_files(target)
    replace_files(target, [*names.values(), CURATION_FILE], write, tag=STAGING_TAG)
    manifest["files"]["curation"] = str(target / CURATION_FILE)
    return manifest
