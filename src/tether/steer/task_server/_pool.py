"""Worker processes for :class:`~tether.steer.task_server.local.LocalTaskServer`.

Each worker is a forked process with one socket pair to the task server. A task is
pickled once and written to an idle worker's socket by the thread that dispatches it; the
worker runs it and writes the finished result back; one thread per worker in the task
server reads it and hands it on. So a task crosses no thread of the server's on its way
out and one on its way back. A ``ProcessPoolExecutor`` adds its manager thread both ways
and its queue feeder thread on the way out: with two tasks in flight on two cores, a
1 KB task's round trip through the steering queues took 1.75-1.84 ms on one and takes
0.93-1.04 ms here (``docs/performance.md``, steering).

A worker that dies (killed, crashed, out of memory) fails only the task it was running
(with a message that says so) and is replaced before that failure is handed on.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import multiprocessing
import os
import pickle
import signal
import threading
from collections.abc import Callable, Mapping
from typing import Any

from tether.steer.models import Result
from tether.steer.task_server._worker import run_task

__all__ = ['WorkerPool']

logger = logging.getLogger(__name__)

_ctx = multiprocessing.get_context('fork')

Done = Callable[[Result], None]


def _serve(conn: Any, methods: Mapping[str, Callable[..., Any]], siblings: list[Any]) -> None:
    """A worker's loop: run each task that arrives; stop when the server hangs up."""
    # The server's ends of the sockets (this worker's and the others'), inherited by the
    # fork: only the server may hold them, so that a worker sees the end of its socket
    # when the server dies, however it dies, and the server sees it when a worker does.
    for other in siblings:
        with contextlib.suppress(OSError):
            other.close()
    # A process group of its own, which the server kills with it (processes a method
    # started included) when it is stopped or terminated.
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)
    while True:
        try:
            message = conn.recv_bytes()
        except (EOFError, OSError):
            return
        if not message:  # the pool shuts down
            return
        try:
            name, result = pickle.loads(message)
            method = methods[name]
        except Exception as e:
            # Said back as text (the task then fails with it), not by dying.
            reply = pickle.dumps(f'the worker could not read its task: {e!r}', protocol=5)
        else:
            finished = run_task(method, result)
            try:
                reply = pickle.dumps(finished, protocol=5)
            except Exception as e:  # an unpicklable value or failure: say so instead
                finished.set_failure(
                    f'the result of task {finished.task_id} cannot be pickled: {e!r}'
                )
                finished.value = None
                reply = pickle.dumps(finished, protocol=5)
        try:
            conn.send_bytes(reply)
        except OSError:
            return


def _hand_on(done: Done, result: Result) -> None:
    """Give ``result`` to ``done``; an error there is logged, never lost with the thread."""
    try:
        done(result)
    except Exception:
        logger.exception('handing on the result of task %s failed', result.task_id)


class _Worker:
    __slots__ = ('conn', 'process', 'task')

    def __init__(self, conn: Any, process: Any) -> None:
        self.conn = conn
        self.process = process
        self.task: tuple[Result, Done] | None = None


