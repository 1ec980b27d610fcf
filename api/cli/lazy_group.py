"""A click group that imports a subcommand's module only when that subcommand runs.

``poolq dev status`` should not import the HTTP client, the server's schemas and the output
helpers that ``poolq results`` needs: every CLI call, and every worker and beat process the CLI
starts, paid for all of them. This is click's documented pattern for lazily loaded subcommands:
the group knows each name and where it lives; ``--help`` still lists all of them (and imports them too).
"""
from __future__ import annotations

import importlib

import click


class LazyGroup(click.Group):
    def __init__(self, *args, lazy_commands: dict[str, str] | None = None, **kwargs) -> None:
        """``lazy_commands``: command name -> ``"module:attribute"`` of its click command."""
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy_commands and cmd_name not in self.commands:
            module_name, attribute = self.lazy_commands[cmd_name].split(":")
            command = getattr(importlib.import_module(module_name), attribute)
            if not isinstance(command, click.Command) or command.name != cmd_name:
                raise TypeError(f"{self.lazy_commands[cmd_name]} is not the click command {cmd_name!r}")
            self.add_command(command)
        return super().get_command(ctx, cmd_name)
