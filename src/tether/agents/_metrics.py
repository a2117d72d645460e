"""Prometheus metrics of a daemon agent (see :mod:`tether._serve.metrics`).

A daemon's supervisor serves the metrics; its agent runs in a child process (restarted
there per the policy). The two share a small file-backed block of counters
(:class:`StatsBlock`, ``<agents home>/daemons/<agent id>.metrics``): the agent's runtime
adds to it as actions finish, the supervisor reads it at scrape time. The counters live
as long as the supervisor, so they carry on across restarts of the agent.

Exported: the agent by status (``running``, ``restarting``, ``stopped``), restarts and
starts, requests in progress and waiting for a slot, messages waiting in the agent's
mailbox at the exchange (Redis and hybrid exchanges), and per action (the behavior's
action names: a fixed set) calls, errors and a latency histogram. No label names an
agent id, a caller or a value.
"""

from __future__ import annotations

import bisect
import dataclasses
import logging
import mmap
import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tether._serve.buckets import LATENCY_BUCKETS

if TYPE_CHECKING:
    from tether._serve.metrics import MetricsOptions, Served
    from tether.agents.launcher.process import ProcessLauncher

__all__ = ['METRICS_FILE_ENV', 'StatsBlock', 'daemon_metrics', 'open_for_agent']

logger = logging.getLogger(__name__)

METRICS_FILE_ENV = 'TETHER_AGENT_METRICS_FILE'
"""Set by a daemon's supervisor for its agent process: the block to add to."""

_BUCKETS = LATENCY_BUCKETS  # as the servers' request histograms
_MAGIC = 0x54_41_47_4D_45_54_30_31  # b'TAGMET01' as an integer slot
_HEAD = 4  # magic, starts, running, waiting
_PER_ACTION = 3 + len(_BUCKETS)  # calls, errors, seconds, one count per bucket


class StatsBlock:
    """Counters shared by a daemon's supervisor (reader) and its agent process (writer).

    Slots are float64s in a file mapped by both. The writer holds a lock of its own
    process; the reader takes no lock (a scrape may see one action's call counted before
    its bucket, never a torn number: each aligned slot is written whole).

    Args:
        path: The block's file.
        actions: The behavior's action names (the same list on both sides).
        create: Make the file (zeroed), instead of opening an existing one.
    """

    def __init__(self, path: str | os.PathLike[str], actions: Sequence[str], *, create: bool):
        self.actions = sorted(actions)
        self._index = {name: i for i, name in enumerate(self.actions)}
        size = 8 * (_HEAD + _PER_ACTION * len(self.actions))
        flags = os.O_RDWR | (os.O_CREAT | os.O_TRUNC if create else 0)
        fd = os.open(path, flags, 0o600)
        try:
            if create:
                os.ftruncate(fd, size)
            elif os.fstat(fd).st_size != size:
                raise ValueError(f'{path} is not a stats block for these actions')
            self._map = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        # The slots as float64s (native order: both sides are processes of this host).
        self._v = memoryview(self._map).cast('d')
        if create:
            self._v[0] = float(_MAGIC)
        elif self._v[0] != float(_MAGIC):
            self._v.release()
            self._map.close()
            raise ValueError(f'{path} is not a stats block')
        self._lock = threading.Lock()

    def _get(self, slot: int) -> float:
        value: float = self._v[slot]
        return value

    # The agent's side -----------------------------------------------------------------

    def started(self) -> None:
        """A new incarnation of the agent started (nothing runs or waits yet)."""
        v = self._v
        with self._lock:
            v[1] += 1
            v[2] = v[3] = 0.0

    def load(self, running: int, waiting: int) -> None:
        """Requests running now and waiting for a free slot."""
        v = self._v
        v[2] = running
        v[3] = waiting

    def action(self, name: str, seconds: float, *, failed: bool) -> None:
        """One call of action ``name`` ended after ``seconds`` (``failed``: it raised)."""
        i = self._index.get(name)
        if i is None:
            return
        base = _HEAD + _PER_ACTION * i
        bucket = bisect.bisect_left(_BUCKETS, seconds)  # the first bucket with seconds <= le
        v = self._v
        with self._lock:
            v[base] += 1
            if failed:
                v[base + 1] += 1
            v[base + 2] += seconds
            v[base + 3 + bucket] += 1

    # The supervisor's side ------------------------------------------------------------

    def starts(self) -> float:
        """Incarnations started so far."""
        return self._get(1)

    def running(self) -> float:
        """Requests running now."""
        return self._get(2)

    def waiting(self) -> float:
        """Requests waiting for a free slot."""
        return self._get(3)

    def per_action(self) -> Iterator[tuple[str, float, float, float, list[float]]]:
        """``(action, calls, errors, seconds, counts per bucket)`` of each action."""
        for i, name in enumerate(self.actions):
            base = _HEAD + _PER_ACTION * i
            counts = [self._get(base + 3 + b) for b in range(len(_BUCKETS))]
            yield name, self._get(base), self._get(base + 1), self._get(base + 2), counts

    def close(self) -> None:
        """Unmap the block."""
        self._v.release()
        self._map.close()


