"""The tether exception tree.

Every error tether raises on purpose derives from :class:`TetherError`. Errors of the
libraries we build on (redis-py, the OS, pickle ...) are translated at the boundary into
one of these classes, with the original error chained as ``__cause__``.

```
TetherError
 +-- ProxyError
 |    +-- ProxyResolveError              a proxy's factory raised a non-tether error
 |         +-- ProxyResolveMissingKeyError  the object behind a store proxy is gone
 +-- SerializationError                  bytes could not become an object, or back
 |    +-- SerializerOutputError          a serializer returned no bytes (also a TypeError)
 +-- ConnectorError                      a mediated channel failed (server down, I/O)
 |    +-- ConnectorClosedError           the connector was used after close()
 |    +-- PeerChannelError               the channel to the peer endpoint owning the
 |    |                                  object failed during the request (it died)
 |    +-- NoConnectorMatchError          no MultiConnector policy accepts the object
 +-- StoreError
 |    +-- StoreExistsError               a store of that name is already registered
 |    +-- StoreNotFoundError             no store of that name is registered
 |    +-- NonProxiableTypeError          the object cannot be proxied (None, bool ...)
 |    +-- FutureError                    a distributed future was misused
 |    |    +-- FutureAlreadySetError     set_result was called on a future already set
 |    |    +-- FutureTimeoutError        no result within the timeout (also a TimeoutError)
 |    +-- OwnershipError                 an ownership or borrowing rule was broken
 |    |    |                             (also a RuntimeError)
 |    |    +-- MutableBorrowError        a borrow conflicts with a mutable borrow
 |    |    +-- ReferenceNotOwnedError    the call needs the owner, got a borrow
 |    |    +-- ReferenceInvalidError     the proxy was moved to another process or dropped
 |    |    +-- AlreadyOwnedError         into_owned() of an ownership proxy (also ValueError)
 |    +-- LifetimeError                  a lifetime was used after it ended (also a
 |    |    |                             RuntimeError)
 |    |    +-- LifetimeArgumentError     invalid arguments to a lifetime (also ValueError)
 |    +-- MissingCapabilityError         the connector lacks what the call needs (also a
 |                                       NotImplementedError)
 +-- InvalidArgumentError                arguments that cannot go together (also ValueError)
 +-- ConfigError                         a configuration is invalid or cannot be read
 |    +-- ConnectorConfigError           a connector config has unknown fields or wrong
 |    |                                  types (also a TypeError)
 |    +-- UntrustedTypeError             data names a type or function not on the allowlist
 +-- WireError                           a tether network connection failed or was refused
 |    +-- WireConnectionError            the peer is unreachable or the connection dropped
 |    +-- ProtocolError                  the peer sent bytes that are not valid framing
 |    |    +-- ProtocolVersionError      the peer speaks another protocol version
 |    |    +-- FrameTooLargeError        a frame exceeds the receiver's limits
 |    +-- AuthenticationError            the challenge-response handshake failed
 |    +-- RemoteError                    the peer answered a request with an error frame
 +-- StreamError                         a stream (tether.stream) failed
 |    +-- EventDecodeError               a broker message is not a valid stream event
 |    |    +-- EventRefusedError         a valid event the consumer must not act on
 |    |         +-- UntrustedStoreError  the event names a store the consumer does not accept
 |    |         +-- EventAuthenticationError  unsigned, altered, or signed with another key
 |    |              +-- EventReplayError  seen before, or outside the time window
 |    +-- TopicClosedError               send() on a topic the producer already closed
 |    +-- StreamBrokerError              the broker is unreachable or dropped the connection
 |    +-- StreamTimeoutError             no message (or no room) within the timeout
 |         +-- StreamBackpressureError   the broker or a bounded buffer stayed full
 +-- EndpointError                       an endpoint or the relay is misconfigured or failed
 |    +-- PeeringError                   no path to a peer endpoint could be opened
 +-- AgentError                          an agent, handle, exchange or launcher failed
 |    +-- MailboxClosedError             the mailbox was terminated (the agent shut down)
 |    +-- UnknownMailboxError            the exchange has no mailbox of that id
 |    +-- MailboxLostError               the exchange lost the mailbox (Redis lost its data)
 |    +-- MessageRejectedError           a message was refused (version, invalid, pickle)
 |    +-- ActionError                    a remote action raised an error not rebuilt here
 |    +-- ActionTimeoutError             no result within the caller's timeout (also a
 |    |                                  TimeoutError); the action was cancelled
 |    +-- AgentLaunchError               an agent could not be launched, or failed for good
 |    +-- AgentStateError                an agent's persistent state cannot be read
 |    +-- AgentCrashedError              the agent's process died while it held the request
 |                                       (started: whether its action had begun)
 |    +-- AgentConfigError               the agents API was given what it cannot use (an
 |         |                             executor for a launcher ...; also a TypeError)
 |         +-- BehaviorDefinitionError   a Behavior class declares a reserved action name
 +-- BenchError                          the benchmark suite (tether.bench) failed
 |    +-- PluginNotFoundError            no app, executor, transformer or filter of that name
 |    +-- TaskDependencyError            a task's input task failed, so it never ran
 +-- HarnessError                        a test helper of tether.testing failed
 |    +-- ServerStartError               a throwaway server did not start (also a RuntimeError)
 |    +-- HammerError                    calls from many threads failed (also an AssertionError)
 +-- FaasError                           the function service (tether.faas) failed or refused
 |    +-- FaasConnectionError            the service is unreachable (gave up retrying)
 |    +-- FaasAuthenticationError        missing, wrong or revoked token (HTTP 401)
 |    +-- FaasNotFoundError              no such function, endpoint or task for this user
 |    +-- FaasPayloadTooLargeError       a payload exceeds the service limit: use a proxy
 |    +-- FaasBadRequestError            a malformed request (HTTP 400; also a ValueError)
 |    +-- FaasRateLimitError             a per-user limit was reached (HTTP 429): retry later
 |    +-- FunctionNotAllowedError        the endpoint's allowlist does not list the function
 |    +-- TaskPending                    get_result() before the task finished
 |    +-- TaskExecutionFailed            the function raised on the endpoint
 |         +-- WorkerLostError           workers kept dying; the retry limit was reached
 |         +-- EndpointDeletedError      the task's endpoint was deleted before it finished
 |         +-- TaskTimeoutError          the task ran past its time limit (task_timeout)
 |         +-- TaskCancelledError        the task was cancelled before it finished
 +-- SteerError                          steering (tether.steer) failed
      +-- SteerQueueError                a task queue's broker failed, restarted or was closed
      |    +-- SteerAuthenticationError  a queue message is unsigned, altered or has another key
      |         +-- SteerReplayError     a signed queue message was replayed (twice, elsewhere)
      +-- SteerTimeoutError              no result or task within the timeout (also a TimeoutError)
      +-- KillSignalError                the queues were told to stop (kill signal)
      +-- ExecutableMethodError          an executable method's program failed or is missing
```

Every message says what failed (the store, key or address) and, where it can, what to do.
"""

