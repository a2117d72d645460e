"""Node object servers: one in-memory object store per host, reached over the wire.

A node server (:class:`NodeServer`) holds objects in memory for every process on its
host, serves put/get/exists/evict and their batch forms to many clients at once over the
:mod:`tether._wire` protocol, keeps within a memory budget by spilling the least
recently used objects to disk, and serves consumers on other hosts directly.

:class:`tether.connectors.node.NodeConnector` starts or attaches to this host's server on
first use. ``tether node start|stop|status`` runs and inspects one by hand.
"""

from __future__ import annotations

from tether._serve.objects import ObjectTable
from tether._serve.sizes import format_size, parse_size
from tether._serve.spawn import detect_address, ensure_server, resolve_secret, stop_server
from tether._serve.state import NodeState, default_run_dir, read_state
from tether.node._server import NodeServer

__all__ = [
    'NodeServer',
    'NodeState',
    'ObjectTable',
    'default_run_dir',
    'detect_address',
    'ensure_server',
    'format_size',
    'parse_size',
    'read_state',
    'resolve_secret',
    'stop_server',
]
