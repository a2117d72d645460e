"""Agent messages and their envelope: a versioned tether wire frame, never a pickle.

An envelope is exactly a :mod:`tether._wire` frame (magic, wire version, type
``AGENT_MESSAGE``, a JSON header, raw payloads), both on direct connections and inside a
Redis mailbox. The JSON header carries the agent protocol version ``v``, the kind, the
source and destination mailboxes, the request tag, and the values (see
:mod:`tether.agents._codec`). A receiver checks all of it and refuses anything else with
:class:`~tether.exceptions.MessageRejectedError`.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import traceback
import uuid
from typing import Any

from tether._wire import FIRST_APP_TYPE, Limits, encode_head
from tether._wire._frame import check_sizes, decode_header, flatten, unpack_prefix
from tether.agents._codec import Codec
from tether.exceptions import (
    ActionError,
    MessageRejectedError,
    ProtocolError,
    TetherError,
)

__all__ = [
    'ACK',
    'AGENT_MESSAGE',
    'CANCEL',
    'DESCRIBE',
    'KINDS',
    'Message',
    'PING',
    'PROTOCOL',
    'REQUEST',
    'RESPONSE',
    'Rejected',
    'SHUTDOWN',
    'decode',
    'decode_bytes',
    'encode',
    'encode_bytes',
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
ACK = FIRST_APP_TYPE + 1

REQUEST = 'request'
RESPONSE = 'response'
PING = 'ping'
SHUTDOWN = 'shutdown'
CANCEL = 'cancel'
DESCRIBE = 'describe'
KINDS = frozenset({REQUEST, RESPONSE, PING, SHUTDOWN, CANCEL, DESCRIBE})

_LIMITS = Limits(max_header=16 << 20, max_payloads=1 << 16)


@dataclasses.dataclass(slots=True)
class Message:
    """One message between mailboxes.

    Attributes:
        kind: ``request``, ``response``, ``ping``, ``shutdown``, ``cancel`` or ``describe``.
        src: Mailbox of the sender (where a response goes).
        dest: Mailbox of the receiver.
        tag: The request's number, unique per sender mailbox (a response repeats it).
        action: Name of the requested action.
        args: Positional arguments of a request.
        kwargs: Keyword arguments of a request.
        result: Result of a successful response.
        error: Description of a failed response (see :func:`error_info`).
    """

    kind: str
    src: str
    dest: str
    tag: int = 0
    action: str = ''
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    result: Any = None
    error: dict[str, Any] | None = None


@dataclasses.dataclass(slots=True)
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


# Encoding ---------------------------------------------------------------------------------


def encode(msg: Message, codec: Codec) -> tuple[dict[str, Any], list[Any]]:
    """Return the envelope header and payloads of ``msg``."""
    buffers: list[Any] = []
    header: dict[str, Any] = {'v': PROTOCOL, 'k': msg.kind, 's': msg.src, 'd': msg.dest}
    if msg.tag:
        header['t'] = msg.tag
    if msg.kind == REQUEST:
        header['a'] = msg.action
        header['x'] = [codec.encode(a, buffers) for a in msg.args]
        if msg.kwargs:
            header['y'] = {str(k): codec.encode(v, buffers) for k, v in msg.kwargs.items()}
    elif msg.kind == RESPONSE:
        if msg.error is not None:
            err = dict(msg.error)
            pickled = err.pop('pickle', None)
            if pickled is not None:
                buffers.append(pickled)
                err['p'] = len(buffers) - 1
            header['e'] = err
        else:
            header['r'] = codec.encode(msg.result, buffers)
    return header, buffers


def encode_bytes(msg: Message, codec: Codec) -> bytes:
    """The envelope of ``msg`` as one bytes object (what a Redis mailbox holds)."""
    header, payloads = encode(msg, codec)
    sizes, buffers = flatten(payloads)
    return b''.join([encode_head(AGENT_MESSAGE, header, sizes), *buffers])


def decode_bytes(data: bytes, codec: Codec) -> Message | Rejected:
    """Parse an envelope held as bytes (a Redis mailbox entry)."""
    from tether._wire._frame import PREFIX

    try:
        view = memoryview(data)
        if view.nbytes < PREFIX.size:
            raise ProtocolError(f'envelope of {view.nbytes} bytes is shorter than a frame prefix')
        version, _flags, mtype, _rid, hlen, count = unpack_prefix(
            bytes(view[: PREFIX.size]), _LIMITS
        )
        pos = PREFIX.size
        sizes = check_sizes(bytes(view[pos : pos + 8 * count]), count, _LIMITS) if count else ()
        pos += 8 * count
        header = decode_header(bytes(view[pos : pos + hlen]))
        pos += hlen
        if pos + sum(sizes) != view.nbytes:
            raise ProtocolError('envelope length does not match its payload sizes')
        payloads = []
        for n in sizes:
            payloads.append(view[pos : pos + n])
            pos += n
    except (TetherError, ValueError) as e:
        return Rejected(MessageRejectedError(f'message is not a valid envelope: {e}'))
    from tether._wire import PROTOCOL_VERSION

    if version != PROTOCOL_VERSION or mtype != AGENT_MESSAGE:
        return Rejected(
            MessageRejectedError(
                f'message is a wire frame of version {version} and type {mtype}; agent '
                f'messages are version {PROTOCOL_VERSION}, type {AGENT_MESSAGE}',
            ),
        )
    return decode(header, payloads, codec)


def decode(header: dict[str, Any], payloads: list[Any], codec: Codec) -> Message | Rejected:
    """Check an envelope header and rebuild its message (or say why it is refused)."""
    src = header.get('s')
    if not isinstance(src, str):
        src = None
    tag = header.get('t', 0)
    if not isinstance(tag, int) or isinstance(tag, bool):
        tag = None
    kind = header.get('k')
    if not isinstance(kind, str) or kind not in KINDS:
        kind = None
    version = header.get('v')
    if version != PROTOCOL:
        return Rejected(
            MessageRejectedError(
                f'message of agent protocol version {version!r:.20}; this side speaks '
                f'version {PROTOCOL}: upgrade the older side',
            ),
            kind,
            src,
            tag,
        )
    if 'm' in header:
        # Shared-memory references are read (and removed) by the hybrid exchange's server
        # for authenticated direct links only; anywhere else they are refused.
        return Rejected(
            MessageRejectedError(
                'message carries shared-memory references (m), which are accepted on '
                'direct links between processes of one host only',
            ),
            kind,
            src,
            tag,
        )
    dest = header.get('d')
    if kind is None or src is None or tag is None or not isinstance(dest, str):
        return Rejected(
            MessageRejectedError(
                'message is not valid: it needs a known kind (k), a source (s), a '
                'destination (d) and an integer tag (t)',
            ),
            kind,
            src,
            tag,
        )
    msg = Message(kind, src, dest, tag)
    try:
        if kind == REQUEST:
            action = header.get('a')
            args = header.get('x', [])
            kwargs = header.get('y', {})
            if not isinstance(action, str) or not isinstance(args, list):
                raise MessageRejectedError('request needs an action name (a) and arguments (x)')
            if not isinstance(kwargs, dict):
                raise MessageRejectedError('request keyword arguments (y) must be an object')
            msg.action = action
            msg.args = tuple(codec.decode(a, payloads) for a in args)
            msg.kwargs = {str(k): codec.decode(v, payloads) for k, v in kwargs.items()}
        elif kind == RESPONSE:
            if 'e' in header:
                err = header['e']
                if not isinstance(err, dict):
                    raise MessageRejectedError('response error (e) must be an object')
                err = dict(err)
                if isinstance(err.get('p'), int):
                    err['pickle'] = bytes(payloads[err.pop('p')])
                msg.error = err
            else:
                msg.result = codec.decode(header.get('r'), payloads)
    except MessageRejectedError as e:
        return Rejected(e, kind, src, tag)
    except (IndexError, TypeError, ValueError) as e:
        return Rejected(MessageRejectedError(f'message is not valid: {e!r}'), kind, src, tag)
    return msg


# Errors -------------------------------------------------------------------------------------


def error_info(exc: BaseException, *, with_pickle: bool = True) -> dict[str, Any]:
    """Describe an exception for a response: type, message, arguments, remote traceback."""
    cls = type(exc)
    info: dict[str, Any] = {
        'type': f'{cls.__module__}.{cls.__qualname__}',
        'message': str(exc),
        'traceback': ''.join(traceback.format_exception(exc)),
    }
    if all(isinstance(a, str | int | float | bool) or a is None for a in exc.args):
        info['args'] = list(exc.args)
    if with_pickle:
        import pickle

        with contextlib.suppress(Exception):
            info['pickle'] = pickle.dumps(exc, protocol=5)
    return info


class _RemoteTraceback(Exception):  # noqa: N818 - named as in concurrent.futures
    def __init__(self, tb: str) -> None:
        self.tb = tb

    def __str__(self) -> str:
        return f'\n\nThe remote traceback:\n"""\n{self.tb}"""'


def rebuild_error(info: dict[str, Any], *, allow_pickle: bool) -> BaseException:
    """Rebuild the exception of an error response, with its remote traceback as cause.

    Built-in exception types and tether's are rebuilt from their type and arguments;
    others are unpickled if this side allows pickled values, and otherwise raised as
    :class:`~tether.exceptions.ActionError` naming the remote type. Exceptions that are
    not :class:`Exception` (``SystemExit``, ``KeyboardInterrupt`` ...) are always an
    ``ActionError``: raised at the caller they would stop its program.
    """
    type_name = str(info.get('type', 'builtins.Exception'))
    message = str(info.get('message', ''))
    tb = str(info.get('traceback', ''))
    exc: BaseException | None = None
    module, _, name = type_name.rpartition('.')
    args = info.get('args')
    if module in ('builtins', 'tether.exceptions') and isinstance(args, list):
        import tether.exceptions

        cls = getattr(builtins if module == 'builtins' else tether.exceptions, name, None)
        # Only Exceptions: SystemExit, KeyboardInterrupt ... raised at the caller would
        # stop its program (they arrive as an ActionError naming the type).
        if isinstance(cls, type) and issubclass(cls, Exception):
            try:
                exc = cls(*args)
            except Exception:
                exc = None
    if exc is None and allow_pickle and isinstance(info.get('pickle'), bytes):
        import pickle

        try:
            loaded = pickle.loads(info['pickle'])
        except Exception:
            loaded = None
        if isinstance(loaded, Exception):
            exc = loaded
    if exc is None:
        exc = ActionError(type_name, message, tb)
    exc.__cause__ = _RemoteTraceback(tb)
    return exc
