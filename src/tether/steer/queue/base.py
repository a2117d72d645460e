"""The queues between a Thinker and a task server, independent of the transport.

A queue object is created once, in the Thinker's process, and handed to the task server
(which runs in a forked process, so both share it). The Thinker side sends task requests
and reads results per topic; the task server side reads requests and sends results.

Messages carry a pickle of the :class:`~tether.steer.models.Result` with its inputs or
value packed (see :mod:`tether.steer._pack`). By default every message is signed with the
queue key and checked before anything in it is unpickled, and a message read twice, or
from another topic or queue than it was sent to, is refused (see
:mod:`tether.steer._auth`). ``secret=False`` sends unsigned messages (a short magic
prefix and the pickle), for queues only trusted parties can write to.
"""

from __future__ import annotations

import abc
import dataclasses
import enum
import logging
import os
import pickle
import threading
import time
import warnings
import weakref
from collections.abc import Collection, Mapping
from typing import Any

from tether import _tracing
from tether.exceptions import (
    ConfigError,
    KillSignalError,
    SteerAuthenticationError,
    SteerQueueError,
    StoreNotFoundError,
)
from tether.steer import _auth, _pack
from tether.steer.models import ResourceRequirements, Result
from tether.steer.queue._evict import Evictor

__all__ = ['BaseQueues', 'ColmenaQueues', 'QueueRole']

logger = logging.getLogger(__name__)

_MAGIC = b'TSQ1'  # an unsigned message (secret=False)
_KILL = b'TSQK'  # the unsigned kill signal
_REQUESTS = 'requests'
_DEFAULT_MAX_AGE = 7 * 24 * 3600.0


_all_queues: weakref.WeakSet[BaseQueues] = weakref.WeakSet()


def _new_locks_after_fork() -> None:
    # A task server is forked from the Thinker's process: a lock an agent thread held at
    # that moment must not stay held forever in the child.
    for queues in list(_all_queues):
        queues._after_fork_in_child()


os.register_at_fork(after_in_child=_new_locks_after_fork)


def _per_topic(value: Any, topics: Collection[str], what: str) -> dict[str, Any]:
    if isinstance(value, Mapping):
        unknown = set(value) - set(topics)
        if unknown:
            raise ConfigError(
                f'{what} names unknown topics {sorted(unknown)}; topics: {sorted(topics)}',
            )
        return {t: value.get(t) for t in topics}
    return dict.fromkeys(topics, value)


class QueueRole(enum.StrEnum):
    """Which side uses a queue object: warns about calls that belong to the other side."""

    ANY = 'any'
    SERVER = 'server'
    CLIENT = 'client'


