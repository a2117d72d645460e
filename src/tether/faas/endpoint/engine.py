"""The engine contract of a function-service endpoint, and the registry of engines.

An endpoint's agent receives tasks from the service and gives them to an *engine*, which
runs them on workers and reports back through two callbacks. tether ships three engines:
``'process'`` (a pool of worker processes on this host), ``'managers'`` (several such
pools, each task routed to one with its function warm) and ``'parsl'`` (a Parsl
HighThroughputExecutor). An endpoint names its engine in its configuration
(``engine = "process"`` in ``config.toml``, ``--engine`` of ``tether faas endpoint
configure``); the name is looked up here:

* engines registered in this process with :func:`register_engine`;
* engines that installed packages declare under the ``tether.faas_engines`` entry-point
  group (the entry point's object is an :data:`EngineFactory`)::

      [project.entry-points."tether.faas_engines"]
      mine = "my_package.engine:make_engine"

An engine implements :class:`Engine`. The conformance suite
``tether.testing.faas.EngineConformance`` checks one (also public as
``tether.abc.FaasEngine``).
"""

from __future__ import annotations

import dataclasses
import threading
import uuid
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from tether.exceptions import ConfigError

if TYPE_CHECKING:
    from tether.faas._config import ComputeEndpointConfig

__all__ = [
    'ENTRY_POINT_GROUP',
    'Engine',
    'EngineBase',
    'EngineFactory',
    'OnHandoff',
    'OnResult',
    'Task',
    'cancelled_error',
    'create_engine',
    'ended_header',
    'engine_names',
    'make_task',
    'register_engine',
    'result_header',
    'task_value',
]


@dataclasses.dataclass(slots=True)
class Task:
    """A task as the endpoint holds it (what an engine runs)."""

    task_id: str
    function_id: str
    function_serializer: str
    function_body: bytes
    data_serializer: str
    payload: bytes
    result_store: Any = None
    result_threshold: Any = None
    attempts: int = 0
    # Time limit in seconds (None: none): past it, the task fails with TaskTimeoutError
    # and its worker is stopped and replaced.
    timeout: float | None = None
    # Each time a worker running the task was lost: {'reason', 'exit_code', 'at'}. The
    # result's header carries it (the task's record says why it ran more than once).
    retries: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    # The Python environment to run it in ('': the endpoint's own interpreter; else a
    # name of the endpoint's [environments] table or an interpreter's absolute path).
    environment: str = ''


OnHandoff = Callable[[list[str]], None]
"""Called (from the engine's thread) with ids of tasks just handed to workers."""

OnResult = Callable[[dict[str, Any], bytes], None]
"""Called (from the engine's thread) with a result header (:func:`result_header`) and
the serialized result (or error) payload."""


@runtime_checkable
class Engine(Protocol):
    """Runs an endpoint's tasks on workers.

    The agent creates the engine with its :data:`EngineFactory` and may replace the two
    callbacks (plain attributes) before :meth:`start`; the engine calls them from any
    thread of its own. Every task submitted ends with exactly one :attr:`on_result`
    (success, failure, ``'cancelled'``, or a lost worker past ``max_retries``), and is
    announced by :attr:`on_handoff` once a worker has it.
    """

    on_handoff: OnHandoff
    """Told the ids of tasks just handed to workers (the service then acknowledges
    their delivery)."""

    on_result: OnResult
    """Told each task's result header and payload."""

    def start(self) -> None:
        """Start (with the configuration's ``min_workers``)."""
        ...

    def submit(self, tasks: list[Task]) -> None:
        """Queue tasks (thread-safe); hand-offs and results come through the callbacks."""
        ...

    def cancel(self, task_ids: list[str]) -> None:
        """Cancel tasks (thread-safe): drop those not started, stop the workers running
        the others; each is reported with a ``'cancelled'`` result. Unknown ids are
        ignored."""
        ...

    def stats(self) -> dict[str, Any]:
        """``workers``, ``idle``, ``pending`` and ``warm`` (function id -> workers)."""
        ...

    def stop(self) -> None:
        """Stop every worker."""
        ...


@dataclasses.dataclass(eq=False, repr=False)
class EngineBase:
    """What every engine keeps from its factory's arguments (a convenience for writing
    one: subclass it, call ``super().__init__``, implement the methods of
    :class:`Engine`).

    A dataclass: a subclass may instead be a dataclass too, its own options as fields
    after these four, its setup in ``__post_init__`` (calling ``super().__post_init__()``),
    as tether's engines are.
    """

    config: ComputeEndpointConfig
    on_handoff: OnHandoff
    on_result: OnResult
    # Environment variables the workers must see (a copy of the one given; None: none).
    env: dict[str, str] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        self.env = dict(self.env or {})


EngineFactory = Callable[['ComputeEndpointConfig', OnHandoff, OnResult, dict[str, str]], Engine]
"""Makes an engine: ``factory(config, on_handoff, on_result, env)``, where ``env`` holds
environment variables the workers must see (``TETHER_FAAS_REDIS_URL`` ...)."""

ENTRY_POINT_GROUP = 'tether.faas_engines'

_registry: dict[str, EngineFactory] = {}
_lock = threading.Lock()


class _Builtin:
    """A factory of one of tether's engines, imported when first made (by name: the
    engines import the configuration, which checks engine names here)."""

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name

    def __call__(
        self,
        config: ComputeEndpointConfig,
        on_handoff: OnHandoff,
        on_result: OnResult,
        env: dict[str, str],
    ) -> Engine:
        import importlib

        cls = getattr(importlib.import_module(self.module), self.name)
        engine: Engine = cls(config, on_handoff, on_result, env)
        return engine


