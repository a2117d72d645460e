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
    """How queues serialize messages (Colmena's names; a plain string works too).

    Only ``PICKLE`` is supported: task inputs and values travel through tether's
    serializer (and by proxy over the threshold). ``JSON`` is refused with a
    :class:`~tether.exceptions.ConfigError` rather than silently pickling.
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

    ``proxy`` maps a store operation (``store.proxy``: storing values over the threshold,
    on the Thinker for inputs and on the worker for values) to its seconds; fetching
    proxied inputs overlaps the method (``async_resolve_proxies`` is the time to start
    it). ``additional`` is free for the task server and user code.
    """

    running: float | None = None
    serialize_inputs: float | None = None
    deserialize_inputs: float | None = None
    serialize_results: float | None = None
    deserialize_results: float | None = None
    async_resolve_proxies: float | None = None
    proxy: dict[str, float] = dataclasses.field(default_factory=dict)
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

    def set_result(self, value: Any, runtime: float | None = None) -> None:
        """Record a successful run."""
        self.value = value
        self.success = True
        self.complete = True
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
