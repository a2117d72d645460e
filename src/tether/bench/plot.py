"""Figures from run directories (the seed's figures 2.8, 2.9 and 2.10).

Runs are averaged together only when they were run with the same parameters (app options,
executor and its options, transformer and its store, filter, workers): the legend names
each parameter that differs (see :mod:`tether.bench._plot_groups`).

* ``makespan``: mean makespan (error bars: standard deviation over runs) of each app on
  each executor, as grouped bars (figure 2.8).
* ``scaling``: task throughput (tasks/s, from the records: tasks over the time from the
  first submission to the last result) of synthetic runs against the number of workers,
  one line per executor (figure 2.9).
* ``data``: mean task round-trip time (record ``received_time - submit_time``) of
  synthetic runs against the payload size, one line per executor and transformer
  (figure 2.10).

Run directories are read as plain JSON and TOML (nothing is unpickled or imported).
Needs matplotlib (``pip install "tether[bench]"``).
"""

from __future__ import annotations

import json
import os
import pathlib
import statistics
from collections.abc import Callable, Iterable
from typing import Any

from tether.bench._plot_groups import Figure, build_figure
from tether.bench.record import read_records
from tether.bench.run.config import load_toml
from tether.exceptions import ConfigError

__all__ = ['RunInfo', 'find_runs', 'plot', 'table']


class RunInfo:
    """What a plot needs from one run directory."""

    def __init__(self, path: pathlib.Path) -> None:
        self.path = path
        try:
            self.summary: dict[str, Any] = json.loads((path / 'summary.json').read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise ConfigError(f'{path} is not a run directory (summary.json): {e}') from e
        config_path = path / 'config.toml'
        self.config = load_toml(config_path) if config_path.exists() else {}
        engine = self.config.get('engine', {})
        self.records_file = path / engine.get('task_record_file_name', 'tasks.jsonl')

    @property
    def app(self) -> str:
        """The app's name."""
        return str(self.summary['app'])

    @property
    def executor(self) -> str:
        """The executor's name."""
        return str(self.summary['executor'])

    @property
    def transformer(self) -> str:
        """The transformer's name (``'none'``)."""
        return str(self.summary.get('transformer') or 'none')

    def records(self) -> list[dict[str, Any]]:
        """The task records."""
        if not self.records_file.exists():
            return []
        return list(read_records(self.records_file))


def find_runs(paths: Iterable[str | os.PathLike[str]]) -> list[RunInfo]:
    """Run directories among ``paths`` and below them (those with a ``summary.json``)."""
    found: list[RunInfo] = []
    for p in paths:
        path = pathlib.Path(p)
        if (path / 'summary.json').exists():
            found.append(RunInfo(path))
        else:
            found.extend(RunInfo(s.parent) for s in sorted(path.rglob('summary.json')))
    if not found:
        raise ConfigError('no run directories (with a summary.json) found')
    return found


def _throughput(run: RunInfo) -> float | None:
    records = [r for r in run.records() if r['success']]
    if not records:
        return None
    span = max(r['received_time'] for r in records) - min(r['submit_time'] for r in records)
    return len(records) / span if span > 0 else None


def _round_trip(run: RunInfo) -> float | None:
    times = [r['received_time'] - r['submit_time'] for r in run.records() if r['success']]
    return statistics.fmean(times) if times else None


def table(runs: list[RunInfo], kind: str) -> list[dict[str, Any]]:
    """The numbers a figure plots, one row per group of runs with equal parameters.

    Each row has the basic names (``app``, ``executor``, ``transformer``, ``workers``),
    the figure's x value, every parameter that tells its group apart from the others
    (see :mod:`tether.bench._plot_groups`), the mean value and its ``std`` over ``runs``
    runs, and ``failed_runs`` (with their ``errors``): a group whose runs all failed has
    the value ``None``.
    """
    return _figure(runs, kind).rows


def _figure(runs: list[RunInfo], kind: str) -> Figure:
    value_of: dict[str, Callable[[RunInfo], float | None]] = {
        'makespan': lambda run: float(run.summary['makespan']),
        'scaling': _throughput,
        'data': _round_trip,
    }
    if kind not in value_of:
        raise ConfigError(f'unknown figure kind {kind!r}: makespan, scaling or data')
    return build_figure(runs, kind, value_of[kind])


def _label(row: dict[str, Any], names: list[str]) -> str:
    parts = [f'{_short(name)}={row[name]}' for name in names if row.get(name) is not None]
    return ', '.join(parts) or 'all runs'


def _short(name: str) -> str:
    return name.removeprefix('app.')


def _plain(value: float, _pos: object = None) -> str:
    """A tick label without powers of ten or offsets."""
    return f'{value:,.6g}'


def _bytes_label(value: float, _pos: object = None) -> str:
    for unit, size in (('GB', 1e9), ('MB', 1e6), ('kB', 1e3)):
        if value >= size:
            return f'{value / size:g} {unit}'
    return f'{value:g} B'


def plot(
    paths: Iterable[str | os.PathLike[str]],
    *,
    kind: str,
    output: str | os.PathLike[str],
    title: str | None = None,
) -> list[dict[str, Any]]:
    """Draw figure ``kind`` from the runs under ``paths`` to ``output``.png and .svg.

    Runs are averaged only when every parameter is equal; the legend names the
    parameters that differ (its title lists them), and the default title what every run
    shares. Returns the numbers (:func:`table`), failed runs included; raises
    :class:`~tether.exceptions.ConfigError` (and writes nothing) when no run has data
    for the figure.
    """
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    figure = _figure(find_runs(paths), kind)
    rows = [r for r in figure.rows if r[figure.value_name] is not None]
    names = figure.varying
    series = sorted({_label(r, names) for r in rows})
    fig, ax = plt.subplots(figsize=(11, 4.5))
    if kind == 'makespan':
        _draw_bars(ax, rows, series, names)
    else:
        _draw_lines(ax, rows, series, names, figure)
        ax.set_yscale('log')
        ax.yaxis.set_major_formatter(FuncFormatter(_plain))
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda _v, _p: ''))
    ax.set_title(title or figure.default_title(), fontsize='medium')
    legend_title = ('runs differ in: ' + ', '.join(_short(n) for n in names)) if names else None
    # Beside the axes, so that it never hides a bar or a point.
    ax.legend(
        fontsize='small',
        title=legend_title,
        title_fontsize='small',
        loc='upper left',
        bbox_to_anchor=(1.01, 1.0),
        alignment='left',
    )
    ax.grid(True, which='major', alpha=0.3)
    fig.tight_layout()
    out = pathlib.Path(output)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out.with_name(out.name + '.png'), dpi=120)
    # Text stays text in the SVG (searchable, editable), not outlines.
    with matplotlib.rc_context({'svg.fonttype': 'none'}):
        fig.savefig(out.with_name(out.name + '.svg'))
    plt.close(fig)
    return figure.rows