from __future__ import annotations

__all__ = [
    'ActionError',
    'ActionTimeoutError',
    'AgentConfigError',
    'AgentCrashedError',
    'AgentError',
    'AgentLaunchError',
    'AgentStateError',
    'AlreadyOwnedError',
    'AuthenticationError',
    'BehaviorDefinitionError',
    'BenchError',
    'ConfigError',
    'ConnectorClosedError',
    'ConnectorConfigError',
    'ConnectorError',
    'EndpointDeletedError',
    'EndpointError',
    'EventAuthenticationError',
    'EventDecodeError',
    'EventRefusedError',
    'EventReplayError',
    'ExecutableMethodError',
    'FaasAuthenticationError',
    'FaasBadRequestError',
    'FaasConnectionError',
    'FaasError',
    'FaasNotFoundError',
    'FaasPayloadTooLargeError',
    'FaasRateLimitError',
    'FrameTooLargeError',
    'FunctionNotAllowedError',
    'FutureAlreadySetError',
    'FutureError',
    'FutureTimeoutError',
    'HammerError',
    'HarnessError',
    'InvalidArgumentError',
    'KillSignalError',
    'LifetimeArgumentError',
    'LifetimeError',
    'MailboxClosedError',
    'MailboxLostError',
    'MessageRejectedError',
    'MissingCapabilityError',
    'MutableBorrowError',
    'NoConnectorMatchError',
    'NonProxiableTypeError',
    'OwnershipError',
    'PeerChannelError',
    'PeeringError',
    'PluginNotFoundError',
    'ProtocolError',
    'ProtocolVersionError',
    'ProxyError',
    'ProxyResolveError',
    'ProxyResolveMissingKeyError',
    'ReferenceInvalidError',
    'ReferenceNotOwnedError',
    'RemoteError',
    'SerializationError',
    'SerializerOutputError',
    'ServerStartError',
    'SteerAuthenticationError',
    'SteerError',
    'SteerQueueError',
    'SteerReplayError',
    'SteerTimeoutError',
    'StoreError',
    'StoreExistsError',
    'StoreNotFoundError',
    'StreamBackpressureError',
    'StreamBrokerError',
    'StreamError',
    'StreamTimeoutError',
    'TaskCancelledError',
    'TaskDependencyError',
    'TaskExecutionFailed',
    'TaskPending',
    'TaskTimeoutError',
    'TetherError',
    'TopicClosedError',
    'UnknownMailboxError',
    'UntrustedStoreError',
    'UntrustedTypeError',
    'WireConnectionError',
    'WireError',
    'WorkerLostError',
]


