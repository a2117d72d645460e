"""What every task server does: read requests, run them, retry, return results.

A task server is a process (forked from the Thinker's, so it shares the queues). It
only looks at a request's method name, task id and retry count: inputs and values stay
packed bytes or proxies, so it never serializes a user's object.

The contract (re-exported as :class:`tether.abc.SteerTaskServer`): a task server derives
from :class:`BaseTaskServer`, which owns the loop (reading requests, retries, the kill
signal, ``timeout``, reporting results), and implements three hooks, called in the task
server's process: :meth:`~BaseTaskServer.start_executor`,
:meth:`~BaseTaskServer.submit_task` and :meth:`~BaseTaskServer.stop_executor` (which
reads :attr:`~BaseTaskServer.stop_now`); :meth:`~BaseTaskServer.kill_workers` is optional.
The conformance suite is :class:`tether.testing.steer.TaskServerConformance`.
"""

from __future__ import annotations

import abc
import contextlib
import logging
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from tether._serve.metrics import MetricsOptions
from tether.exceptions import (
    ConfigError,
    KillSignalError,
    SteerAuthenticationError,
    SteerError,
    SteerTimeoutError,
)
from tether.steer.models import Result
from tether.steer.task_server._metrics import TaskServerMetrics

__all__ = ['BaseTaskServer', 'method_name']

logger = logging.getLogger(__name__)

_ctx = multiprocessing.get_context('fork')


def method_name(method: Any) -> str:
    """The name a method is called by in ``send_inputs(method=...)``."""
    name = getattr(method, 'name', None) or getattr(method, '__name__', None)
    if not isinstance(name, str):
        raise ConfigError(f'method {method!r} has no name: give it a __name__ or .name')
    return name


