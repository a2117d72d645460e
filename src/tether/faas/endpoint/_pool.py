"""The process-pool engine: elastic worker processes with warm-function routing.

One manager thread owns the workers (processes, each with a socket) and waits on their
sockets and pidfds at once:

* **hand-off**: a task goes to a worker with room (``1 + worker_prefetch`` tasks), one
  where its function is already warm first, then the least loaded; the endpoint is told
  once the task is in a worker's pipe (only then is it acknowledged to the broker);
* **retries**: when a worker dies, each task it held is queued again, up to
  ``max_retries`` times, then fails with ``WorkerLostError``;
* **cancellation and time limits**: a cancelled task not yet with a worker is dropped, a
  prefetched one is skipped by its worker, and a running one, or one past its
  ``timeout``, is stopped by killing its worker, which a new one replaces (the worker's
  other tasks, not started, go back to the queue); a limit counts from when the task
  starts on its worker: a new worker's first message says it is up, and no limit runs
  before it (an interpreter or container slow to start spends none of it); a worker not
  up within ``worker_start_timeout_s`` is killed and counts as lost (retries below);
* **elasticity**: workers are started while tasks wait and fewer than ``max_workers``
  run; a worker idle for ``idle_timeout_s`` is stopped, down to ``min_workers``;
* **environments**: a task whose function asks for another Python environment
  (:mod:`._environments`) waits in that environment's queue and runs on workers started
  with its interpreter: a pool of its own, with its own ``max_workers`` and
  ``min_workers``, idle workers stopped the same way.
"""

from __future__ import annotations

import collections
import contextlib
import json
import logging
import math
import multiprocessing.connection
import os
import socket
import subprocess
import sys
import threading
import time
from typing import Any

from tether.exceptions import ConfigError
from tether.faas.endpoint._environments import argv_of, worker_sys_path
from tether.faas.endpoint.engine import (
    EngineBase,
    Task,
    cancelled_error,
    ended_header,
    result_header,
)

__all__ = ['ProcessPoolEngine']

logger = logging.getLogger(__name__)

_TICK = 0.25


class _Worker:
    """A worker process (``python -m tether.faas.endpoint._worker``) and its socket.

    Workers are fresh interpreters rather than forks (the endpoint has threads and an
    event loop) and do not import the endpoint's ``__main__`` the way multiprocessing's
    spawn and forkserver do. A pidfd signals the worker's death.
    """

    def __init__(
        self, env: dict[str, str], environment: str = '', argv: list[str] | None = None
    ) -> None:
        parent, child = socket.socketpair()
        if environment:  # another interpreter: its own site-packages come first
            env = {
                **env,
                'TETHER_FAAS_ENVIRONMENT': environment,
                'TETHER_FAAS_SYS_PATH': json.dumps(worker_sys_path()),
            }
        else:
            env = {**env, 'TETHER_FAAS_SYS_PATH': json.dumps(sys.path)}
        self.environment = environment
        try:
            self.process = subprocess.Popen(
                [
                    *(argv or [sys.executable]),
                    '-m',
                    'tether.faas.endpoint._worker',
                    str(child.fileno()),
                ],
                pass_fds=[child.fileno()],
                env={**os.environ, **env},
                stdin=subprocess.DEVNULL,
            )
        except BaseException:
            parent.close()
            raise
        finally:
            child.close()
        self.conn = multiprocessing.connection.Connection(parent.detach())
        self.sentinel = os.pidfd_open(self.process.pid)
        # In the order the worker runs them: the first is running (since ``started``).
        self.inflight: dict[str, Task] = {}
        self.started = time.monotonic()
        # Until the worker's first message (it is up): no time limit counts before it, and
        # past worker_start_timeout_s since ``spawned`` it is given up on.
        self.ready = False
        self.spawned = time.monotonic()
        # Prefetched tasks cancelled (already reported): the worker skips them.
        self.skipping: set[str] = set()
        self.warm: set[str] = set()
        self.idle_since = time.monotonic()
        self.dead = False

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        for close in (self.conn.close, lambda: os.close(self.sentinel)):
            with contextlib.suppress(OSError):
                close()


