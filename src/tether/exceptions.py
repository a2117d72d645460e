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
 |    +-- SerializerNotAllowedError      a payload's serializer is not on the allowlist
 |    +-- SourceNotFoundError            a builtin given to a source serializer (also a TypeError)
 |    +-- UnknownStrategyError           not a strategy tether.faas knows (also a ValueError)
 +-- ConnectorError                      a mediated channel failed (server down, I/O)
 |    +-- ConnectorClosedError           the connector was used after close()
 |    +-- PeerChannelError               the channel to the peer endpoint owning the
 |    |                                  object failed during the request (it died)
 |    +-- NoConnectorMatchError          no MultiConnector policy accepts the object
 +-- StoreError
 |    +-- StoreExistsError               a store of that name is already registered
 |    +-- StoreNotFoundError             no store of that name is registered
 |    +-- NonProxiableTypeError          the object cannot be proxied (None, bool ...)
 |    +-- NotAStoreProxyError            a store operation got a proxy not made by a store
 |    |                                  (also a TypeError)
 |    +-- FutureError                    a distributed future was misused
 |    |    +-- FutureAlreadySetError     set_result was called on a future already set
 |    |    +-- FutureTimeoutError        no result within the timeout (also a TimeoutError)
 |    +-- OwnershipError                 an ownership or borrowing rule was broken
 |    |    |                             (also a RuntimeError)
 |    |    +-- MutableBorrowError        a borrow conflicts with a mutable borrow
 |    |    +-- ReferenceNotOwnedError    the call needs the owner, got a borrow
 |    |    +-- ReferenceInvalidError     the proxy was moved to another process or dropped
 |    |    +-- AlreadyOwnedError         into_owned() of an ownership proxy (also ValueError)
 |    |    +-- OwnerCopyError            copy of an owned proxy (also NotImplementedError)
 |    +-- LifetimeError                  a lifetime was used after it ended (also a
 |    |    |                             RuntimeError)
 |    |    +-- LifetimeArgumentError     invalid arguments to a lifetime (also ValueError)
 |    +-- MissingCapabilityError         the connector lacks what the call needs (also a
 |                                       NotImplementedError)
 +-- InvalidArgumentError                arguments that cannot go together (also ValueError)
 |    +-- WalltimeError                  a negative walltime (also an AssertionError)
 +-- ConfigError                         a configuration is invalid or cannot be read
 |    +-- ConnectorConfigError           a connector config has unknown fields or wrong
 |    |                                  types (also a TypeError)
 |    +-- ConnectorKindError             a connector kind that names no connector (also a
 |    |                                  ValueError)
 |    +-- ImportPathError                an import path names nothing importable (also an
 |    |                                  ImportError)
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
 |    +-- UnknownTopicError              a publisher has no channel for the topic (also ValueError)
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
 |    +-- PluginKindError                a plugin kind tether.bench does not have (also a
 |    |                                  ConfigError and a ValueError)
 |    +-- PluginRegistrationError        a plugin class without a name, or a name taken (also
 |    |                                  a ConfigError and a RuntimeError)
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

from tether._errors_data import (
    AlreadyOwnedError,
    AuthenticationError,
    ConfigError,
    ConnectorClosedError,
    ConnectorConfigError,
    ConnectorError,
    ConnectorKindError,
    EventAuthenticationError,
    EventDecodeError,
    EventRefusedError,
    EventReplayError,
    FrameTooLargeError,
    FutureAlreadySetError,
    FutureError,
    FutureTimeoutError,
    ImportPathError,
    InvalidArgumentError,
    LifetimeArgumentError,
    LifetimeError,
    MissingCapabilityError,
    MutableBorrowError,
    NoConnectorMatchError,
    NonProxiableTypeError,
    NotAStoreProxyError,
    OwnerCopyError,
    OwnershipError,
    PeerChannelError,
    ProtocolError,
    ProtocolVersionError,
    ProxyError,
    ProxyResolveError,
    ProxyResolveMissingKeyError,
    ReferenceInvalidError,
    ReferenceNotOwnedError,
    RemoteError,
    SerializationError,
    SerializerNotAllowedError,
    SerializerOutputError,
    SourceNotFoundError,
    StoreError,
    StoreExistsError,
    StoreNotFoundError,
    StreamBackpressureError,
    StreamBrokerError,
    StreamError,
    StreamTimeoutError,
    TetherError,
    TopicClosedError,
    UnknownStrategyError,
    UnknownTopicError,
    UntrustedStoreError,
    UntrustedTypeError,
    WalltimeError,
    WireConnectionError,
    WireError,
)
from tether._errors_services import (
    ActionError,
    ActionTimeoutError,
    AgentConfigError,
    AgentCrashedError,
    AgentError,
    AgentLaunchError,
    AgentStateError,
    BehaviorDefinitionError,
    BenchError,
    EndpointDeletedError,
    EndpointError,
    ExecutableMethodError,
    FaasAuthenticationError,
    FaasBadRequestError,
    FaasConnectionError,
    FaasError,
    FaasNotFoundError,
    FaasPayloadTooLargeError,
    FaasRateLimitError,
    FunctionNotAllowedError,
    HammerError,
    HarnessError,
    KillSignalError,
    MailboxClosedError,
    MailboxLostError,
    MessageRejectedError,
    PeeringError,
    PluginKindError,
    PluginNotFoundError,
    PluginRegistrationError,
    ServerStartError,
    SteerAuthenticationError,
    SteerError,
    SteerQueueError,
    SteerReplayError,
    SteerTimeoutError,
    TaskCancelledError,
    TaskDependencyError,
    TaskExecutionFailed,
    TaskPending,
    TaskTimeoutError,
    UnknownMailboxError,
    WorkerLostError,
)

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
    'ConnectorKindError',
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
    'ImportPathError',
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
    'NotAStoreProxyError',
    'OwnerCopyError',
    'OwnershipError',
    'PeerChannelError',
    'PeeringError',
    'PluginKindError',
    'PluginNotFoundError',
    'PluginRegistrationError',
    'ProtocolError',
    'ProtocolVersionError',
    'ProxyError',
    'ProxyResolveError',
    'ProxyResolveMissingKeyError',
    'ReferenceInvalidError',
    'ReferenceNotOwnedError',
    'RemoteError',
    'SerializationError',
    'SerializerNotAllowedError',
    'SerializerOutputError',
    'ServerStartError',
    'SourceNotFoundError',
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
    'UnknownStrategyError',
    'UnknownTopicError',
    'UntrustedStoreError',
    'UntrustedTypeError',
    'WalltimeError',
    'WireConnectionError',
    'WireError',
    'WorkerLostError',
]

# The classes live in small private modules; they are tether.exceptions' own (pickles,
# tracebacks and reprs name tether.exceptions.X).
for _name in __all__:
    globals()[_name].__module__ = __name__
del _name
