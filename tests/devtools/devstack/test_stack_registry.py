"""The user's record of local stacks (``$XDG_STATE_HOME/poolq/stacks``): private, one note per
stack, notes of stacks that are gone dropped; and how the CLI picks a stack from it: the one
running, ``--stack`` among several, an error naming them otherwise. Stacks here are stand-ins:
a state file whose pids are real processes with the stack's command-line markers (no services)."""
import stat

import pytest
from click.testing import CliRunner
from support.fake_stacks import fake_stack as _fake_stack
from support.fake_stacks import stand_in_processes

from poolq.api.cli.main import main
from poolq.devtools.devstack.stack_finder import running_stacks
from poolq.devtools.devstack.stack_registry import StackRegistry, user_state_dir


def _mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def sleepers():
    """Processes whose command lines hold every service's marker ("serve", "worker", ...), as a stack's would."""
    with stand_in_processes() as start:
        yield start


def test_the_registry_lives_under_xdg_state_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert StackRegistry().root == tmp_path / "state" / "poolq" / "stacks"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert user_state_dir() == tmp_path / "home" / ".local" / "state" / "poolq"


def test_notes_are_private_and_removed(tmp_path):
    registry = StackRegistry(tmp_path / "state" / "poolq" / "stacks")
    note = registry.add(tmp_path / "a" / ".poolq")
    registry.add(tmp_path / "b" / ".poolq")
    registry.add(tmp_path / "a" / ".poolq")  # noted again: still one note
    assert _mode(note) == 0o600 and _mode(registry.root) == 0o700 and _mode(registry.root.parent) == 0o700
    assert sorted(registry.state_dirs()) == [tmp_path / "a" / ".poolq", tmp_path / "b" / ".poolq"]
    registry.remove(tmp_path / "a" / ".poolq")
    assert registry.state_dirs() == [tmp_path / "b" / ".poolq"] and not note.exists()


def test_notes_of_stacks_that_are_gone_are_dropped(tmp_path, sleepers):
    registry = StackRegistry(tmp_path / "registry")
    alive = _fake_stack(tmp_path / "alive", "http://127.0.0.1:1", sleepers(), registry)
    _fake_stack(tmp_path / "stopped", "http://127.0.0.1:2", None, registry)
    registry.add(tmp_path / "removed")  # its directory is gone
    assert [stack.state_dir for stack, _ in running_stacks(registry)] == [alive.state_dir]
    assert registry.state_dirs() == [alive.state_dir]


def test_down_takes_the_note_away(tmp_path, sleepers):
    registry = StackRegistry(tmp_path / "registry")
    stack = _fake_stack(tmp_path / "s", "http://127.0.0.1:1", sleepers(), registry)
    stack.down()
    assert registry.state_dirs() == []


@pytest.fixture
def two_stacks(tmp_path, monkeypatch, sleepers, closed_port):
    """Two running stand-in stacks noted in the user's registry; the CLI runs from a third directory."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)
    registry = StackRegistry()
    first = _fake_stack(tmp_path / "one" / ".poolq", f"http://127.0.0.1:{closed_port}", sleepers(), registry)
    second = _fake_stack(tmp_path / "two" / ".poolq", f"http://127.0.0.2:{closed_port}", sleepers(), registry)
    return first, second


def _cli(*args: str):
    env = {"POOLQ_API_URL": None, "POOLQ_API_KEY": None, "POOLQ_DEV_DIR": None, "POOLQ_STACK": None}
    return CliRunner().invoke(main, list(args), env=env)


def test_with_two_stacks_the_cli_names_them_and_asks_for_one(two_stacks, tmp_path, closed_port):
    first, second = two_stacks
    ambiguous = _cli("status", "0" * 32)
    assert ambiguous.exit_code == 2, ambiguous.output
    assert "2 local stacks are running" in ambiguous.output and "--stack" in ambiguous.output
    assert str(first.state_dir) in ambiguous.output and str(second.state_dir) in ambiguous.output
    # --stack names one (its folder or its state directory): the verb talks to that stack's API
    for choice in (str(tmp_path / "two"), str(second.state_dir)):
        chosen = _cli("--stack", choice, "status", "0" * 32)
        assert chosen.exit_code == 3 and f"127.0.0.2:{closed_port}" in chosen.output, chosen.output
    # a stack that is not running is an error, not a silent fallback
    missing = _cli("--stack", str(tmp_path / "three"), "status", "0" * 32)
    assert missing.exit_code == 2 and "no running stack at" in missing.output
    listed = _cli("--stack", str(tmp_path / "one"), "dev", "status", "--json")
    assert f'"api_url": "http://127.0.0.1:{closed_port}"' in listed.output


def test_with_one_stack_the_cli_uses_it_from_anywhere(two_stacks, closed_port):
    first, second = two_stacks
    second.down()
    found = _cli("status", "0" * 32)
    assert found.exit_code == 3 and f"127.0.0.1:{closed_port}" in found.output, found.output
    assert str(first.state_dir) in _cli("dev", "status", "--json").output


def test_dev_down_from_anywhere_stops_the_chosen_stack_and_forgets_it(two_stacks):
    first, second = two_stacks
    ambiguous = _cli("dev", "down")
    assert ambiguous.exit_code == 2 and "--stack" in ambiguous.output  # two run: nothing is stopped on a guess
    assert len(running_stacks()) == 2
    stopped = _cli("--stack", str(second.state_dir), "dev", "down")
    assert stopped.exit_code == 0 and stopped.output.startswith("stopped: "), stopped.output
    assert [stack.state_dir for stack, _ in running_stacks()] == [first.state_dir]
    assert StackRegistry().state_dirs() == [first.state_dir]


def test_in_a_terminal_the_cli_asks_which_stack(two_stacks, monkeypatch, closed_port):
    first, second = two_stacks

    class _Terminal:
        @staticmethod
        def isatty() -> bool:
            return True

    # A terminal on both ends (CliRunner's streams are not one); the answer comes from CliRunner's input.
    monkeypatch.setattr("poolq.api.cli.stack_choice.sys", type("FakeSys", (), {"stdin": _Terminal, "stderr": _Terminal}))
    env = {"POOLQ_API_URL": None, "POOLQ_API_KEY": None, "POOLQ_DEV_DIR": None, "POOLQ_STACK": None}
    asked = CliRunner().invoke(main, ["status", "0" * 32], env=env, input="2\n")
    assert "2 local stacks are running" in asked.output and "which one" in asked.output
    assert f"1. {first.state_dir}" in asked.output and f"2. {second.state_dir}" in asked.output
    assert asked.exit_code == 3 and f"127.0.0.2:{closed_port}" in asked.output, asked.output