class TetherError(Exception):
    """Root of every error raised by tether."""


class ProxyError(TetherError):
    """Base class for errors of :mod:`tether.proxy`."""


class ProxyResolveError(ProxyError):
    """The factory of a proxy raised while resolving the target object.

    The original error is chained as ``__cause__``.
    """


class ProxyResolveMissingKeyError(ProxyResolveError):
    """A store proxy was resolved but its object is no longer in the store.

    Attributes:
        key: The connector key that was looked up.
        store_name: The name of the store that was asked.
    """

    def __init__(self, key: object, store_name: str, connector: str = '') -> None:
        self.key = key
        self.store_name = store_name
        where = f' (connector {connector})' if connector else ''
        super().__init__(
            f'object with key {key!r} is missing from store {store_name!r}{where}: '
            'it was evicted (evict=True proxies resolve once; owned proxies and lifetimes '
            'evict when they end) or never written',
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.key, self.store_name))


class SerializationError(TetherError):
    """An object could not be serialized, or bytes could not be deserialized."""


class ConnectorError(TetherError):
    """A connector's mediated channel failed (server unreachable, I/O error ...)."""


class ConnectorClosedError(ConnectorError):
    """A connector was used after it was closed."""


class PeerChannelError(ConnectorError):
    """The channel to the peer endpoint that owns the object failed during the request.

    The owner died, or its link broke, while the request was on its way or its reply was
    coming back, and the local endpoint could not reach it again. The request may or may
    not have taken effect at the owner.

    Attributes:
        peer: The name or UUID of the owning endpoint, as the request named it.
    """

    def __init__(self, message: str, peer: str = '') -> None:
        super().__init__(message)
        self.peer = peer

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (str(self), self.peer))


class StoreError(TetherError):
    """Base class for errors of :mod:`tether.store`."""


class StoreExistsError(StoreError):
    """A store with the same name is already registered in this process."""


class StoreNotFoundError(StoreError):
    """No store with the requested name is registered in this process."""


class NonProxiableTypeError(StoreError):
    """The object cannot be proxied (``None``, ``bool`` and ``NotImplemented`` cannot be)."""


class ConfigError(TetherError):
    """A configuration is invalid, incomplete, or cannot be read."""


class ConnectorConfigError(ConfigError, TypeError):
    """A connector's config has unknown fields or values of the wrong type.

    Raised by ``from_config`` (see :mod:`tether.connectors.config`); also a
    :class:`TypeError`, which ProxyStore's ``from_config(**config)`` raised.
    """


class UntrustedTypeError(ConfigError):
    """Data from outside this process names a type or function that is not allowlisted.

    Raised before anything is imported or called. Connector, key and serializer types
    are allowlisted in :mod:`tether.store.allowlist` (tether's own, plus those the
    application registers).
    """


# Wire protocol and node servers (tether._wire, tether.node, issue 3) -----------------


class WireError(TetherError):
    """A connection of the tether wire protocol failed or was refused."""


class WireConnectionError(WireError):
    """The peer could not be reached, or the connection dropped or timed out."""


class ProtocolError(WireError):
    """The peer sent bytes that are not valid tether framing."""


class ProtocolVersionError(ProtocolError):
    """The peer speaks a protocol version this side does not."""


class FrameTooLargeError(ProtocolError):
    """A frame (header, payload count or payload bytes) exceeds the receiver's limits."""


class AuthenticationError(WireError):
    """The challenge-response handshake failed (wrong or missing shared secret)."""


class RemoteError(WireError):
    """The peer answered a request with an error frame.

    Attributes:
        code: The short error code sent by the peer (``'internal'``, ``'bad-request'`` ...).
    """

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.code, str(self)))