class ProcessPoolEngine(EngineBase):
    """Worker processes on this host (see the module docstring)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        # Waiting tasks by environment ('': the default one, always first).
        self._queues: dict[str, collections.deque[Task]] = {'': collections.deque()}
        self._lock = threading.Lock()
        self._workers: list[_Worker] = []
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        self._stopping = False
        self._cancels: list[str] = []
        self._thread = threading.Thread(target=self._run, name='tether-faas-pool', daemon=True)
        self.started_workers = 0
        self.cold_starts = 0

    def start(self) -> None:
        for _ in range(self.config.min_workers):
            self._spawn()
        for name, env in self.config.environments.items():
            for _ in range(env.min_workers):
                if self._spawn_or_fail(name) is None:  # logged; its tasks will say why
                    break
        self._thread.start()

    def submit(self, tasks: list[Task]) -> None:
        with self._lock:
            for task in tasks:
                self._queue(task.environment).append(task)
        self._wake()

    def _queue(self, environment: str) -> collections.deque[Task]:
        """The waiting tasks of ``environment`` (created on first use; under the lock)."""
        found = self._queues.get(environment)
        if found is None:
            found = self._queues[environment] = collections.deque()
        return found

    def _limits(self, environment: str) -> tuple[int, int]:
        """``(min_workers, max_workers)`` of ``environment``'s pool."""
        if not environment:
            return self.config.min_workers, self.config.max_workers
        env = self.config.environments.get(environment)
        if env is None:  # an interpreter named by its path
            return 0, self.config.max_workers
        return env.min_workers, env.max_workers or self.config.max_workers

    def cancel(self, task_ids: list[str]) -> None:
        with self._lock:
            self._cancels.extend(task_ids)
        self._wake()

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b'x')

    def stats(self) -> dict[str, Any]:
        with self._lock:
            warm: dict[str, int] = {}
            for w in self._workers:
                for fid in w.warm:
                    warm[fid] = warm.get(fid, 0) + 1
            return {
                'workers': len(self._workers),
                'idle': sum(1 for w in self._workers if not w.inflight),
                'pending': sum(len(q) for q in self._queues.values()),
                'warm': warm,
            }

    def stop(self) -> None:
        self._stopping = True
        self._wake()
        if self._thread.is_alive():
            self._thread.join(30)
        for w in list(self._workers):
            self._retire(w)
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)

    # Manager thread --------------------------------------------------------------------

    def _spawn(self, environment: str = '') -> _Worker:
        if environment:
            argv = argv_of(environment, self.config.environments)
            worker = _Worker(self.env, environment, argv)
        else:
            worker = _Worker(self.env)
        with self._lock:
            self._workers.append(worker)
        self.started_workers += 1
        return worker

    def _retire(self, worker: _Worker) -> None:
        with contextlib.suppress(OSError, ValueError):
            worker.conn.send(None)
        try:
            worker.process.wait(5)
        except subprocess.TimeoutExpired:
            worker.process.kill()
            worker.process.wait(5)
        worker.close()
        with self._lock:
            if worker in self._workers:
                self._workers.remove(worker)

    def _run(self) -> None:
        while not self._stopping:
            waitables: list[Any] = [self._wake_r]
            for w in self._workers:
                waitables.extend((w.conn, w.sentinel))
            try:
                ready = multiprocessing.connection.wait(waitables, timeout=self._next_tick())
            except OSError:
                ready = []
            if self._wake_r in ready:
                with contextlib.suppress(BlockingIOError, OSError):
                    os.read(self._wake_r, 65536)
            try:
                # Cancels first: a result that arrives with a cancel asked before it (a task
                # that finished as it was cancelled) is then dropped, not reported a success.
                self._cancel_now()
                self._collect(ready)
                self._expire()
                self._scale()
                self._dispatch()  # the tasks of workers just started go into their pipes now
            except Exception:
                logger.exception('process pool manager error')

    def _collect(self, ready: list[Any]) -> None:
        for w in list(self._workers):
            if w.conn in ready:
                try:
                    while w.conn.poll():
                        message = w.conn.recv()
                        if not w.ready:  # its first message: the worker is up
                            w.ready = True
                            w.started = time.monotonic()  # its first task starts now
                            if message is None:  # (a result first: an older worker)
                                continue
                        task_id, status, ser, data, error, start, end, out = message
                        task = w.inflight.pop(task_id, None)
                        w.started = time.monotonic()  # the next one starts now
                        if not w.inflight:
                            w.idle_since = w.started
                        if task_id in w.skipping:
                            w.skipping.discard(task_id)  # cancelled: reported then
                            continue
                        header = result_header(task_id, status, ser, error, start, end, out)
                        if task is not None:
                            w.warm.add(task.function_id)
                            if task.retries:
                                header['retries'] = task.retries
                        self.on_result(header, data)
                except (EOFError, OSError):
                    w.dead = True
            if w.dead or w.sentinel in ready or not w.alive():
                self._lost(w)

    def _lost(self, worker: _Worker, unstarted: float | None = None) -> None:
        """Retry or fail the tasks of a worker that died (or, with ``unstarted``, was
        killed for not starting within that many seconds)."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            worker.process.wait(1)
        exitcode = worker.process.returncode
        logger.warning(
            'worker %s %s (exit code %s) holding %d task(s)',
            worker.pid,
            'died' if unstarted is None else f'did not start within {unstarted:g} s',
            exitcode,
            len(worker.inflight),
        )
        with self._lock:
            if worker in self._workers:
                self._workers.remove(worker)
        worker.close()
        again = []
        for task in worker.inflight.values():
            if task.task_id in worker.skipping:
                continue  # cancelled (reported then): not run again
            task.attempts += 1
            reason = 'worker lost' if unstarted is None else 'worker did not start'
            task.retries.append({'reason': reason, 'exit_code': exitcode, 'at': time.time()})
            if task.attempts > self.config.max_retries:
                message = (
                    f'the worker running the task died {task.attempts} times (exit code '
                    f'{exitcode}); max_retries = {self.config.max_retries}'
                )
                if unstarted is not None:
                    message = (
                        f'the worker for the task did not start within {unstarted:g} s '
                        f'(worker_start_timeout_s), {task.attempts} times; max_retries = '
                        f'{self.config.max_retries}'
                    )
                error = {'type': 'WorkerLostError', 'message': message, 'traceback': ''}
                now = time.time()
                header = result_header(
                    task.task_id, 'failed', task.data_serializer, error, now, now
                )
                header['retries'] = task.retries
                self.on_result(header, b'')
            else:
                again.append(task)
        with self._lock:
            self._queue(worker.environment).extendleft(reversed(again))

    # Cancellation and time limits ----------------------------------------------------

    def _next_tick(self) -> float:
        """How long the manager may wait: until the nearest time limit or start deadline,
        at most _TICK."""
        wait = _TICK
        now = time.monotonic()
        for w in self._workers:
            if not w.ready:
                start_by = w.spawned + self.config.worker_start_timeout_s
                wait = min(wait, max(0.0, start_by - now))
                continue
            head = next(iter(w.inflight.values()), None)
            if head is not None and head.timeout is not None:
                wait = min(wait, max(0.0, w.started + head.timeout - now))
        return wait

    def _report(self, task: Task, status: str, error: dict[str, str]) -> None:
        self.on_result(ended_header(task, status, error, time.time()), b'')

    def _cancel_now(self) -> None:
        """Cancel what was asked: tasks not handed to a worker are dropped, prefetched ones
        are skipped by their worker, running ones are stopped with their worker."""
        with self._lock:
            if not self._cancels:
                return
            ids = set(self._cancels)
            self._cancels.clear()
            dropped = []
            for env, queue in self._queues.items():
                gone = [t for t in queue if t.task_id in ids]
                if gone:
                    dropped += gone
                    self._queues[env] = collections.deque(t for t in queue if t.task_id not in ids)
        for task in dropped:
            self._report(task, 'cancelled', cancelled_error())
        for w in list(self._workers):
            hit = [t for t in w.inflight if t in ids and t not in w.skipping]
            if not hit:
                continue
            head = next(iter(w.inflight))
            for task_id in hit:
                if task_id == head:
                    continue
                w.skipping.add(task_id)
                with contextlib.suppress(OSError, ValueError):
                    w.conn.send(('cancel', task_id))
                self._report(w.inflight[task_id], 'cancelled', cancelled_error())
            if head in hit:
                self._stop_worker(w, 'cancelled', cancelled_error())

    def _expire(self) -> None:
        """Stop the workers whose running task is past its time limit, and those not up
        within ``worker_start_timeout_s``."""
        now = time.monotonic()
        for w in list(self._workers):
            if not w.ready:
                limit = self.config.worker_start_timeout_s
                if now - w.spawned >= limit:  # a hung interpreter or container start
                    with contextlib.suppress(OSError):
                        w.process.kill()
                    self._lost(w, unstarted=limit)
                continue
            head = next(iter(w.inflight.values()), None)
            if head is None or head.timeout is None or head.task_id in w.skipping:
                continue
            if now - w.started >= head.timeout:
                error = {
                    'type': 'TaskTimeoutError',
                    'message': (
                        f'the task ran longer than its time limit of {head.timeout:g} s '
                        '(task_timeout): its worker was stopped and replaced'
                    ),
                    'traceback': '',
                }
                self._stop_worker(w, 'failed', error)

    def _stop_worker(self, worker: _Worker, status: str, error: dict[str, str]) -> None:
        """Kill ``worker`` and report its running task with ``error``; its prefetched
        tasks go back to the front of the queue (they never started) and a new worker
        takes its place."""
        with contextlib.suppress(OSError):
            worker.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            worker.process.wait(5)
        with self._lock:
            if worker in self._workers:
                self._workers.remove(worker)
        worker.close()
        tasks = list(worker.inflight.values())
        self._report(tasks[0], status, error)
        again = [t for t in tasks[1:] if t.task_id not in worker.skipping]
        with self._lock:
            self._queue(worker.environment).extendleft(reversed(again))
        logger.info('task %s %s: its worker %s was stopped', tasks[0].task_id, status, worker.pid)
        if not self._stopping:
            self._spawn_or_fail(worker.environment)

    def _dispatch(self) -> None:
        handed: list[str] = []
        for environment in list(self._queues):
            self._dispatch_queue(environment, handed)
        if handed:
            self.on_handoff(handed)

    def _dispatch_queue(self, environment: str, handed: list[str]) -> None:
        """Hand ``environment``'s waiting tasks to its workers with room."""
        capacity = 1 + self.config.worker_prefetch
        while True:
            with self._lock:
                pending = self._queues[environment]
                if not pending:
                    break
                task = pending[0]
                free = [
                    w
                    for w in self._workers
                    if w.environment == environment and not w.dead and len(w.inflight) < capacity
                ]
                if not free:
                    break
                warm = [w for w in free if task.function_id in w.warm]
                worker = min(warm or free, key=lambda w: len(w.inflight))
                pending.popleft()
            cold = task.function_id not in worker.warm
            if cold:
                self.cold_starts += 1
            message = (
                task.task_id,
                task.function_id,
                task.function_serializer,
                task.function_body if cold else None,
                task.data_serializer,
                task.payload,
                task.result_store,
                task.result_threshold,
            )
            try:
                worker.conn.send(message)
            except (OSError, ValueError):
                worker.dead = True
                with self._lock:
                    self._queues[environment].appendleft(task)
                continue
            if not worker.inflight:
                worker.started = time.monotonic()
            worker.inflight[task.task_id] = task
            worker.warm.add(task.function_id)
            if task.attempts == 0:
                handed.append(task.task_id)

    def _scale(self) -> None:
        for environment in list(self._queues):
            self._scale_pool(environment)

    def _scale_pool(self, environment: str) -> None:
        """Start workers of ``environment`` while its tasks wait (up to its
        ``max_workers``); stop those idle past ``idle_timeout_s`` (down to its
        ``min_workers``)."""
        capacity = 1 + self.config.worker_prefetch
        low, high = self._limits(environment)
        with self._lock:
            pending = len(self._queues[environment])
            mine = [w for w in self._workers if w.environment == environment]
            room = sum(capacity - len(w.inflight) for w in mine)
        n = len(mine)
        if pending > room and n < high:
            want = min(high - n, math.ceil((pending - room) / capacity))
            for _ in range(want):
                if self._spawn_or_fail(environment) is None:
                    return
        now = time.monotonic()
        for w in mine:
            if n <= low:
                break
            if not w.inflight and now - w.idle_since > self.config.idle_timeout_s and not pending:
                self._retire(w)
                n -= 1

    def _spawn_or_fail(self, environment: str) -> _Worker | None:
        """A new worker of ``environment``; if its interpreter cannot be started, its
        waiting tasks fail with the reason (rather than waiting for ever)."""
        if not environment:
            return self._spawn()
        try:
            return self._spawn(environment)
        except (ConfigError, OSError) as e:
            with self._lock:
                queue = self._queue(environment)
                failed = list(queue)
                queue.clear()
            message = f'the workers of environment {environment!r} cannot start: {e}'
            logger.error('%s (%d task(s) fail)', message, len(failed))
            error = {'type': 'tether.exceptions.ConfigError', 'message': message, 'traceback': ''}
            for task in failed:
                self._report(task, 'failed', error)
            return None
