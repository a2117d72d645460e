"""Steering campaigns and bench runs, from their result files."""

from __future__ import annotations

import statistics
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse

from tether.dashboard._html import esc, figure, page, table, when
from tether.dashboard._runs import bench_runs, steer_records, steer_series, step_series
from tether.dashboard._state import State

__all__ = ['bench_page', 'bench_run_page', 'steer_page']


async def steer_page(state: State, request: Request) -> HTMLResponse:
    if not state.config.steer_dirs:
        body = '<p class="muted">No campaigns: start with --steer DIR.</p>'
        return HTMLResponse(page('Steering', '/steer', body))
    body = ''
    for i, folder in enumerate(state.config.steer_dirs):
        records = steer_records(folder)
        flight, ranks = steer_series(records)
        by_topic: dict[str, list[int]] = {}
        for r in records:
            counts = by_topic.setdefault(str(r.get('topic') or 'default'), [0, 0])
            counts[0 if r.get('success') else 1] += 1
        rows = [[topic, ok, bad] for topic, (ok, bad) in sorted(by_topic.items())]
        body += f'<h2>{esc(folder)}</h2>'
        body += table(['topic', 'succeeded', 'failed'], rows, f'steer-{i}', 'no results yet')
        body += '<div class="charts">'
        body += figure(
            f'steer-{i}-flight',
            'Tasks in flight per topic',
            [{'x': x, 'y': y, 'name': t, 'line': {'shape': 'hv'}} for t, (x, y) in flight.items()],
            y_title='tasks',
        )
        body += figure(
            f'steer-{i}-ranks',
            'Resources in use per topic (ranks)',
            [
                {'x': x, 'y': y, 'name': t, 'line': {'shape': 'hv'}, 'stackgroup': 'ranks'}
                for t, (x, y) in ranks.items()
            ],
            y_title='ranks',
        )
        body += '</div>'
    return HTMLResponse(page('Steering', '/steer', body, state.config.page_refresh_s))


def _runs(state: State) -> dict[str, Any]:
    return {r.name: r for r in bench_runs(state.config.bench_dirs)}


async def bench_page(state: State, request: Request) -> HTMLResponse:
    runs = list(_runs(state).values())
    rows = []
    for r in runs:
        s = r.summary
        tasks = s.get('tasks') if isinstance(s.get('tasks'), dict) else {}
        assert isinstance(tasks, dict)
        ok = bool(s.get('success'))
        rows.append(
            [
                (f'<a href="/bench/{esc(r.name)}">{esc(r.name)}</a>', ''),
                s.get('app'),
                s.get('executor'),
                s.get('workers'),
                s.get('transformer') or '',
                round(float(s.get('makespan') or 0), 3),
                tasks.get('completed', tasks.get('total', '')),
                ('ok' if ok else esc(s.get('error') or 'failed'), 'ok' if ok else 'bad'),
                when(s.get('start_time')),
            ]
        )
    body = table(
        [
            'run',
            'app',
            'executor',
            'workers',
            'transformer',
            'makespan (s)',
            'tasks',
            'result',
            'started (UTC)',
        ],
        rows,
        'runs',
        'no runs: start with --bench DIR' if not state.config.bench_dirs else 'no runs yet',
    )
    by_group: dict[str, tuple[list[str], list[float]]] = {}
    for r in runs:
        key = f'{r.summary.get("app")} on {r.summary.get("executor")}'
        names, spans = by_group.setdefault(key, ([], []))
        names.append(r.name)
        spans.append(float(r.summary.get('makespan') or 0))
    traces = [{'type': 'bar', 'x': n, 'y': m, 'name': k} for k, (n, m) in by_group.items()]
    body += figure('bench-makespans', 'Makespan of each run (s)', traces, time_axis=False)
    return HTMLResponse(page('Bench runs', '/bench', body, state.config.page_refresh_s))


async def bench_run_page(state: State, request: Request) -> HTMLResponse:
    name = request.path_params['name']
    run = _runs(state).get(name)
    if run is None:
        return HTMLResponse(page('Bench run', '/bench', f'<p>No run {esc(name)}.</p>'), 404)
    facts = [
        [k, when(v) if k.endswith('_time') else v if isinstance(v, str | int | float) else str(v)]
        for k, v in run.summary.items()
    ]
    body = table(['', ''], facts, 'run-summary')
    tasks = run.tasks()
    trips = [
        float(t['received_time']) - float(t['submit_time'])
        for t in tasks
        if isinstance(t.get('received_time'), int | float)
        and isinstance(t.get('submit_time'), int | float)
    ]
    if trips:
        body += (
            f'<p id="run-tasks">{len(tasks)} tasks, median round trip '
            f'{statistics.median(trips) * 1e3:.2f} ms</p>'
        )
    starts = []
    for t in tasks:
        ex = t.get('execution') if isinstance(t.get('execution'), dict) else None
        if ex and isinstance(ex.get('execution_start_time'), int | float):
            starts.append((float(ex['execution_start_time']), 1.0))
            starts.append(
                (float(ex.get('execution_end_time') or ex['execution_start_time']), -1.0)
            )
    x, y = step_series(starts)
    body += '<div class="charts">'
    body += figure('run-running', 'Tasks running', [{'x': x, 'y': y, 'line': {'shape': 'hv'}}])
    body += figure(
        'run-trips',
        'Round trip of each task (ms)',
        [
            {
                'type': 'histogram',
                'x': [v * 1e3 for v in trips],
                'marker': {'line': {'width': 1, 'color': 'white'}},
            }
        ]
        if trips
        else [],
        'ms',
        time_axis=False,
    )
    body += '</div>'
    return HTMLResponse(page(f'Run {name}', '/bench', body))
