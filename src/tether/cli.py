"""The ``tether`` command line.

Subcommands are added by the modules that own them; each is imported only when used, so
``tether --help`` stays fast.
"""

from __future__ import annotations

import click

__all__ = ['cli', 'main']


@click.group(context_settings={'help_option_names': ['-h', '--help']})
@click.version_option(package_name='tether')
def cli() -> None:
    """tether: pass-by-reference data flow for distributed Python."""


@cli.command()
@click.option('--size-mb', default=32, show_default=True, help='Size of each array (MB).')
@click.option('--tasks', default=8, show_default=True, help='Tasks in each stage.')
@click.option('--workers', default=2, show_default=True, help='Worker processes.')
@click.option('--json', 'as_json', is_flag=True, help='Print the results as JSON.')
def demo(size_mb: int, tasks: int, workers: int, as_json: bool) -> None:
    """Run the main demo: a process-pool pipeline, by value and by proxy."""
    from tether.demo import run_demo

    run_demo(size_mb=size_mb, tasks=tasks, workers=workers, as_json=as_json)


@cli.group()
def shm() -> None:
    """Manage shared-memory objects of the SharedMemoryConnector."""


@shm.command('clean')
@click.option('--namespace', default=None, help='Only this namespace (default: all).')
def shm_clean(namespace: str | None) -> None:
    """Remove leftover tether shared-memory segments."""
    from tether.connectors.shared_memory import cleanup

    n = cleanup(namespace)
    click.echo(f'removed {n} shared-memory segment(s)')


def main() -> None:
    """Entry point of the ``tether`` console script."""
    cli()
