"""What every task server does: read requests, run them, retry, return results.

A task server is a process (forked from the Thinker's, so it shares the queues). It
only looks at a request's method name, task id and retry count: inputs and values stay
packed bytes or proxies, so it never serializes a user's object.
"""

from __future__ import annotations

import abc
import contextlib
import logging
import multiprocessing
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from tether.exceptions import (
    ConfigError,
    KillSignalError,
    SteerAuthenticationError,
    SteerError,
    SteerTimeoutError,
)
from tether.steer.models import Result

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
        timeout: Stop after this many seconds without a request (``None``: never).
    """

    def __init__(self, queues: Any, methods: Iterable[Any], timeout: float | None = None) -> None:
        super().__init__(daemon=False)
        self.queues = queues
        self.methods: dict[str, Any] = {}
        for m in methods:
            fn = m[0] if isinstance(m, tuple) else m
            self.methods[method_name(fn)] = m
        self.timeout = timeout
        self._outstanding = 0
        self._cond = threading.Condition()

    # Subclasses ------------------------------------------------------------------------

    @abc.abstractmethod
    def _setup(self) -> None:
        """Start the executor (in the task server's process)."""

    @abc.abstractmethod
    def _submit(self, method: Any, result: Result, done: Callable[[Result], None]) -> None:
        """Run ``result`` with ``method`` and call ``done`` with the finished result.

        For a failure outside the method (a lost worker), call ``done`` with the
        original result marked failed.
        """

    @abc.abstractmethod
    def _cleanup(self) -> None:
        """Stop the executor."""

    # Loop ------------------------------------------------------------------------------

    def _finish(self, original: Result, result: Result) -> None:
        result.timestamp.task_received = time.time()
        if not result.success and result.retries < result.max_retries:
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
        try:
            self.queues.send_result(result)
        except SteerError:
            logger.exception('could not send the result of task %s', result.task_id)
        with self._cond:
            self._outstanding -= 1
            self._cond.notify_all()

    def _dispatch(self, result: Result) -> None:
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
        self._submit(method, attempt, lambda r: self._finish(result, r))

    def run(self) -> None:
        """Serve until the kill signal (or ``timeout`` idle seconds).

        If the executor cannot start, or serving fails, the Thinker's result processors
        get the kill signal (so they stop instead of waiting forever) and the error is
        raised (the process exits with a non-zero status).
        """
        try:
            self._serve()
        except BaseException:
            logger.exception('the task server failed: telling the Thinker')
            with contextlib.suppress(Exception):
                self.queues.send_kill_to_thinker()
            raise
        self.queues.send_kill_to_thinker()

    def _serve(self) -> None:
        self._setup()
        try:
            while True:
                try:
                    result = self.queues.get_task(timeout=self.timeout)
                except KillSignalError:
                    logger.info('kill signal: finishing %d tasks', self._outstanding)
                    break
                except SteerTimeoutError:
                    logger.info('no request for %s s: stopping', self.timeout)
                    break
                except SteerAuthenticationError as e:
                    # Unsigned, altered or replayed: nothing in it was unpickled or run.
                    # The server keeps serving the campaign's genuine requests.
                    logger.error('refused a task request: %s', e)
                    continue
                with self._cond:
                    self._outstanding += 1
                self._dispatch(result)
            with self._cond:
                self._cond.wait_for(lambda: self._outstanding <= 0)
        finally:
            self._cleanup()
