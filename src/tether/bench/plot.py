"""Figures from run directories (the seed's figures 2.8, 2.9 and 2.10).

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
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

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


def _mean_std(values: list[float]) -> tuple[float, float]:
    mean = statistics.fmean(values)
    return mean, statistics.stdev(values) if len(values) > 1 else 0.0


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
    """The numbers a figure plots, one row per group of runs."""
    groups: dict[tuple[Any, ...], list[float]] = defaultdict(list)
    for run in runs:
        if not run.summary.get('success'):
            continue
        if kind == 'makespan':
            groups[(run.app, run.executor, run.transformer)].append(run.summary['makespan'])
        elif kind == 'scaling':
            workers = run.summary.get('workers')
            value = _throughput(run)
            if run.app == 'synthetic' and workers and value is not None:
                groups[(run.executor, run.transformer, int(workers))].append(value)
        elif kind == 'data':
            size = run.config.get('app', {}).get('task_data_bytes')
            value = _round_trip(run)
            if run.app == 'synthetic' and size is not None and value is not None:
                groups[(run.executor, run.transformer, int(size))].append(value)
        else:
            raise ConfigError(f'unknown figure kind {kind!r}: makespan, scaling or data')
    names = {
        'makespan': ('app', 'executor', 'transformer'),
        'scaling': ('executor', 'transformer', 'workers'),
        'data': ('executor', 'transformer', 'bytes'),
    }[kind]
    value_name = {'makespan': 'makespan_s', 'scaling': 'tasks_per_s', 'data': 'round_trip_s'}[kind]
    rows = []
    for key, values in sorted(groups.items()):
        mean, std = _mean_std(values)
        rows.append(
            {
                **dict(zip(names, key, strict=True)),
                value_name: mean,
                'std': std,
                'runs': len(values),
            }
        )
    if not rows:
        raise ConfigError(f'no successful runs fit a {kind} figure')
    return rows


def _label(executor: str, transformer: str) -> str:
    return executor if transformer == 'none' else f'{executor} + {transformer}'


def plot(
    paths: Iterable[str | os.PathLike[str]],
    *,
    kind: str,
    output: str | os.PathLike[str],
    title: str | None = None,
) -> list[dict[str, Any]]:
    """Draw figure ``kind`` from the runs under ``paths`` to ``output``.png and .svg.

    Returns the plotted numbers (:func:`table`).
    """
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    rows = table(find_runs(paths), kind)
    fig, ax = plt.subplots(figsize=(7, 4))
    if kind == 'makespan':
        apps = sorted({r['app'] for r in rows})
        series = sorted({(r['executor'], r['transformer']) for r in rows})
        width = 0.8 / len(series)
        for i, (executor, transformer) in enumerate(series):
            xs, ys, errs = [], [], []
            for j, app in enumerate(apps):
                for r in rows:
                    if (r['app'], r['executor'], r['transformer']) == (app, executor, transformer):
                        xs.append(j + (i - (len(series) - 1) / 2) * width)
                        ys.append(r['makespan_s'])
                        errs.append(r['std'])
            ax.bar(xs, ys, width, yerr=errs, capsize=2, label=_label(executor, transformer))
        ax.set_xticks(range(len(apps)), apps)
        ax.set_ylabel('makespan (s)')
    else:
        x_name, y_name = (
            ('workers', 'tasks_per_s') if kind == 'scaling' else ('bytes', 'round_trip_s')
        )
        series = sorted({(r['executor'], r['transformer']) for r in rows})
        for executor, transformer in series:
            points = sorted(
                (r[x_name], r[y_name], r['std'])
                for r in rows
                if (r['executor'], r['transformer']) == (executor, transformer)
            )
            ax.errorbar(
                [p[0] for p in points],
                [p[1] for p in points],
                yerr=[p[2] for p in points],
                marker='o',
                capsize=2,
                label=_label(executor, transformer),
            )
        if kind == 'scaling':
            ax.set_xlabel('workers')
            ax.set_ylabel('throughput (tasks/s)')
            ax.set_xticks(sorted({r['workers'] for r in rows}))
        else:
            ax.set_xscale('log')
            ax.set_xlabel('task input and output size (bytes)')
            ax.set_ylabel('mean round-trip time (s)')
        ax.set_yscale('log')
    if title:
        ax.set_title(title)
    ax.legend(fontsize='small')
    ax.grid(True, which='major', alpha=0.3)
    fig.tight_layout()
    out = pathlib.Path(output)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out.with_name(out.name + '.png'), dpi=120)
    fig.savefig(out.with_name(out.name + '.svg'))
    plt.close(fig)
    return rows
