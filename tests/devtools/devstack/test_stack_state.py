"""The local stack's state file holds its admin key and S3 secret: its owner alone reads it."""
import stat
from dataclasses import fields

from poolq.devtools.devstack.stack_state import StackState


def _state() -> StackState:
    values = {field.name: f"x-{field.name}" for field in fields(StackState)}
    return StackState(**{**values, "ports": {}, "pids": {}})


def test_the_state_file_and_its_folder_are_private(tmp_path):
    path = tmp_path / "state" / "stack.json"
    _state().save(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_saving_again_over_a_readable_file_makes_it_private(tmp_path):
    path = tmp_path / "stack.json"
    path.write_text("{}")
    path.chmod(0o644)
    (tmp_path / "stack.tmp").write_text("{}")
    (tmp_path / "stack.tmp").chmod(0o644)
    _state().save(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert StackState.load(path) == _state()
