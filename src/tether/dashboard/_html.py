"""HTML of the dashboard's pages: the layout, tables and charts.

Every text from a server or a file is escaped here (:func:`esc`); charts are Plotly
figures written as JSON into ``<script type="application/json">`` elements that the
dashboard's own script (:data:`SCRIPT`) draws with the ``plotly.min.js`` shipped by the
``plotly`` package, served by the dashboard itself (no network needed).
"""

from __future__ import annotations

import datetime
import html
import json
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ['SCRIPT', 'STYLE', 'esc', 'figure', 'page', 'table', 'when']

NAV = (
    ('/', 'Overview'),
    ('/faas', 'Functions'),
    ('/servers', 'Servers'),
    ('/steer', 'Steering'),
    ('/bench', 'Bench runs'),
)

STYLE = """
body { font-family: system-ui, sans-serif; margin: 0; color: #222; }
header { background: #1f3b57; color: #fff; padding: 0.6em 1.5em; }
header a { color: #fff; margin-right: 1.2em; text-decoration: none; }
header a.here { border-bottom: 2px solid #fff; }
header .brand { font-weight: bold; margin-right: 2em; }
main { padding: 1em 1.5em; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 90%; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; }
th { background: #eef2f6; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.ok, .success, .online { color: #070; }
.bad, .failed, .offline { color: #a00; }
.running, .waiting-for-ep { color: #a60; }
.error { color: #a00; background: #fff0f0; padding: 0.5em; border: 1px solid #eaa; }
pre { background: #f6f6f6; padding: 0.6em; overflow-x: auto; max-height: 30em; }
.charts { display: flex; flex-wrap: wrap; gap: 1em; }
.chart { width: 560px; height: 300px; }
form.filters label { margin-right: 1em; }
.muted { color: #777; }
"""

SCRIPT = """"use strict";
document.querySelectorAll("script.figure").forEach(function (el) {
  var figure = JSON.parse(el.textContent);
  var div = document.createElement("div");
  div.className = "chart";
  div.id = el.id + "-chart";
  el.parentNode.insertBefore(div, el);
  Plotly.newPlot(div, figure.data, figure.layout, {displaylogo: false, responsive: true});
});
"""


def esc(value: Any) -> str:
    """``value`` as escaped HTML text (``None``: empty)."""
    return '' if value is None else html.escape(str(value))


def when(seconds: Any, fmt: str = '%Y-%m-%d %H:%M:%S') -> str:
    """A UNIX time as ``YYYY-MM-DD HH:MM:SS`` (UTC)."""
    if not isinstance(seconds, int | float) or seconds <= 0:
        return ''
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime(fmt)


def table(
    headers: Sequence[str], rows: Iterable[Sequence[Any]], table_id: str = '', empty: str = ''
) -> str:
    """A table; a cell is escaped text, or ``(html, class)`` of trusted HTML."""
    out = [f'<table id="{esc(table_id)}">' if table_id else '<table>', '<thead><tr>']
    out += [f'<th>{esc(h)}</th>' for h in headers]
    out.append('</tr></thead><tbody>')
    count = 0
    for row in rows:
        count += 1
        out.append('<tr>')
        for cell in row:
            if isinstance(cell, tuple):
                out.append(f'<td class="{esc(cell[1])}">{cell[0]}</td>')
            elif isinstance(cell, int | float) and not isinstance(cell, bool):
                out.append(f'<td class="num">{esc(_number(cell))}</td>')
            else:
                out.append(f'<td>{esc(cell)}</td>')
        out.append('</tr>')
    if not count and empty:
        out.append(f'<tr><td colspan="{len(headers)}" class="muted">{esc(empty)}</td></tr>')
    out.append('</tbody></table>')
    return ''.join(out)


def _number(value: float) -> str:
    if isinstance(value, int) or value.is_integer():
        return f'{int(value):,}'
    return f'{value:,.3g}' if abs(value) < 1000 else f'{value:,.0f}'


def figure(
    fig_id: str,
    title: str,
    traces: list[dict[str, Any]],
    x_title: str = '',
    *,
    y_title: str = '',
    time_axis: bool = True,
) -> str:
    """A Plotly chart (its traces as Plotly's JSON: ``{'x', 'y', 'name', ...}``; times
    in UNIX seconds when ``time_axis``)."""
    for trace in traces:
        trace.setdefault('type', 'scatter')
        trace.setdefault('mode', 'lines')
        if time_axis:  # Plotly's date strings, to the millisecond
            trace['x'] = [when(x, '%Y-%m-%d %H:%M:%S.%f')[:-3] for x in trace.get('x', [])]
    layout = {
        'title': {'text': title, 'font': {'size': 14}, 'x': 0.01, 'xanchor': 'left'},
        'margin': {'l': 50, 'r': 10, 't': 40, 'b': 40},
        'xaxis': {'title': {'text': x_title}},
        'yaxis': {'title': {'text': y_title}, 'rangemode': 'tozero'},
        'legend': {'orientation': 'h'},
        'height': 300,
    }
    if not traces:
        layout['annotations'] = [
            {'text': 'no data yet', 'showarrow': False, 'xref': 'paper', 'yref': 'paper'}
        ]
    data = json.dumps({'data': traces, 'layout': layout}).replace('<', '\\u003c')
    return f'<script type="application/json" class="figure" id="{esc(fig_id)}">{data}</script>'


def page(title: str, here: str, body: str, refresh: float | None = None) -> str:
    """A whole page: navigation, ``body``; reloaded every ``refresh`` seconds."""
    nav = ''.join(
        f'<a href="{href}" class="{"here" if href == here else ""}">{esc(label)}</a>'
        for href, label in NAV
    )
    meta = f'<meta http-equiv="refresh" content="{max(refresh, 1):g}">' if refresh else ''
    scripts = ''  # Plotly (4.8 MB) only on pages with a chart
    if 'class="figure"' in body:
        scripts = (
            '<script src="/static/plotly.min.js"></script>'
            '<script src="/static/dashboard.js"></script>'
        )
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f'<title>{esc(title)} - tether dashboard</title>{meta}'
        '<link rel="stylesheet" href="/static/dashboard.css"></head><body>'
        f'<header><span class="brand">tether dashboard</span>{nav}</header>'
        f'<main><h1>{esc(title)}</h1>{body}</main>'
        f'{scripts}</body></html>'
    )
