"""``tether shm``: manage shared-memory objects of the SharedMemoryConnector."""

from __future__ import annotations

import click

__all__ = ['shm']


@click.group()
def shm() -> None:
    """Manage shared-memory objects of the SharedMemoryConnector."""


@shm.command('clean')
@click.option('--namespace', default=None, help='Only this namespace (default: all).')
def shm_clean(namespace: str | None) -> None:
    """Remove leftover tether shared-memory segments (under /dev/shm)."""
    from tether.connectors.shared_memory import cleanup

    n = cleanup(namespace)
    click.echo(f'removed {n} shared-memory segment(s)')
