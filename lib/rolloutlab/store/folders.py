"""Folders written whole: built beside their target, then swapped in with one rename.

A reader of the target sees the old folder or the new one, never a mix, whenever the process is
killed. ``exchange`` swaps two folders in one system call where the kernel can (Linux
``renameat2(RENAME_EXCHANGE)``, 3.15+); a staging folder left by a killed process is removed by
the next writer of the same target (``remove_stale``).
"""
from __future__ import annotations

import ctypes
import errno
import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Callable, Sequence

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
# errors that say the call or the file system cannot swap (then the caller falls back)
_CANNOT_SWAP = {errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EBUSY, errno.EPERM}


def pid_alive(pid: int) -> bool:
    if os.name == "nt":  # os.kill(pid, 0) would not ask there: never take a folder that may be in use
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. another user's process
        return True
    return True


def staging_prefix(target: Path, tag: str) -> str:
    """The name every staging folder of ``target`` starts with: ``.NAME.TAG-`` then the PID."""
    return f".{target.name}.{tag}-"


def remove_stale(where: Path, prefix: str) -> list[Path]:
    """Remove the staging folders in ``where`` named ``prefix`` + ``PID[-…]`` that writers killed
    before they finished left behind: those whose process is gone. Returns what was removed."""
    removed = []
    if not where.is_dir():
        return removed
    for folder in where.iterdir():
        pid = folder.name[len(prefix):].split("-")[0]
        if folder.name.startswith(prefix) and pid.isdigit() and int(pid) != os.getpid() and not pid_alive(int(pid)):
            if folder.is_dir() and not folder.is_symlink():
                shutil.rmtree(folder, ignore_errors=True)
            else:
                folder.unlink(missing_ok=True)
            removed.append(folder)
    return removed


def _renameat2():
    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError, TypeError):  # not glibc 2.28+ / not Linux
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


_RENAMEAT2 = _renameat2()


def exchange(a: Path, b: Path) -> bool:
    """Swap two existing paths in one atomic step; False where this system or file system cannot
    (the caller then does something else), an OSError for anything else (a missing path)."""
    if _RENAMEAT2 is None:
        return False
    if _RENAMEAT2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in _CANNOT_SWAP:
        return False
    raise OSError(code, os.strerror(code), str(a), None, str(b))


def umask() -> int:
    """The process's umask, read without changing it where Linux says it (else set and restored)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst, follow_symlinks=False)
    except OSError:
        if stat.S_ISREG(os.lstat(src).st_mode):  # never open a FIFO or a device to copy it
            shutil.copy2(src, dst, follow_symlinks=False)


def _carry_over(target: Path, stage: Path, names: Sequence[str]) -> None:
    """What ``target`` holds besides ``names``, into ``stage`` as hard links (copies where the
    file system has none; symlinks as symlinks): the swap keeps it."""
    for entry in os.scandir(target):
        if entry.name in names:
            continue
        into = os.path.join(stage, entry.name)
        if entry.is_symlink():
            os.symlink(os.readlink(entry.path), into)
        elif entry.is_dir():
            shutil.copytree(entry.path, into, symlinks=True, copy_function=_link_or_copy)
        else:
            _link_or_copy(entry.path, into)


def _move_missing(old: Path, new: Path, names: Sequence[str]) -> None:
    """Entries that reached ``old`` while its copy was made (or that could not be linked) move to ``new``."""
    for entry in os.scandir(old):
        if entry.name not in names and not os.path.lexists(new / entry.name):
            os.rename(entry.path, new / entry.name)


def replace_files(target: Path, names: Sequence[str], write: Callable[[Path], None], tag: str) -> None:
    """Make the folder ``target`` hold the files ``write(folder)`` writes into an empty folder,
    named ``names`` (the last is replaced last where it has to be file by file), all at once:
    written and flushed to disk in a staging folder beside ``target`` (``.NAME.TAG-PID-…``),
    ``target``'s other entries carried over (hard links), then the two folders are swapped with
    one ``exchange`` (or, for a new target, one rename). Killed at any point, ``target`` holds the
    old files or the new ones, never a mix; the next call removes what a killed one left. Where
    no swap is possible (no ``renameat2``, a file system or mount point that refuses it, a parent
    folder this process cannot write), the files are staged and replaced one by one, ``names[-1]``
    last. ``write`` failing leaves ``target`` as it was. A process standing in ``target`` (its
    working folder) stands in the new folder after the swap; other processes there stay in the old."""
    target = Path(os.path.realpath(target))
    inside = f".{tag}-"
    remove_stale(target.parent, staging_prefix(target, tag))
    remove_stale(target, inside)
    stage = None
    if not os.path.ismount(target):  # a mount point cannot be renamed: its files are replaced in it
        try:
            stage = Path(tempfile.mkdtemp(dir=target.parent, prefix=f"{staging_prefix(target, tag)}{os.getpid()}-"))
        except PermissionError:  # the parent is not this process's to write: stage inside target
            pass
    beside = stage is not None
    if not beside:
        target.mkdir(exist_ok=True)
        stage = Path(tempfile.mkdtemp(dir=target, prefix=f"{inside}{os.getpid()}-"))
    try:
        write(stage)
        for name in names:
            with open(stage / name, "rb") as f:
                os.fsync(f.fileno())
        fsync_dir(stage)
        if beside:
            mode = os.stat(target).st_mode if target.is_dir() else 0o777 & ~umask()
            os.chmod(stage, stat.S_IMODE(mode))
            if not target.exists():
                try:
                    os.rename(stage, target)
                    fsync_dir(target.parent)
                    return
                except OSError:  # made meanwhile: swap with it below
                    pass
            _carry_over(target, stage, names)
            cwd = os.getcwd()
            if exchange(stage, target):  # stage now holds the old folder
                _move_missing(stage, target, names)
                fsync_dir(target.parent)
                if Path(cwd).is_relative_to(target):  # this process stood in the old folder: stand in the new
                    try:
                        os.chdir(cwd)
                    except OSError:
                        os.chdir(target)
                return
        for name in names:
            os.replace(stage / name, target / name)  # replaces a symlink at the name, never its target
        fsync_dir(target)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


__all__ = ["replace_files", "exchange", "remove_stale", "pid_alive", "staging_prefix", "fsync_dir", "umask"]
