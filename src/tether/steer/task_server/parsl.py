"""A task server on Parsl (for example its High-Throughput Executor)."""

from __future__ import annotations

import logging
import pickle
import threading
from collections.abc import Callable, Iterable
from typing import Any

from tether.plugins.parsl import make_app, start_kernel, stop_kernel
from tether.steer.models import Result
from tether.steer.task_server._worker import run_pickled_task
from tether.steer.task_server.base import BaseTaskServer, method_name

__all__ = ['ParslTaskServer', 'scale_out_now']

logger = logging.getLogger(__name__)


class _Request:
    """A pickled request on its way through Parsl: its bytes, with a short ``repr``.

    Parsl's executor logs the ``repr`` of every argument of a task when its logger is at
    DEBUG, as it is by default (``Config(initialize_logging=True)`` logs everything to
    ``parsl.log``): it cut the ``repr`` to 100 characters, but only after building all of
    it, ~4 characters a byte, milliseconds for a 1 MB input sent inline.
    """

    __slots__ = ('message',)

    def __init__(self, message: bytes) -> None:
        self.message = message

    def __reduce__(self) -> tuple[Any, ...]:
        return (_Request, (self.message,))

    def __repr__(self) -> str:
        return f'<tether task request, {len(self.message)} bytes>'


class _MethodTask:
    """One method as a Parsl app's function: a pickled request in, a pickled result out.

    Parsl serializes an app's function once (it caches it) but its arguments and return
    value every time, with dill, a pure-Python pickler (~20 times as slow as
    :mod:`pickle` on a :class:`~tether.steer.models.Result`): so the method is bound
    here, not passed per task, and the request and result cross Parsl as bytes, which it
    only copies.
    """

    def __init__(self, method: Callable[..., Any]) -> None:
        self.method = method
        self.__name__ = method_name(method)

    def __call__(self, request: _Request) -> bytes:
        return run_pickled_task(self.method, request.message)


def scale_out_now(dfk: Any) -> None:
    """Run the kernel's first scaling poll now, so its ``init_blocks`` start at once.

    Parsl's job-status poller polls when it is made, before the kernel has added its
    executors, and then every ``strategy_period`` (5 s by default): the first block of
    workers was launched only then, ~3.5 s after the kernel started. The poll made here
    and the poller's own are serialized by a lock, so the initial blocks are requested
    once.
    """
    poller = getattr(dfk, 'job_status_poller', None)
    callback = getattr(poller, 'callback', None)
    if poller is None or callback is None:
        return
    lock = threading.Lock()

    def serialized(*args: Any) -> None:
        with lock:
            callback(*args)

    poller.callback = serialized
    try:
        serialized(*getattr(poller, 'cb_args', ()))
    except Exception:
        # The poller's next tick retries; Parsl logs its own errors the same way.
        logger.exception('first scaling poll failed; Parsl polls again in strategy_period')


class ParslTaskServer(BaseTaskServer):
    """Run tasks as Parsl apps.

    Each method is one app; a request reaches it, and its result comes back, as one
    pickle of bytes (which Parsl only copies).

    Args:
        methods: Functions, or ``(function, {'executors': [...]})`` pairs to pin a method
            to some of the Parsl config's executors.
        queues: The queues shared with the Thinker.
        config: The Parsl ``Config``, loaded in the task server's process.
        timeout: Idle seconds before stopping (``None``: wait for the kill signal).
        default_executors: Executors of methods given without options (``'all'``).
        kill_timeout: Seconds the tasks get to finish after the kill signal before the
            server stops without them (see :class:`BaseTaskServer`).
    """

    def __init__(
        self,
        methods: Iterable[Any],
        queues: Any,
        config: Any,
        timeout: float | None = None,
        default_executors: str | list[str] = 'all',
        *,
        kill_timeout: float | None = 10.0,
    ) -> None:
        super().__init__(queues, methods, timeout, kill_timeout=kill_timeout)
        self.config = config
        self.default_executors = default_executors
        self._apps: dict[str, Any] = {}
        self._dfk: Any = None

    def start_executor(self) -> None:
        # A kernel of its own (the task server runs in a forked process).
        self._dfk = start_kernel(self.config)
        scale_out_now(self._dfk)
        for name, method in self.methods.items():
            executors = self.default_executors
            fn = method
            if isinstance(method, tuple):
                fn = method[0]
                executors = method[1].get('executors', executors)
            self._apps[name] = make_app(self._dfk, _MethodTask(fn), executors)
            logger.info('method %s on executors %s', name, executors)

    def stop_executor(self) -> None:
        if self._dfk is not None:
            stop_kernel(self._dfk)
            self._dfk = None

    def submit_task(self, method: Any, result: Result, done: Callable[[Result], None]) -> None:
        fn = method[0] if isinstance(method, tuple) else method
        future = self._apps[method_name(fn)](_Request(pickle.dumps(result, protocol=5)))

        def callback(f: Any) -> None:
            try:
                finished = pickle.loads(f.result())
            except Exception as e:
                # The app never returned: its worker was lost, or Parsl failed.
                result.set_failure(f'{type(e).__name__}: the task did not finish on Parsl: {e}')
                finished = result
            done(finished)

        future.add_done_callback(callback)
