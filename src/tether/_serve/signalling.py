"""Message types of the relay (on top of :mod:`tether._wire`).

The control connection of an endpoint carries requests in both directions: the endpoint
asks (``REGISTER``, ``LIST``, ``CONNECT``, ``TUNNEL``) and the relay pushes (``OFFER``,
``TUNNEL_OPEN``) to which the endpoint answers (``ANSWER``).

==============  ====  =============================  ===================================
message         type  header                         reply
==============  ====  =============================  ===================================
REGISTER        64    ``{token, uuid, name, cert}``  ``OK {user, observed, udp_ports,
                                                     data_port}``
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
"""

from __future__ import annotations

__all__ = [
    'ANSWER',
    'CONNECT',
    'LIST',
    'OFFER',
    'OK',
    'PROBE',
    'REGISTER',
    'SEEN',
    'TCP_PROBE',
    'TICKET_BYTES',
    'TUNNEL',
    'TUNNEL_OPEN',
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
