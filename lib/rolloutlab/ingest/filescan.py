"""One pass over a file for ingest: its sha256, the sha256 of the part loaded before (so that a file
that only grew is recognized), where its last complete line ends, and its line count there.

A file that only grew (its earlier bytes unchanged) loads just its new lines; a last line without
its newline is held back while the file may still be written (``follow``), so a writer caught
mid-line is never mistaken for a cut-off file.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

BLOCK = 1 << 22


@dataclass(frozen=True)
class Scan:
    size: int
    sha256: str  # of the whole file
    prefix_sha256: str | None  # of bytes [0, prefix) when a prefix was asked for and the file has it
    complete_end: int  # just past the last newline: where the complete lines end
    complete_sha256: str  # of bytes [0, complete_end)
    lines_after_prefix: int  # newlines in [prefix, complete_end) (in the whole file without a prefix)


def scan(path: Path, prefix: int | None = None) -> Scan:
    """Hash the file once, keeping on the way the hash of its first ``prefix`` bytes and of its
    complete lines; count the newlines after the prefix only — the prefix's are known when its
    hash matches. Blocks are read into one reused buffer: no copies, and the process holds a
    block, not the file (a memory map would count the whole file as the process's memory)."""
    whole = hashlib.sha256()
    buf = bytearray(BLOCK)
    view = memoryview(buf)
    size = lines = 0
    prefix_sha = hashlib.sha256().hexdigest() if prefix == 0 else None
    complete_end, complete_sha = 0, hashlib.sha256().hexdigest()
    with open(path, "rb") as fh:
        while n := fh.readinto(buf):
            at = buf.rfind(b"\n", 0, n)
            before = whole.copy() if at >= 0 else None
            if prefix and prefix_sha is None and size + n >= prefix:  # the block the prefix ends in
                head = whole.copy()
                head.update(view[:prefix - size])
                prefix_sha = head.hexdigest()
                count_from = prefix - size
            else:
                count_from = n if (prefix and prefix_sha is None) else 0  # inside the prefix: known
            lines += buf.count(b"\n", count_from, n)
            whole.update(view[:n])
            if before is not None:
                before.update(view[:at + 1])
                complete_end, complete_sha = size + at + 1, before.hexdigest()
            size += n
    view.release()
    if prefix and prefix_sha is None:  # the file is shorter than the prefix: count it all
        lines = count_lines(path, complete_end)
    return Scan(size=size, sha256=whole.hexdigest(), prefix_sha256=prefix_sha, complete_end=complete_end,
                complete_sha256=complete_sha, lines_after_prefix=lines)


def count_lines(path: Path, end: int) -> int:
    """Newlines in the first ``end`` bytes."""
    n = 0
    with open(path, "rb") as fh:
        while end > 0:
            block = fh.read(min(BLOCK, end))
            if not block:
                break
            n += block.count(b"\n")
            end -= len(block)
    return n


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


def line_chunks(path: Path, folder: str | Path, target: int, start: int = 0, end: int | None = None):
    """Bytes [start, end) of ``path`` as consecutive files of about ``target`` bytes each, cut
    after a newline, written into ``folder`` one at a time: yields (chunk file, its newlines).
    The caller loads a chunk before asking for the next (which overwrites it)."""
    end = os.path.getsize(path) if end is None else end
    out = Path(folder) / path.name
    with open(path, "rb") as src:
        src.seek(start)
        position = start
        while position < end:
            written = newlines = 0
            with open(out, "wb") as dst:
                while position < end:
                    block = src.read(min(BLOCK, end - position))
                    if not block:
                        break
                    if written + len(block) >= target:
                        cut = block.find(b"\n", max(0, target - written - 1))
                        if cut >= 0:  # end the chunk with this line; the rest starts the next one
                            src.seek(position + cut + 1)
                            block = block[: cut + 1]
                    dst.write(block)
                    written += len(block)
                    newlines += block.count(b"\n")
                    position += len(block)
                    if written >= target and block.endswith(b"\n"):
                        break
            yield out, newlines
