"""tether's errors of data, proxies, stores, connectors, wire and streams.

Public home: :mod:`tether.exceptions` (which draws the tree).
"""

from __future__ import annotations


class TetherError(Exception):
    """Root of every error raised by tether."""


class ProxyError(TetherError):
    """Base class for errors of :mod:`tether.proxy`."""


class ProxyResolveError(ProxyError):
    """The factory of a proxy raised while resolving the target object.

    The original error is chained as ``__cause__`` (also :attr:`cause`, ProxyStore's name).
    """

    @property
    def cause(self) -> BaseException:
        """The error the factory raised: ``__cause__``, or this error itself when the
        factory raised it (a missing key raises ``ProxyResolveMissingKeyError``)."""
        return self.__cause__ if self.__cause__ is not None else self


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


class NotAStoreProxyError(StoreError, TypeError):
    """A store operation got a proxy whose factory is not a store's (ProxyStore's
    ``ProxyStoreFactoryError``; also a :class:`TypeError`)."""


class NonProxiableTypeError(StoreError):
    """The object cannot be proxied (``None``, ``bool`` and ``NotImplemented`` cannot be)."""


class ConfigError(TetherError):
    """A configuration is invalid, incomplete, or cannot be read."""


class ConnectorConfigError(ConfigError, TypeError):
    """A connector's config has unknown fields or values of the wrong type.

    Raised by ``from_config`` (see :mod:`tether.connectors.config`); also a
    :class:`TypeError`, which ProxyStore's ``from_config(**config)`` raised.
    """


class ConnectorKindError(ConfigError, ValueError):
    """A connector config names a kind that is neither a known short name nor an import
    path (also a :class:`ValueError`, which ProxyStore raised)."""


class ImportPathError(ConfigError, ImportError):
    """An import path (``module.qualname``) names nothing importable (also an
    :class:`ImportError`, which ProxyStore raised)."""


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


class UnknownTopicError(StreamError, ValueError):
    """A publisher was given a topic it has no channel for (also a :class:`ValueError`,
    which ProxyStore's queue publisher raised)."""


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


class WalltimeError(InvalidArgumentError, AssertionError):
    """A negative walltime (a :class:`~tether.faas.ShellFunction`'s): also a
    :class:`ValueError` and, as the Globus Compute SDK's check is, an
    :class:`AssertionError`.
    """


class MissingCapabilityError(StoreError, NotImplementedError):
    """The store's connector lacks what the call needs (also a :class:`NotImplementedError`).

    For example :meth:`Store.future() <tether.store.Store.future>` over a connector that
    cannot reserve keys (``new_key``/``set``).
    """


class SerializerOutputError(SerializationError, TypeError):
    """A custom serializer returned something other than bytes (also a :class:`TypeError`)."""


class SourceNotFoundError(SerializationError, TypeError):
    """A function without Python source (a builtin such as ``max``) was given to a
    serializer that sends source text (also a :class:`TypeError`, as the Globus Compute
    SDK raises).
    """


class SerializerNotAllowedError(SerializationError):
    """A payload names a serializer (strategy) the receiver's allowlist does not list.

    Raised before any byte of the payload is read: ``ComputeSerializer(
    allowed_deserializer_types=...)`` in a program, ``allowed_serializers`` on a faas
    endpoint (the task fails with this error's name).
    """


class UnknownStrategyError(SerializationError, ValueError):
    """A value is not a serialization strategy tether knows (also a :class:`ValueError`).

    Strategies are the classes of :mod:`tether.faas` (``DillCode``, ``JSONData`` ...), an
    instance of one, their name, or an import path to one; nothing is ever imported.
    """


class OwnerCopyError(OwnershipError, NotImplementedError):
    """``copy.copy``/``deepcopy`` of an owned proxy: it would be a second owner (also a
    :class:`NotImplementedError`, which ProxyStore raised)."""


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
