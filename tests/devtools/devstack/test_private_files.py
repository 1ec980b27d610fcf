"""The stack's files are its owner's: directories 0700, files 0600, without touching what is not its own."""

import os
import stat

from poolq.devtools.devstack.private_files import open_private_append, private_dir, restrict_tree, write_private


def _mode(path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_restrict_tree_tightens_directories_and_files_and_follows_no_link(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("not the stack's")
    outside.chmod(0o644)
    root = tmp_path / "redis"
    (root / "sub").mkdir(parents=True)
    (root / "sub").chmod(0o755)
    (root / "data.aof").write_text("x")
    (root / "data.aof").chmod(0o664)
    (root / "link").symlink_to(outside)
    restrict_tree(root)
    assert (_mode(root), _mode(root / "sub"), _mode(root / "data.aof")) == (0o700, 0o700, 0o600)
    assert _mode(outside) == 0o644  # the link's target is not the stack's


def test_private_files_are_created_private_and_existing_parents_are_left_alone(tmp_path):
    tmp_path.chmod(0o755)
    write_private(tmp_path / "new" / "state.json", "{}")
    os.close(open_private_append(tmp_path / "logs" / "api.log"))
    assert _mode(tmp_path / "new") == _mode(tmp_path / "logs") == 0o700
    assert _mode(tmp_path / "new" / "state.json") == _mode(tmp_path / "logs" / "api.log") == 0o600
    assert _mode(tmp_path) == 0o755  # a parent that existed (it may be /tmp) keeps its mode
    old_log = tmp_path / "old.log"
    old_log.write_text("")
    old_log.chmod(0o644)
    os.close(open_private_append(old_log))
    assert _mode(old_log) == 0o600
    assert _mode(private_dir(tmp_path / "mine")) == 0o700
