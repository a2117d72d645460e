"""Agent messages: one typed, frozen record per kind, and their envelope.

A message is one of :class:`Request`, :class:`Response`, :class:`Ping`,
:class:`Shutdown`, :class:`Stop`, :class:`Cancel` and :class:`Describe` (all
:class:`Message`). Each is
an immutable record whose fields were checked when it was built from the wire, so code
that handles a message reads attributes and never looks into a header.

:func:`encode` turns a message into an :class:`Envelope` and :func:`decode` turns an
envelope (or its bytes) back into a message, or into a :class:`Rejected` saying why it was
refused. An envelope is exactly a :mod:`tether._wire` frame (magic, wire version, type
:data:`AGENT_MESSAGE`, a JSON header, raw payloads), both on direct connections and inside
a Redis mailbox. The JSON header carries the agent protocol version ``v``, the kind
``k``, the source ``s`` and destination ``d`` mailboxes, the request tag ``t`` and the
values (see :class:`Codec`); never a pickle unless the receiver
allows it.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import traceback
import types
import uuid
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, NamedTuple

from tether._wire import FIRST_APP_TYPE, Limits, decode_frame, encode_head, flatten
from tether.agents._codec import Codec
from tether.exceptions import (
    ActionError,
    MessageRejectedError,
    TetherError,
)

__all__ = [
    'ACK',
    'AGENT_MESSAGE',
    'CANCEL',
    'Cancel',
    'Codec',
    'DESCRIBE',
    'Describe',
    'Envelope',
    'ErrorInfo',
    'KINDS',
    'Message',
    'PING',
    'PROTOCOL',
    'Ping',
    'REQUEST',
    'RESPONSE',
    'Rejected',
    'Request',
    'Response',
    'SHUTDOWN',
    'STATS',
    'STOP',
    'Shutdown',
    'Stats',
    'Stop',
    'decode',
    'encode',
    'error_info',
    'new_mailbox_id',
    'rebuild_error',
]


def new_mailbox_id(kind: str = 'agent') -> str:
    """A fresh mailbox id (``agent-<hex>`` or ``client-<hex>``)."""
    return f'{kind}-{uuid.uuid4().hex}'


PROTOCOL = 1
"""Version of the agent message protocol (the ``v`` of every envelope header)."""

AGENT_MESSAGE = FIRST_APP_TYPE
"""Wire message type of an envelope."""
ACK = FIRST_APP_TYPE + 1
"""Wire message type of a direct link's acknowledgement."""

REQUEST = 'request'
RESPONSE = 'response'
PING = 'ping'
SHUTDOWN = 'shutdown'
STOP = 'stop'
STATS = 'stats'
CANCEL = 'cancel'
DESCRIBE = 'describe'
KINDS = frozenset({REQUEST, RESPONSE, PING, SHUTDOWN, STOP, STATS, CANCEL, DESCRIBE})

_LIMITS = Limits(max_header=16 << 20, max_payloads=1 << 16)


# Records ------------------------------------------------------------------------------------


class _MessageType(type):
    """Makes every message class slotted (a named tuple's fields, no instance dict) and
    sets its ``kind`` from the class keyword: ``class Ping(Message, _Head, kind=PING)``."""

    def __new__(
        mcs,
        name: str,
        bases: tuple[type, ...],
        namespace: dict[str, Any],
        kind: str = '',
    ) -> _MessageType:
        namespace.setdefault('__slots__', ())
        namespace['kind'] = kind
        return super().__new__(mcs, name, bases, namespace)


