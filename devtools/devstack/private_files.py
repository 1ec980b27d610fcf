"""The local stack's files are its owner's alone: directories 0700, files 0600.

The state directory holds the stack's secrets (S3 keys, the Redis password, the key-signing
secret, the dev API key) and its data (tenants' documents and vectors, key hashes); other users
of the machine must read none of it. Every service is started under ``PRIVATE_UMASK``, so what
it creates is private from the start; ``restrict_tree`` tightens what an earlier version left open.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

#: The umask the stack's processes run under: nothing they create is open to group or others.
PRIVATE_UMASK = 0o077
PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def private_dir(path: Path) -> Path:
    """Create ``path`` (and missing parents, each 0700) if needed, and make it 0700: for directories
    the stack owns (its state directory, a server's data directory)."""
    _make_missing(path)
    os.chmod(path, PRIVATE_DIR_MODE)
    return path


def _make_missing(path: Path) -> None:
    """Create ``path`` and its missing parents, each 0700; existing ones are left as they are."""
    missing = [parent for parent in (path, *path.parents) if not parent.exists()]
    for directory in reversed(missing):
        directory.mkdir(mode=PRIVATE_DIR_MODE, exist_ok=True)


def open_private_append(path: Path) -> int:
    """A file descriptor appending to ``path``, created 0600 (an existing file is made 0600); missing
    parents are made 0700."""
    _make_missing(path.parent)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, PRIVATE_FILE_MODE)
    os.fchmod(descriptor, PRIVATE_FILE_MODE)
    return descriptor


def write_private(path: Path, text: str) -> None:
    """Replace ``path`` with ``text``, readable by its owner only (written aside, then renamed in);
    missing parents are made 0700."""
    _make_missing(path.parent)
    tmp = path.with_name(path.name + ".tmp")
    descriptor = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE_MODE)
    os.fchmod(descriptor, PRIVATE_FILE_MODE)  # an existing file keeps its mode through O_CREAT
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text)
    tmp.replace(path)


def restrict_tree(root: Path) -> None:
    """Make every directory under ``root`` (``root`` too) 0700 and every regular file 0600.

    Symbolic links are not followed, and sockets and other special files are left alone.
    """
    if not root.is_dir():
        return
    os.chmod(root, PRIVATE_DIR_MODE)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            _chmod_if(Path(dirpath, name), stat.S_ISDIR, PRIVATE_DIR_MODE)
        for name in filenames:
            _chmod_if(Path(dirpath, name), stat.S_ISREG, PRIVATE_FILE_MODE)


def _chmod_if(path: Path, kind: Callable[[int], bool], mode: int) -> None:
    try:
        status = path.lstat()
    except FileNotFoundError:  # removed meanwhile (a server's temporary file)
        return
    if kind(status.st_mode) and stat.S_IMODE(status.st_mode) != mode:
        os.chmod(path, mode)
