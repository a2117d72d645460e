"""The task record that travels from the Thinker to a worker and back: :class:`Result`.

A :class:`Result` carries the inputs, the method name, the value (or the failure with its
traceback), the resources requested, and the timestamps and timings of every stage of the
task's life cycle. Inputs and values travel serialized (see :mod:`tether.steer._pack`):
the task server moves them as opaque bytes, or as small proxies when a topic's store and
threshold send them by reference.
"""

from __future__ import annotations

import dataclasses
import enum
import time
import traceback
import uuid
from collections.abc import Sequence
from typing import Any

from tether.steer import _pack

__all__ = [
    'FailureInformation',
    'ResourceRequirements',
    'Result',
    'SerializationMethod',
    'TimeSpans',
    'Timestamps',
]


class SerializationMethod(enum.StrEnum):
    """How task inputs and values are serialized (Colmena's names; a plain string works too).

    ``PICKLE`` (the default) uses tether's serializer; ``JSON`` uses :func:`json.dumps`
    on each input and value (a value JSON cannot encode raises ``TypeError``; tuples
    come back as lists). Either way, values over a topic's threshold travel by proxy and
    the message around them is tether's signed envelope.
    """

    PICKLE = 'pickle'
    JSON = 'json'


@dataclasses.dataclass
class ResourceRequirements:
    """What a task asks of the workers that run it (recorded; task servers may use it)."""

    node_count: int = 1
    cpu_processes: int = 1
    cpu_threads: int = 1

    @property
    def total_ranks(self) -> int:
        """Processes over all nodes."""
        return self.node_count * self.cpu_processes


@dataclasses.dataclass
class FailureInformation:
    """Why a task failed: the exception's type, message and formatted traceback (text).

    The exception itself is never pickled across processes, so a failure can always be
    read on the Thinker even when the exception's class cannot be imported there.
    """

    exception: str
    traceback: str = ''

    @classmethod
    def from_exception(cls, exc: BaseException) -> FailureInformation:
        """Record ``exc``."""
        text = ''.join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        return cls(exception=f'{type(exc).__qualname__}: {exc}', traceback=text)


@dataclasses.dataclass
class Timestamps:
    """Wall-clock times (``time.time()``) of the stages of a task's life cycle.

    ``created`` (Thinker), ``input_received`` (task server), ``start_task_submission``
    (task server hands it to its executor), ``compute_started`` and ``compute_ended``
    (worker), ``task_received`` (task server gets it back), ``result_sent`` (task
    server), ``result_received`` (Thinker).
    """

    created: float = dataclasses.field(default_factory=time.time)
    input_received: float | None = None
    compute_started: float | None = None
    compute_ended: float | None = None
    result_sent: float | None = None
    result_received: float | None = None
    start_task_submission: float | None = None
    task_received: float | None = None