class NoConnectorMatchError(ConnectorError):
    """No connector of a MultiConnector has a policy that accepts the object."""


# Streams (tether.stream) -------------------------------------------------------------


class StreamError(TetherError):
    """Base class for errors of :mod:`tether.stream`."""


class EventDecodeError(StreamError):
    """A message read from a broker is not a valid stream event (garbage, wrong version)."""


class EventRefusedError(EventDecodeError):
    """A well-formed stream event that the consumer refuses to act on.

    For example its key type is not allowlisted, or its key does not belong to its
    store's connector. Nothing the event names was imported or called. The consumer
    stays usable: the next call reads the next message.
    """


class UntrustedStoreError(EventRefusedError):
    """A stream event names a store the consumer does not accept (see store pinning)."""


class EventAuthenticationError(EventRefusedError):
    """A stream message is unsigned, altered, or signed with another stream key."""


class EventReplayError(EventAuthenticationError):
    """A signed stream message was seen before, or is outside the accepted time window."""


class TopicClosedError(StreamError):
    """An object was sent to a topic that the producer already closed."""


class StreamBrokerError(StreamError):
    """The message broker cannot be reached or dropped the connection.

    The broker client's error is chained as ``__cause__``.
    """


class StreamTimeoutError(StreamError):
    """No message arrived, or no room freed up, within the timeout."""


class StreamBackpressureError(StreamTimeoutError):
    """A bounded buffer (a queue's ``maxsize``, a broker's limit) stayed full too long.

    The producer blocks while consumers are slow instead of buffering without bound; this
    is raised when the wait exceeds its timeout.
    """


# Proxy patterns (issue 4): futures, ownership, lifetimes ---------------------------------


class FutureError(StoreError):
    """Base class for errors of :mod:`tether.store.future`."""


class FutureAlreadySetError(FutureError):
    """``set_result`` was called on a future whose result is already set."""


class FutureTimeoutError(FutureError, TimeoutError):
    """A future's result was not set within the timeout (the producer may have died)."""


class OwnershipError(StoreError, RuntimeError):
    """An ownership or borrowing rule of :mod:`tether.store.ref` was broken.

    Also a :class:`RuntimeError` (what ProxyStore raised when an owner went out of scope
    while borrowed).
    """


class LifetimeError(StoreError, RuntimeError):
    """A lifetime of :mod:`tether.store.lifetimes` was used after it ended.

    Also a :class:`RuntimeError`, as ProxyStore's was.
    """


# ProxyStore compatibility (issue 9): finer classes, each also the builtin ProxyStore
# raised in its place, so ported ``except`` clauses keep catching them. --------------------


class InvalidArgumentError(TetherError, ValueError):
    """Arguments that cannot go together or are out of range (also a :class:`ValueError`).

    For example ``store.proxy(obj, evict=True, lifetime=lt)``, or a sampling filter's
    probability outside ``[0, 1]``.
    """


class MissingCapabilityError(StoreError, NotImplementedError):
    """The store's connector lacks what the call needs (also a :class:`NotImplementedError`).

    For example :meth:`Store.future() <tether.store.Store.future>` over a connector that
    cannot reserve keys (``new_key``/``set``).
    """


class SerializerOutputError(SerializationError, TypeError):
    """A custom serializer returned something other than bytes (also a :class:`TypeError`)."""


class MutableBorrowError(OwnershipError):
    """A borrow conflicts with a mutable borrow (or a mutable borrow with any borrow)."""


class ReferenceNotOwnedError(OwnershipError):
    """The call needs the owner (an ``OwnedProxy``) and got a borrow or a plain proxy."""


class ReferenceInvalidError(OwnershipError):
    """The ownership proxy is no longer valid: it was moved to another process or dropped."""


class AlreadyOwnedError(OwnershipError, ValueError):
    """``into_owned()`` of a proxy that already is an ownership proxy (also a ValueError)."""


class LifetimeArgumentError(LifetimeError, ValueError):
    """A lifetime was called with invalid arguments (also a :class:`ValueError`)."""


# Agents (tether.agents, issue 11) -------------------------------------------------------


class AgentError(TetherError):
    """Base class for errors of :mod:`tether.agents`."""


class MailboxClosedError(AgentError):
    """The mailbox was terminated: its agent shut down for good and takes no messages."""


class UnknownMailboxError(AgentError):
    """The exchange has no mailbox with that id (never registered, or another exchange)."""


