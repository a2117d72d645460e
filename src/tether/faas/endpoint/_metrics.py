"""A compute endpoint agent's Prometheus metrics (see :mod:`tether._serve.metrics`).

Read at scrape time from the agent's own bookkeeping: tasks by state (``waiting``:
received, not yet with a worker; ``running``: handed to a worker; ``unconfirmed``: result
sent, not yet acknowledged by the service), results sent, whether it is connected, and
the engine's workers (``workers``, ``idle``, ``pending`` of its ``stats()``) and, for an
engine with blocks (``parsl``, ``managers`` with a ``[provider]``), its blocks by state as
the provider last reported them.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from tether._serve.metrics import Served, ServerMetrics

if TYPE_CHECKING:
    from tether.faas.endpoint._agent import Agent

__all__ = ['agent_metrics']


def agent_metrics(agent: Agent) -> Served:
    """The agent's metrics, served if its configuration says so."""
    options = agent.config.metrics
    if not options.enabled:
        return Served(None, options)
    m = ServerMetrics('faas-endpoint', agent.config.name, ())
    m.gauge(
        'tether_faas_tasks',
        'Tasks held by this endpoint, by state',
        lambda: _tasks(agent),
        ('state',),
    )
    m.gauge(
        'tether_faas_connected',
        'Whether the service is connected',
        agent.connected.is_set,
    )
    m.gauge(
        'tether_faas_results',
        'Results this endpoint produced',
        lambda: agent.results_made,
        counter=True,
    )
    m.gauge(
        'tether_faas_workers',
        "The engine's workers, by state",
        lambda: _workers(agent),
        ('state',),
    )
    m.gauge(
        'tether_faas_blocks',
        "The engine's blocks (batch jobs, pods, instances), by state",
        lambda: _blocks(agent),
        ('state',),
    )
    return Served(m, options)


def _blocks(agent: Agent) -> dict[tuple[str, ...], float]:
    blocks: Any = getattr(agent.engine, 'blocks', None)
    if blocks is None:
        return {}
    states: dict[str, int] = {}
    with contextlib.suppress(Exception):  # not started, or the provider not polled yet
        states = blocks()
    # Parsl's states: a fixed set (pending, running, cancelled, completed, failed ...).
    return {(str(state),): float(n) for state, n in states.items()}


def _tasks(agent: Agent) -> dict[tuple[str, ...], float]:
    holding = agent._holding.copy()  # dict.copy is atomic: the loop's thread may be changing it
    running = sum(1 for handed in holding.values() if handed)
    return {
        ('waiting',): len(holding) - running,
        ('running',): running,
        ('unconfirmed',): len(agent._unconfirmed),
    }


def _workers(agent: Agent) -> dict[tuple[str, ...], float]:
    stats: dict[str, Any] = {}
    with contextlib.suppress(Exception):  # an engine not started, or one without stats
        stats = agent.engine.stats()
    return {
        (key,): float(stats[key])
        for key in ('workers', 'idle', 'pending')
        if isinstance(stats.get(key), int | float)
    }