def open_for_agent(agent_id: str, actions: Sequence[str]) -> StatsBlock | None:
    """The block this agent process adds to, if its supervisor made one for it."""
    path = os.environ.get(METRICS_FILE_ENV)
    if not path or Path(path).stem != agent_id:
        return None  # no metrics, or a child agent of the daemon's agent
    try:
        block = StatsBlock(path, actions, create=False)
    except (OSError, ValueError) as e:
        logger.warning('agent %s records no metrics: %s', agent_id, e)
        return None
    block.started()
    return block


def daemon_metrics(
    spec: Any, launcher: ProcessLauncher, block: StatsBlock, options: MetricsOptions
) -> Served:
    """The metrics of the daemon running ``spec`` under ``launcher`` (served when opened)."""
    from tether._serve.metrics import Served, ServerMetrics

    behavior = type(spec.behavior)
    m = ServerMetrics('agent-daemon', f'{behavior.__module__}.{behavior.__qualname__}', ())
    agent_id = spec.agent_id
    m.gauge(
        'tether_agents',
        'Agents of this daemon, by status',
        lambda: _status(launcher, agent_id),
        ('status',),
    )
    m.gauge(
        'tether_agent_restarts',
        'Restarts of the agent after a failure',
        lambda: _restarts(launcher, agent_id),
        counter=True,
    )
    m.gauge('tether_agent_starts', 'Incarnations of the agent started', block.starts, counter=True)
    m.gauge('tether_agent_requests_in_progress', 'Requests the agent is running', block.running)
    m.gauge(
        'tether_agent_requests_queued',
        'Requests the agent accepted that wait for a free slot',
        block.waiting,
    )
    m.gauge(
        'tether_agent_mailbox_messages',
        "Messages waiting in the agent's mailbox at the exchange, not yet taken by the agent "
        '(Redis and hybrid exchanges)',
        lambda: _mailbox_depth(spec),
    )
    m.registry.register(_Actions(block))
    return Served(m, options)


def _status(launcher: ProcessLauncher, agent_id: str) -> dict[tuple[str, ...], float]:
    out: dict[tuple[str, ...], float] = {
        ('running',): 0.0,
        ('restarting',): 0.0,
        ('stopped',): 0.0,
    }
    if agent_id not in launcher.running():
        out['stopped',] = 1.0
    elif launcher.pid(agent_id) is not None and _alive(launcher.pid(agent_id)):
        out['running',] = 1.0
    else:
        out['restarting',] = 1.0
    return out


def _alive(pid: int | None) -> bool:
    from tether._serve.state import pid_alive

    return pid is not None and pid_alive(pid)


def _restarts(launcher: ProcessLauncher, agent_id: str) -> float:
    try:
        return float(launcher.restarts(agent_id))
    except Exception:
        return 0.0


def _mailbox_depth(spec: Any) -> dict[tuple[str, ...], float] | float:
    from tether.agents.exchange.redis import RedisExchange
    from tether.exceptions import TetherError

    exchange = spec.exchange
    if not isinstance(exchange, RedisExchange):
        return {}  # no sample: the exchange does not say
    try:
        transport: Any = exchange.transport()
        waiting = transport.redis.execute('LLEN', transport.k('mb', spec.agent_id))
    except (TetherError, OSError) as e:
        logger.debug('mailbox depth of %s: %s', spec.agent_id, e)
        return {}
    return float(int(waiting))


@dataclasses.dataclass(eq=False, repr=False)
class _Actions:
    """Per-action calls, errors and latency, read from the block when scraped."""

    block: StatsBlock

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily

        calls = CounterMetricFamily(
            'tether_agent_actions', 'Action calls that ended, by action', labels=['action']
        )
        errors = CounterMetricFamily(
            'tether_agent_action_errors', 'Action calls that raised, by action', labels=['action']
        )
        latency = HistogramMetricFamily(
            'tether_agent_action_seconds', 'Seconds an action ran, by action', labels=['action']
        )
        for name, n, failed, seconds, counts in self.block.per_action():
            calls.add_metric([name], n)
            errors.add_metric([name], failed)
            total, buckets = 0.0, []
            for le, count in zip(_BUCKETS, counts, strict=True):
                total += count
                buckets.append(('+Inf' if le == float('inf') else repr(le), total))
            latency.add_metric([name], buckets, seconds)
        yield calls
        yield errors
        yield latency
