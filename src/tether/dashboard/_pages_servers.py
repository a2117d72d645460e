"""The servers' pages, from their Prometheus endpoints: node servers, endpoints and
their peers, relays, function services and endpoint agents, agent exchanges."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse

from tether.dashboard._html import esc, figure, page, table, when
from tether.dashboard._metrics import Scrape, mean_latency, rate
from tether.dashboard._state import State

__all__ = ['server_page', 'servers_page', 'servers_table']

# Gauges shown for a server of each kind: (metric, label to split by or '', caption).
GAUGES: dict[str, list[tuple[str, str, str]]] = {
    'node': [
        ('tether_objects', '', 'objects'),
        ('tether_objects_bytes', 'place', 'bytes held'),
        ('tether_clients', '', 'clients'),
        ('tether_peers', '', 'client hosts'),
    ],
    'endpoint': [
        ('tether_objects', '', 'objects'),
        ('tether_peers', 'path', 'peers by path'),
        ('tether_peer_bytes_total', 'path', 'bytes to peers by path'),
        ('tether_peer_requests_total', 'path', 'requests to peers by path'),
        ('tether_endpoint_passed_on_total', 'how', 'requests passed on'),
        ('tether_pending_requests', '', 'waiting on peers'),
    ],
    'relay': [
        ('tether_relay_endpoints', '', 'endpoints'),
        ('tether_relay_users', '', 'users'),
        ('tether_relay_tunnels', 'state', 'tunnels'),
        ('tether_relay_forwarded_bytes_total', '', 'bytes forwarded'),
    ],
    'faas': [
        ('tether_faas_endpoints_connected', '', 'endpoints connected'),
        ('tether_faas_tasks_submitting', '', 'tasks being submitted'),
    ],
    'faas-endpoint': [
        ('tether_faas_tasks', 'state', 'tasks'),
        ('tether_faas_workers', 'state', 'workers'),
        ('tether_faas_results_total', '', 'results'),
        ('tether_faas_connected', '', 'connected'),
    ],
    'agent-daemon': [
        ('tether_agents', 'status', 'agents'),
        ('tether_agent_restarts', '', 'restarts'),
        ('tether_agent_starts', '', 'starts'),
        ('tether_agent_requests_in_progress', '', 'requests running'),
        ('tether_agent_requests_queued', '', 'requests queued'),
        ('tether_agent_mailbox_messages', '', 'mailbox depth'),
    ],
    'steer': [
        ('tether_steer_tasks', 'state', 'tasks'),
        ('tether_steer_tasks_by_method', 'method', 'in flight by method'),
    ],
    'hosted-exchange': [
        ('tether_exchange_mailboxes', 'status', 'mailboxes'),
        ('tether_exchange_queued_messages', '', 'queued messages'),
        ('tether_exchange_queued_bytes', '', 'queued bytes'),
        ('tether_exchange_connections', '', 'connections'),
    ],
}


def _gauge_text(scrape: Scrape, metric: str, label: str) -> str:
    if scrape.total(metric) is None and scrape.total(f'{metric}_total') is not None:
        metric = f'{metric}_total'  # exported as a counter
    if label:
        parts = scrape.by(metric, label)
        return ', '.join(f'{k}: {v:,.0f}' for k, v in sorted(parts.items())) or '-'
    value = scrape.total(metric)
    return '-' if value is None else f'{value:,.0f}'


def _calls(scrape: Scrape, metric: str, label: str) -> list[list[Any]]:
    """A row per ``label`` value: it, its calls, errors and mean ms, from the counters
    ``{metric}s_total`` and ``{metric}_errors_total`` and the histogram ``{metric}_seconds``.
    """
    calls = scrape.by(f'{metric}s_total', label)
    errors = scrape.by(f'{metric}_errors_total', label)
    seconds = mean_latency(scrape, f'{metric}_seconds', label)
    return [
        [k, n, errors.get(k, 0), round(seconds[k] * 1e3, 3) if k in seconds else '']
        for k, n in sorted(calls.items())
    ]


def servers_table(state: State) -> str:
    rows: list[list[Any]] = []
    for target in state.config.metrics:
        s = state.scraper.latest(target.name)
        link = f'<a href="/servers/{esc(target.name)}">{esc(target.name)}</a>'
        if s is None:
            rows.append([(link, ''), ('not scraped yet', 'muted'), '', '', '', '', ''])
            continue
        if s.error:
            rows.append([(link, ''), (esc(s.error), 'bad'), '', '', '', '', when(s.at)])
            continue
        info = s.info()
        rows.append(
            [
                (link, ''),
                ('up', 'ok'),
                info.get('kind', ''),
                s.total('tether_requests_total') or 0,
                s.total('tether_request_errors_total') or 0,
                s.total('tether_request_bytes_total') or 0,
                when(s.at),
            ]
        )
    return table(
        ['server', 'state', 'kind', 'requests', 'errors', 'bytes', 'scraped (UTC)'],
        rows,
        'servers',
        'no servers: start with --metrics URL',
    )


async def servers_page(state: State, request: Request) -> HTMLResponse:
    body = servers_table(state) + '<div class="charts">'
    traces_req = []
    traces_bytes = []
    for target in state.config.metrics:
        history = list(state.scraper.history[target.name])
        x, y = rate(history, 'tether_requests_total')
        traces_req.append({'x': x, 'y': y, 'name': target.name})
        x, y = rate(history, 'tether_request_bytes_total')
        traces_bytes.append({'x': x, 'y': y, 'name': target.name})
    body += figure('servers-requests', 'Requests per second', traces_req, y_title='req/s')
    body += figure('servers-bytes', 'Payload bytes per second', traces_bytes, y_title='B/s')
    body += '</div>'
    return HTMLResponse(page('Servers', '/servers', body, state.config.page_refresh_s))


async def server_page(state: State, request: Request) -> HTMLResponse:
    name = request.path_params['name']
    if name not in state.scraper.history:
        return HTMLResponse(page('Server', '/servers', f'<p>No server {esc(name)}.</p>'), 404)
    history = list(state.scraper.history[name])
    latest = history[-1] if history else None
    if latest is None or latest.error:
        why = latest.error if latest else 'not scraped yet'
        body = f'<p class="error" id="server-error">{esc(why)}</p>'
        return HTMLResponse(page(name, '/servers', body, state.config.page_refresh_s))
    kind = latest.info().get('kind', '')
    facts: list[list[Any]] = [['kind', kind], ['scraped in (ms)', latest.seconds * 1e3]]
    facts += [
        [caption, _gauge_text(latest, m, label)] for m, label, caption in GAUGES.get(kind, [])
    ]
    op_rows = _calls(latest, 'tether_request', 'op')
    body = table(['', ''], facts, 'server') + '<h2>Operations</h2>'
    body += table(['operation', 'requests', 'errors', 'mean ms'], op_rows, 'ops', 'none yet')
    if kind == 'agent-daemon':
        rows = _calls(latest, 'tether_agent_action', 'action')
        body += '<h2>Actions</h2>'
        body += table(['action', 'calls', 'errors', 'mean ms'], rows, 'actions', 'none yet')
    body += '<div class="charts">'
    x, y = rate(history, 'tether_requests_total')
    body += figure('server-requests', 'Requests per second', [{'x': x, 'y': y, 'name': name}])
    if kind == 'endpoint':
        traces = []
        for path in sorted(latest.by('tether_peer_bytes_total', 'path')):
            x, y = rate(history, 'tether_peer_bytes_total', path=path)
            traces.append({'x': x, 'y': y, 'name': path})
        body += figure('server-peer-bytes', 'Bytes to peers per second, by path', traces)
    if kind == 'faas-endpoint':
        traces = []
        for st in ('workers', 'idle', 'pending'):
            pts = [(s.at, s.total('tether_faas_workers', state=st)) for s in history]
            xs = [t for t, v in pts if v is not None]
            ys = [v for _, v in pts if v is not None]
            traces.append({'x': xs, 'y': ys, 'name': st})
        body += figure('server-workers', 'Workers', traces)
    body += '</div>'
    return HTMLResponse(page(name, '/servers', body, state.config.page_refresh_s))