@dataclasses.dataclass
class TimeSpans:
    """Durations (seconds) of the stages of a task's life cycle.

    ``proxy`` maps each proxy's key (``str(key)``) to its timings, as Colmena's does:
    ``{'times': {op: {'count': n, 'seconds': total}}}``, where ``op`` is ``store.proxy``
    (storing a value over the threshold, on the Thinker for inputs and on the worker for
    values) or ``resolve_async`` (the worker starting to fetch a proxied input); fetching
    proxied inputs overlaps the method (``async_resolve_proxies`` is the time to start
    it). ``additional`` is free for the task server and user code.
    """

    running: float | None = None
    serialize_inputs: float | None = None
    deserialize_inputs: float | None = None
    serialize_results: float | None = None
    deserialize_results: float | None = None
    async_resolve_proxies: float | None = None
    proxy: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    additional: dict[str, float] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Result:
    """A task request and, once it ran, its result.

    Attributes:
        inputs: ``(args, kwargs)`` of the call. On the Thinker before sending and after
            receiving (if ``keep_inputs``) they are objects; in transit they are packed.
        method: Name of the method to run.
        value: The return value (or ``None`` until set, or after a failure).
        success: Whether the task succeeded (``None`` until it ran).
        complete: Whether the task ran (successfully or not).
        failure_info: Why it failed, with the remote traceback.
        task_id: Unique id of the task.
        topic: The topic its result is returned on.
        keep_inputs: Whether the inputs come back with the result.
        resources: The resources requested.
        task_info: Free-form data that comes back with the result.
        max_retries: How many times the task server re-runs a failed task.
        retries: How many times it was re-run.
        worker_info: Where the task ran (host name, process id).
        message_sizes: Bytes of the messages that carried the task (``inputs``, ``value``)
            through the queues and the task server.
        timestamp: When each stage happened; ``time``: how long stages took (as Colmena).
    """

    inputs: Any = ((), {})
    method: str | None = None
    value: Any = None
    success: bool | None = None
    complete: bool | None = None
    failure_info: FailureInformation | None = None
    task_id: str = dataclasses.field(default_factory=lambda: uuid.uuid4().hex)
    topic: str | None = None
    keep_inputs: bool = True
    resources: ResourceRequirements = dataclasses.field(default_factory=ResourceRequirements)
    task_info: dict[str, Any] = dataclasses.field(default_factory=dict)
    max_retries: int = 0
    retries: int = 0
    worker_info: dict[str, Any] = dataclasses.field(default_factory=dict)
    message_sizes: dict[str, int] = dataclasses.field(default_factory=dict)
    timestamp: Timestamps = dataclasses.field(default_factory=Timestamps)
    time: TimeSpans = dataclasses.field(default_factory=TimeSpans)
    # Where over-threshold values go: the topic's store config and threshold (bytes).
    proxystore_config: Any = None
    proxystore_threshold: int | None = None
    proxystore_name: str | None = None
    serialization_method: str = 'pickle'

    @classmethod
    def from_args_and_kwargs(
        cls,
        fn_args: Sequence[Any],
        fn_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> Result:
        """A request for a call with these arguments (``kwargs`` set the other fields)."""
        return cls(inputs=(tuple(fn_args), dict(fn_kwargs or {})), **kwargs)

    # Serialization (Colmena's explicit steps) -------------------------------------------

    def _target_store(self) -> Any:
        if self.proxystore_config is not None:
            from tether.store import get_or_create_store

            return get_or_create_store(self.proxystore_config)
        if self.proxystore_name is not None:
            from tether.store import get_store

            return get_store(self.proxystore_name)
        return None

    def serialize(self) -> tuple[float, list[Any]]:
        """Pack the inputs and the value (if set) for the queues; a no-op for those packed.

        Values over ``proxystore_threshold`` go to the store (``proxystore_config``, or
        the store registered as ``proxystore_name``) and travel as proxies. Returns the
        seconds it took and the proxies it made. Queues and task servers call this
        themselves: user code needs it only when it builds requests by hand.
        """
        start = time.perf_counter()
        made: list[Any] = []
        fmt = str(self.serialization_method)
        need_inputs = not isinstance(self.inputs, _pack.Packed)
        need_value = self.value is not None and not isinstance(self.value, _pack.Packed)
        if not (need_inputs or need_value):
            return 0.0, made
        store = self._target_store()
        if need_inputs:
            args, kwargs = self.inputs
            packed = _pack.pack_inputs(
                tuple(args),
                dict(kwargs),
                store,
                self.proxystore_threshold,
                self.time.proxy,
                fmt=fmt,
            )
            self.inputs = packed
            self.message_sizes.setdefault('inputs', packed.nbytes)
            made += [packed.items[i] for i in packed.proxied]
        if need_value:
            value = _pack.pack_value(
                self.value, store, self.proxystore_threshold, self.time.proxy, fmt=fmt
            )
            self.value = value
            self.message_sizes.setdefault('value', value.nbytes)
            made += [value.items[i] for i in value.proxied]
        return time.perf_counter() - start, made

    def deserialize(self) -> float:
        """Unpack the inputs and the value (a no-op for those unpacked); return the seconds.

        Proxied inputs and values stay proxies (they resolve on first use).
        """
        start = time.perf_counter()
        self._unpack_inputs()
        if isinstance(self.value, _pack.Packed):
            self.value = self.value.unpack()
        return time.perf_counter() - start

    # Inputs ----------------------------------------------------------------------------

    @property
    def args(self) -> tuple[Any, ...]:
        """Positional arguments (unpacked on first access)."""
        self._unpack_inputs()
        return tuple(self.inputs[0])

    @property
    def kwargs(self) -> dict[str, Any]:
        """Keyword arguments (unpacked on first access)."""
        self._unpack_inputs()
        return dict(self.inputs[1])

    def _unpack_inputs(self) -> None:
        if isinstance(self.inputs, _pack.Packed):
            start = time.perf_counter()
            self.inputs = self.inputs.unpack()
            self.time.deserialize_inputs = (
                (self.time.deserialize_inputs or 0.0) + time.perf_counter() - start
            )

    # Value -----------------------------------------------------------------------------

    def set_result(
        self,
        value: Any,
        runtime: float | None = None,
        intermediate: bool = False,
    ) -> None:
        """Record a successful run (``intermediate``: one of several results of a task).

        With ``keep_inputs=False`` the inputs are dropped here.
        """
        self.value = value
        if not self.keep_inputs:
            self.inputs = ((), {})
        self.success = True
        self.complete = not intermediate
        self.failure_info = None
        if runtime is not None:
            self.time.running = runtime
        self.timestamp.compute_ended = time.time()

    def set_failure(self, exc: BaseException | str, runtime: float | None = None) -> None:
        """Record a failed run (an exception, or a message for failures outside the task)."""
        if isinstance(exc, BaseException):
            self.failure_info = FailureInformation.from_exception(exc)
        else:
            self.failure_info = FailureInformation(exception=exc)
        self.value = None
        self.success = False
        self.complete = True
        if runtime is not None:
            self.time.running = runtime
        self.timestamp.compute_ended = time.time()

    def __repr__(self) -> str:
        state = 'pending' if not self.complete else ('ok' if self.success else 'failed')
        return f'Result(task_id={self.task_id!r}, method={self.method!r}, {state})'
