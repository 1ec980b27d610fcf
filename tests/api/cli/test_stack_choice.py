"""Which of several running local stacks a command uses: the one serving POOLQ_API_URL, the one
POOLQ_STACK names (path or name), the one whose folder holds the current directory; else exit 2
naming them and how to choose. The same rules for every command: the API verbs (`status`), the
store's (`webhooks secret`) and `dev status`. Stacks are stand-ins (support/fake_stacks.py): no
service listens, so each command fails reaching the chosen stack, and its message says which one it was."""
import json

import pytest
from click.testing import CliRunner
from support.fake_stacks import fake_stack, stand_in_processes

from poolq.api.cli.main import main
from poolq.devtools.devstack.stack_registry import StackRegistry

NO_SETTINGS = ("POOLQ_API_URL", "POOLQ_API_KEY", "POOLQ_DEV_DIR", "POOLQ_STACK", "POOLQ_STORE", "POOLQ_S3_ENDPOINT_URL",
               "POOLQ_BUCKET")
JOB = "0" * 32


@pytest.fixture
def stacks(tmp_path, monkeypatch, closed_port):
    """Two running stand-in stacks: `poolq dev up`'s in one/, `poolq demo`'s in two/; the CLI runs from elsewhere/."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    for name in NO_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("POOLQ_S3_MAX_ATTEMPTS", "0")  # a refused store fails at once, not after botocore's retries
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "two" / "src" / "deep").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "elsewhere")
    registry = StackRegistry()
    with stand_in_processes() as start:
        made = {}
        for name, host, state_dir in (("one", "127.0.0.1", ".poolq"), ("two", "127.0.0.2", ".poolq-demo")):
            url = f"http://{host}:{closed_port}"
            made[name] = fake_stack(tmp_path / name / state_dir, url, start(), registry, s3_endpoint=url,
                                    bucket=f"{name}-bucket", redis_url=f"redis://{host}:{closed_port}/0")
        yield made


def _cli(*args: str, **env: str):
    return CliRunner().invoke(main, list(args), env=env)


def _used(result, stack_name: str, closed_port: int) -> bool:
    """The command reached for ``stack_name``'s services (its API or its bucket) and no other's."""
    host = {"one": "127.0.0.1", "two": "127.0.0.2"}[stack_name]
    return f"{host}:{closed_port}" in result.output and "local stacks are running" not in result.output


def test_webhooks_secret_uses_the_stack_serving_poolq_api_url(stacks, closed_port):
    # Given two running stacks and a shell set up for the second one's API
    result = _cli("webhooks", "secret", "--tenant", "acme", POOLQ_API_URL=f"http://127.0.0.2:{closed_port}/")
    # Then the secret is read from that stack's store (unreachable here: exit 3 naming its bucket), not refused as ambiguous
    assert result.exit_code == 3 and "bucket 'two-bucket'" in result.stderr, result.output
    # An API URL wins over POOLQ_STACK
    chosen = _cli("webhooks", "secret", "--tenant", "acme", POOLQ_API_URL=f"http://127.0.0.1:{closed_port}",
                  POOLQ_STACK=str(stacks["two"].state_dir))
    assert chosen.exit_code == 3 and "bucket 'one-bucket'" in chosen.stderr, chosen.output
    listed = _cli("dev", "status", "--json", POOLQ_API_URL=f"http://127.0.0.2:{closed_port}")
    assert json.loads(listed.stdout)["state_dir"] == str(stacks["two"].state_dir), listed.output


@pytest.mark.parametrize("name", ["two", ".poolq-demo"])
def test_poolq_stack_may_name_a_running_stack(stacks, closed_port, name):
    # POOLQ_STACK=two from elsewhere/: no ./two here, but a running stack of that name (its folder's, or its state directory's)
    for args in (("status", JOB), ("webhooks", "secret", "--tenant", "acme")):
        result = _cli(*args, POOLQ_STACK=name)
        assert result.exit_code == 3 and _used(result, "two", closed_port), (args, result.output)
    unknown = _cli("status", JOB, POOLQ_STACK="three")
    assert unknown.exit_code == 2 and "no running stack at" in unknown.stderr


def test_the_stack_whose_folder_holds_the_current_directory_is_used(stacks, closed_port, tmp_path, monkeypatch):
    for folder, expected in ((tmp_path / "two" / "src" / "deep", "two"), (tmp_path / "one", "one"),
                             (stacks["two"].state_dir, "two")):
        monkeypatch.chdir(folder)
        for args in (("status", JOB), ("webhooks", "secret", "--tenant", "acme")):
            result = _cli(*args)
            assert result.exit_code == 3 and _used(result, expected, closed_port), (folder, args, result.output)
        listed = _cli("dev", "status", "--json")
        assert json.loads(listed.stdout)["state_dir"] == str(stacks[expected].state_dir), listed.output
    # POOLQ_STACK wins over the current directory
    chosen = _cli("status", JOB, POOLQ_STACK="one")
    assert chosen.exit_code == 3 and _used(chosen, "one", closed_port), chosen.output


def test_a_stack_outside_a_poolq_folder_does_not_claim_its_parent(stacks, closed_port, tmp_path, monkeypatch):
    # A third stack whose state directory is plain/ (--dir plain): it holds plain/logs, not its siblings
    with stand_in_processes() as start:
        fake_stack(tmp_path / "plain", f"http://127.0.0.3:{closed_port}", start(), StackRegistry())
        (tmp_path / "plain" / "logs").mkdir()
        monkeypatch.chdir(tmp_path / "plain" / "logs")
        inside = _cli("status", JOB)
        assert inside.exit_code == 3 and f"127.0.0.3:{closed_port}" in inside.output, inside.output
        monkeypatch.chdir(tmp_path / "elsewhere")
        assert _cli("status", JOB).exit_code == 2  # three run, none holds elsewhere/


def test_with_several_and_none_chosen_the_message_lists_them_and_how_to_pick(stacks):
    result = _cli("webhooks", "secret", "--tenant", "acme")
    assert result.exit_code == 2 and result.stdout == ""  # `... | tail -1` gets nothing: the reason is on stderr
    first, second = stacks["one"].state_dir, stacks["two"].state_dir
    assert f"1. {first}" in result.stderr and f"2. {second}" in result.stderr
    assert f"POOLQ_STACK={first} main webhooks secret" in result.stderr  # a command line to copy
    assert "POOLQ_API_URL" in result.stderr and "from inside its folder" in result.stderr
