"""Message types of the relay (on top of :mod:`tether._wire`).

The control connection of an endpoint carries requests in both directions: the endpoint
asks (``REGISTER``, ``LIST``, ``CONNECT``, ``TUNNEL``) and the relay pushes (``OFFER``,
``TUNNEL_OPEN``) to which the endpoint answers (``ANSWER``).

==============  ====  =============================  ===================================
message         type  header                         reply
==============  ====  =============================  ===================================
REGISTER        64    ``{token, uuid, name,          ``OK {user, observed, udp_ports,
                      fingerprint}``                 data_port}``
LIST            65    ``{}``                         ``OK {endpoints: [{uuid, name}]}``
CONNECT         66    ``{target, offer}``            ``OK {uuid, name, answer}``
OFFER           67    ``{from, name, offer}``        (pushed) ``ANSWER {answer}``
ANSWER          68    ``{answer}`` or ``{error}``    none
TUNNEL          69    ``{target, session}``          ``OK {ticket}``
TUNNEL_OPEN     70    ``{from, session, ticket}``    (pushed) none
OK              71
==============  ====  =============================  ===================================

UDP (NAT discovery): an endpoint sends ``PROBE`` + 16-byte nonce to each of the relay's
two UDP ports; the relay answers ``SEEN`` + nonce + the JSON ``[ip, port]`` it saw.
Relayed data: a TCP connection to the data port sends a 32-byte ticket, then carries the
endpoints' own end-to-end TLS session, spliced by the relay to the other ticket holder.
A connection that sends ``TCP_PROBE`` instead gets the JSON ``[ip, port]`` it came from
(the public TCP mapping, for TCP hole punching) and is closed.

Each message kind has one typed, frozen record (a named tuple), checked once when it is
decoded: :func:`decode` for a request or a push (by its type), :func:`decode_reply` for
the ``OK`` answering one (by the record expected); :func:`encode` is the other way. The
offer and the answer that two endpoints exchange through the relay are the endpoints'
business: the relay passes them on as JSON objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple, TypeVar

from tether._wire._fields import field, optional
from tether.exceptions import ProtocolError

__all__ = [
    'ANSWER',
    'Answer',
    'CONNECT',
    'Connect',
    'Connected',
    'Endpoints',
    'LIST',
    'ListEndpoints',
    'Message',
    'OFFER',
    'OK',
    'Offer',
    'PROBE',
    'REGISTER',
    'Register',
    'Registered',
    'Reply',
    'SEEN',
    'TCP_PROBE',
    'TICKET_BYTES',
    'TUNNEL',
    'TUNNEL_OPEN',
    'Ticket',
    'Tunnel',
    'TunnelOpen',
    'decode',
    'decode_reply',
    'encode',
]

REGISTER = 64
LIST = 65
CONNECT = 66
OFFER = 67
ANSWER = 68
TUNNEL = 69
TUNNEL_OPEN = 70
OK = 71

PROBE = b'TTHRPROBE'
SEEN = b'TTHRSEEN'
TICKET_BYTES = 32
TCP_PROBE = b'TTHR-TCP-PROBE'.ljust(TICKET_BYTES, b'\0')

# Requests and pushes -----------------------------------------------------------------------


class Register(NamedTuple):
    """``REGISTER``: an endpoint presents its user's token, its UUID, name and certificate's
    fingerprint.

    A missing token decodes as ``''`` (refused as a wrong one is: nothing tells the two
    apart).
    """

    token: str
    uuid: str
    name: str
    fingerprint: str | None = None


class ListEndpoints(NamedTuple):
    """``LIST``: the user's endpoints online at the relay."""


class Connect(NamedTuple):
    """``CONNECT``: peer with ``target`` (a UUID or a name); ``offer`` goes to it as is."""

    target: str
    offer: dict[str, Any]


class Offer(NamedTuple):
    """``OFFER`` (pushed by the relay): endpoint ``sender`` (named ``name``) offers to peer."""

    sender: str
    name: str
    offer: dict[str, Any]


class Answer(NamedTuple):
    """``ANSWER``: the answer to an :class:`Offer`, or why there is none."""

    answer: dict[str, Any] | None = None
    error: str | None = None


class Tunnel(NamedTuple):
    """``TUNNEL``: a relayed channel to ``target`` for the peering ``session``."""

    target: str
    session: str


class TunnelOpen(NamedTuple):
    """``TUNNEL_OPEN`` (pushed): ``sender`` opens a relayed channel; present ``ticket``."""

    sender: str
    session: str
    ticket: str


Message = Register | ListEndpoints | Connect | Offer | Answer | Tunnel | TunnelOpen

# Replies -----------------------------------------------------------------------------------


class Registered(NamedTuple):
    """The ``OK`` to :class:`Register`: who the relay took the endpoint for, and its ports.

    Attributes:
        user: The user the token belongs to.
        observed: The address the relay saw the endpoint connect from.
        udp_ports: The relay's two UDP ports (NAT discovery).
        data_port: The relay's data port (relayed channels, TCP mappings).
    """

    user: str
    observed: str
    udp_ports: list[int]
    data_port: int


class Endpoints(NamedTuple):
    """The ``OK`` to :class:`ListEndpoints`: ``[{uuid, name}]``, by name."""

    endpoints: list[dict[str, str]]


