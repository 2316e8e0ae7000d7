"""One pass over a file for ingest: its sha256, the sha256 of the part loaded before (so that a file
that only grew is recognized), where its last complete line ends, and its line count there.

A file that only grew (its earlier bytes unchanged) loads just its new lines; a last line without
its newline is held back while the file may still be written (``follow``), so a writer caught
mid-line is never mistaken for a cut-off file.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

BLOCK = 1 << 22


@dataclass(frozen=True)
class Scan:
    size: int
    sha256: str  # of the whole file
    prefix_sha256: str | None  # of bytes [0, prefix) when a prefix was asked for and the file has it
    prefix_lines: int  # newlines in [0, prefix)
    complete_end: int  # just past the last newline: where the complete lines end
    complete_sha256: str  # of bytes [0, complete_end)
    lines: int  # newlines in [0, complete_end): the complete lines


def scan(path: Path, prefix: int | None = None) -> Scan:
    """Hash the file once, keeping on the way the hash of its first ``prefix`` bytes and of its
    complete lines (the hash state before the last block with a newline, finished up to it)."""
    whole = hashlib.sha256()
    prefix_sha = hashlib.sha256().hexdigest() if prefix == 0 else None
    size = lines = prefix_lines = 0
    last_newline, before_last = -1, None  # (hash state before that block, the block, where)
    with open(path, "rb") as fh:
        while True:
            block = fh.read(BLOCK)
            if not block:
                break
            at = block.rfind(b"\n")
            if at >= 0:
                before_last = (whole.copy(), block, at)
                last_newline = size + at
            if prefix and prefix_sha is None and size + len(block) >= prefix:
                cut = prefix - size
                head = whole.copy()
                head.update(block[:cut])
                prefix_sha = head.hexdigest()
                prefix_lines = lines + block.count(b"\n", 0, cut)
            whole.update(block)
            lines += block.count(b"\n")
            size += len(block)
    complete = hashlib.sha256()
    if before_last is not None:
        complete, block, at = before_last
        complete.update(block[:at + 1])
    return Scan(size=size, sha256=whole.hexdigest(), prefix_sha256=prefix_sha, prefix_lines=prefix_lines,
                complete_end=last_newline + 1, complete_sha256=complete.hexdigest(), lines=lines)


def copy_range(path: Path, start: int, end: int, folder: str | Path) -> Path:
    """Bytes [start, end) of ``path`` as a file of its own name in ``folder``."""
    out = Path(folder) / path.name
    with open(path, "rb") as src, open(out, "wb") as dst:
        src.seek(start)
        remaining = end - start
        while remaining > 0:
            block = src.read(min(BLOCK, remaining))
            if not block:
                break
            dst.write(block)
            remaining -= len(block)
    return out
