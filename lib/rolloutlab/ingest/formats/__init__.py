"""One module per input format. Each has ``FORMAT`` (its name), ``FILE_TYPES`` (the kinds of file
it reads, ``FILE_KINDS``' keys, each with what of it), ``sniff(path, head, first_record) -> bool``
and ``load(ctx) -> LoadResult``; the shared machinery (line staging, field checks,
record conversion, chat messages, zip members) lives one level up, in ``rolloutlab.ingest``.

A new format: add a module here, list it in ``MODULES`` below (more specific formats first:
sniffing stops at the first that claims a file), document it in docs/formats.md.
"""
from . import (art, bedrock_metrics, buildhours, gemini_metrics, inspectlog, native, openai_chat, openai_evals,
               openai_finetune, rft_endpoint, tau2, taubench, trl, verl, vfeval)

# Sniffing order matters: the more specific formats first.
MODULES = (openai_finetune, openai_evals, bedrock_metrics, gemini_metrics, art, verl, trl, rft_endpoint, buildhours, vfeval,
           openai_chat, native, taubench, tau2, inspectlog)
FORMATS = {module.FORMAT: module for module in MODULES}

# The kinds of file ingest reads, in the order people are told them.
FILE_KINDS = {"jsonl": "JSON lines (.jsonl, or any name)", "json": "JSON (.json)", "eval": "Inspect logs (.eval)",
              "parquet": "Parquet (.parquet)", "csv": "CSV (.csv)"}


def file_types() -> list[tuple[str, list[str]]]:
    """What ingest reads, by kind of file: every format's ``FILE_TYPES`` (the CLI says it when a
    folder holds no log file)."""
    return [(title, sorted((what for module in MODULES for k, what in module.FILE_TYPES if k == kind),
                           key=lambda what: (not what.startswith("native"), what)))
            for kind, title in FILE_KINDS.items()]
