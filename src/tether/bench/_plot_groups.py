"""Which runs a figure may average: grouping by every parameter that differs.

A run's *parameters* are what it was run with: the app and its options, the executor and
its options, the transformer with its store's connector, the filter, and the number of
workers. Runs are averaged together only when every parameter is equal; a parameter that
differs between the runs of a figure (a failure type, a worker count, a store) keeps them
apart and is named in the figure's legend. A parameter that only ever changes along with
the figure's x axis (``max_threads`` beside ``workers`` in a scaling figure) is not a
series of its own; one that is the same in every run goes to the default title.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tether.exceptions import ConfigError

if TYPE_CHECKING:
    from tether.bench.plot import RunInfo

__all__ = ['KINDS', 'Figure', 'build_figure', 'parameters']

#: Figure kinds: (x parameter, value name, what a run needs to have a value).
KINDS: dict[str, tuple[str, str, str]] = {
    'makespan': ('app', 'makespan_s', 'a finished run'),
    'scaling': ('workers', 'tasks_per_s', 'a synthetic run with task records'),
    'data': ('app.task_data_bytes', 'round_trip_s', 'a synthetic run with task records'),
}

# Options that name where a run wrote or read files: they tell runs apart but never
# change what is measured.
_PATH_SUFFIXES = ('_dir', '_file', '_path', '_file_name', 'dir_format')
# The order parameters are named in, most telling first.
_ORDER = ('app', 'workers', 'executor', 'transformer', 'filter')


def _flatten(prefix: str, value: Any, out: dict[str, str]) -> None:
    if isinstance(value, dict):
        for key, inner in value.items():
            _flatten(f'{prefix}.{key}', inner, out)
    elif not prefix.endswith(_PATH_SUFFIXES):
        out[prefix] = value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def parameters(run: RunInfo) -> dict[str, str]:
    """Everything ``run`` was run with that may change what it measures, as strings."""
    out: dict[str, str] = {'app': run.app, 'executor': run.executor}
    out['transformer'] = run.transformer
    workers = run.summary.get('workers')
    if workers is not None:
        out['workers'] = str(workers)
    app = {k: v for k, v in run.config.get('app', {}).items() if k != 'name'}
    _flatten('app', app, out)
    engine = run.config.get('engine', {})
    for part in ('executor', 'transformer', 'filter'):
        section = engine.get(part)
        if isinstance(section, dict):
            _flatten(part, {k: v for k, v in section.items() if k != 'name'}, out)
            if part == 'filter' and 'name' in section:
                out['filter'] = str(section['name'])
    return out


def _sort_key(name: str) -> tuple[int, str]:
    head = name.split('.', 1)[0]
    return (_ORDER.index(head) if head in _ORDER else len(_ORDER), name)


@dataclasses.dataclass(eq=False)
class Figure:
    """The groups of one figure: ``rows`` (one per group), the parameters that tell the
    series apart (``varying``) and those every run shares (``common``)."""

    kind: str
    rows: list[dict[str, Any]]
    varying: list[str]
    common: dict[str, str]

    @property
    def x_name(self) -> str:
        """The parameter along the x axis."""
        return KINDS[self.kind][0]

    @property
    def value_name(self) -> str:
        """The name of the plotted value in each row."""
        return KINDS[self.kind][1]

    def default_title(self) -> str:
        """What every run of the figure shares, in a few words."""
        what = {
            'makespan': 'Makespan',
            'scaling': 'No-op throughput against workers',
            'data': 'Round-trip time against payload size',
        }[self.kind]
        shared = [
            f'{name}={self.common[name]}'
            for name in sorted(self.common, key=_sort_key)
            if name in ('app', 'executor', 'transformer', 'workers')
        ]
        return f'{what} ({", ".join(shared)})' if shared else what


def _determined_by(name: str, x_name: str, params: list[dict[str, str]]) -> bool:
    """Whether parameter ``name`` has one value for each value of the x parameter."""
    seen: dict[str | None, str | None] = {}
    for p in params:
        x = p.get(x_name)
        if seen.setdefault(x, p.get(name)) != p.get(name):
            return False
    return True


def _series_parameters(params: list[dict[str, str]], x_name: str) -> list[str]:
    """The parameters that differ between runs and are not fixed by the x value; of
    several that split the runs the same way, the first (most telling) alone."""
    names = sorted({k for p in params for k in p}, key=_sort_key)
    out: list[str] = []
    partitions: set[tuple[str | None, ...]] = set()
    for name in names:
        values = [p.get(name) for p in params]
        if name == x_name or len(set(values)) == 1 or _determined_by(name, x_name, params):
            continue
        # Runs split the same way by an earlier name: this one adds nothing to a label.
        index: dict[str | None, int] = {}
        partition = tuple(str(index.setdefault(v, len(index))) for v in values)
        if partition in partitions:
            continue
        partitions.add(partition)
        out.append(name)
    return out


def build_figure(
    runs: list[RunInfo],
    kind: str,
    value_of: Callable[[RunInfo], float | None],
) -> Figure:
    """Group ``runs`` for figure ``kind``; ``value_of`` gives a run's value (``None``:
    the run has no data for this figure)."""
    if kind not in KINDS:
        raise ConfigError(f'unknown figure kind {kind!r}: makespan, scaling or data')
    x_name, value_name, needs = KINDS[kind]
    fitting: list[tuple[RunInfo, dict[str, str], float | None]] = []
    passed_over: list[str] = []
    for run in runs:
        params = parameters(run)
        if x_name not in params or (kind != 'makespan' and run.app != 'synthetic'):
            passed_over.append(f'{run.path.name} ({run.app})')
            continue
        value = value_of(run) if run.summary.get('success') else None
        if value is None and run.summary.get('success'):
            passed_over.append(f'{run.path.name} (no task records)')
            continue
        fitting.append((run, params, value))
    if not any(value is not None for _, _, value in fitting):
        detail = f'; passed over: {", ".join(passed_over)}' if passed_over else ''
        failed = sum(1 for _, _, value in fitting if value is None)
        detail += f'; {failed} failed run(s)' if failed else ''
        raise ConfigError(f'no run fits a {kind} figure: it needs {needs}{detail}')
    all_params = [params for _, params, _ in fitting]
    varying = _series_parameters(all_params, x_name)
    common = {k: v for k, v in all_params[0].items() if all(p.get(k) == v for p in all_params[1:])}
    groups: dict[tuple[str | None, ...], list[tuple[RunInfo, float | None]]] = defaultdict(list)
    firsts: dict[tuple[str | None, ...], dict[str, str]] = {}
    key_names = [x_name, *varying]
    for run, params, value in fitting:
        key = tuple(params.get(k) for k in key_names)
        groups[key].append((run, value))
        firsts.setdefault(key, params)
    rows = [
        _row(key_names, key, members, value_name, firsts[key]) for key, members in groups.items()
    ]
    rows.sort(key=lambda r: tuple(_order_value(r[k]) for k in key_names))
    return Figure(kind, rows, varying, common)


def _order_value(value: Any) -> tuple[int, float, str]:
    if isinstance(value, int | float):
        return (0, float(value), '')
    return (1, 0.0, str(value))


def _typed(value: str | None) -> Any:
    if value is None:
        return None
    try:
        number = json.loads(value)
    except ValueError:
        return value
    return number if isinstance(number, int | float) and not isinstance(number, bool) else value


def _row(
    key_names: list[str],
    key: tuple[str | None, ...],
    members: list[tuple[RunInfo, float | None]],
    value_name: str,
    params: dict[str, str],
) -> dict[str, Any]:
    values = [v for _, v in members if v is not None]
    failed = [run for run, v in members if v is None]
    # The basic names are in every row (the numbers of a figure read alone); the
    # parameters that set the group apart follow.
    row: dict[str, Any] = {name: _typed(params.get(name)) for name in _ORDER if name in params}
    row.update({name: _typed(k) for name, k in zip(key_names, key, strict=True)})
    if key_names[0] == 'app.task_data_bytes':
        row['bytes'] = row[key_names[0]]
    row[value_name] = statistics.fmean(values) if values else None
    row['std'] = statistics.stdev(values) if len(values) > 1 else 0.0
    row['runs'] = len(values)
    row['failed_runs'] = len(failed)
    if failed:
        row['errors'] = [str(run.summary.get('error') or 'failed') for run in failed]
    return row