class Connected(NamedTuple):
    """The ``OK`` to :class:`Connect`: the target's UUID and name and its :class:`Answer`."""

    uuid: str
    name: str
    answer: Answer


class Ticket(NamedTuple):
    """The ``OK`` to :class:`Tunnel`: the ticket to present at the data port (hex)."""

    ticket: str


Reply = Registered | Endpoints | Connected | Ticket

# Encoding ----------------------------------------------------------------------------------

_TYPES: dict[type[Any], int] = {
    Register: REGISTER,
    ListEndpoints: LIST,
    Connect: CONNECT,
    Offer: OFFER,
    Answer: ANSWER,
    Tunnel: TUNNEL,
    TunnelOpen: TUNNEL_OPEN,
    Registered: OK,
    Endpoints: OK,
    Connected: OK,
    Ticket: OK,
}
_WIRE_NAMES = {'sender': 'from'}


def encode(message: Message | Reply) -> tuple[int, dict[str, Any]]:
    """The message type and JSON header of a record (the inverse of the decoders)."""
    header: dict[str, Any] = {}
    for name, value in zip(message._fields, message, strict=True):
        if value is not None:
            header[_WIRE_NAMES.get(name, name)] = (
                encode(value)[1] if isinstance(value, Answer) else value
            )
    return _TYPES[type(message)], header


def _register(h: Mapping[str, Any]) -> Register:
    token = h.get('token')
    uuid, name = h.get('uuid'), h.get('name')
    if not (
        isinstance(uuid, str)
        and isinstance(name, str)
        and 0 < len(uuid) <= 64
        and 0 < len(name) <= 256
    ):
        raise ProtocolError('REGISTER needs a uuid and a name')
    return Register(
        token if isinstance(token, str) else '',
        uuid,
        name,
        optional(h, 'fingerprint', str, 'REGISTER'),
    )


def _ticket(h: Mapping[str, Any], what: str) -> str:
    ticket: str = field(h, 'ticket', str, what)
    try:
        if len(bytes.fromhex(ticket)) == TICKET_BYTES:
            return ticket
    except ValueError:
        pass
    raise ProtocolError(f'{what}: the ticket must be {TICKET_BYTES} bytes in hexadecimal')


def _answer(h: Mapping[str, Any]) -> Answer:
    return Answer(optional(h, 'answer', dict, 'ANSWER'), optional(h, 'error', str, 'ANSWER'))


_DECODERS: dict[int, Any] = {
    REGISTER: _register,
    LIST: lambda h: ListEndpoints(),
    CONNECT: lambda h: Connect(
        field(h, 'target', str, 'CONNECT'), field(h, 'offer', dict, 'CONNECT')
    ),
    OFFER: lambda h: Offer(
        field(h, 'from', str, 'OFFER'),
        field(h, 'name', str, 'OFFER'),
        field(h, 'offer', dict, 'OFFER'),
    ),
    ANSWER: _answer,
    TUNNEL: lambda h: Tunnel(
        field(h, 'target', str, 'TUNNEL'), field(h, 'session', str, 'TUNNEL')
    ),
    TUNNEL_OPEN: lambda h: TunnelOpen(
        field(h, 'from', str, 'TUNNEL_OPEN'),
        field(h, 'session', str, 'TUNNEL_OPEN'),
        _ticket(h, 'TUNNEL_OPEN'),
    ),
}


def decode(mtype: int, header: Mapping[str, Any]) -> Message:
    """The record of a request or push of type ``mtype``.

    Raises:
        ProtocolError: the type is unknown or the header does not fit it.
    """
    decoder = _DECODERS.get(mtype)
    if decoder is None:
        raise ProtocolError(f'unknown message type {mtype}')
    message: Message = decoder(header)
    return message


def _ports(h: Mapping[str, Any]) -> list[int]:
    ports: list[int] = field(h, 'udp_ports', list, 'REGISTER reply')
    if not all(type(p) is int for p in ports):
        raise ProtocolError('REGISTER reply: udp_ports must be a list of ports')
    return ports


def _endpoints(h: Mapping[str, Any]) -> Endpoints:
    rows = field(h, 'endpoints', list, 'LIST reply')
    for row in rows:
        if not isinstance(row, dict) or not all(
            isinstance(row.get(k), str) for k in ('uuid', 'name')
        ):
            raise ProtocolError('LIST reply: each endpoint must have a uuid and a name')
    return Endpoints(rows)


_REPLY_DECODERS: dict[type[Any], Any] = {
    Registered: lambda h: Registered(
        field(h, 'user', str, 'REGISTER reply'),
        field(h, 'observed', str, 'REGISTER reply'),
        _ports(h),
        field(h, 'data_port', int, 'REGISTER reply'),
    ),
    Endpoints: _endpoints,
    Connected: lambda h: Connected(
        field(h, 'uuid', str, 'CONNECT reply'),
        field(h, 'name', str, 'CONNECT reply'),
        _answer(field(h, 'answer', dict, 'CONNECT reply')),
    ),
    Ticket: lambda h: Ticket(_ticket(h, 'TUNNEL reply')),
}

R = TypeVar('R', Registered, Endpoints, Connected, Ticket)


def decode_reply(kind: type[R], header: Mapping[str, Any]) -> R:
    """The record of the ``OK`` that answers a request, of the record type ``kind``.

    Raises:
        ProtocolError: the header does not fit it.
    """
    reply: R = _REPLY_DECODERS[kind](header)
    return reply
