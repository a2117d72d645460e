"""The managers engine: several managers, each a pool of workers, and warmth-aware routing.

The funcX design: an endpoint's tasks go to *managers* (one per node of a block), each
running a few workers. Every manager advertises its free capacity and the functions its
workers hold warm (:meth:`ProcessPoolEngine.stats`); the endpoint keeps its tasks and
gives each manager at most ``workers + worker_prefetch`` of them (a bounded prefetch), so
that the choice of manager is made as late as possible. With ``routing = "warm"``, the
oldest waiting task (among the first ``lookahead``) whose function a manager with room
has warm goes to that manager; when there is none, the oldest task goes to the manager
with most room (a cold start there: a manager never idles while tasks wait). With
``routing = "random"``, each task goes to a manager with room chosen at random (the
baseline of the funcX paper's figure on warming-aware routing).

Without a ``[provider]`` the managers run on the endpoint's host (``managers`` pools of
``max_workers`` workers); each is a :class:`~tether.faas.endpoint._pool.ProcessPoolEngine`,
whose own hand-off prefers a worker where the function is warm. With a ``[provider]``
(Slurm, PBS Pro, ... or local) the managers run in its blocks, one per node, and connect
back to the endpoint; blocks are asked for while tasks wait and end once idle
(:mod:`._blocks`), and the tasks of a manager that goes away run again elsewhere, up to
``max_retries`` times, then fail with ``WorkerLostError``.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import math
import random
import threading
import time
from typing import Any

from tether.faas.endpoint._pool import ProcessPoolEngine
from tether.faas.endpoint.engine import (
    EngineBase,
    OnResult,
    Task,
    cancelled_error,
    ended_header,
)

__all__ = ['ManagersEngine']

logger = logging.getLogger(__name__)

# A waiting task passed over this many times (others' functions were warm) goes next.
_MAX_SKIPS = 64


def _where(pool: Any) -> str:
    """Where a manager in a block runs (host, block, job), for messages."""
    return ', '.join(f'{k}={v}' for k, v in sorted(pool.block.items()))


class _Manager:
    """One manager as the router sees it: its pool, the tasks it holds, its warmth."""

    def __init__(self, index: int, pool: Any, capacity: int) -> None:
        self.index = index
        # A ProcessPoolEngine on this host, or a RemotePool (a manager in a block).
        self.pool = pool
        self.capacity = capacity
        self.held: dict[str, Task] = {}
        # Functions routed here (warm from the moment the first one arrives) and what
        # the manager advertises (its workers' warm functions).
        self.warm: set[str] = set()

    @property
    def free(self) -> int:
        return self.capacity - len(self.held)

    def advertise(self) -> None:
        self.warm.update(self.pool.stats()['warm'])


@dataclasses.dataclass(eq=False, repr=False)
class ManagersEngine(EngineBase):
    """``config.managers`` managers of ``config.max_workers`` workers each, routed by
    ``config.routing`` (see the module docstring).

    Args:
        lookahead: Waiting tasks a manager with room looks through for one whose
            function it has warm.
        seed: Seed of the random choices (random routing, ties).
    """

    lookahead: int = dataclasses.field(default=256, kw_only=True)
    seed: int | None = dataclasses.field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        super().__post_init__()
        config = self.config
        self._lock = threading.Lock()
        self._queue: collections.deque[Task] = collections.deque()
        self._skips: dict[str, int] = {}
        self._random = random.Random(self.seed)
        self._where: dict[str, _Manager] = {}
        self._managers: list[_Manager] = []
        self._blocks: Any = None
        if config.provider is not None:
            from tether.faas.endpoint._blocks import BlockManagers, Callbacks

            self._blocks = BlockManagers(
                config,
                self.env,
                Callbacks(
                    self._joined, self._left, self._idle, self._remote_handed, self._remote_result
                ),
            )
            return
        pool_config = config.model_copy(
            update={'min_workers': config.max_workers, 'engine': 'process'}
        )
        for i in range(config.managers):
            manager = _Manager(i, None, config.max_workers + config.worker_prefetch)
            manager.pool = ProcessPoolEngine(
                pool_config, self._handed, self._result_of(manager), self.env
            )
            self._managers.append(manager)

    @property
    def cold_starts(self) -> int:
        """Functions loaded by a worker for the first time, over every manager."""
        return sum(m.pool.cold_starts for m in self._managers)

    def _handed(self, task_ids: list[str]) -> None:
        self.on_handoff(task_ids)  # the callback of now (the agent may replace it)

    def _result_of(self, manager: _Manager) -> OnResult:
        def on_result(header: dict[str, Any], payload: bytes) -> None:
            task_id = str(header.get('task_id'))
            with self._lock:
                manager.held.pop(task_id, None)
                self._where.pop(task_id, None)
            self.on_result(header, payload)
            self._dispatch()

        return on_result

    # Managers in blocks (see _blocks) ---------------------------------------------------

    def _remote_handed(self, pool: Any, task_ids: list[str]) -> None:
        """Hand-offs a manager in a block reports, of the tasks it holds (others dropped)."""
        with self._lock:
            manager = next((m for m in self._managers if m.pool is pool), None)
            held = [] if manager is None else [i for i in task_ids if i in manager.held]
        if len(held) < len(task_ids) and manager is not None:
            logger.warning(
                'dropped %d hand-offs from the manager at %s: it does not hold those tasks',
                len(task_ids) - len(held),
                _where(pool),
            )
        if held:
            self._handed(held)

    def _remote_result(self, pool: Any, header: dict[str, Any], payload: bytes) -> None:
        """A result from a manager in a block, taken only for a task that manager holds.

        The link proves the key at its handshake only: a result for a task the manager
        was never given, or one it reported already, is logged and dropped.
        """
        task_id = str(header.get('task_id'))
        with self._lock:
            manager = next((m for m in self._managers if m.pool is pool), None)
            if manager is None:
                return  # a manager already given up: its tasks were queued again
            held = manager.held.pop(task_id, None) is not None
            if held:
                self._where.pop(task_id, None)
        if not held:
            logger.warning(
                'dropped a result for task %r from the manager at %s: it does not hold that '
                'task (never given to it, or its result was reported already)',
                task_id[:64],
                _where(pool),
            )
            return
        self.on_result(header, payload)
        self._dispatch()

    def _joined(self, pool: Any) -> None:
        with self._lock:
            index = max((m.index for m in self._managers), default=-1) + 1
            self._managers.append(_Manager(index, pool, pool.capacity))
        self._dispatch()

    def _left(self, pool: Any) -> None:
        """A manager's link closed: its tasks run again elsewhere, or fail."""
        with self._lock:
            manager = next((m for m in self._managers if m.pool is pool), None)
            if manager is None:
                return
            self._managers.remove(manager)
            lost = list(manager.held.values())
            for task in lost:
                self._where.pop(task.task_id, None)
        where = _where(pool)
        again: list[Task] = []
        for task in lost:
            task.attempts += 1
            task.retries.append(
                {
                    'reason': f'ManagerLost: the manager at {where} went away',
                    'exit_code': None,
                    'at': time.time(),
                }
            )
            if task.attempts > self.config.max_retries:
                error = {
                    'type': 'WorkerLostError',
                    'message': (
                        f'its manager was lost {task.attempts} times (the block ended: '
                        f'cancelled, past its walltime, or its node failed); max_retries = '
                        f'{self.config.max_retries}'
                    ),
                    'traceback': '',
                }
                header = ended_header(task, 'failed', error, time.time())
                header['block'] = dict(pool.block)
                self.on_result(header, b'')
            else:
                again.append(task)
        with self._lock:
            self._queue.extendleft(reversed(again))
        self._dispatch()

    def _idle(self, pool: Any) -> bool:
        """Whether an idle manager may end (it holds nothing): it is forgotten if so."""
        with self._lock:
            manager = next((m for m in self._managers if m.pool is pool), None)
            if manager is None or manager.held or self._queue:
                return False
            self._managers.remove(manager)
        return True

    def blocks(self) -> dict[str, int]:
        """With a ``[provider]``: the blocks by state, as Parsl last polled them."""
        return {} if self._blocks is None else self._blocks.blocks()

    def _grow(self) -> None:
        """Ask for managers while waiting tasks exceed what those asked for will take."""
        if self._blocks is None:
            return
        per = self.config.max_workers + self.config.worker_prefetch
        with self._lock:
            waiting = len(self._queue)
            room = sum(m.free for m in self._managers)
        wanted = math.ceil(max(0, waiting - room) / per)
        while wanted > self._blocks.launching and self._blocks.launch():
            pass

    def start(self) -> None:
        if self._blocks is not None:
            self._blocks.start()
        for manager in self._managers:
            manager.pool.start()

    def submit(self, tasks: list[Task]) -> None:
        with self._lock:
            self._queue.extend(tasks)
        self._dispatch()

    def _most_room(self, managers: list[_Manager]) -> _Manager:
        most = max(m.free for m in managers)
        return self._random.choice([m for m in managers if m.free == most])

    def _next(self, free: list[_Manager]) -> tuple[_Manager, Task]:
        """The next (manager, task) pair (under the lock; ``free``: the managers with
        room, the queue not empty)."""
        head = self._queue[0]
        if self.config.routing == 'random':
            return self._random.choice(free), self._queue.popleft()
        if self._skips.get(head.task_id, 0) < _MAX_SKIPS:
            # The oldest waiting task whose function a manager with room has warm.
            for i, task in enumerate(self._queue):
                if i >= self.lookahead:
                    break
                warm = [m for m in free if task.function_id in m.warm]
                if warm:
                    if i:
                        self._skips[head.task_id] = self._skips.get(head.task_id, 0) + 1
                    del self._queue[i]
                    return self._most_room(warm), task
        # None: the oldest task goes where there is most room (a cold start there).
        self._skips.pop(head.task_id, None)
        return self._most_room(free), self._queue.popleft()

    def _dispatch(self) -> None:
        """Give waiting tasks to managers with room, as ``routing`` says."""
        out: list[tuple[_Manager, Task]] = []
        with self._lock:
            for manager in self._managers:
                manager.advertise()
            while self._queue:
                free = [m for m in self._managers if m.free > 0]
                if not free:
                    break
                manager, task = self._next(free)
                manager.held[task.task_id] = task
                manager.warm.add(task.function_id)
                self._where[task.task_id] = manager
                out.append((manager, task))
        for manager, task in out:
            manager.pool.submit([task])
        self._grow()

    def cancel(self, task_ids: list[str]) -> None:
        dropped: list[Task] = []
        routed: dict[int, tuple[_Manager, list[str]]] = {}
        with self._lock:
            wanted = set(task_ids)
            for task in list(self._queue):
                if task.task_id in wanted:
                    self._queue.remove(task)
                    self._skips.pop(task.task_id, None)
                    dropped.append(task)
            for task_id in wanted:
                if task_id in self._where:
                    manager = self._where[task_id]
                    routed.setdefault(id(manager), (manager, []))[1].append(task_id)
        for task in dropped:
            self.on_result(ended_header(task, 'cancelled', cancelled_error()), b'')
        for manager, ids in routed.values():
            manager.pool.cancel(ids)

    def stats(self) -> dict[str, Any]:
        warm: dict[str, int] = {}
        workers = idle = pending = 0
        for manager in list(self._managers):
            s = manager.pool.stats()
            workers, idle, pending = (
                workers + s['workers'],
                idle + (s['idle'] or 0),
                pending + s['pending'],
            )
            for fid, n in s['warm'].items():
                warm[fid] = warm.get(fid, 0) + n
        with self._lock:
            pending += len(self._queue)
        return {
            'workers': workers,
            'idle': idle,
            'pending': pending,
            'warm': warm,
        }

    def stop(self) -> None:
        if self._blocks is not None:
            self._blocks.stop()
            return
        for manager in self._managers:
            manager.pool.stop()
