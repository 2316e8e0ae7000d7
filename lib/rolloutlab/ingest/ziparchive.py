"""Zip members as Inspect AI writes them: stored, deflate, or Zstandard (zip method 93).

Current inspect_ai compresses every member of a ``.eval`` with zstd, as several frames per
member; Python's ``zipfile`` cannot read method 93 before 3.14. We read such a member's raw bytes
from its local header and decompress them across frames with ``zstandard``, checking size and
CRC as ``zipfile`` does for the methods it knows. Nothing is patched globally.

A zip is input from elsewhere: a member whose recorded size is past ``config.ZIP_MEMBER_MAX_BYTES``,
or past ``config.ZIP_MAX_RATIO`` times its compressed size (beyond ``config.ZIP_RATIO_FROM_BYTES``),
is refused before it is decompressed; every member is then decompressed as a stream and refused
once it grows past those limits (deflate) or one byte past the size the zip records (zstd, read in
one call: no chunks to join), so a 1 MB zip bomb costs a few megabytes, not gigabytes.

``reading_ahead(names)`` reads members in a thread of its own a few ahead of the reader: reading
the file, zstd and the CRC let go of the GIL, so they run beside the caller's parsing on another
core. The same checks, the same errors (raised where the member is read), and at most
``READ_AHEAD_MEMBERS`` members held beyond the one being read.
"""
from __future__ import annotations

import queue
import struct
import threading
import zipfile
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import zstandard

from .. import config
from ..config import READ_AHEAD_MEMBERS

ZSTD_METHOD = 93
LOCAL_HEADER = struct.Struct("<4s22xHH")  # signature, then file name and extra field lengths
LOCAL_SIGNATURE = b"PK\x03\x04"
CHUNK = 1 << 20


class MemberError(ValueError):
    """A member that cannot be read, with why."""


def _mib(n: int) -> str:
    return f"{n / 2**20:,.0f} MiB"


