"""The queues between a Thinker and a task server, independent of the transport.

A queue object is created once, in the Thinker's process, and handed to the task server
(which runs in a forked process, so both share it). The Thinker side sends task requests
and reads results per topic; the task server side reads requests and sends results.

Messages are a short magic prefix and a pickle of the :class:`~tether.steer.models.Result`
with its inputs or value packed (see :mod:`tether.steer._pack`). With ``secret`` set,
every message carries an HMAC-SHA256 tag, and a message without a valid tag is refused
before anything in it is unpickled.
"""

from __future__ import annotations

import abc
import hashlib
import hmac
import logging
import pickle
import threading
import time
from collections.abc import Collection, Mapping
from typing import Any

from tether.exceptions import (
    ConfigError,
    KillSignalError,
    SteerQueueError,
    StoreNotFoundError,
)
from tether.steer import _pack
from tether.steer.models import ResourceRequirements, Result

__all__ = ['BaseQueues', 'ColmenaQueues']

logger = logging.getLogger(__name__)

_MAGIC = b'TSQ1'
_KILL = b'TSQK'
_TAG = 32  # bytes of an HMAC-SHA256 tag


def _per_topic(value: Any, topics: Collection[str], what: str) -> dict[str, Any]:
    if isinstance(value, Mapping):
        unknown = set(value) - set(topics)
        if unknown:
            raise ConfigError(
                f'{what} names unknown topics {sorted(unknown)}; topics: {sorted(topics)}',
            )
        return {t: value.get(t) for t in topics}
    return dict.fromkeys(topics, value)


