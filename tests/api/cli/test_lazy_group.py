"""The CLI imports a command's module only when that command runs, and every command still answers."""
import subprocess
import sys

import click
import pytest

from poolq.api.cli.lazy_group import LazyGroup
from poolq.api.cli.main import LAZY_COMMANDS, main

HEAVY = ("poolq.api.client.poolq_client", "poolq.api.server.schemas", "poolq.api.cli.output")


def test_a_dev_command_imports_neither_the_http_client_nor_the_servers_schemas(tmp_path):
    probe = ("import sys\nfrom poolq.api.cli.main import main\n"
             f"try:\n    main(['dev', 'status', '--dir', {str(tmp_path)!r}, '--json'], standalone_mode=False)\n"
             "except SystemExit:\n    pass\n"
             f"print(sorted(name for name in {HEAVY!r} if name in sys.modules))")
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().splitlines()[-1] == "[]", run.stdout


@pytest.mark.parametrize("name", sorted(LAZY_COMMANDS))
def test_every_lazy_name_resolves_to_its_command(name):
    command = main.get_command(click.Context(main), name)
    assert isinstance(command, click.Command) and command.name == name
    assert name in main.list_commands(click.Context(main))


def test_a_name_mapped_to_another_command_is_refused():
    group = LazyGroup(lazy_commands={"status": "poolq.api.cli.commands.job_commands:submit"})
    with pytest.raises(TypeError, match="not the click command 'status'"):
        group.get_command(click.Context(group), "status")
