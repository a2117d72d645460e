"""Size claims count against an endpoint's memory budget before any data arrives.

A frame's head says how large its payloads are; an endpoint that allocated that much at
once could be made to hold gigabytes by a few heads with no data behind them. These tests
send such heads (on client connections, and on a client connection spliced to the
owner's peer server) and check that the endpoint's memory stays within its budget: what
memory cannot take goes to spill files as it arrives, and everything is given back when
the connection closes.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import uuid as _uuid
from typing import Any

from tests.endpoint.conftest import Relay, Site, wait_for
from tether._serve.codes import CHANNEL, GET, OK, PUT
from tether._wire import SyncConnection, encode_head
from tether.connectors.endpoint import EndpointKey
from tether.endpoint import find_config

MiB = 1 << 20
BUDGET = 64_000_000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return int(s.getsockname()[1])


def rss(pid: int) -> int:
    """Resident memory of process ``pid``, in bytes."""
    with open(f'/proc/{pid}/status') as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1]) * 1024
    raise AssertionError(f'no VmRSS for {pid}')


def raw_client(site: Site, name: str) -> SyncConnection:
    config = find_config(name, site.home)
    info = json.loads((config.folder(site.home) / 'state.json').read_text())
    return SyncConnection(info['host'], info['port'], secret=config.client_token(site.home))


def claim(conn: SyncConnection, size: int, **header: Any) -> None:
    """Send the head of a ``PUT`` of ``size`` bytes, and none of its bytes."""
    head = {'ids': [_uuid.uuid4().hex], **header}
    conn.sock.sendall(encode_head(PUT, head, (size,), 7, 0))


def claimed(status: dict[str, Any]) -> int:
    return int(status.get('inflight', 0)) + int(status.get('disk_inflight', 0))


def wait_claimed(site: Site, name: str, pid: int, base: int, total: int) -> dict[str, Any]:
    """Wait until the endpoint has taken every head (counted, or allocated outright)."""

    def taken() -> dict[str, Any] | None:
        status = site.status(name)
        return status if claimed(status) == total or rss(pid) - base > total // 2 else None

    result: dict[str, Any] = wait_for(taken, timeout=60, what='the claims to be taken')
    return result


def test_claims_on_client_connections_count_against_the_budget(site: Site) -> None:
    """One claim memory can take, then claims that together exceed the budget many times."""
    site.configure('budget', None, storage={'memory': str(BUDGET)})
    site.start('budget')
    pid = site.pid('budget')
    base = rss(pid)
    sizes = [40 * MiB] + [100 * MiB] * 4
    conns = [raw_client(site, 'budget') for _ in sizes]
    for conn, size in zip(conns, sizes, strict=True):
        claim(conn, size)
    status = wait_claimed(site, 'budget', pid, base, sum(sizes))
    grown = rss(pid) - base
    assert grown < BUDGET + 32 * MiB, f'{grown >> 20} MiB resident for claims with no data'
    assert status['inflight'] <= status['memory_limit']
    assert status['inflight'] + status['disk_inflight'] == sum(sizes)
    # Whatever a connection claimed is given back when it closes.
    for conn in conns:
        conn.close()
    wait_for(lambda: claimed(site.status('budget')) == 0, what='the claims to be released')
    # The endpoint still serves, within its budget.
    conn = raw_client(site, 'budget')
    data = os.urandom(3 * MiB)
    oid = _uuid.uuid4().hex
    assert conn.request(PUT, {'ids': [oid]}, [data]).type == OK
    conn.close()


def test_claims_on_a_spliced_channel_count_against_the_owners_budget(
    site: Site, loop_relay: Relay
) -> None:
    """A client spliced onto a peer channel reaches the owner's peer server: same budget."""
    port = free_port()
    site.configure('splice-a', loop_relay.address)
    b_uuid = site.configure(
        'splice-b',
        loop_relay.address,
        peering={'port': port, 'advertise': [f'127.0.0.1:{port}']},
        storage={'memory': str(BUDGET)},
    )
    site.start('splice-a')
    site.start('splice-b')
    pid = site.pid('splice-b')
    conn = raw_client(site, 'splice-a')
    reply = conn.request(CHANNEL, {'endpoint': b_uuid})
    assert reply.type == OK
    assert reply.header['path'] == 'direct'
    base = rss(pid)
    total = 300 * MiB
    claim(conn, total, endpoint=b_uuid)
    status = wait_claimed(site, 'splice-b', pid, base, total)
    grown = rss(pid) - base
    assert grown < BUDGET + 32 * MiB, f'{grown >> 20} MiB resident for a claim with no data'
    assert status['disk_inflight'] == total
    conn.close()
    wait_for(lambda: claimed(site.status('splice-b')) == 0, what='the claim to be released')


def test_a_forwarded_object_memory_cannot_take_goes_on_from_its_spill_file(
    site: Site, loop_relay: Relay
) -> None:
    """A ``PUT`` for a peer received whole, larger than the budget, reaches the owner whole."""
    port = free_port()
    site.configure('spill-a', loop_relay.address, storage={'memory': '8MB'})
    b_uuid = site.configure(
        'spill-b',
        loop_relay.address,
        peering={'port': port, 'advertise': [f'127.0.0.1:{port}']},
    )
    site.start('spill-a')
    site.start('spill-b')
    conn = raw_client(site, 'spill-a')
    data = os.urandom(20 * MiB)
    oid = _uuid.uuid4().hex
    # The first request to a peer finds no open channel: it is received whole, then sent.
    assert conn.request(PUT, {'ids': [oid], 'endpoint': b_uuid}, [data]).type == OK
    conn.close()
    assert site.status('spill-a')['disk_inflight'] == 0
    owner = raw_client(site, 'spill-b')
    reply = owner.request(GET, {'ids': [oid]})
    assert bytes(reply.payloads[0]) == data
    owner.close()


def test_a_set_piped_over_quic_holds_a_few_megabytes(site: Site, loop_relay: Relay) -> None:
    """The punched QUIC path is slower than a local client: the client is paused, not
    buffered for (QUIC streams report what they hold, and cut-through pauses on it)."""
    site.configure('quic-a', loop_relay.address, peering={'paths': ['punched'], 'punch': ['udp']})
    b_uuid = site.configure('quic-b', loop_relay.address)
    site.start('quic-a')
    site.start('quic-b')
    conn = site.connector('quic-a')
    key = EndpointKey(_uuid.uuid4().hex, b_uuid)
    conn.set(key, b'peered first, so that the large set is piped')
    assert site.status('quic-a')['peers'][0]['transport'] == 'quic'
    pid = site.pid('quic-a')
    base, peak, stop = rss(pid), [0], threading.Event()

    def watch() -> None:
        while not stop.wait(0.02):
            peak[0] = max(peak[0], rss(pid) - base)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    size = 64 * MiB
    try:
        conn.set(key, os.urandom(size))
    finally:
        stop.set()
        watcher.join(10)
    assert site.status('quic-a')['piped']['put'] == 1
    assert peak[0] < size // 2, f'{peak[0] >> 20} MiB held for a piped {size >> 20} MiB set'
    conn.close()
