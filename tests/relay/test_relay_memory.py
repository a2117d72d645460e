"""Nothing unauthenticated costs the relay memory; registered endpoints' claims are budgeted.

A frame's head claims how many payload bytes follow. These tests send heads claiming
large payloads and no data: before ``REGISTER`` (no token) they are refused at the small
pre-authentication limit, after it they count against the relay's memory budget before
anything is allocated. The relay's own accounting (``status()['memory']``) is checked,
and once, the resident memory of a ``tether relay`` process.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Callable
from pathlib import Path

from tests.endpoint.conftest import Relay, write_relay_config
from tests.relay.conftest import ThreadRelay, wait_closed
from tether._serve import signalling as rp
from tether._wire import ERROR, SyncConnection, encode_head
from tether._wire._frame import PREFIX
from tether.testing import wait_until

MiB = 1 << 20
KiB = 1 << 10


def rss(pid: int) -> int:
    """Resident memory of process ``pid``, in bytes."""
    with open(f'/proc/{pid}/status') as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1]) * 1024
    raise AssertionError(f'no VmRSS for {pid}')


def claim(conn: SyncConnection, mtype: int, size: int) -> None:
    """Send the head of a frame with one payload of ``size`` bytes, and none of its bytes."""
    conn.sock.sendall(encode_head(mtype, {}, [size], 7))


def refusal(data: bytes) -> dict[str, object]:
    """The header of the ``ERROR`` frame the relay sent before closing."""
    _, _, _, mtype, _, hlen, count = PREFIX.unpack_from(data)
    assert mtype == ERROR
    start = PREFIX.size + 8 * count
    return dict(json.loads(data[start : start + hlen]))


def test_claims_before_register_are_refused_unallocated(
    make_relay: Callable[..., ThreadRelay],
) -> None:
    relay = make_relay()
    for _ in range(2):
        conn = relay.connect()  # the wire handshake done, no token sent
        claim(conn, rp.REGISTER, 256 * MiB)
        error = refusal(wait_closed(conn.sock))
        assert error['code'] == 'too-large'
        assert '16384' in str(error['message'])
        conn.close()
    memory = relay.status()['memory']
    assert memory['peak'] == 0
    assert memory['reserved'] == 0
    assert relay.status()['refused'] == 2


def test_registered_claims_count_against_the_budget(
    make_relay: Callable[..., ThreadRelay],
) -> None:
    relay = make_relay(memory_budget=MiB, max_message=512 * KiB)
    # A claim over max_message is refused outright, even from a registered endpoint.
    conn = relay.register('alice', 'ep-big')
    claim(conn, rp.LIST, 2 * MiB)
    assert refusal(wait_closed(conn.sock))['code'] == 'too-large'
    conn.close()
    # Claims within max_message are reserved until the budget is full, before any data.
    conns = [relay.register('alice', f'ep-{i}') for i in range(3)]
    for conn in conns[:2]:
        claim(conn, rp.LIST, 400 * KiB)
    wait_until(
        lambda: relay.status()['memory']['reserved'] == 800 * KiB, message='two claims reserved'
    )
    claim(conns[2], rp.LIST, 400 * KiB)
    error = refusal(wait_closed(conns[2].sock))
    assert error['code'] == 'too-large'
    assert 'memory budget' in str(error['message'])
    memory = relay.status()['memory']
    assert memory['peak'] == 800 * KiB
    assert memory['refused'] == 1
    # A claim whose connection goes away gives its bytes back.
    for conn in conns:
        conn.close()
    wait_until(lambda: relay.status()['memory']['reserved'] == 0, message='the claims released')
    # A claim whose data arrives is handled and released too.
    conn = relay.register('alice', 'ep-ok')
    assert conn.request(rp.LIST, {}, [bytes(300 * KiB)]).type == rp.OK
    assert relay.status()['memory']['reserved'] == 0
    conn.close()


def test_relay_process_memory_stays_flat_under_unauthenticated_claims(tmp_path: Path) -> None:
    """The issue's attack on a ``tether relay`` process: heads claiming 256 MiB, no data."""
    relay = Relay(write_relay_config(tmp_path, '127.0.0.1', 0)).start()
    try:
        assert relay.proc is not None
        host, port = relay.address.rsplit(':', 1)
        context = ssl.create_default_context(cafile=str(tmp_path / 'relay.pem'))
        before = rss(relay.proc.pid)
        for _ in range(4):
            conn = SyncConnection(host, int(port), ssl=context, timeout=10)
            conn.sock.sendall(encode_head(rp.REGISTER, {}, [256 * MiB], 1))
            assert refusal(wait_closed(conn.sock))['code'] == 'too-large'
            conn.close()
        # Four claims of 256 MiB each: the relay grew by far less than one of them.
        assert rss(relay.proc.pid) - before < 64 * MiB
    finally:
        relay.stop()


def test_unregistered_connections_are_dropped_after_the_handshake_timeout(
    make_relay: Callable[..., ThreadRelay],
) -> None:
    relay = make_relay(handshake_timeout=0.5)
    registered = relay.register('alice', 'ep-stays')
    idle = [relay.connect() for _ in range(20)]
    for conn in idle:
        assert wait_closed(conn.sock) == b''  # dropped without a word
        conn.close()
    assert relay.status()['login_timeouts'] == 20
    # A registered endpoint is not subject to the deadline.
    reply = registered.request(rp.LIST, {})
    assert reply.header['endpoints'] == [{'uuid': 'ep-stays', 'name': 'ep-stays'}]
    registered.close()