def _draw_bars(ax: Any, rows: list[dict[str, Any]], series: list[str], names: list[str]) -> None:
    from matplotlib.ticker import FuncFormatter

    apps = sorted({r['app'] for r in rows})
    colours = {label: f'C{i % 10}' for i, label in enumerate(series)}
    per_app = {app: [r for r in rows if r['app'] == app] for app in apps}
    width = 0.8 / max(len(group) for group in per_app.values())
    shown: set[str] = set()
    for j, app in enumerate(apps):
        # The bars of one app sit side by side, centred on its tick.
        group = sorted(per_app[app], key=lambda r: series.index(_label(r, names)))
        for i, r in enumerate(group):
            label = _label(r, names)
            bars = ax.bar(
                [j + (i - (len(group) - 1) / 2) * width],
                [r['makespan_s']],
                width,
                yerr=[r['std']],
                capsize=2,
                color=colours[label],
                label=None if label in shown else label,
            )
            shown.add(label)
            # Each bar says its value, so a small bar beside a large one is still read.
            ax.bar_label(bars, labels=[f'{r["makespan_s"]:.3g}'], fontsize='x-small', padding=2)
    values = [r['makespan_s'] for r in rows if r['makespan_s'] > 0]
    if values and max(values) / min(values) > 50:
        ax.set_yscale('log')
    ax.yaxis.set_major_formatter(FuncFormatter(_plain))
    ax.set_xticks(range(len(apps)), apps)
    ax.set_ylabel('makespan (s)')


def _draw_lines(
    ax: Any, rows: list[dict[str, Any]], series: list[str], names: list[str], figure: Figure
) -> None:
    from matplotlib.ticker import FixedLocator, FuncFormatter

    x_name, y_name = figure.x_name, figure.value_name
    for label in series:
        points = sorted(
            (r[x_name], r[y_name], r['std']) for r in rows if _label(r, names) == label
        )
        ax.errorbar(
            [p[0] for p in points],
            [p[1] for p in points],
            yerr=[p[2] for p in points],
            marker='o',
            capsize=2,
            label=label,
        )
    xs = sorted({r[x_name] for r in rows})
    if figure.kind == 'scaling':
        ax.set_xlabel('workers')
        ax.set_ylabel('throughput (tasks/s)')
        ax.set_xticks(xs)
        ax.xaxis.set_major_formatter(FuncFormatter(_plain))
    else:
        ax.set_xscale('log')
        ax.xaxis.set_major_locator(FixedLocator([x for x in xs if x > 0]))
        ax.xaxis.set_major_formatter(FuncFormatter(_bytes_label))
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda _v, _p: ''))
        ax.set_xlabel('task input and output size')
        ax.set_ylabel('mean round-trip time (s)')
