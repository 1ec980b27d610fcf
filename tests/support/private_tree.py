"""What "its owner's alone" means for a directory tree of the local stack."""

from __future__ import annotations

import stat
from pathlib import Path


def assert_private_tree(root: Path) -> None:
    """Every directory under ``root`` is 0700 and every file 0600 (symbolic links aside): the stack's
    services, run under umask 077, create nothing others may read. Except SeaweedFS's ``.vif`` files
    (a volume's format and size, no data), which weed makes 0644 whatever the umask, in directories
    no one else may enter."""
    modes = {path: stat.S_IMODE(path.lstat().st_mode) for path in [root, *root.rglob("*")] if not path.is_symlink()}
    assert {str(p): oct(m) for p, m in modes.items() if p.is_dir() and m != 0o700} == {}
    assert {str(p): oct(m) for p, m in modes.items() if p.is_file() and m & 0o077 and p.suffix != ".vif"} == {}
