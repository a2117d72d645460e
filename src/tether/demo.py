"""The main demo (``make demo`` / ``tether demo``): placeholder until the demo lands."""

from __future__ import annotations

import click

__all__ = ['demo_command', 'run_demo']


def run_demo(
    *, size_mb: int = 32, tasks: int = 8, workers: int = 2, as_json: bool = False
) -> None:
    """Run the demo pipeline."""
    raise NotImplementedError


@click.command('demo')
@click.option('--size-mb', default=32, show_default=True, help='Size of each array (MB).')
@click.option('--tasks', default=8, show_default=True, help='Tasks in each stage.')
@click.option('--workers', default=2, show_default=True, help='Worker processes.')
@click.option('--json', 'as_json', is_flag=True, help='Print the results as JSON.')
def demo_command(size_mb: int, tasks: int, workers: int, as_json: bool) -> None:
    """Run the main demo: a process-pool pipeline, by value and by proxy."""
    run_demo(size_mb=size_mb, tasks=tasks, workers=workers, as_json=as_json)
