"""The relay's message records: every kind round-trips; a malformed header is refused."""

from __future__ import annotations

from typing import Any

import pytest

from tether._serve import signalling as rp
from tether.exceptions import ProtocolError

TICKET = 'ab' * rp.TICKET_BYTES

MESSAGES: list[rp.Message] = [
    rp.Register('token', 'uuid-1', 'site-a', 'fingerprint'),
    rp.Register('token', 'uuid-1', 'site-a'),
    rp.ListEndpoints(),
    rp.Connect('site-b', {'session': 'aa'}),
    rp.Offer('uuid-1', 'site-a', {'session': 'aa'}),
    rp.Answer(answer={'cert': 'x'}),
    rp.Answer(error='refused'),
    rp.Tunnel('uuid-2', 'aa'),
    rp.TunnelOpen('uuid-1', 'aa', TICKET),
]
REPLIES: list[rp.Reply] = [
    rp.Registered('alice', '10.0.0.1', [4000, 4001], 4002),
    rp.Endpoints([{'uuid': 'u', 'name': 'n'}]),
    rp.Connected('uuid-2', 'site-b', rp.Answer(answer={'cert': 'x'})),
    rp.Ticket(TICKET),
]


@pytest.mark.parametrize('message', MESSAGES)
def test_requests_and_pushes_round_trip(message: rp.Message) -> None:
    mtype, header = rp.encode(message)
    assert rp.decode(mtype, header) == message


def test_offers_name_their_sender_from_on_the_wire() -> None:
    assert rp.encode(rp.Offer('u', 'n', {}))[1] == {'from': 'u', 'name': 'n', 'offer': {}}


@pytest.mark.parametrize('reply', REPLIES)
def test_replies_round_trip(reply: rp.Reply) -> None:
    mtype, header = rp.encode(reply)
    assert mtype == rp.OK
    kind: type[Any] = type(reply)
    assert rp.decode_reply(kind, header) == reply


def test_a_missing_token_decodes_as_an_empty_one() -> None:
    # Refused as a wrong token is: nothing tells the two apart.
    register = rp.decode(rp.REGISTER, {'uuid': 'u', 'name': 'n'})
    assert isinstance(register, rp.Register)
    assert not register.token


@pytest.mark.parametrize(
    ('mtype', 'header', 'match'),
    [
        (rp.REGISTER, {'token': 't', 'uuid': '', 'name': 'n'}, 'needs a uuid and a name'),
        (rp.REGISTER, {'token': 't', 'uuid': 'u' * 65, 'name': 'n'}, 'needs a uuid and a name'),
        (rp.CONNECT, {'target': 'b'}, "CONNECT without the field 'offer'"),
        (rp.CONNECT, {'target': 'b', 'offer': []}, "'offer' must be dict"),
        (rp.OFFER, {'from': 1, 'name': 'n', 'offer': {}}, "'from' must be str"),
        (rp.ANSWER, {'answer': 'yes'}, "'answer' must be dict"),
        (rp.TUNNEL, {'target': 'b'}, "without the field 'session'"),
        (rp.TUNNEL_OPEN, {'from': 'a', 'session': 's', 'ticket': 'zz'}, 'hexadecimal'),
        (rp.OK, {}, 'unknown message type'),
    ],
)
def test_malformed_messages_are_protocol_errors(
    mtype: int, header: dict[str, Any], match: str
) -> None:
    with pytest.raises(ProtocolError, match=match):
        rp.decode(mtype, header)


@pytest.mark.parametrize(
    ('kind', 'header', 'match'),
    [
        (
            rp.Registered,
            {'user': 'a', 'observed': 'h', 'udp_ports': ['x'], 'data_port': 1},
            'udp_ports',
        ),
        (
            rp.Registered,
            {'user': 'a', 'observed': 'h', 'udp_ports': [], 'data_port': True},
            'data_port',
        ),
        (rp.Endpoints, {'endpoints': [{'uuid': 'u'}]}, 'a uuid and a name'),
        (rp.Connected, {'uuid': 'u', 'name': 'n'}, "without the field 'answer'"),
        (rp.Ticket, {'ticket': 'ab'}, 'hexadecimal'),
    ],
)
def test_malformed_replies_are_protocol_errors(
    kind: type[Any], header: dict[str, Any], match: str
) -> None:
    with pytest.raises(ProtocolError, match=match):
        rp.decode_reply(kind, header)
