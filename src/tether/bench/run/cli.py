"""``tether bench``: run benchmarks, list plugins, plot figures from run directories."""

from __future__ import annotations

import json
import pathlib
import re
import sys
from typing import Any

import click

from tether.exceptions import ConfigError

__all__ = ['bench']


@click.group(context_settings={'help_option_names': ['-h', '--help']})
def bench() -> None:
    """The task performance suite: any app on any executor, with records of every task."""


@bench.command(
    'run',
    context_settings={'ignore_unknown_options': True, 'allow_extra_args': True},
    add_help_option=False,
)
@click.argument('args', nargs=-1, type=click.UNPROCESSED)
def _run_command(args: tuple[str, ...]) -> None:
    """Run an app: --app NAME [--executor X] [-c a.toml ...] [--app.OPTION V ...] (--help)."""
    from tether.bench.logging import init_logging, remove_logging
    from tether.bench.run import BenchmarkConfig, make_run_dir, run
    from tether.bench.run._options import parse_run_args

    try:
        parsed = parse_run_args(args)
        if parsed.help is not None:
            click.echo(parsed.help)
            return
        config = BenchmarkConfig.from_dict(parsed.config)
    except ConfigError as e:
        raise click.UsageError(str(e)) from e
    run_dir = make_run_dir(config)
    init_logging(
        run_dir / config.logging.file_name,
        level=config.logging.level,
        logfile_level=config.logging.file_level,
    )
    show = parsed.progress if parsed.progress is not None else sys.stderr.isatty()
    try:
        summary = run(config, run_dir, show_progress=show and not parsed.json_output)
    except Exception as e:
        raise click.ClickException(f'the run failed ({run_dir}): {type(e).__name__}: {e}') from e
    finally:
        remove_logging()
    if parsed.json_output:
        click.echo(json.dumps(summary, indent=2))
    else:
        click.echo(f'{summary["app"]} on {summary["executor"]}: {summary["makespan"]:.3f} s')
        click.echo(f'run directory: {run_dir}')


@bench.command('list')
@click.option('--json', 'as_json', is_flag=True, help='print JSON')
def _list_command(as_json: bool) -> None:
    """List the apps, executors, transformers and filters (and the unavailable ones)."""
    from tether.bench.registry import KINDS, Kind, get_plugin, plugin_names

    out: dict[str, Any] = {}
    kind: Kind
    for kind in KINDS:
        entries = []
        for name in plugin_names(kind):
            try:
                cls = get_plugin(kind, name)
                doc = (cls.__doc__ or '').strip().splitlines()[0] if cls.__doc__ else ''
                doc = re.sub(r':\w+:`~?([^`]+)`', r'\1', doc).replace('``', '')
                entries.append({'name': name, 'description': doc, 'available': True})
            except ConfigError as e:
                entries.append({'name': name, 'description': str(e), 'available': False})
        out[kind] = entries
    if as_json:
        click.echo(json.dumps(out, indent=2))
        return
    for kind_name, kind_entries in out.items():
        click.echo(f'{kind_name}s:')
        for entry in kind_entries:
            mark = '' if entry['available'] else ' [unavailable]'
            click.echo(f'  {entry["name"]:<14} {entry["description"]}{mark}')


@bench.command('plot')
@click.argument(
    'runs', nargs=-1, required=True, type=click.Path(exists=True, path_type=pathlib.Path)
)
@click.option(
    '--kind',
    type=click.Choice(['makespan', 'scaling', 'data']),
    required=True,
    help='makespan per app and executor (fig. 2.8), no-op throughput against workers '
    '(fig. 2.9), or round-trip time against payload size (fig. 2.10)',
)
@click.option(
    '-o',
    '--output',
    type=click.Path(path_type=pathlib.Path),
    required=True,
    help='output path without suffix: writes OUTPUT.png and OUTPUT.svg',
)
@click.option('--title', default=None, help='figure title')
@click.option('--json', 'as_json', is_flag=True, help='print the plotted numbers as JSON')
def _plot_command(
    runs: tuple[pathlib.Path, ...],
    kind: str,
    output: pathlib.Path,
    title: str | None,
    as_json: bool,
) -> None:
    """Draw a figure from run directories (or folders holding run directories)."""
    from tether.bench.plot import plot

    try:
        table = plot(list(runs), kind=kind, output=output, title=title)
    except ConfigError as e:
        raise click.UsageError(str(e)) from e
    if as_json:
        click.echo(json.dumps(table, indent=2))
    else:
        click.echo(f'wrote {output}.png and {output}.svg')