class BaseTaskServer(_ctx.Process, abc.ABC):  # type: ignore[name-defined,misc]
    """Run tasks from the queues until the kill signal.

    Args:
        queues: The queues shared with the Thinker.
        methods: The methods it may run; a request naming any other method comes back
            as a failure (nothing a message names is imported or called otherwise).
        timeout: Stop after this many seconds without a request (``None``: never); the
            tasks still running finish first.
        kill_timeout: After the kill signal, seconds the tasks it has (running or
            waiting for a worker) get to finish; those still unfinished then are stopped
            (:class:`LocalTaskServer` kills their workers) and come back failed.
            ``None``: wait for every one.
        metrics: Where to serve Prometheus metrics (:class:`~tether._serve.metrics.MetricsOptions`
            or a dict of its fields: ``port`` (0: any free port), ``bind``,
            ``token_file``); default: none. The address bound is
            :attr:`metrics_address` once the server runs. Also settable as
            :attr:`metrics_options` before ``start()``.

    Stopping: the kill signal (:meth:`~tether.steer.queue.BaseQueues.send_kill_signal`)
    stops the server within ``kill_timeout`` seconds, even while tasks run.
    ``terminate()`` (``SIGTERM``) stops it at once and kills its workers with it; the
    server then exits with ``-SIGTERM``.
    """

    def __init__(
        self,
        queues: Any,
        methods: Iterable[Any],
        timeout: float | None = None,
        *,
        kill_timeout: float | None = 10.0,
        metrics: MetricsOptions | Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(daemon=False)
        self.queues = queues
        self.methods: dict[str, Any] = {}
        for m in methods:
            fn = m[0] if isinstance(m, tuple) else m
            self.methods[method_name(fn)] = m
        self.timeout = timeout
        self.kill_timeout = kill_timeout
        self._outstanding = 0
        self._tasks: dict[str, Result] = {}  # received, no result sent yet
        self._stopping = False  # the kill signal came: no more retries
        self._stop_now = False  # ... and kill_timeout passed: stop what still runs
        self._cond = threading.Condition()
        # Prometheus metrics (off unless a port is given): served from the server's
        # process, which tells this object the port it bound.
        self.metrics_options = TaskServerMetrics.options(metrics)
        self._metrics_port = _ctx.Value('i', 0)
        self._telemetry: TaskServerMetrics | None = None

    @property
    def metrics_address(self) -> tuple[str, int] | None:
        """Where the metrics endpoint listens, once the server has started it (``None``:
        metrics are off, or not started yet)."""
        port = int(self._metrics_port.value)
        return (self.metrics_options.bind, port) if port else None

    def _start_metrics(self) -> None:
        if not self.metrics_options.enabled:
            return

        def in_flight() -> dict[str, int]:
            with self._cond:
                methods = [r.method or '' for r in self._tasks.values()]
            return {m: methods.count(m) for m in set(methods)}

        name = f'{type(self).__name__}-{os.getpid()}'
        self._telemetry = TaskServerMetrics(name, self.methods, self.metrics_options, in_flight)
        address = self._telemetry.address()
        if address is not None:
            self._metrics_port.value = address[1]
            logger.info('metrics at http://%s:%d/metrics', *address)

    # Subclasses ------------------------------------------------------------------------

    @property
    def stop_now(self) -> bool:
        """Whether :meth:`stop_executor` must stop the tasks still running, at once.

        True once the kill signal came and ``kill_timeout`` passed with tasks unfinished.
        """
        return self._stop_now

    @abc.abstractmethod
    def start_executor(self) -> None:
        """Start the executor (in the task server's process)."""

    @abc.abstractmethod
    def submit_task(self, method: Any, result: Result, done: Callable[[Result], None]) -> None:
        """Run ``result`` with ``method`` and call ``done`` with the finished result.

        For a failure outside the method (a lost worker), call ``done`` with the
        original result marked failed.
        """

    @abc.abstractmethod
    def stop_executor(self) -> None:
        """Stop the executor (at once, stopping the tasks it runs, if :attr:`stop_now`)."""

    def kill_workers(self) -> None:
        """Kill the processes that run tasks, at once (the server is terminated).

        Called from a signal handler: no locks, nothing that may block.
        """

    # Loop ------------------------------------------------------------------------------

    def _finish(self, original: Result, result: Result) -> None:
        result.timestamp.task_received = time.time()
        if not result.success and result.retries < result.max_retries and not self._stopping:
            if self._telemetry is not None:
                self._telemetry.retried()
            original.retries += 1
            logger.info(
                'task %s (%s) failed, retry %d of %d',
                original.task_id,
                original.method,
                original.retries,
                original.max_retries,
            )
            self._dispatch(original)
            return
        result.retries = original.retries
        result.message_sizes.setdefault('inputs', original.message_sizes.get('inputs', 0))
        with self._cond:
            if self._tasks.pop(original.task_id, None) is None:
                return  # already reported as stopped by the kill signal
        if self._telemetry is not None:
            received = original.timestamp.input_received or result.timestamp.task_received
            self._telemetry.finished(
                original.method,
                max(0.0, (result.timestamp.task_received or 0.0) - (received or 0.0)),
                bool(result.success),
                int(original.message_sizes.get('inputs', 0)),
            )
        try:
            self.queues.deliver_result(result)
        except SteerError:
            logger.exception('could not send the result of task %s', result.task_id)
        with self._cond:
            self._outstanding -= 1
            self._cond.notify_all()

    def _report_stopped(self) -> None:
        """Send the tasks still unfinished after ``kill_timeout`` back as failed."""
        with self._cond:
            stopped = list(self._tasks.values())
            self._tasks.clear()
            self._outstanding = 0
        for original in stopped:
            failed = Result(**vars(original))
            failed.set_failure(
                f'KillSignal: the task server received the kill signal and stopped task '
                f'{original.task_id} ({original.method}) after waiting {self.kill_timeout} s '
                'for it to finish (kill_timeout)',
            )
            try:
                self.queues.deliver_result(failed)
            except SteerError:
                logger.exception('could not send the result of task %s', original.task_id)

    def _dispatch(self, result: Result) -> None:
        if result.method is None and len(self.methods) == 1:
            # send_inputs() without method=: the only method there is (as in Colmena).
            result.method = next(iter(self.methods))
        method = self.methods.get(result.method or '')
        if method is None:
            failed = Result(**vars(result))
            failed.set_failure(
                f'unknown method {result.method!r}: this task server runs {sorted(self.methods)}',
            )
            failed.max_retries = 0
            self._finish(result, failed)
            return
        import copy

        result.timestamp.start_task_submission = time.time()
        attempt = copy.copy(result)
        attempt.timestamp = copy.copy(result.timestamp)
        attempt.time = copy.deepcopy(result.time)
        self.submit_task(method, attempt, lambda r: self._finish(result, r))

    def run(self) -> None:
        """Serve until the kill signal (or ``timeout`` idle seconds).

        If the executor cannot start, or serving fails, the Thinker's result processors
        get the kill signal (so they stop instead of waiting forever) and the error is
        raised (the process exits with a non-zero status).
        """
        # In the server's process (its main thread); run() called in a thread leaves
        # SIGTERM to the caller.
        main = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGTERM, self._on_sigterm) if main else None
        try:
            self._serve()
        except BaseException:
            logger.exception('the task server failed: telling the Thinker')
            with contextlib.suppress(Exception):
                self.queues.send_kill_to_thinker()
            raise
        finally:
            if main:
                signal.signal(signal.SIGTERM, previous)
        self.queues.send_kill_to_thinker()

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        # terminate(): the workers go with the server, never left running under init.
        try:
            self.kill_workers()
        finally:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)

    def _serve(self) -> None:
        if _ctx.current_process() is self and hasattr(self.queues, 'set_role'):
            self.queues.set_role('server')  # in its own process: this copy is the server's
        self._start_metrics()
        self.start_executor()
        try:
            while True:
                try:
                    result = self.queues.next_task(timeout=self.timeout)
                except KillSignalError:
                    logger.info(
                        'kill signal: finishing %d tasks (for up to %s s)',
                        self._outstanding,
                        self.kill_timeout,
                    )
                    grace, killed = self.kill_timeout, True
                    break
                except SteerTimeoutError:
                    # Idle: the tasks still running finish (kill_timeout is the kill
                    # signal's).
                    logger.info('no request for %s s: stopping', self.timeout)
                    grace, killed = None, False
                    break
                except SteerAuthenticationError as e:
                    # Unsigned, altered or replayed: nothing in it was unpickled or run.
                    # The server keeps serving the campaign's genuine requests.
                    logger.error('refused a task request: %s', e)
                    continue
                with self._cond:
                    self._outstanding += 1
                    self._tasks[result.task_id] = result
                if self._telemetry is not None:
                    self._telemetry.received()
                self._dispatch(result)
            with self._cond:
                self._stopping = killed
                done = self._cond.wait_for(lambda: self._outstanding <= 0, grace)
                self._stop_now = not done
        finally:
            self.stop_executor()
            if self._telemetry is not None:
                self._telemetry.close()
        if self._stop_now:
            self._report_stopped()