_BUILTIN: dict[str, EngineFactory] = {
    'managers': _Builtin('tether.faas.endpoint._managers', 'ManagersEngine'),
    'parsl': _Builtin('tether.faas.endpoint._parsl', 'ParslEngine'),
    'process': _Builtin('tether.faas.endpoint._pool', 'ProcessPoolEngine'),
}


def register_engine(name: str, factory: EngineFactory, *, replace: bool = False) -> None:
    """Make ``name`` an engine of this process's endpoints.

    Raises:
        ConfigError: ``name`` is taken (a built-in engine, or registered before without
            ``replace``), or is not a plain name.
    """
    if not name.isidentifier():
        raise ConfigError(
            f'an engine name must be a plain name (letters, digits, _), not {name!r}'
        )
    with _lock:
        if name in _BUILTIN or (name in _registry and not replace):
            raise ConfigError(f'engine {name!r} is registered already')
        _registry[name] = factory


def _entry_points() -> dict[str, Any]:
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def engine_names() -> list[str]:
    """Every engine an endpoint of this process may name (sorted)."""
    with _lock:
        names = set(_BUILTIN) | set(_registry)
    return sorted(names | set(_entry_points()))


def _factory(name: str) -> EngineFactory:
    with _lock:
        found = _BUILTIN.get(name) or _registry.get(name)
    if found is not None:
        return found
    ep = _entry_points().get(name)
    if ep is None:
        raise ConfigError(
            f'unknown engine {name!r}: the engines are {", ".join(engine_names())} '
            f'(more come from register_engine() or the {ENTRY_POINT_GROUP!r} entry points)'
        )
    factory = ep.load()
    if not callable(factory):
        raise ConfigError(f'the entry point of engine {name!r} ({ep.value}) is not callable')
    return factory  # type: ignore[no-any-return]


def create_engine(
    config: ComputeEndpointConfig,
    on_handoff: OnHandoff,
    on_result: OnResult,
    env: dict[str, str] | None = None,
) -> Engine:
    """The engine ``config.engine`` names, with the endpoint's worker environment.

    Raises:
        ConfigError: no engine has that name.
    """
    workers_env = {
        'TETHER_FAAS_REDIS_URL': config.redis_url,
        'TETHER_FAAS_ENDPOINT_ID': config.endpoint_id,
        'TETHER_FAAS_MAX_RESULT_BYTES': str(config.max_result_bytes),
        'TETHER_FAAS_MAX_OUTPUT_BYTES': str(config.max_output_bytes),
        **(env or {}),
    }
    return _factory(config.engine)(config, on_handoff, on_result, workers_env)


def cancelled_error() -> dict[str, str]:
    """The error of a task cancelled at the endpoint."""
    return {
        'type': 'TaskCancelledError',
        'message': 'the task was cancelled before it finished',
        'traceback': '',
    }


def result_header(  # noqa: PLR0917
    task_id: str,
    status: str,
    serializer: str,
    error: dict[str, str] | None,
    start: float,
    end: float,
    output: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The header of a result message (what :attr:`Engine.on_result` is told); ``output``:
    the task's captured ``stdout`` and ``stderr``."""
    header: dict[str, Any] = {
        'task_id': task_id,
        'status': status,
        'result_serializer': serializer,
        't': {'worker_start': start, 'worker_end': end},
    }
    if error is not None:
        header['error'] = error
    if output:
        header['output'] = output
    return header


def ended_header(
    task: Task, status: str, error: dict[str, str], at: float = 0.0
) -> dict[str, Any]:
    """The header of a result the engine gives for ``task`` itself, with no worker's
    answer (``'cancelled'``, or ``'failed'``: its workers were lost ...): ``at`` as its
    start and end, and the task's ``retries`` if it has any."""
    header = result_header(task.task_id, status, task.data_serializer, error, at, at)
    if task.retries:
        header['retries'] = task.retries
    return header


def make_task(
    fn: Callable[..., Any], /, *args: Any, timeout: float | None = None, **kwargs: Any
) -> Task:
    """A task that calls ``fn(*args, **kwargs)`` (``fn`` pickled by reference: workers
    import its module), as an endpoint would receive it: for testing engines."""
    from tether.faas._payload import pack_args, pack_function

    return Task(
        task_id=str(uuid.uuid4()),
        function_id=f'{fn.__module__}.{fn.__qualname__}',
        function_serializer='pickle',
        function_body=pack_function(fn),
        data_serializer='tether',
        payload=pack_args(args, kwargs),
        timeout=timeout,
    )


def task_value(header: dict[str, Any], payload: bytes | memoryview) -> Any:
    """The value a successful task returned, from what :attr:`Engine.on_result` was
    told.

    Raises:
        TaskExecutionFailed: the task did not succeed (its error in the message).
    """
    from tether.exceptions import TaskExecutionFailed
    from tether.faas._payload import unpack_result

    if header.get('status') != 'success':
        error = header.get('error') or {}
        raise TaskExecutionFailed(
            str(error.get('type', '')),
            f'task {header.get("task_id")} {header.get("status")}: {error.get("message")}',
            str(error.get('traceback', '')),
        )
    return unpack_result(str(header.get('result_serializer', 'tether')), payload)
