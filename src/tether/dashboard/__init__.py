"""``tether dashboard``: live pages of a user's servers, function service, steering
campaigns and bench runs (``docs/observability.md``).

It reads what the servers expose (their Prometheus endpoints, the function service's
REST API with the user's own token) and result files; charts are drawn by Plotly
(``plotly.min.js`` from the ``plotly`` package, served by the dashboard). Install with
``pip install "tether[dashboard]"``.
"""

from __future__ import annotations

from tether.dashboard._app import build_app
from tether.dashboard._config import DashboardConfig, MetricsTarget, load_config
from tether.dashboard._metrics import parse_metrics
from tether.dashboard._runs import append_steer_record, steer_record
from tether.dashboard._serve import serve

__all__ = [
    'DashboardConfig',
    'MetricsTarget',
    'append_steer_record',
    'build_app',
    'load_config',
    'parse_metrics',
    'serve',
    'steer_record',
]
