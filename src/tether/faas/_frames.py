"""tether wire frames as single messages (WebSocket messages and HTTP bodies).

The service, its endpoints and the SDK exchange binary messages framed exactly like every
other tether connection (:mod:`tether._wire`): the versioned fixed prefix, the payload
lengths, a JSON header, then the raw payloads. Control data is JSON; only payloads are
bytes, and the service never deserializes them.

:func:`encode` and :func:`decode` are the pair for one message (:func:`pack` cuts a batch
into as many messages as fit). A task, as the service queues it for its endpoint, is the
typed, frozen record :class:`TaskMessage`, checked once by :func:`decode_task` (and the
task ids of ``ACK``, ``RESULTS_OK`` and ``CANCEL`` by :func:`decode_task_ids`), so that
an endpoint reads attributes, never a header.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from tether._wire import PREFIX, Frame, Limits, decode_frame, encode_head, flatten
from tether._wire._fields import field, optional
from tether.exceptions import ProtocolError

__all__ = [
    'ACK',
    'CANCEL',
    'CONTENT_TYPE',
    'FUNCTION',
    'HEARTBEAT',
    'HELLO',
    'RESULTS',
    'RESULTS_OK',
    'SubmittedTask',
    'Submission',
    'SUBMIT',
    'SUBMITTED',
    'SUBMIT_FAILED',
    'TASKS',
    'TaskMessage',
    'WELCOME',
    'decode',
    'decode_submission',
    'decode_task',
    'decode_task_ids',
    'decode_tasks',
    'encode',
    'encode_task',
    'header_length',
    'pack',
]

CONTENT_TYPE = 'application/x-tether-frame'

# Message types (tether._wire numbers applications' types from 32).
HELLO = 40  # endpoint -> service: held task ids, allowlist, engine
TASKS = 41  # service -> endpoint: tasks (one payload each)
ACK = 42  # endpoint -> service: tasks handed to workers / client -> service: results taken
RESULTS = 43  # endpoint -> service -> client: results (one payload each)
RESULTS_OK = 44  # service -> endpoint: results stored durably, forget them
HEARTBEAT = 45  # endpoint -> service: workers, idle, pending
SUBMIT = 46  # client -> service (HTTP body, or on a result stream): a batch of tasks
FUNCTION = 47  # client -> service (HTTP body): a function to register
SUBMITTED = 48  # service -> client (result stream): the batch ``request`` is recorded
SUBMIT_FAILED = 49  # service -> client (result stream): it was refused (error, message)
ACKED = 50  # service -> client (result stream): every ACK up to the one naming ``sync`` is stored
CANCEL = 51  # service -> endpoint: stop these tasks (drop them if queued, stop their worker)
WELCOME = 52  # service -> endpoint: its HELLO (allowlist) is stored and its queue consumed


def encode(mtype: int, header: dict[str, Any], payloads: Sequence[Any] = ()) -> bytes:
    """One message: prefix, sizes, JSON header, payloads."""
    sizes, buffers = flatten(list(payloads))
    return b''.join([encode_head(mtype, header, sizes), *buffers])


# A batch of tasks or results is cut into messages that every receiver accepts: payloads
# up to MESSAGE_BYTES and a JSON header (one entry per task or result) up to HEADER_BUDGET,
# half the default Limits.max_header. Payload bytes alone are not enough: 5,000 no-op
# results carry about 2 MB of headers (their timings) and 1 KB of payloads.
MESSAGE_BYTES = 8 * 2**20
HEADER_BUDGET = 2**19
MESSAGE_ENTRIES = 1024


def header_length(message: bytes) -> int:
    """The length of the JSON header of an encoded message."""
    return int(PREFIX.unpack_from(message)[5])


def pack(
    mtype: int,
    key: str,
    entries: Iterable[tuple[dict[str, Any], Any]],
    extra: dict[str, Any] | None = None,
) -> list[bytes]:
    """``(header, payload)`` entries as few messages ``{key: [headers], **extra}`` as fit.

    Each message holds at most :data:`MESSAGE_ENTRIES` entries and :data:`MESSAGE_BYTES`
    of payloads (one larger payload goes alone) and a header of at most
    :data:`HEADER_BUDGET` bytes: a group whose header is longer is halved.

    Raises:
        ProtocolError: one entry's header alone is longer than :data:`HEADER_BUDGET`.
    """
    groups: list[list[tuple[dict[str, Any], Any]]] = []
    group: list[tuple[dict[str, Any], Any]] = []
    size = 0
    for entry in entries:
        n = len(entry[1])
        if group and (size + n > MESSAGE_BYTES or len(group) >= MESSAGE_ENTRIES):
            groups.append(group)
            group, size = [], 0
        group.append(entry)
        size += n
    if group:
        groups.append(group)
    messages: list[bytes] = []
    while groups:
        group = groups.pop(0)
        message = encode(
            mtype, {key: [h for h, _ in group], **(extra or {})}, [p for _, p in group]
        )
        if header_length(message) <= HEADER_BUDGET:
            messages.append(message)
            continue
        if len(group) == 1:
            raise ProtocolError(
                f'one {key[:-1]} has a header of {header_length(message)} bytes, over the '
                f'{HEADER_BUDGET} a message may carry',
            )
        half = len(group) // 2
        groups[:0] = [group[:half], group[half:]]
    return messages


def decode(data: bytes | bytearray | memoryview, limits: Limits | None = None) -> Frame:
    """Parse one message; payloads are zero-copy views of ``data``.

    Raises:
        ProtocolError: if the bytes are not one well-formed frame.
        ProtocolVersionError: if the frame carries another protocol version.
        FrameTooLargeError: if it exceeds ``limits``.
    """
    flags, mtype, rid, header, payloads = decode_frame(data, limits or Limits())
    return Frame(mtype, header, payloads, rid, flags)


class TaskMessage(NamedTuple):
    """A task as the service queues it for its endpoint (one entry of a ``TASKS`` message).

    Attributes:
        task_id: The task's id.
        function_id: The function to run.
        task_group_id: The group its result is published to.
        data_serializer: How its arguments (the payload) and result are serialized.
        result_store: A store configuration to put a large result into (``None``: none).
        result_threshold: Results larger than this many bytes go to ``result_store``.
        timeout: Seconds the task may run (``None``: no limit).
        t: Timestamps (seconds since the epoch) along its way, by stage.
    """

    task_id: str
    function_id: str
    task_group_id: str
    data_serializer: str
    result_store: dict[str, Any] | None
    result_threshold: int | None
    timeout: float | None
    t: dict[str, float]


def encode_task(task: TaskMessage) -> dict[str, Any]:
    """The JSON header entry of a task (no ``timeout`` if it has none)."""
    header = task._asdict()
    if task.timeout is None:
        del header['timeout']
    return header


def decode_task(header: Mapping[str, Any]) -> TaskMessage:
    """The record of one entry of a ``TASKS`` message.

    Raises:
        ProtocolError: a field is missing or of the wrong type.
    """
    get = header.get
    task_id, function_id = get('task_id'), get('function_id')
    group, serializer = get('task_group_id') or '', get('data_serializer', 'tether')
    store, threshold, timeout, stamps = (
        get('result_store'),
        get('result_threshold'),
        get('timeout'),
        get('t') or {},
    )
    if (  # one test of every field's type (the usual case), then the precise error
        type(task_id) is not str
        or type(function_id) is not str
        or type(group) is not str
        or type(serializer) is not str
        or (store is not None and type(store) is not dict)
        or (threshold is not None and type(threshold) is not int)
        or (timeout is not None and type(timeout) not in _NUMBERS)
        or type(stamps) is not dict
    ):
        return _decode_task_slowly(header)
    record: TaskMessage = _new(
        TaskMessage,
        (
            task_id,
            function_id,
            group,
            serializer,
            store,
            threshold,
            float(timeout) if timeout is not None and timeout > 0 else None,
            stamps,
        ),
    )
    return record


_NUMBERS = (int, float)
_new = tuple.__new__  # a record without the Python-level __new__ of a named tuple


def _decode_task_slowly(header: Mapping[str, Any]) -> TaskMessage:
    """:func:`decode_task` field by field: the error names the first bad field."""
    what = 'a task message'
    timeout = optional(header, 'timeout', (int, float), what)
    return TaskMessage(
        field(header, 'task_id', str, what),
        field(header, 'function_id', str, what),
        str(optional(header, 'task_group_id', str, what, '')),
        optional(header, 'data_serializer', str, what, 'tether'),
        optional(header, 'result_store', dict, what),
        optional(header, 'result_threshold', int, what),
        float(timeout) if timeout is not None and timeout > 0 else None,
        dict(optional(header, 't', dict, what, {})),
    )


def decode_tasks(frame: Frame) -> Iterator[tuple[TaskMessage, Any]]:
    """The tasks of a ``TASKS`` message, each with its payload, one at a time.

    Raises:
        ProtocolError: the entries do not match the payloads (before any task), or one
            is malformed (when it comes).
    """
    entries = field(frame.header, 'tasks', list, 'TASKS')
    if len(entries) != len(frame.payloads):
        raise ProtocolError('TASKS needs one payload per entry of "tasks"')
    return map(_task_and_payload, entries, frame.payloads)


def _task_and_payload(entry: Any, payload: Any) -> tuple[TaskMessage, Any]:
    if type(entry) is not dict:
        raise ProtocolError('each entry of "tasks" must be an object')
    return decode_task(entry), payload


def decode_task_ids(header: Mapping[str, Any]) -> list[str]:
    """The ``task_ids`` of an ``ACK``, ``RESULTS_OK`` or ``CANCEL`` message.

    Raises:
        ProtocolError: they are not a list of strings.
    """
    ids = header.get('task_ids', [])
    if not isinstance(ids, list) or not all(isinstance(t, str) for t in ids):
        raise ProtocolError('"task_ids" must be a list of task id strings')
    return ids


class SubmittedTask(NamedTuple):
    """One task of a ``SUBMIT`` message (as a client sends it).

    Attributes:
        task_id: The id the client chose for it.
        function_id: The function to run.
        endpoint_id: Where to run it.
        data_serializer: How its arguments and result are serialized.
        result_store: A store configuration for a large result (``None``: none).
        result_threshold: Results larger than this many bytes go to ``result_store``.
        timeout: Seconds it may run, as the client asked (``None``: no limit).
        t: Timestamps along its way so far, by stage.
    """

    task_id: str
    function_id: str
    endpoint_id: str
    data_serializer: str
    result_store: dict[str, Any] | None
    result_threshold: int | None
    timeout: Any
    t: dict[str, float]


class Submission(NamedTuple):
    """A ``SUBMIT`` message: a batch of tasks, one payload each, for one task group."""

    task_group_id: str | None
    tasks: list[SubmittedTask]


def decode_submission(header: Mapping[str, Any], payload_count: int) -> Submission:
    """The record of a ``SUBMIT`` message's header (its time limits are the service's to
    bound: ``timeout`` is given as sent).

    Raises:
        ProtocolError: the tasks do not match the payloads, or a field is missing or of
            the wrong type.
    """
    entries = field(header, 'tasks', list, 'SUBMIT')
    if len(entries) != payload_count:
        raise ProtocolError('a submission needs one payload per entry of "tasks"')
    tasks = []
    for entry in entries:
        if not isinstance(entry, dict):
            raise ProtocolError('each entry of "tasks" must be an object')
        get = entry.get
        task = _new(
            SubmittedTask,
            (
                get('task_id'),
                get('function_id'),
                get('endpoint_id'),
                get('data_serializer'),
                get('result_store'),
                get('result_threshold'),
                get('timeout'),
                get('t') or {},
            ),
        )
        if (  # one test of every field's type (the usual case), then the precise error
            type(task.task_id) is not str
            or type(task.function_id) is not str
            or type(task.endpoint_id) is not str
            or (task.data_serializer is not None and type(task.data_serializer) is not str)
            or (task.result_store is not None and type(task.result_store) is not dict)
            or (task.result_threshold is not None and type(task.result_threshold) is not int)
            or type(task.t) is not dict
        ):
            task = _submitted_slowly(entry)
        elif task.data_serializer is None:
            task = task._replace(data_serializer='tether')
        tasks.append(task)
    return Submission(optional(header, 'task_group_id', str, 'SUBMIT') or None, tasks)


def _submitted_slowly(entry: Mapping[str, Any]) -> SubmittedTask:
    """One task of :func:`decode_submission`, field by field: the error names the field."""
    what = 'a submitted task'
    return SubmittedTask(
        field(entry, 'task_id', str, what),
        field(entry, 'function_id', str, what),
        field(entry, 'endpoint_id', str, what),
        optional(entry, 'data_serializer', str, what, 'tether'),
        optional(entry, 'result_store', dict, what),
        optional(entry, 'result_threshold', int, what),
        entry.get('timeout'),
        dict(optional(entry, 't', dict, what, {})),
    )
