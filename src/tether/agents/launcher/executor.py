"""ExecutorLauncher: each agent runs as one task of a ``concurrent.futures.Executor``.

What academy-py 1.0's manager does with the executors it is given: an agent occupies one
of the executor's workers while it runs. The executor must reach the agent's exchange
(a :class:`~tether.agents.exchange.ThreadExchange` only works with a thread pool of this
process).

Engines with quirks are handled here: a Dask ``Client`` is accepted as such (its
``get_executor()``), and a Dask client executor submits agents with ``pure=False``:
Dask names a pure task by its function and arguments, so a restart of the same agent
would get back the failed task of the run before instead of a new one.
"""

from __future__ import annotations

from concurrent.futures import Executor, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from tether.agents._runtime import AgentRuntime
from tether.agents.launcher._base import Launcher, RestartPolicy, Supervised
from tether.exceptions import AgentConfigError

if TYPE_CHECKING:
    from tether.agents._context import AgentSpec

__all__ = ['ExecutorLauncher']


def _run_agent(spec: AgentSpec, **submit_kwargs: Any) -> None:
    del submit_kwargs  # for the executor (a Parsl resource specification ...), not the agent
    AgentRuntime(spec).run()


def _is_dask_executor(executor: object) -> bool:
    cls = type(executor)
    return cls.__module__.startswith('distributed.') and cls.__name__ == 'ClientExecutor'


def _dask_executor(executor: Any) -> Any:
    """A Dask ``Client`` becomes its executor (other objects are left alone)."""
    if any(
        base.__module__ == 'distributed.client' and base.__name__ == 'Client'
        for base in type(executor).__mro__
    ):
        return executor.get_executor()
    return executor


class ExecutorLauncher(Launcher):
    """Runs each agent as a task of ``executor`` (a thread or process pool ...).

    The launcher does not own the executor: ``close()`` stops the agents and leaves the
    executor running (shut it down yourself, or let :class:`tether.agents.aio.Manager`,
    which owns the executors it is given, do it).

    Args:
        executor: Any ``concurrent.futures.Executor`` (or a Dask ``Client``).
        restart: The restart policy, or a number of restarts (default: never).
    """

    def __init__(self, executor: Executor, *, restart: RestartPolicy | int | None = None) -> None:
        executor = _dask_executor(executor)
        if not isinstance(executor, Executor):
            raise AgentConfigError(
                f'ExecutorLauncher needs a concurrent.futures.Executor, got {executor!r:.80}'
            )
        super().__init__(restart=restart)
        self.executor = executor
        self.in_process = isinstance(executor, ThreadPoolExecutor)
        self.submit_kwargs: dict[str, dict[str, Any]] = {}
        """Keyword arguments given to ``executor.submit`` for an agent, by agent id."""
        self._engine_kwargs: dict[str, Any] = (
            {'pure': False} if _is_dask_executor(executor) else {}
        )

    def run_once(self, entry: Supervised) -> None:
        if entry.stopping:
            return
        kwargs = {**self._engine_kwargs, **self.submit_kwargs.get(entry.spec.agent_id, {})}
        self.executor.submit(_run_agent, entry.spec, **kwargs).result()

    def max_workers(self) -> int | None:
        """How many agents the executor can run at once, when it says so."""
        value = getattr(self.executor, '_max_workers', None)
        return value if isinstance(value, int) else None

    def __repr__(self) -> str:
        return f'ExecutorLauncher({self.executor!r})'

    def __getstate__(self) -> dict[str, Any]:
        raise TypeError('an ExecutorLauncher cannot be pickled (it holds an executor)')