class MailboxLostError(AgentError):
    """The exchange lost a mailbox and what it held (Redis restarted without its data).

    Raised for requests that waited for an answer when the caller's mailbox was found
    gone: the request or its answer may be lost, and the action may or may not have run.
    The mailboxes are registered again, so new requests work.
    """


class MessageRejectedError(AgentError):
    """A message was refused by its receiver.

    Reasons: another protocol version, a message that is not valid, an unknown action, or
    a pickled value sent to a receiver that does not accept pickles.
    """


class ActionError(AgentError):
    """A remote action raised an exception whose type is not rebuilt at the caller.

    Attributes:
        type_name: Import path of the remote exception's type.
        remote_traceback: The traceback formatted where the action ran.
    """

    def __init__(self, type_name: str, message: str, remote_traceback: str = '') -> None:
        self.type_name = type_name
        self.remote_traceback = remote_traceback
        super().__init__(f'{type_name}: {message}')

    def __reduce__(self) -> tuple[object, ...]:
        text = str(self).partition(': ')[2]
        return (type(self), (self.type_name, text, self.remote_traceback))


class ActionTimeoutError(AgentError, TimeoutError):
    """No result arrived within the caller's timeout; the action was cancelled at the agent."""


class AgentLaunchError(AgentError):
    """An agent could not be launched, or failed more often than its restart limit."""


class AgentStateError(AgentError):
    """An agent's persistent state cannot be read or written."""


class AgentCrashedError(AgentError):
    """The agent's process died while it held the request.

    Sent to the caller by the agent's launcher (or by the restarted agent) for every
    request the dead process had accepted and not answered; it is never re-run.

    Attributes:
        started: Whether the action had started: it may then have partly run. ``False``:
            the request waited for a free slot (``max_concurrency``) and did not run at
            all, so sending it again is safe.
    """

    def __init__(self, message: str = '', started: bool = True) -> None:
        super().__init__(message, started)
        self.started = started

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ''


class AgentConfigError(AgentError, TypeError):
    """The agents API was given something it cannot use (also a :class:`TypeError`).

    For example an executor where a launcher goes (``Manager(exchange,
    ThreadPoolExecutor())``): the message names what is expected.
    """


class BehaviorDefinitionError(AgentConfigError):
    """A :class:`~tether.agents.Behavior` class is not valid (also a :class:`TypeError`).

    Raised when the class is defined, for example when it declares an action with a name
    that handles or behaviors reserve (see ``tether.agents.RESERVED_ACTION_NAMES``).
    """


# Test helpers (tether.testing) ----------------------------------------------------------


class HarnessError(TetherError):
    """Base class for errors of the test helpers in :mod:`tether.testing`."""


class ServerStartError(HarnessError, RuntimeError):
    """A throwaway server (:class:`tether.testing.ServerProcess`) did not start.

    The message names the program, the port and the last lines the program printed.
    """


class HammerError(HarnessError, AssertionError):
    """Calls made from many threads by :func:`tether.testing.hammer` failed or hung.

    Attributes:
        report: The :class:`tether.testing.HammerReport` of the run.
    """

    def __init__(self, report: object) -> None:
        self.report = report
        super().__init__(str(report))

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.report,))


# Endpoints and the relay (tether.endpoint, tether.relay, issue 10) ------------------------


class EndpointError(TetherError):
    """An endpoint or the relay is misconfigured, not running, or refused an operation."""


class PeeringError(EndpointError):
    """No path (direct, hole-punched or relayed) to a peer endpoint could be opened."""


# Function service (tether.faas, issue 13) ----------------------------------------------


class FaasError(TetherError):
    """Base class for errors of :mod:`tether.faas` (service, endpoints, SDK)."""


class FaasConnectionError(FaasError):
    """The function service could not be reached (the SDK retried until its deadline)."""


class FaasAuthenticationError(FaasError):
    """The service refused the token (missing, wrong or revoked): HTTP 401."""


class FaasNotFoundError(FaasError):
    """No function, endpoint, task or task group with that id is visible to this user.

    Another user's objects are reported exactly like missing ones (HTTP 404), so ids
    cannot be probed.
    """


class FaasPayloadTooLargeError(FaasError):
    """A task's arguments or result exceed the service's payload limit.

    Pass large objects by reference instead: ``Executor(endpoint_id, store=store)``
    proxies arguments above a threshold through a tether Store.
    """


class FaasBadRequestError(FaasError, ValueError):
    """The service refused a malformed request (HTTP 400): a field of the wrong type,
    an id that is too long or has other characters than an id may, JSON nested too
    deeply. Also a :class:`ValueError`. The message names the field."""


