"""``tether shm``: manage shared-memory objects of the SharedMemoryConnector."""

from __future__ import annotations

import click

__all__ = ['shm']


@click.group()
def shm() -> None:
    """Manage shared-memory objects of the SharedMemoryConnector."""


def _namespace(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    from tether.connectors.shared_memory import check_namespace

    if value is None:
        return None
    try:
        return check_namespace(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from e


@shm.command('clean')
@click.option(
    '--namespace', default=None, callback=_namespace, help='Only this namespace (default: all).'
)
@click.option('--list', 'list_only', is_flag=True, help='List the segments; remove nothing.')
@click.option('--dry-run', is_flag=True, help='Show what would be removed; remove nothing.')
def shm_clean(namespace: str | None, list_only: bool, dry_run: bool) -> None:
    """Remove leftover tether shared-memory segments (under /dev/shm).

    \b
    Examples:
      tether shm clean --list
      tether shm clean --namespace myapp --dry-run
      tether shm clean --namespace myapp
    """
    from tether.connectors.shared_memory import cleanup, segments

    if list_only or dry_run:
        found = segments(namespace)
        for name, size in found:
            click.echo(f'{name}\t{size} bytes')
        total = sum(size for _, size in found)
        verb = 'would remove' if dry_run else 'found'
        click.echo(f'{verb} {len(found)} shared-memory segment(s), {total} bytes')
        return
    n = cleanup(namespace)
    click.echo(f'removed {n} shared-memory segment(s)')
