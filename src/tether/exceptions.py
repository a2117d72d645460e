"""The tether exception tree.

Every error tether raises on purpose derives from :class:`TetherError`. Errors of the
libraries we build on (redis-py, the OS, pickle ...) are translated at the boundary into
one of these classes, with the original error chained as ``__cause__``.

```
TetherError
 +-- ProxyError
 |    +-- ProxyResolveError              the factory of a proxy failed
 |         +-- ProxyResolveMissingKeyError   the object behind a store proxy is gone
 +-- SerializationError                  bytes could not become an object, or back
 +-- ConnectorError                      a mediated channel failed (server down, I/O)
 |    +-- ConnectorClosedError           the connector was used after close()
 |    +-- NoConnectorMatchError          no MultiConnector policy accepts the object
 +-- StoreError
 |    +-- StoreExistsError               a store of that name is already registered
 |    +-- StoreNotFoundError             no store of that name is registered
 |    +-- NonProxiableTypeError          the object cannot be proxied (None, bool ...)
 |    +-- FutureError                    a distributed future was misused
 |    |    +-- FutureAlreadySetError     set_result was called on a future already set
 |    |    +-- FutureTimeoutError        no result within the timeout (also a TimeoutError)
 |    +-- OwnershipError                 an ownership or borrowing rule was broken
 |    +-- LifetimeError                  a lifetime was used after it ended
 +-- ConfigError                         a configuration is invalid or cannot be read
 +-- WireError                           a tether network connection failed or was refused
 |    +-- WireConnectionError            the peer is unreachable or the connection dropped
 |    +-- ProtocolError                  the peer sent bytes that are not valid framing
 |    |    +-- ProtocolVersionError      the peer speaks another protocol version
 |    |    +-- FrameTooLargeError        a frame exceeds the receiver's limits
 |    +-- AuthenticationError            the challenge-response handshake failed
 |    +-- RemoteError                    the peer answered a request with an error frame
 +-- StreamError                         a stream (tether.stream) failed
      +-- EventDecodeError               a broker message is not a valid stream event
      +-- TopicClosedError               send() on a topic the producer already closed
      +-- StreamBrokerError              the broker is unreachable or dropped the connection
      +-- StreamTimeoutError             no message (or no room) within the timeout
           +-- StreamBackpressureError   the broker or a bounded buffer stayed full
```

Every message says what failed (the store, key or address) and, where it can, what to do.
"""

from __future__ import annotations

__all__ = [
    'AuthenticationError',
    'ConfigError',
    'ConnectorClosedError',
    'ConnectorError',
    'EventDecodeError',
    'FrameTooLargeError',
    'FutureAlreadySetError',
    'FutureError',
    'FutureTimeoutError',
    'LifetimeError',
    'NoConnectorMatchError',
    'NonProxiableTypeError',
    'OwnershipError',
    'ProtocolError',
    'ProtocolVersionError',
    'ProxyError',
    'ProxyResolveError',
    'ProxyResolveMissingKeyError',
    'RemoteError',
    'SerializationError',
    'StoreError',
    'StoreExistsError',
    'StoreNotFoundError',
    'StreamBackpressureError',
    'StreamBrokerError',
    'StreamError',
    'StreamTimeoutError',
    'TetherError',
    'TopicClosedError',
    'WireConnectionError',
    'WireError',
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


class OwnershipError(StoreError):
    """An ownership or borrowing rule of :mod:`tether.store.ref` was broken."""


class LifetimeError(StoreError):
    """A lifetime of :mod:`tether.store.lifetimes` was used after it ended."""
