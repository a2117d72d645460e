"""The object servers' message records: decoded once, malformed headers refused clearly."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tether._serve import codes as proto
from tether._serve import messages
from tether._serve.messages import (
    ChannelRequest,
    Empty,
    ObjectReply,
    ObjectRequest,
    PeersRequest,
)
from tether.exceptions import ProtocolError


@pytest.mark.parametrize(
    'message',
    [
        ObjectRequest(['a', 'b-1']),
        ObjectRequest(['a'], 'uuid-1'),
        PeersRequest(relay=True),
        PeersRequest(check_nat=True),
        ChannelRequest('uuid-2'),
    ],
)
def test_requests_round_trip(message: messages.Message) -> None:
    mtype = {
        ObjectRequest: proto.GET,
        PeersRequest: proto.PEERS,
        ChannelRequest: proto.CHANNEL,
    }[type(message)]
    assert messages.decode(mtype, messages.encode(message)) == message


def test_empty_requests() -> None:
    for mtype in (proto.STATUS, proto.SHUTDOWN, proto.WARM_UP):
        assert messages.decode(mtype, {}) == Empty()
    assert messages.encode(Empty()) == {}
    assert messages.decode(proto.PUT, {}) == ObjectRequest([])


@pytest.mark.parametrize(
    ('mtype', 'header', 'match'),
    [
        (proto.GET, {'ids': 'abc'}, 'ids must be a list'),
        (proto.GET, {'ids': [1]}, 'ids must be a list'),
        (proto.PUT, {'ids': ['../x']}, 'ids must be a list'),
        (proto.GET, {'ids': ['a'], 'endpoint': 5}, 'endpoint must be'),
        (proto.PEERS, {'relay': 'yes'}, "'relay' must be bool"),
        (proto.CHANNEL, {}, "without the field 'endpoint'"),
        (proto.CHANNEL, {'endpoint': ['x']}, "'endpoint' must be str"),
        (999, {}, 'unknown message type 999'),
    ],
)
def test_malformed_requests_are_protocol_errors(
    mtype: int, header: dict[str, Any], match: str
) -> None:
    with pytest.raises(ProtocolError, match=match):
        messages.decode(mtype, header)


def test_replies_are_checked_before_any_payload_is_used() -> None:
    ok = {'ids': ['a', 'b'], 'found': [True, False]}
    assert messages.decode_reply(ok, ['a', 'b'], 1) == ObjectReply(['a', 'b'], [True, False])
    exists = {'ids': ['a'], 'exists': [True]}
    assert messages.decode_reply(exists, ['a'], 0).exists == [True]
    with pytest.raises(ProtocolError, match='out of step'):
        messages.decode_reply(ok, ['b', 'a'], 1)
    with pytest.raises(ProtocolError, match='finds 1 objects but carries 2'):
        messages.decode_reply(ok, ['a', 'b'], 2)
    with pytest.raises(ProtocolError, match='list of 2 booleans'):
        messages.decode_reply({'ids': ['a', 'b'], 'found': [True]}, ['a', 'b'], 1)
    with pytest.raises(ProtocolError, match='list of 1 booleans'):
        messages.decode_reply({'ids': ['a'], 'exists': ['yes']}, ['a'], 0)


_STATUS = messages.NodeStatus(
    name='n', pid=7, address='10.0.0.1', bind='0.0.0.0', all_interfaces=True, tls=False,
    port=4000, objects=3, memory_used=30, memory_limit=100, spilled_objects=1, disk_used=10,
    spills=2, spill_dir='/tmp/x', inflight=0, disk_inflight=0, frame_timeouts=0,
    pool_bytes=0, pool_hits=0, clients=1, refused=0, requests=9, peers=['10.0.0.2'],
    metrics=('127.0.0.1', 9100), uptime=1.5,
)  # fmt: skip


def test_node_status_round_trips_through_json() -> None:
    header = json.loads(json.dumps(_STATUS._asdict()))
    assert messages.decode_status(header) == _STATUS
    none = _STATUS._replace(metrics=None, uptime=2)
    assert messages.decode_status(json.loads(json.dumps(none._asdict()))) == none


@pytest.mark.parametrize(
    ('change', 'error'),
    [
        ({'pid': None}, "field 'pid'"),
        ({'pid': '7'}, "field 'pid' must be int"),
        ({'tls': 1}, "field 'tls' must be bool"),
        ({'objects': True}, "field 'objects' must be int"),
        ({'peers': 'a'}, "field 'peers' must be list"),
        ({'peers': [1]}, "'peers' must be a list of strings"),
        ({'metrics': ['h']}, "'metrics' must be \\[host, port\\]"),
        ({'metrics': [1, 'h']}, "'metrics' must be \\[host, port\\]"),
    ],
)
def test_malformed_node_status_is_a_protocol_error(change: dict[str, Any], error: str) -> None:
    header = {**json.loads(json.dumps(_STATUS._asdict())), **change}
    if change.get('pid', 0) is None:
        del header['pid']
    with pytest.raises(ProtocolError, match=error):
        messages.decode_status(header)