class BaseQueues(abc.ABC):
    """Topics, per-topic stores and thresholds, and the message format.

    Args:
        topics: Names of the result topics (``'default'`` is always added).
        serialization_method: Only ``'pickle'`` (accepted for compatibility).
        keep_inputs: Whether results carry their inputs back by default.
        proxystore_name: Name of a registered store (or a dict topic -> name) used to
            send values over the threshold by reference.
        proxystore_threshold: Bytes (or a dict topic -> bytes): a value whose serialized
            payload (framing header not counted) is over it travels by proxy; ``None``,
            bools, ``...`` and ``NotImplemented`` never do. ``None`` never proxies.
        secret: Key to sign and check every message with (HMAC-SHA256). Never sent.
    """

    def __init__(
        self,
        topics: Collection[str] = (),
        serialization_method: str = 'pickle',
        keep_inputs: bool = True,
        proxystore_name: str | Mapping[str, str | None] | None = None,
        proxystore_threshold: int | Mapping[str, int | None] | None = None,
        *,
        secret: bytes | str | None = None,
    ) -> None:
        if isinstance(topics, str):
            raise ConfigError('topics must be a collection of names, not one string')
        if serialization_method != 'pickle':
            raise ConfigError(
                f'serialization_method {serialization_method!r} is not supported: use "pickle"',
            )
        self.topics = sorted({*topics, 'default'})
        self.serialization_method = serialization_method
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
        self._secret = secret.encode() if isinstance(secret, str) else secret
        self._lock = threading.Condition()
        self._active = 0
        self._made_proxies: dict[str, tuple[Any, list[Any], bool]] = {}

    # Message format --------------------------------------------------------------------

    def _encode(self, result: Result) -> bytes:
        payload = pickle.dumps(result, protocol=5)
        if self._secret is not None:
            return _MAGIC + hmac.new(self._secret, payload, hashlib.sha256).digest() + payload
        return _MAGIC + payload

    def _decode(self, message: bytes, where: str) -> Result:
        if message[:4] != _MAGIC:
            raise SteerQueueError(f'refused a message on {where}: not a tether.steer message')
        body = memoryview(message)[4:]
        if self._secret is not None:
            tag, body = body[:_TAG], body[_TAG:]
            good = hmac.new(self._secret, body, hashlib.sha256).digest()
            if not hmac.compare_digest(bytes(tag), good):
                raise SteerQueueError(
                    f'refused a message on {where}: missing or wrong signature '
                    '(sent by a peer without this secret, or altered)',
                )
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
        the topic's store and travel as proxies.
        """
        if topic not in self.topics:
            raise ConfigError(f'unknown topic {topic!r}; topics: {self.topics}')
        if method is None:
            raise ConfigError('send_inputs needs method= (the name of a task server method)')
        if isinstance(resources, dict):
            resources = ResourceRequirements(**resources)
        result = Result(
            method=method,
            topic=topic,
            keep_inputs=self.keep_inputs if keep_inputs is None else keep_inputs,
            resources=resources or ResourceRequirements(),
            task_info=dict(task_info or {}),
            max_retries=max_retries,
        )
        store = self._store(topic)
        threshold = self.proxystore_threshold[topic]
        # Inputs read exactly once (not kept for the result, no retry to read them again)
        # are evicted by the worker as it resolves them, off the Thinker's path.
        once = not result.keep_inputs and max_retries == 0
        start = time.perf_counter()
        packed = _pack.pack_inputs(
            input_args,
            dict(input_kwargs or {}),
            store,
            threshold,
            result.time.proxy,
            evict=once,
        )
        result.inputs = packed
        if store is not None:
            result.proxystore_config = store.config()
            result.proxystore_threshold = threshold
        # The time to serialize (and proxy) the inputs; the pickle of the small envelope
        # that follows is not included.
        result.time.serialize_inputs = time.perf_counter() - start
        message = self._encode(result)
        if packed.proxied and not result.keep_inputs:
            made = [packed.items[i] for i in packed.proxied]
            self._made_proxies[result.task_id] = (store, made, once)
        with self._lock:
            self._active += 1
        try:
            self._send_request(message)
        except BaseException:
            with self._lock:
                self._active -= 1
                self._lock.notify_all()
            self._made_proxies.pop(result.task_id, None)
            raise
        return result.task_id

    def get_result(self, topic: str = 'default', timeout: float | None = None) -> Result:
        """Return the next result of ``topic``.

        Raises:
            SteerTimeoutError: nothing arrived within ``timeout`` seconds.
            KillSignalError: the task server shut down (it forwards the kill signal).
            SteerQueueError: the broker failed or restarted (results may be lost).
        """
        if topic not in self.topics:
            raise ConfigError(f'unknown topic {topic!r}; topics: {self.topics}')
        message = self._get_result(topic, timeout)
        if message == _KILL:
            raise KillSignalError(f'the task server shut down (kill signal on topic {topic!r})')
        received = time.time()
        start = time.perf_counter()
        result = self._decode(message, f'result topic {topic!r}')
        result.timestamp.result_received = received
        result.message_sizes['value'] = len(message)
        if isinstance(result.value, _pack.Packed):
            result.value = result.value.unpack()
        if isinstance(result.inputs, _pack.Packed):
            result.inputs = result.inputs.unpack()
        result.time.deserialize_results = time.perf_counter() - start
        made = self._made_proxies.pop(result.task_id, None)
        if made is not None:
            store, proxies, once = made
            # Evicted by the worker on resolve, unless the task failed (it may not have
            # got that far); evicting an evicted key is harmless.
            if not once or not result.success:
                self._evict(store, proxies)
        with self._lock:
            self._active -= 1
            self._lock.notify_all()
        return result

    @staticmethod
    def _evict(store: Any, proxies: list[Any]) -> None:
        from tether.store.utils import get_key

        for proxy in proxies:
            try:
                store.evict(get_key(proxy))
            except Exception:  # pragma: no cover - eviction is best effort
                logger.warning('could not evict an input of a finished task', exc_info=True)

    @property
    def active_count(self) -> int:
        """Tasks sent whose results were not read yet."""
        with self._lock:
            return self._active

    def wait_until_done(self, timeout: float | None = None) -> bool:
        """Block until every task sent has had its result read; return whether it did."""
        with self._lock:
            return self._lock.wait_for(lambda: self._active <= 0, timeout)

    def send_kill_signal(self) -> None:
        """Tell the task server to finish the tasks it has and stop."""
        self._send_request(_KILL)

    # Task server side ------------------------------------------------------------------

    def get_task(self, timeout: float | None = None) -> Result:
        """Return the next task request (its inputs stay packed).

        Raises:
            KillSignalError: the Thinker sent the kill signal.
            SteerTimeoutError: nothing arrived within ``timeout`` seconds.
        """
        message = self._get_request(timeout)
        if message == _KILL:
            raise KillSignalError('the Thinker sent the kill signal')
        received = time.time()
        result = self._decode(message, 'the request queue')
        result.timestamp.input_received = received
        result.message_sizes['inputs'] = len(message)
        return result

    def send_result(self, result: Result) -> None:
        """Send a finished task's result to its topic."""
        result.timestamp.result_sent = time.time()
        self._send_result(self._encode(result), result.topic or 'default')

    def send_kill_to_thinker(self) -> None:
        """Put the kill signal on every result topic (the task server is stopping)."""
        for topic in self.topics:
            self._send_result(_KILL, topic)


ColmenaQueues = BaseQueues