class FaasRateLimitError(FaasError):
    """A per-user limit of the service was reached (HTTP 429, WebSocket close 4429): too
    many requests in progress or WebSockets open at once. The SDK waits and retries
    (for ``retry_deadline`` seconds) before raising it.

    Attributes:
        retry_after: Seconds the service asked to wait (its ``Retry-After``).
    """

    def __init__(self, message: str, retry_after: float = 1.0) -> None:
        self.retry_after = retry_after
        super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (str(self), self.retry_after))


class FunctionNotAllowedError(FaasError):
    """The endpoint's allowlist does not list the function: it was not run."""


class TaskPending(FaasError):  # noqa: N818 (the funcX SDK's name)
    """``get_result`` was called before the task finished; try again later.

    Attributes:
        task_id: The task asked about.
        status: Its current status (``'waiting-for-ep'``, ``'running'`` ...).
    """

    def __init__(self, task_id: str, status: str) -> None:
        self.task_id = task_id
        self.status = status
        super().__init__(f'task {task_id} is not finished yet (status {status!r})')

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.task_id, self.status))


class TaskExecutionFailed(FaasError):  # noqa: N818 (the Globus Compute SDK's name)
    """The function raised on the endpoint (or could not be run there).

    The remote exception is not unpickled: its type name, message and formatted
    traceback travel as text.

    Attributes:
        remote_type: The qualified name of the remote exception's class.
        remote_traceback: The formatted remote traceback.
    """

    def __init__(self, remote_type: str, message: str, remote_traceback: str = '') -> None:
        self.remote_type = remote_type
        self.remote_traceback = remote_traceback
        super().__init__(f'{remote_type}: {message}' if remote_type else message)

    def __reduce__(self) -> tuple[object, ...]:
        text = str(self)
        prefix = f'{self.remote_type}: '
        message = text[len(prefix) :] if text.startswith(prefix) else text
        return (type(self), (self.remote_type, message, self.remote_traceback))


class WorkerLostError(TaskExecutionFailed):
    """The worker running the task died (killed, crashed, out of memory) more times than
    the endpoint's retry limit allows."""


class EndpointDeletedError(TaskExecutionFailed):
    """The task's endpoint was deleted before the task finished (queued or running)."""


class TaskTimeoutError(TaskExecutionFailed):
    """The task ran longer than its time limit (``task_timeout``): its worker was stopped
    and replaced."""


class TaskCancelledError(TaskExecutionFailed):
    """The task was cancelled (``TaskFuture.cancel()``, ``Client.cancel``) before it
    finished: removed from its queue, or stopped on its worker."""


# Benchmark suite (tether.bench, issue 12) --------------------------------------------


class BenchError(TetherError):
    """Base class for errors of :mod:`tether.bench`."""


class PluginNotFoundError(BenchError, ConfigError):
    """No registered app, executor, transformer or filter has the requested name."""


class TaskDependencyError(BenchError):
    """A task never ran because a task whose result it takes as input failed.

    The parent's error is chained as ``__cause__``.

    Attributes:
        task_id: The id of the task that failed first (``None`` if unknown).
    """

    def __init__(self, message: str, task_id: str | None = None) -> None:
        self.task_id = task_id
        super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (str(self), self.task_id))


# Steering (tether.steer, issue 14) ------------------------------------------------------


class SteerError(TetherError):
    """Base class for errors of :mod:`tether.steer`."""


class SteerQueueError(SteerError):
    """A task queue failed: its broker is unreachable, restarted, or the queue is closed.

    Raised instead of reconnecting silently when the broker may have lost queued tasks or
    results (for example a Redis server restarted without persistence). The broker
    client's error, if any, is chained as ``__cause__``.
    """


class SteerAuthenticationError(SteerQueueError):
    """A queue message is unsigned, altered, or signed with another queue key.

    Raised (or, on a task server, logged and the message dropped) before anything in the
    message is unpickled.
    """


class SteerReplayError(SteerAuthenticationError):
    """A signed queue message was read before, was sent to another queue or topic, or is
    older than the queues' ``max_age``."""


class SteerTimeoutError(SteerError, TimeoutError):
    """No result (or no task) arrived within the timeout."""


class KillSignalError(SteerError):
    """The queues received the kill signal: the campaign is shutting down."""


class ExecutableMethodError(SteerError):
    """The program of an executable method could not start or exited with an error.

    The message gives the command, the exit status and the end of its standard error.
    """