class WorkerPool:
    """``size`` worker processes that run tasks by method name.

    Args:
        size: Worker processes.
        methods: Method name to function (the workers are forked: nothing is pickled).
    """

    def __init__(self, size: int, methods: Mapping[str, Callable[..., Any]]) -> None:
        self._methods = dict(methods)
        self._lock = threading.Lock()
        self._idle: collections.deque[_Worker] = collections.deque()
        self._waiting: collections.deque[tuple[str, Result, Done]] = collections.deque()
        self._workers: list[_Worker] = []
        self._closed = False
        self._fork_lock = threading.Lock()
        # One thread at a time waits for a worker process: two waiting at once race to
        # reap it, and the loser sees no exit code (then a live-looking, reaped pid).
        self._reap_lock = threading.Lock()
        for _ in range(size):
            self._start_worker()

    def _start_worker(self) -> None:
        # One fork at a time, so that no worker inherits another's end of its socket.
        with self._fork_lock:
            ours, theirs = _ctx.Pipe(duplex=True)
            with self._lock:
                # The child closes these: its own copy of the server's end, and the
                # server's ends of the other workers' sockets.
                siblings = [ours, *(w.conn for w in self._workers)]
            # Not a daemon: a method may start processes of its own.
            process = _ctx.Process(target=_serve, args=(theirs, self._methods, siblings))
            process.start()
            if process.pid is not None:  # also here: before the child gets to it
                with contextlib.suppress(OSError):
                    os.setpgid(process.pid, process.pid)
            theirs.close()
            worker = _Worker(ours, process)
            with self._lock:
                self._workers.append(worker)
        threading.Thread(
            target=self._read, args=(worker,), name=f'pool-worker-{process.pid}', daemon=True
        ).start()
        self._ready(worker)

    def submit(self, name: str, result: Result, done: Done) -> None:
        """Run method ``name`` on ``result`` in a worker; ``done`` gets the finished result
        (from a thread of the pool)."""
        with self._lock:
            if self._closed:
                raise RuntimeError('the worker pool is shut down')
            if not self._workers:
                result.set_failure(
                    f'WorkerLost: task {result.task_id} has no worker to run on '
                    '(every worker died and none could be started)',
                )
                worker = None
            else:
                worker = self._idle.popleft() if self._idle else None
                if worker is None:
                    self._waiting.append((name, result, done))
                    return
                worker.task = (result, done)
        if worker is None:
            _hand_on(done, result)
            return
        self._send(worker, name, result)

    def _send(self, worker: _Worker, name: str, result: Result) -> None:
        try:
            message = pickle.dumps((name, result), protocol=5)
        except Exception as e:
            task, worker.task = worker.task, None
            self._ready(worker)
            result.set_failure(f'task {result.task_id} cannot be pickled for a worker: {e!r}')
            if task is not None:
                _hand_on(task[1], result)
            return
        # A worker that is gone fails the send or never answers: either way its reader
        # thread sees the end of its socket, fails the task and replaces the worker.
        with contextlib.suppress(OSError):
            worker.conn.send_bytes(message)

    def _ready(self, worker: _Worker) -> None:
        """``worker`` is free: give it the next waiting task, or mark it idle."""
        with self._lock:
            if self._closed:
                return
            if not self._waiting:
                self._idle.append(worker)
                return
            name, result, done = self._waiting.popleft()
            worker.task = (result, done)
        self._send(worker, name, result)

    def _read(self, worker: _Worker) -> None:
        while True:
            try:
                message = worker.conn.recv_bytes()
            except (EOFError, OSError):
                self._lost(worker)
                return
            task, worker.task = worker.task, None
            if task is None:  # pragma: no cover (a worker only answers a task)
                continue
            finished = task[0]
            try:
                reply = pickle.loads(message)
            except Exception as e:
                finished.set_failure(f'the result of task {finished.task_id} is corrupt: {e!r}')
            else:
                if isinstance(reply, Result):
                    finished = reply
                else:
                    finished.set_failure(str(reply))
            self._ready(worker)
            _hand_on(task[1], finished)

    def _lost(self, worker: _Worker) -> None:
        with contextlib.suppress(OSError):
            worker.conn.close()
        with self._reap_lock:
            worker.process.join(5)
        task, worker.task = worker.task, None
        with self._lock:
            if worker in self._idle:
                self._idle.remove(worker)
            if worker in self._workers:
                self._workers.remove(worker)
            closed = self._closed
        if closed:
            return
        logger.warning(
            'worker %s died (exit code %s): starting another',
            worker.process.pid,
            worker.process.exitcode,
        )
        try:
            self._start_worker()
        except Exception:
            logger.exception('could not start a worker in place of %s', worker.process.pid)
            self._fail_waiting_if_none_left()
        if task is not None:
            result, done = task
            result.set_failure(
                f'WorkerLost: the worker process running task {result.task_id} died '
                f'(killed, crashed or out of memory; exit code {worker.process.exitcode})',
            )
            _hand_on(done, result)

    def _fail_waiting_if_none_left(self) -> None:
        """With no worker left, the waiting tasks fail (rather than wait for ever)."""
        with self._lock:
            if self._workers:
                return
            waiting = list(self._waiting)
            self._waiting.clear()
        for _, result, done in waiting:
            result.set_failure(
                f'WorkerLost: task {result.task_id} has no worker to run on '
                '(every worker died and none could be started)',
            )
            _hand_on(done, result)

    def shutdown(self, *, kill: bool = False) -> None:
        """Stop every worker and wait for them: each finishes the task it runs first
        (for up to 10 s), or, with ``kill``, is killed at once with its process group."""
        with self._lock:
            self._closed = True
            workers = list(self._workers)
            self._idle.clear()
            self._waiting.clear()
        for worker in workers:
            if kill:
                _kill(worker.process)
            with contextlib.suppress(OSError):
                worker.conn.send_bytes(b'')
        for worker in workers:
            with self._reap_lock:
                worker.process.join(10)
                if worker.process.is_alive():
                    _kill(worker.process)
                    worker.process.join()

    def kill_now(self) -> None:
        """Kill every worker and its process group, without waiting (a signal handler's:
        no lock is taken)."""
        for worker in list(self._workers):
            _kill(worker.process)


def _kill(process: Any) -> None:
    """SIGKILL a worker's process group (the worker and what it started)."""
    pid = process.pid
    if pid is None or process._popen is None or process._popen.returncode is not None:
        return  # never started, or already reaped: its pid may be another's now
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:  # not (yet) a group of its own
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
