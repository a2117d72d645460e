"""The ``tether`` command line.

Each subcommand lives in the module that owns it and is imported only when used (so
``tether --help`` stays fast). To add one, add a line to ``_SUBCOMMANDS``:
``'name': 'module.path:click_object'``.
"""

from __future__ import annotations

import importlib
from typing import Any

import click

__all__ = ['cli', 'main']

_SUBCOMMANDS: dict[str, str] = {
    'agents': 'tether.agents.cli:agents',
    'bench': 'tether.bench.run.cli:bench',
    'dashboard': 'tether.dashboard.cli:dashboard',
    'demo': 'tether.demo:demo_command',
    'endpoint': 'tether.endpoint.cli:endpoint',
    'faas': 'tether.faas.cli:faas',
    'node': 'tether.node.cli:node',
    'relay': 'tether.relay.cli:relay',
    'shm': 'tether.connectors._shm_cli:shm',
}


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *_SUBCOMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        path = _SUBCOMMANDS.get(cmd_name)
        if path is None:
            return super().get_command(ctx, cmd_name)
        module, _, attr = path.partition(':')
        command: Any = getattr(importlib.import_module(module), attr)
        return command  # type: ignore[no-any-return]


@click.group(cls=_LazyGroup, context_settings={'help_option_names': ['-h', '--help']})
@click.version_option(package_name='tether')
def cli() -> None:
    """tether: pass-by-reference data flow for distributed Python."""


def main() -> None:
    """Entry point of the ``tether`` console script."""
    cli()