class Message(metaclass=_MessageType):
    """What every message has (a message is one of the subclasses).

    Messages are immutable records (named tuples underneath, so that building one costs
    about what a tuple does); two messages are equal when they are of the same kind and
    their fields are equal.

    Attributes:
        kind: ``request``, ``response``, ``ping``, ``shutdown``, ``cancel`` or ``describe``.
        src: Mailbox of the sender (where a response goes).
        dest: Mailbox of the receiver.
        tag: The request's number, unique per sender mailbox (a response repeats it;
            0: no answer is expected).
    """

    kind: ClassVar[str]
    src: str
    dest: str
    tag: int

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and _tuple_eq(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((type(self), _tuple_hash(self)))


_tuple_eq: Callable[[object, object], bool] = tuple.__eq__  # type: ignore[assignment]
_tuple_hash: Callable[[object], int] = tuple.__hash__  # type: ignore[assignment]
_NO_KWARGS: Mapping[str, Any] = types.MappingProxyType({})


class _Head(NamedTuple):
    src: str
    dest: str
    tag: int = 0


class _RequestFields(NamedTuple):
    src: str
    dest: str
    tag: int = 0
    action: str = ''
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = _NO_KWARGS


class Request(Message, _RequestFields, kind=REQUEST):
    """Run an action.

    Attributes:
        action: Name of the action.
        args: Its positional arguments.
        kwargs: Its keyword arguments.
    """


@dataclasses.dataclass(frozen=True, slots=True)
class ErrorInfo:
    """An exception, described for a response (see :func:`error_info`).

    Attributes:
        type: Qualified name of its class (``builtins.ValueError`` ...).
        message: ``str()`` of it.
        traceback: Its traceback at the sender, as text.
        args: Its arguments, when all are plain values (then it can be rebuilt).
        pickle: Its pickle, when the sender made one (used only if the receiver allows
            pickled values).
    """

    type: str
    message: str = ''
    traceback: str = ''
    args: tuple[Any, ...] | None = None
    pickle: bytes | None = None


class _ResponseFields(NamedTuple):
    src: str
    dest: str
    tag: int = 0
    result: Any = None
    error: ErrorInfo | None = None


class Response(Message, _ResponseFields, kind=RESPONSE):
    """The answer to a request (or to a ping, describe or shutdown).

    Attributes:
        result: The result, when the request succeeded.
        error: What went wrong, when it failed.
    """


class Ping(Message, _Head, kind=PING):
    """Ask the agent to answer (an empty response)."""


class Shutdown(Message, _Head, kind=SHUTDOWN):
    """Ask the agent to shut down for good (it answers first)."""


class Stop(Message, _Head, kind=STOP):
    """Ask the agent to stop and keep its mailbox (it answers first): messages sent to it
    wait there, and it can be launched again with the same id."""


class Stats(Message, _Head, kind=STATS):
    """Ask the agent for its request counts (answered with a dict of counts)."""


class Cancel(Message, _Head, kind=CANCEL):
    """Cancel the request of this sender with this tag (no answer)."""


class Describe(Message, _Head, kind=DESCRIBE):
    """Ask the agent for its actions (answered with their descriptions)."""


_CONTROL: dict[str, Callable[[str, str, int], Message]] = {
    PING: Ping,
    SHUTDOWN: Shutdown,
    STOP: Stop,
    STATS: Stats,
    CANCEL: Cancel,
    DESCRIBE: Describe,
}


@dataclasses.dataclass(frozen=True, slots=True)
class Rejected:
    """A message that could not be accepted, with what could be read of it.

    Attributes:
        error: Why it was refused.
        kind: Its kind, when readable.
        src: Its sender mailbox, when readable (a reply can then be sent).
        tag: Its tag, when readable.
    """

    error: MessageRejectedError
    kind: str | None = None
    src: str | None = None
    tag: int | None = None


class Envelope(NamedTuple):
    """A message as a wire frame: its JSON header and its raw payloads.

    Attributes:
        header: The JSON header.
        payloads: The raw payloads (bytes-like) the header's values point at.
    """

    header: dict[str, Any]
    payloads: list[Any]

    def to_bytes(self) -> bytes:
        """The whole frame as one bytes object (what a Redis mailbox holds)."""
        sizes, buffers = flatten(self.payloads)
        return b''.join([encode_head(AGENT_MESSAGE, self.header, sizes), *buffers])

    @classmethod
    def from_bytes(cls, data: bytes | memoryview) -> Envelope:
        """Parse a frame held in memory.

        Raises:
            MessageRejectedError: if it is not an agent envelope of this wire version.
        """
        try:
            _flags, mtype, _rid, header, payloads = decode_frame(data, _LIMITS)
        except (TetherError, ValueError) as e:
            raise MessageRejectedError(f'message is not a valid envelope: {e}') from e
        if mtype != AGENT_MESSAGE:
            raise MessageRejectedError(
                f'message is a wire frame of type {mtype}; agent messages are type '
                f'{AGENT_MESSAGE}',
            )
        return cls(header, payloads)


# Encoding -----------------------------------------------------------------------------------


def encode(msg: Message, codec: Codec) -> Envelope:
    """The envelope of ``msg`` (its values encoded by ``codec``)."""
    buffers: list[Any] = []
    header: dict[str, Any] = {'v': PROTOCOL, 'k': msg.kind, 's': msg.src, 'd': msg.dest}
    if msg.tag:
        header['t'] = msg.tag
    if type(msg) is Request:
        header['a'] = msg.action
        header['x'] = [codec.encode(a, buffers) for a in msg.args]
        if msg.kwargs:
            header['y'] = {str(k): codec.encode(v, buffers) for k, v in msg.kwargs.items()}
    elif type(msg) is Response:
        error = msg.error
        if error is not None:
            err: dict[str, Any] = {
                'type': error.type,
                'message': error.message,
                'traceback': error.traceback,
            }
            if error.args is not None:
                err['args'] = list(error.args)
            if error.pickle is not None:
                buffers.append(error.pickle)
                err['p'] = len(buffers) - 1
            header['e'] = err
        else:
            header['r'] = codec.encode(msg.result, buffers)
    return Envelope(header, buffers)


def decode(envelope: Envelope | bytes | memoryview, codec: Codec) -> Message | Rejected:
    """Check an envelope (or its bytes) and rebuild its message, or say why it is refused.

    Every field is checked here, once: a message that comes out is well formed.
    """
    if not isinstance(envelope, Envelope):
        try:
            envelope = Envelope.from_bytes(envelope)
        except MessageRejectedError as e:
            return Rejected(e)
    header, payloads = envelope
    src = header.get('s')
    if not isinstance(src, str):
        src = None
    tag = header.get('t', 0)
    if not isinstance(tag, int) or isinstance(tag, bool):
        tag = None
    kind = header.get('k')
    if not isinstance(kind, str) or kind not in KINDS:
        kind = None
    problem = _envelope_problem(header, kind, src, tag)
    if problem is not None or kind is None or src is None or tag is None:
        return Rejected(MessageRejectedError(problem or 'message is not valid'), kind, src, tag)
    head = (src, header['d'], tag)
    try:
        if kind == REQUEST:
            return _request(header, payloads, codec, head)
        if kind == RESPONSE:
            return _response(header, payloads, codec, head)
        return _CONTROL[kind](*head)
    except MessageRejectedError as e:
        return Rejected(e, kind, src, tag)
    except (IndexError, TypeError, ValueError) as e:
        return Rejected(MessageRejectedError(f'message is not valid: {e!r}'), kind, src, tag)


def _envelope_problem(
    header: dict[str, Any], kind: str | None, src: str | None, tag: int | None
) -> str | None:
    version = header.get('v')
    if version != PROTOCOL:
        return (
            f'message of agent protocol version {version!r:.20}; this side speaks '
            f'version {PROTOCOL}: upgrade the older side'
        )
    if 'm' in header:
        # Shared-memory references are read (and removed) by the hybrid exchange's server
        # for authenticated direct links only; anywhere else they are refused.
        return (
            'message carries shared-memory references (m), which are accepted on '
            'direct links between processes of one host only'
        )
    if kind is None or src is None or tag is None or not isinstance(header.get('d'), str):
        return (
            'message is not valid: it needs a known kind (k), a source (s), a '
            'destination (d) and an integer tag (t)'
        )
    return None


def _request(
    header: dict[str, Any], payloads: list[Any], codec: Codec, head: tuple[str, str, int]
) -> Request:
    action = header.get('a')
    args = header.get('x', [])
    kwargs = header.get('y', {})
    if not isinstance(action, str) or not isinstance(args, list):
        raise MessageRejectedError('request needs an action name (a) and arguments (x)')
    if not isinstance(kwargs, dict):
        raise MessageRejectedError('request keyword arguments (y) must be an object')
    dec = codec.decode
    return Request(
        *head,
        action,
        tuple([dec(a, payloads) for a in args]),
        {str(k): dec(v, payloads) for k, v in kwargs.items()} if kwargs else _NO_KWARGS,
    )


def _response(
    header: dict[str, Any], payloads: list[Any], codec: Codec, head: tuple[str, str, int]
) -> Response:
    err = header.get('e')
    if err is None:
        return Response(*head, codec.decode(header.get('r'), payloads))
    if not isinstance(err, dict):
        raise MessageRejectedError('response error (e) must be an object')
    type_name = err.get('type', 'builtins.Exception')
    message = err.get('message', '')
    tb = err.get('traceback', '')
    args = err.get('args')
    index = err.get('p')
    if not (isinstance(type_name, str) and isinstance(message, str) and isinstance(tb, str)):
        raise MessageRejectedError('response error (e) needs text type, message, traceback')
    if not isinstance(args, list | None):
        raise MessageRejectedError('response error arguments (e.args) must be a list')
    pickled = bytes(payloads[index]) if isinstance(index, int) else None
    info = ErrorInfo(type_name, message, tb, tuple(args) if args is not None else None, pickled)
    return Response(*head, None, info)


# Errors -------------------------------------------------------------------------------------


def error_info(exc: BaseException, *, with_pickle: bool = True) -> ErrorInfo:
    """Describe an exception for a response: type, message, arguments, remote traceback."""
    cls = type(exc)
    args = None
    if all(isinstance(a, str | int | float | bool) or a is None for a in exc.args):
        args = tuple(exc.args)
    pickled = None
    if with_pickle:
        import pickle

        with contextlib.suppress(Exception):
            pickled = pickle.dumps(exc, protocol=5)
    return ErrorInfo(
        f'{cls.__module__}.{cls.__qualname__}',
        str(exc),
        ''.join(traceback.format_exception(exc)),
        args,
        pickled,
    )


class _RemoteTraceback(Exception):  # noqa: N818 - named as in concurrent.futures
    def __init__(self, tb: str) -> None:
        self.tb = tb

    def __str__(self) -> str:
        return f'\n\nThe remote traceback:\n"""\n{self.tb}"""'


def rebuild_error(info: ErrorInfo, *, allow_pickle: bool) -> BaseException:
    """Rebuild the exception of an error response, with its remote traceback as cause.

    Built-in exception types and tether's (:mod:`tether.exceptions`,
    :mod:`tether.agents.exceptions`) are rebuilt from their type and arguments;
    others are unpickled if this side allows pickled values, and otherwise raised as
    :class:`~tether.exceptions.ActionError` naming the remote type. Exceptions that are
    not :class:`Exception` (``SystemExit``, ``KeyboardInterrupt`` ...) are always an
    ``ActionError``: raised at the caller they would stop its program.
    """
    exc = _from_args(info)
    if exc is None and allow_pickle and info.pickle is not None:
        exc = _from_pickle(info.pickle)
    if exc is None:
        exc = ActionError(info.type, info.message, info.traceback)
    exc.__cause__ = _RemoteTraceback(info.traceback)
    return exc


def _from_args(info: ErrorInfo) -> BaseException | None:
    module, _, name = info.type.rpartition('.')
    if module not in ('builtins', 'tether.exceptions', 'tether.agents.exceptions'):
        return None
    if info.args is None:
        return None
    import tether.agents.exceptions
    import tether.exceptions

    homes = {
        'builtins': builtins,
        'tether.exceptions': tether.exceptions,
        'tether.agents.exceptions': tether.agents.exceptions,
    }
    cls = getattr(homes[module], name, None)
    # Only Exceptions: SystemExit, KeyboardInterrupt ... raised at the caller would stop
    # its program (they arrive as an ActionError naming the type).
    if not (isinstance(cls, type) and issubclass(cls, Exception)):
        return None
    make: Callable[..., BaseException] = cls
    try:
        return make(*info.args)
    except Exception:
        return None


def _from_pickle(data: bytes) -> BaseException | None:
    import pickle

    try:
        loaded = pickle.loads(data)
    except Exception:
        return None
    return loaded if isinstance(loaded, Exception) else None
