"""The function service's pages: endpoints, tasks (filtered) and one task."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse

from tether.dashboard._faas import TASK_STATES, filter_tasks
from tether.dashboard._html import esc, figure, page, table, when
from tether.dashboard._state import State
from tether.exceptions import FaasError

__all__ = ['endpoints_table', 'faas_page', 'task_page']

# The stages of a task's timings, in order, and the name of the span that ends at each.
STAGES = (
    ('client_submit', ''),
    ('service_received', 'to the service'),
    ('service_queued', 'service: stored'),
    ('service_dispatched', 'queue to the endpoint'),
    ('endpoint_received', 'to the endpoint'),
    ('worker_start', 'endpoint to worker'),
    ('worker_end', 'function'),
    ('endpoint_sent', 'worker to endpoint'),
    ('service_result', 'back to the service'),
    ('service_published', 'service: result stored'),
    ('service_sent', 'queue to the client'),
    ('client_received', 'to the client'),
)


def _link(href: str, text: str) -> str:
    return f'<a href="{esc(href)}">{esc(text)}</a>'


def endpoints_table(endpoints: list[dict[str, Any]]) -> str:
    rows = []
    for e in endpoints:
        info = e.get('info') if isinstance(e.get('info'), dict) else {}
        assert isinstance(info, dict)
        state = 'online' if e.get('online') else 'offline'
        rows.append(
            [
                (_link(f'/faas?endpoint={e.get("endpoint_id")}', str(e.get('name'))), ''),
                (esc(state), state),
                info.get('engine', ''),
                info.get('managers', ''),
                info.get('blocks', '') if info.get('blocks') is not None else '',
                _int(info.get('workers')),
                _int(info.get('idle')),
                _int(e.get('queued')),
                _int(e.get('running')),
                when(e.get('last_seen')),
            ]
        )
    return table(
        [
            'endpoint',
            'status',
            'engine',
            'managers',
            'blocks',
            'workers',
            'idle',
            'queued',
            'running',
            'last seen (UTC)',
        ],
        rows,
        'endpoints',
        'no endpoints',
    )


def _int(value: Any) -> Any:
    return value if isinstance(value, int | float) else ''


def _select(name: str, options: list[tuple[str, str]], chosen: str) -> str:
    opts = ['<option value="">any</option>']
    for value, label in options:
        sel = ' selected' if value == chosen else ''
        opts.append(f'<option value="{esc(value)}"{sel}>{esc(label)}</option>')
    select = f'<select name="{esc(name)}" id="filter-{esc(name)}">{"".join(opts)}</select>'
    return f'<label>{esc(name)} {select}</label>'


async def faas_page(state: State, request: Request) -> HTMLResponse:
    if state.faas is None:
        body = '<p class="muted">No function service: start with --faas-url.</p>'
        return HTMLResponse(page('Functions', '/faas', body))
    q = request.query_params
    chosen_state = q.get('state', '')[:40]
    chosen_fn = q.get('function', '')[:200]
    chosen_ep = q.get('endpoint', '')[:64]
    try:
        me, endpoints, tasks = await asyncio.gather(
            state.faas.whoami(), state.faas.endpoints(), state.faas.tasks()
        )
    except FaasError as e:
        body = f'<p class="error" id="faas-error">{esc(e)}</p>'
        return HTMLResponse(page('Functions', '/faas', body, state.config.page_refresh_s))
    names = {str(e.get('endpoint_id')): str(e.get('name')) for e in endpoints}
    shown = filter_tasks(tasks, chosen_state, chosen_fn, chosen_ep)
    counts: dict[str, int] = {}
    for t in tasks:
        counts[str(t.get('status'))] = counts.get(str(t.get('status')), 0) + 1
    form = (
        '<form class="filters" method="get" action="/faas">'
        + _select('state', [(s, s) for s in TASK_STATES], chosen_state)
        + '<label>function <input name="function" id="filter-function" '
        + f'value="{esc(chosen_fn)}"></label>'
        + _select('endpoint', sorted(names.items(), key=lambda kv: kv[1]), chosen_ep)
        + '<button type="submit" id="filter-apply">Filter</button> '
        + '<a href="/faas">clear</a></form>'
    )
    rows = [
        [
            (_link(f'/faas/tasks/{t.get("task_id")}', str(t.get('task_id'))[:8]), 'task'),
            t.get('function_name') or str(t.get('function_id'))[:8],
            names.get(str(t.get('endpoint_id')), str(t.get('endpoint_id'))[:8]),
            (esc(t.get('status')), str(t.get('status'))),
            when(t.get('created')),
            _duration(t.get('created'), t.get('finished')),
        ]
        for t in shown[:500]
    ]
    summary = ', '.join(f'{esc(k)}: {v}' for k, v in sorted(counts.items())) or 'no tasks'
    body = (
        f'<p>User <b id="faas-user">{esc(me.get("name"))}</b> at {esc(state.faas.url)}</p>'
        f'<h2>Endpoints</h2>{endpoints_table(endpoints)}'
        f'<h2>Tasks</h2><p id="task-counts">Latest {len(tasks)} tasks: {summary}</p>{form}'
        f'<p class="muted">{len(shown)} shown</p>'
        + table(
            ['task', 'function', 'endpoint', 'state', 'submitted (UTC)', 'took (s)'],
            rows,
            'tasks',
            'no tasks match',
        )
    )
    return HTMLResponse(page('Functions', '/faas', body, state.config.page_refresh_s))


def _duration(start: Any, end: Any) -> Any:
    if isinstance(start, int | float) and isinstance(end, int | float) and end >= start:
        return round(end - start, 4)
    return ''


async def task_page(state: State, request: Request) -> HTMLResponse:
    task_id = request.path_params['task_id']
    if state.faas is None:
        return HTMLResponse(page('Task', '/faas', '<p>No function service.</p>'), 404)
    try:
        task = await state.faas.task(task_id)
    except FaasError as e:
        return HTMLResponse(page('Task', '/faas', f'<p class="error">{esc(e)}</p>'), 502)
    if task is None:
        body = f'<p class="error" id="not-found">No task {esc(task_id)} of yours.</p>'
        return HTMLResponse(page('Task', '/faas', body), 404)
    status = str(task.get('status'))
    facts: list[list[Any]] = [
        ['task', task.get('task_id')],
        ['state', (esc(status), status)],
        ['function', task.get('function_id')],
        ['endpoint', task.get('endpoint_id')],
        ['task group', task.get('task_group_id')],
        ['submitted (UTC)', when(task.get('created'))],
        ['finished (UTC)', when(task.get('finished'))],
        ['attempts', task.get('attempts')],
    ]
    if task.get('block'):
        facts.append(['where', json.dumps(task['block'])])
    body = table(['', ''], facts, 'task')
    error = task.get('error')
    if isinstance(error, dict):
        body += (
            f'<h2>Error</h2><p class="error" id="task-error">{esc(error.get("type"))}: '
            f'{esc(error.get("message"))}</p>'
            f'<pre id="task-traceback">{esc(error.get("traceback"))}</pre>'
        )
    for stream in ('stdout', 'stderr'):
        text = task.get(stream)
        shown = esc(text) if text else '<span class="muted">(nothing)</span>'
        body += f'<h2>{stream}</h2><pre id="task-{stream}">{shown}</pre>'
    timings = task.get('timings') if isinstance(task.get('timings'), dict) else {}
    assert isinstance(timings, dict)
    body += '<h2>Timings</h2>' + _timings(timings)
    return HTMLResponse(page(f'Task {task_id[:8]}', '/faas', body))


def _timings(t: dict[str, Any]) -> str:
    """The spans between consecutive stamps, as a table and a bar chart."""
    stamps = [(k, label, t[k]) for k, label in STAGES if isinstance(t.get(k), int | float)]
    rows = []
    names, values = [], []
    for (_, _, before), (key, label, at) in itertools.pairwise(stamps):
        ms = (at - before) * 1e3
        rows.append([label or key, round(ms, 3)])
        names.append(label or key)
        values.append(ms)
    chart = figure(
        'task-timings',
        'Where the time went (ms)',
        [{'type': 'bar', 'x': values, 'y': names, 'orientation': 'h'}] if values else [],
        'ms',
        time_axis=False,
    )
    return table(['span', 'ms'], rows, 'timings', 'no timings') + chart
