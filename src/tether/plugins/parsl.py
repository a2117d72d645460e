"""A Parsl executor that returns proxies intact, for ``StoreExecutor``.

Parsl serializes a task's result with its *code* serializers when ``callable(result)``
is true, and those hash the object. Every proxy is callable (it forwards ``__call__``), so
a proxy of an unhashable object (a list, an array) cannot come back from a plain Parsl
task. :class:`ParslPoolExecutor` is ``parsl.concurrent.ParslPoolExecutor`` with results
carried in a small box and unpacked in the caller::

    from tether.plugins.parsl import ParslPoolExecutor
    from tether.store.executor import ProxySize, StoreExecutor

    with StoreExecutor(ParslPoolExecutor(config), store, should_proxy=ProxySize(100_000)) as ex:
        assert ex.submit(sum, [1, 2, 3]).result() == 6

Futures are ``concurrent.futures.Future`` objects (not Parsl ``AppFuture``).

This module is also tether's one Parsl integration: the bench Parsl executors, the
steering Parsl task server, the agents' Parsl launcher and the faas Parsl engine build
their configuration, their data-flow kernel and their apps, and clean up, with its
helpers:

* :func:`local_config`: a HighThroughputExecutor on this host, on loopback, its workers
  and interchange started with this interpreter;
* :func:`make_provider`, :func:`make_launcher` and :func:`htex_config`: a
  HighThroughputExecutor on any of Parsl's providers (Slurm, PBS Pro, LSF, Condor,
  Kubernetes, AWS, Google Cloud, local), named by the short names of :data:`PROVIDERS` and
  :data:`LAUNCHERS`, with errors that say what to fix;
* :func:`start_kernel` / :func:`stop_kernel`: a data-flow kernel of the caller's own (not
  ``parsl.load``'s global one), and its cleanup, run-log file handlers closed;
* :func:`closing_run_log`: close the run log's handlers around any Parsl shutdown;
* :func:`normalise_localhost`: an executor address of ``'localhost'`` made ``'127.0.0.1'``
  (done by :func:`start_kernel`);
* :func:`make_app`: a Python app of a kernel, on some of its executors;
* :func:`worker_init` and :func:`interchange_command`: the shell line and the command
  that make Parsl's workers and interchange run this interpreter.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from parsl.concurrent import ParslPoolExecutor as _ParslPoolExecutor

from tether.plugins._boxes import unbox_into
from tether.plugins._parsl_build import (
    LAUNCHERS,
    PROVIDERS,
    htex_config,
    interchange_command,
    make_launcher,
    make_provider,
    worker_init,
)

__all__ = [
    'LAUNCHERS',
    'PROVIDERS',
    'ParslPoolExecutor',
    'closing_run_log',
    'htex_config',
    'interchange_command',
    'local_config',
    'make_app',
    'make_launcher',
    'make_provider',
    'normalise_localhost',
    'start_kernel',
    'stop_kernel',
    'worker_init',
]


class _Boxed:
    """Calls the function and returns its result inside a list (emptied by the caller)."""

    def __init__(self, function: Callable[..., Any]) -> None:
        self.function = function
        self.__name__ = getattr(function, '__name__', 'task')

    def __call__(self, *args: Any, **kwargs: Any) -> list[Any]:
        return [self.function(*args, **kwargs)]


class ParslPoolExecutor(_ParslPoolExecutor):
    """``parsl.concurrent.ParslPoolExecutor`` whose tasks can return proxies."""

    def submit(  # type: ignore[override]
        self,
        fn: Callable[..., Any],
        /,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        """Run ``fn(*args, **kwargs)`` as a Parsl app; return a concurrent future."""
        inner = super().submit(_Boxed(fn), *args, **kwargs)  # type: ignore[no-untyped-call]
        outer: concurrent.futures.Future[Any] = concurrent.futures.Future()
        outer.set_running_or_notify_cancel()
        # The engine may keep its own future (and its callbacks) for a while: hold ours
        # weakly so that an owned result has no second holder.
        ref = weakref.ref(outer)
        inner.add_done_callback(lambda f: unbox_into(f, ref))
        return outer


def local_config(
    *,
    label: str = 'htex',
    workers: int = 1,
    run_dir: str | None = None,
    retries: int = 0,
    retry_handler: Callable[[Exception, Any], float] | None = None,
    encrypted: bool = False,
    min_blocks: int = 0,
    strategy: str | None = 'none',
    max_idletime: float | None = None,
    initialize_logging: bool = False,
    run_dir_prefix: str = 'tether-parsl-',
    **htex: Any,
) -> Any:
    """A ``parsl.config.Config``: one HighThroughputExecutor of one block on this host.

    The interchange listens on loopback (``127.0.0.1``); workers and interchange run this
    interpreter. ``run_dir`` defaults to a new temporary directory (``run_dir_prefix``),
    which the caller removes. ``strategy=None`` keeps Parsl's default (scaling in an idle
    block after ``max_idletime`` seconds, down to ``min_blocks``); ``retry_handler`` is
    Parsl's (the cost of each failure against ``retries``); ``htex`` adds any other
    HighThroughputExecutor options (``heartbeat_period`` ...; options it does not take
    raise :class:`~tether.exceptions.ConfigError`). For other providers: :func:`htex_config`,
    which this calls with a local provider.
    """
    from parsl.providers import LocalProvider

    provider = LocalProvider(  # type: ignore[no-untyped-call]
        init_blocks=1,
        min_blocks=min_blocks,
        max_blocks=1,
        worker_init=worker_init(),
    )
    return htex_config(
        provider,
        label=label,
        workers_per_node=workers,
        address='127.0.0.1',
        encrypted=encrypted,
        retries=retries,
        retry_handler=retry_handler,
        strategy=strategy,
        strategy_period=None,
        max_idletime=max_idletime,
        run_dir=run_dir,
        run_dir_prefix=run_dir_prefix,
        initialize_logging=initialize_logging,
        **htex,
    )


def start_kernel(config: Any) -> Any:
    """Start a ``DataFlowKernel`` of the caller's own from ``config``.

    Not ``parsl.load``'s global kernel: a forked process inherits whatever global kernel
    its parent loaded (without its threads), and ``parsl.load`` refuses to load twice.
    Stop it with :func:`stop_kernel`.

    An executor whose ``address`` is ``'localhost'`` (as configs written for older Parsl
    releases say) is given ``'127.0.0.1'`` instead: current Parsl takes only IP addresses
    there, and its interchange would fail to start.
    """
    from parsl.dataflow.dflow import DataFlowKernel

    normalise_localhost(config)
    return DataFlowKernel(config)


def normalise_localhost(config: Any) -> Any:
    """Replace an executor ``address`` of ``'localhost'`` in ``config`` by ``'127.0.0.1'``.

    A compatibility shim for Parsl configs written before Parsl required an IP address
    (``'localhost' does not appear to be an IPv4 or IPv6 address``). Other addresses are
    left as they are. Returns ``config``, changed in place.
    """
    for executor in getattr(config, 'executors', ()):
        if getattr(executor, 'address', None) != 'localhost':
            continue
        executor.address = '127.0.0.1'
        if getattr(executor, 'all_addresses', None) == {'localhost'}:
            executor.all_addresses = {'127.0.0.1'}
    return config


def make_app(dfk: Any, function: Callable[..., Any], executors: str | list[str] = 'all') -> Any:
    """A Parsl Python app running ``function`` on ``dfk``'s ``executors``."""
    from parsl.app.python import PythonApp

    return PythonApp(function, data_flow_kernel=dfk, executors=executors)  # type: ignore[no-untyped-call]


@contextlib.contextmanager
def closing_run_log(run_dir: str) -> Iterator[None]:
    """Around a Parsl shutdown: close the file handlers of the run log in ``run_dir``.

    Parsl detaches the handlers of its run log at cleanup but never closes them (an open
    file, a ``ResourceWarning``): they are found before the shutdown, closed after.
    """
    found = _run_log_handlers(run_dir)
    try:
        yield
    finally:
        for log, handler in found | _run_log_handlers(run_dir):
            log.removeHandler(handler)
            handler.close()


def _run_log_handlers(run_dir: str) -> set[tuple[logging.Logger, logging.Handler]]:
    loggers = [logging.getLogger()] + [
        x for x in logging.Logger.manager.loggerDict.values() if isinstance(x, logging.Logger)
    ]
    return {
        (log, handler)
        for log in loggers
        for handler in list(log.handlers)
        if run_dir and run_dir in str(getattr(handler, 'baseFilename', ''))
    }


def stop_kernel(dfk: Any) -> None:
    """Clean up a kernel of :func:`start_kernel` (stops its executors, closes its run log)."""
    with closing_run_log(str(dfk.run_dir)):
        dfk.cleanup()