class Archive:
    """A zip file whose members are read whole, one at a time (``with Archive(path) as a``)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.zip = zipfile.ZipFile(self.path)
        self._raw = open(self.path, "rb")
        self._infos = {info.filename: info for info in self.zip.infolist()}
        self._ahead: _ReadAhead | None = None

    def __enter__(self) -> "Archive":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._raw.close()
        self.zip.close()

    def names(self) -> list[str]:
        return list(self._infos)

    def limit(self, info: zipfile.ZipInfo) -> int:
        """The most bytes this member may decompress to."""
        by_ratio = max(config.limit("ZIP_RATIO_FROM_BYTES"), config.limit("ZIP_MAX_RATIO") * info.compress_size)
        return min(config.limit("ZIP_MEMBER_MAX_BYTES"), by_ratio)

    def _refuse(self, info: zipfile.ZipInfo, limit: int) -> MemberError:
        return MemberError(
            f"{info.filename}: decompresses to more than {_mib(limit)} from {info.compress_size:,} compressed bytes: "
            f"refused as a likely zip bomb (limits: {_mib(config.limit('ZIP_MEMBER_MAX_BYTES'))} per member, "
            f"{config.limit('ZIP_MAX_RATIO')}x its compressed size). If the log is genuine, raise them: "
            "ROLLOUTLAB_ZIP_MEMBER_MAX_BYTES / ROLLOUTLAB_ZIP_MAX_RATIO (docs/security.md)")

    @contextmanager
    def reading_ahead(self, names: list[str], depth: int | None = None) -> Iterator["Archive"]:
        """Within the block, ``names`` are read in a thread of their own, ``depth`` ahead: ``read``
        of them in this order hands over what it read (or raises what it raised); any other read is
        done as usual."""
        ahead = _ReadAhead(self, list(names), depth or READ_AHEAD_MEMBERS)
        self._ahead = ahead
        try:
            yield self
        finally:
            self._ahead = None
            ahead.stop()

    def read(self, name: str) -> bytes:
        ahead = self._ahead
        if ahead is not None and ahead.next_name == name:
            return ahead.take(lambda: self._read(name, self._raw))
        return self._read(name, self._raw)

    def _read(self, name: str, raw) -> bytes:
        info = self._infos.get(name)
        if info is None:
            raise MemberError(f"no member {name!r}")
        limit = self.limit(info)
        if info.file_size > limit:  # the zip says so itself: refuse before decompressing
            raise self._refuse(info, limit)
        if info.compress_type != ZSTD_METHOD:
            try:
                with self.zip.open(info) as stream:  # zipfile checks size and CRC at the end
                    return self._bounded(stream.read, info, limit)
            except NotImplementedError as exc:
                raise MemberError(f"{name}: {exc} (zip method {info.compress_type})") from None
        data = self._zstd(info, raw)
        if len(data) != info.file_size or zlib.crc32(data) != info.CRC:
            raise MemberError(f"{name}: its contents do not match the size and CRC the zip records "
                              "(the file is corrupt)")
        return data

    def _bounded(self, read, info: zipfile.ZipInfo, limit: int) -> bytes:
        """Read a decompressing stream a chunk at a time, never past ``limit`` bytes."""
        parts, total = [], 0
        while chunk := read(CHUNK):
            total += len(chunk)
            if total > limit:
                raise self._refuse(info, limit)
            parts.append(chunk)
        return b"".join(parts)

    def _zstd(self, info: zipfile.ZipInfo, file) -> bytes:
        file.seek(info.header_offset)
        header = file.read(LOCAL_HEADER.size)
        if len(header) != LOCAL_HEADER.size or header[:4] != LOCAL_SIGNATURE:
            raise MemberError(f"{info.filename}: bad local header (the zip is corrupt)")
        _, name_len, extra_len = LOCAL_HEADER.unpack(header)
        file.seek(name_len + extra_len, 1)
        raw = file.read(info.compress_size)
        if len(raw) != info.compress_size:
            raise MemberError(f"{info.filename}: the zip ends inside this member (the file is cut off)")
        # The size the zip records is within the limits (checked before): read at most one byte past
        # it, in one call where the frames allow — never a byte more, whatever the data claims.
        want = info.file_size + 1
        parts, total = [], 0
        try:
            with zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True) as reader:
                while total < want and (chunk := reader.read(want - total)):
                    parts.append(chunk)
                    total += len(chunk)
        except zstandard.ZstdError as exc:
            raise MemberError(f"{info.filename}: zstd data is corrupt ({exc})") from None
        return parts[0] if len(parts) == 1 else b"".join(parts)


class _ReadAhead:
    """Members of an archive read in order by a thread with a file handle of its own (zipfile's
    own handle is shared under its lock, for deflate), at most ``depth`` ahead of ``take``."""

    def __init__(self, archive: Archive, names: list[str], depth: int):
        self._names = names
        self._next = 0
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._work, args=(archive,), name="zip-read-ahead", daemon=True)
        self._thread.start()

    @property
    def next_name(self) -> str | None:
        return self._names[self._next] if self._next < len(self._names) else None

    def _work(self, archive: Archive) -> None:  # a failure here leaves the reader to read for itself
        with open(archive.path, "rb") as file:
            for name in self._names:
                try:
                    result = (archive._read(name, file), None)
                except Exception as exc:  # raised to the reader, where it reads this member
                    result = (None, exc)
                while not self._stopped.is_set():
                    try:
                        self._queue.put(result, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if self._stopped.is_set():
                    return

    def take(self, read_here) -> bytes:
        """The next member as the thread read it; ``read_here()`` if the thread is gone."""
        while True:
            try:
                data, exc = self._queue.get(timeout=0.5)
                break
            except queue.Empty:
                if not self._thread.is_alive() and self._queue.empty():
                    self._next += 1
                    return read_here()
        self._next += 1
        if exc is not None:
            raise exc
        return data

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join()