class BaseQueues(abc.ABC):
    """Topics, per-topic stores and thresholds, and the message format.

    Args:
        topics: Names of the result topics (``'default'`` is always added).
        serialization_method: How inputs and values are serialized: ``'pickle'``
            (tether's serializer, the default) or ``'json'`` (each input and value goes
            through :func:`json.dumps`; a value JSON cannot encode raises ``TypeError``
            in :meth:`send_inputs`, and tuples come back as lists, as in Colmena).
        keep_inputs: Whether results carry their inputs back by default.
        proxystore_name: Name of a registered store (or a dict topic -> name) used to
            send values over the threshold by reference.
        proxystore_threshold: Bytes (or a dict topic -> bytes): a value whose serialized
            payload (framing header not counted) is over it travels by proxy (but
            ``None``, bools, ``...`` and ``NotImplemented`` never do). A threshold of
            ``None`` never proxies.
        secret: Key to sign and check every message with (HMAC-SHA256), at least 16
            bytes. ``None`` (the default) takes it from ``$TETHER_STEER_KEY``,
            ``$TETHER_STEER_KEY_FILE`` or the user's key file
            (``~/.config/tether/steer.key``, created on first use); ``False`` sends and
            accepts unsigned messages. Never sent, never pickled.
        max_age: Signed messages older than this many seconds are refused (replays to a
            reader that restarted); ``None``: no limit.
    """

    def __init__(
        self,
        topics: Collection[str] = (),
        serialization_method: str = 'pickle',
        keep_inputs: bool = True,
        proxystore_name: str | Mapping[str, str | None] | None = None,
        proxystore_threshold: int | Mapping[str, int | None] | None = None,
        *,
        secret: _auth.SecretSpec = None,
        max_age: float | None = _DEFAULT_MAX_AGE,
    ) -> None:
        if isinstance(topics, str):
            raise ConfigError('topics must be a collection of names, not one string')
        if serialization_method not in ('pickle', 'json'):
            raise ConfigError(
                f'serialization_method {serialization_method!r} is not supported: use "pickle" '
                '(SerializationMethod.PICKLE) or "json"',
            )
        self.topics: set[str] = {*topics, 'default'}
        self.serialization_method = str(serialization_method)
        self.role = QueueRole.ANY
        self.keep_inputs = keep_inputs
        self.proxystore_name = _per_topic(proxystore_name, self.topics, 'proxystore_name')
        self.proxystore_threshold = _per_topic(
            proxystore_threshold,
            self.topics,
            'proxystore_threshold',
        )
        for topic, value in self.proxystore_threshold.items():
            if value is not None and (not isinstance(value, int) or value < 0):
                raise ConfigError(f'proxystore_threshold for topic {topic!r} must be an int >= 0')
        # Only "from the environment" or "unsigned" survives pickling, never a key.
        self._secret_spec: _auth.SecretSpec = False if secret is False else None
        self.max_age = max_age
        self._sealer = self._new_sealer(_auth.resolve_secret(secret))
        self._queue_id = ''  # names these queues in signed messages (subclasses set it)
        self._lock = threading.Condition()
        self._active = 0
        self._active_ids: dict[str, None] = {}  # ordered: the tasks sent, no result read
        self._made_proxies: dict[str, tuple[Any, list[Any]]] = {}
        self._evictor = Evictor()
        _all_queues.add(self)
        self._open()

    def _open(self) -> None:  # noqa: B027 (a hook: nothing to do unless overridden)
        """Make the transport's queues, last in ``__init__`` (a transport that needs no
        arguments of its own overrides this, not ``__init__``)."""

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Condition()
        # The tasks in flight are the parent's: the child sent none of them.
        self._active = 0
        self._active_ids = {}
        # The evicting thread is the parent's: the child evicts nothing it did not make.
        self._evictor = Evictor()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state['_lock'] = None
        # The key stays in this process: a copy resolves its own (environment or key
        # file), or stays unsigned if these queues were made with secret=False.
        state['_sealer'] = None
        state['_made_proxies'] = {}
        state['_evictor'] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Condition()
        self._evictor = Evictor()
        self._sealer = self._new_sealer(_auth.resolve_secret(self._secret_spec))
        _all_queues.add(self)

    def set_role(self, role: QueueRole | str) -> None:
        """Say which side uses this object (``'client'``, ``'server'`` or ``'any'``).

        A call that belongs to the other side then warns (``UserWarning``); it still
        runs. A Thinker sets ``'client'``, a task server ``'server'``.

        Raises:
            ValueError: ``role`` is not one of those names.
        """
        self.role = QueueRole(role)

    def _check_role(self, allowed: QueueRole, call: str) -> None:
        if self.role not in (QueueRole.ANY, allowed):
            warnings.warn(
                f'{call} belongs to the {allowed.value} side; these queues are the '
                f'{self.role.value} side (see set_role)',
                stacklevel=3,
            )

    def flush(self) -> None:
        """Drop every message waiting in the request queue and the result topics."""
        raise NotImplementedError(f'{type(self).__name__} cannot flush')

    # Message format --------------------------------------------------------------------

    def _new_sealer(self, key: _auth.QueueKey | None) -> _auth.Sealer | None:
        return None if key is None else _auth.Sealer(key, max_age=self.max_age)

    @property
    def signed(self) -> bool:
        """Whether messages are signed and checked (see ``secret``)."""
        return self._sealer is not None

    def _channel(self, channel: str) -> str:
        return f'{self._queue_id}/{channel}'

    def _encode(self, result: Result | None, channel: str) -> bytes:
        """The message carrying ``result`` (``None``: the kill signal) to ``channel``."""
        if self._sealer is None:
            return _KILL if result is None else _MAGIC + pickle.dumps(result, protocol=5)
        if result is None:
            return self._sealer.seal(self._channel(channel), 'kill', b'')
        kind = 'task' if channel == _REQUESTS else 'result'
        return self._sealer.seal(self._channel(channel), kind, pickle.dumps(result, protocol=5))

    def _decode(self, message: bytes, channel: str, where: str) -> Result | None:
        """The result a message read from ``channel`` carries (``None``: the kill signal).

        Raises:
            SteerAuthenticationError: the message is unsigned (these queues sign), altered,
                signed with another key, or signed but these queues have no key.
            SteerReplayError: it was read before, or sent to another topic or queue.
            SteerQueueError: it is not a tether.steer message.
        """
        head = message[:4]
        if head == _auth.SIGNED:
            if self._sealer is None:
                raise SteerAuthenticationError(
                    f'refused a signed message on {where}: these queues were made with '
                    'secret=False and cannot check it (give both sides the same secret)',
                )
            kind, body = self._sealer.open(message, self._channel(channel), where)
            if kind == 'kill':
                return None
            expected = 'task' if channel == _REQUESTS else 'result'
            if kind != expected:
                raise SteerAuthenticationError(
                    f'refused a message on {where}: a {kind!r} where a {expected!r} belongs',
                )
        elif head in (_MAGIC, _KILL) and self._sealer is not None:
            raise SteerAuthenticationError(
                f'refused an unsigned message on {where}: these queues sign and check every '
                'message (pass secret=False to both sides to use unsigned queues)',
            )
        elif message == _KILL:
            return None
        elif head == _MAGIC:
            body = memoryview(message)[4:]
        else:
            raise SteerQueueError(f'refused a message on {where}: not a tether.steer message')
        result = pickle.loads(body)
        if not isinstance(result, Result):
            raise SteerQueueError(f'refused a message on {where}: not a Result')
        return result

    # Transport (subclasses) ------------------------------------------------------------

    @abc.abstractmethod
    def _send_request(self, message: bytes) -> None: ...

    @abc.abstractmethod
    def _get_request(self, timeout: float | None) -> bytes:
        """Return the next request; raise SteerTimeoutError after ``timeout``."""

    @abc.abstractmethod
    def _send_result(self, message: bytes, topic: str) -> None: ...

    @abc.abstractmethod
    def _get_result(self, topic: str, timeout: float | None) -> bytes:
        """Return the next result of ``topic``; raise SteerTimeoutError after ``timeout``."""

    # Thinker side ----------------------------------------------------------------------

    def _store(self, topic: str) -> Any:
        name = self.proxystore_name[topic]
        if name is None:
            return None
        from tether.store import get_store

        store = get_store(name)
        if store is None:
            raise StoreNotFoundError(
                f'no store named {name!r} is registered in this process (topic {topic!r}): '
                f'create it with Store({name!r}, connector, register=True)',
            )
        return store

    def send_inputs(
        self,
        *input_args: Any,
        method: str | None = None,
        input_kwargs: dict[str, Any] | None = None,
        keep_inputs: bool | None = None,
        resources: ResourceRequirements | dict[str, Any] | None = None,
        topic: str = 'default',
        task_info: dict[str, Any] | None = None,
        max_retries: int = 0,
    ) -> str:
        """Send a task request; return its task id.

        Inputs are serialized once here; those over the topic's threshold are stored in
        the topic's store and travel as proxies. Without ``method``, a task server that
        runs exactly one method runs that one (others fail the task, naming theirs).
        """
        self._check_role(QueueRole.CLIENT, 'send_inputs')
        if topic not in self.topics:
            raise ConfigError(f'unknown topic {topic!r}; topics: {sorted(self.topics)}')
        if isinstance(resources, dict):
            resources = ResourceRequirements(**resources)
        result = Result(
            method=method,
            topic=topic,
            keep_inputs=self.keep_inputs if keep_inputs is None else keep_inputs,
            resources=resources or ResourceRequirements(),
            task_info=dict(task_info or {}),
            max_retries=max_retries,
            serialization_method=self.serialization_method,
        )
        store = self._store(topic)
        threshold = self.proxystore_threshold[topic]
        start = time.perf_counter()
        packed = _pack.pack_inputs(
            input_args,
            dict(input_kwargs or {}),
            store,
            threshold,
            result.time.proxy,
            fmt=self.serialization_method,
        )
        result.inputs = packed
        if store is not None:
            result.proxystore_config = store.config()
            result.proxystore_threshold = threshold
        # The time to serialize (and proxy) the inputs; the pickle of the small envelope
        # that follows is not included.
        result.time.serialize_inputs = time.perf_counter() - start
        message = self._encode(result, _REQUESTS)
        if packed.proxied and not result.keep_inputs:
            made = [packed.items[i] for i in packed.proxied]
            self._made_proxies[result.task_id] = (store, made)
        with self._lock:
            self._active += 1
            self._active_ids[result.task_id] = None
        try:
            self._send_request(message)
        except BaseException:
            with self._lock:
                self._active -= 1
                self._active_ids.pop(result.task_id, None)
                self._lock.notify_all()
            self._made_proxies.pop(result.task_id, None)
            raise
        return result.task_id

    def get_result(self, topic: str = 'default', timeout: float | None = None) -> Result:
        """Return the next result of ``topic``.

        The inputs the Thinker proxied for the task are deleted from their store in the
        background (see :meth:`finish_evictions`).

        Raises:
            SteerTimeoutError: nothing arrived within ``timeout`` seconds.
            KillSignalError: the task server shut down (it forwards the kill signal).
            SteerQueueError: the broker failed or restarted (results may be lost), or
                the proxied inputs of an earlier task could not be deleted (raised before
                any result is read, so none is lost).
        """
        self._check_role(QueueRole.CLIENT, 'get_result')
        if topic not in self.topics:
            raise ConfigError(f'unknown topic {topic!r}; topics: {sorted(self.topics)}')
        self._evictor.check()
        message = self._get_result(topic, timeout)
        received = time.time()
        start = time.perf_counter()
        decoded = self._decode(message, f'result/{topic}', f'result topic {topic!r}')
        if decoded is None:
            raise KillSignalError(f'the task server shut down (kill signal on topic {topic!r})')
        result = decoded
        result.timestamp.result_received = received
        result.message_sizes['value'] = len(message)
        if isinstance(result.value, _pack.Packed):
            result.value = result.value.unpack()
        if isinstance(result.inputs, _pack.Packed):
            result.inputs = result.inputs.unpack()
        result.time.deserialize_results = time.perf_counter() - start
        if _tracing.on:  # the task's lifetime, from the stages' stamps
            _tracing.task_trace(
                'tether.steer.task',
                dataclasses.asdict(result.timestamp),
                {
                    'tether.task_id': result.task_id,
                    'tether.method': str(result.method),
                    'tether.topic': topic,
                    'tether.success': bool(result.success),
                },
            )
        made = self._made_proxies.pop(result.task_id, None)
        if made is not None:
            # Not on the worker as it resolves them: an executor that re-runs a task
            # whose worker died (the function service does) would find them gone. Nor
            # here, one round trip per input before the next task can be sent: on the
            # evicting thread.
            self._evictor.submit(*made)
        with self._lock:
            self._active -= 1
            self._active_ids.pop(result.task_id, None)
            self._lock.notify_all()
        return result

    def finish_evictions(self, timeout: float | None = None) -> bool:
        """Wait until the proxied inputs of every finished task are deleted.

        :meth:`get_result` hands them to a background thread; a :class:`BaseThinker`
        calls this when its agents stop, so that none is left in the store. Returns
        whether they were all deleted within ``timeout`` seconds.

        Raises:
            SteerQueueError: one could not be deleted (it may still be in the store).
        """
        return self._evictor.drain(timeout)

    def active_task_ids(self) -> list[str]:
        """The ids of the tasks sent by this process whose results were not read yet."""
        with self._lock:
            return list(self._active_ids)

    @property
    def active_count(self) -> int:
        """Tasks sent whose results were not read yet."""
        with self._lock:
            return self._active

    def wait_until_done(self, timeout: float | None = None) -> bool:
        """Block until every task sent has had its result read and its proxied inputs
        deleted (:meth:`finish_evictions`); return whether it did.

        Raises:
            SteerQueueError: such an input could not be deleted.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            if not self._lock.wait_for(lambda: self._active <= 0, timeout):
                return False
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        return self.finish_evictions(left)

    def send_kill_signal(self) -> None:
        """Tell the task server to finish the tasks it has and stop."""
        self._check_role(QueueRole.CLIENT, 'send_kill_signal')
        self._send_request(self._encode(None, _REQUESTS))

    # Task server side ------------------------------------------------------------------

    def get_task(self, timeout: float | None = None) -> tuple[str, Result]:
        """Return the next task request's topic and the request (its inputs stay packed).

        Call :meth:`~tether.steer.models.Result.deserialize` to read its inputs.

        Raises:
            KillSignalError: the Thinker sent the kill signal.
            SteerTimeoutError: nothing arrived within ``timeout`` seconds.
            SteerAuthenticationError: the message was refused (unsigned, altered,
                replayed); nothing in it was unpickled.
        """
        self._check_role(QueueRole.SERVER, 'get_task')
        result = self.next_task(timeout)
        return result.topic or 'default', result

    def next_task(self, timeout: float | None = None) -> Result:
        """:meth:`get_task` for task servers: the request alone, without a role check."""
        message = self._get_request(timeout)
        received = time.time()
        decoded = self._decode(message, _REQUESTS, 'the request queue')
        if decoded is None:
            raise KillSignalError('the Thinker sent the kill signal')
        result = decoded
        result.timestamp.input_received = received
        result.message_sizes['inputs'] = len(message)
        return result

    def send_result(self, result: Result) -> None:
        """Send a finished task's result to its topic (its value is packed if not yet)."""
        self._check_role(QueueRole.SERVER, 'send_result')
        self.deliver_result(result)

    def deliver_result(self, result: Result) -> None:
        """:meth:`send_result` for task servers, without a role check."""
        result.serialize()
        result.timestamp.result_sent = time.time()
        topic = result.topic or 'default'
        self._send_result(self._encode(result, f'result/{topic}'), topic)

    def send_kill_to_thinker(self) -> None:
        """Put the kill signal on every result topic (the task server is stopping)."""
        for topic in self.topics:
            self._send_result(self._encode(None, f'result/{topic}'), topic)


ColmenaQueues = BaseQueues
