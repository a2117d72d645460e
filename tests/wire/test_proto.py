"""The frame parser fed in arbitrary pieces (as a network delivers them)."""

from __future__ import annotations

import asyncio
import json
import random
import struct
from typing import Any

import pytest

from tether._wire import Limits, encode_head, encode_one
from tether._wire._proto import FrameProtocol
from tether.exceptions import FrameTooLargeError, ProtocolError


def stream(frames: list[tuple[int, dict[str, object], list[bytes]]]) -> bytes:
    out = bytearray()
    for i, (mtype, header, payloads) in enumerate(frames):
        out += encode_head(mtype, header, [len(p) for p in payloads], request_id=i)
        for p in payloads:
            out += p
    return bytes(out)


def feed(proto: FrameProtocol, data: bytes, rng: random.Random) -> None:
    pos = 0
    while pos < len(data):
        buf = proto.get_buffer(-1)
        n = min(len(buf), len(data) - pos, rng.choice([1, 7, 24, 100, 4096, 1 << 20]))
        buf[:n] = data[pos : pos + n]
        pos += n
        proto.buffer_updated(n)


@pytest.mark.parametrize('seed', range(20))
def test_any_chunking_gives_the_same_frames(seed: int) -> None:
    rng = random.Random(seed)
    frames = [
        (
            32 + rng.randrange(5),
            {'n': i, 'pad': 'x' * rng.choice([0, 10, 70_000])},
            [rng.randbytes(rng.choice([0, 1, 5, 3000, 200_000])) for _ in range(rng.randrange(4))],
        )
        for i in range(12)
    ]
    data = stream(frames)

    async def main() -> None:
        proto = FrameProtocol(Limits(), 1)
        feed(proto, data, rng)
        for i, (mtype, header, payloads) in enumerate(frames):
            frame = await proto.recv()
            assert (frame.type, frame.request_id) == (mtype, i)
            assert frame.header == header
            assert [bytes(p) for p in frame.payloads] == payloads

    asyncio.run(main())


def test_limits_and_garbage_are_errors() -> None:
    async def main() -> None:
        proto = FrameProtocol(Limits(max_frame=10), 1)
        feed(proto, encode_head(32, None, [11]), random.Random(0))
        with pytest.raises(FrameTooLargeError):
            await proto.recv()
        proto = FrameProtocol(Limits(), 1)
        feed(proto, b'GET / HTTP/1.1\r\nHost: x\r\n\r\n', random.Random(0))
        with pytest.raises(ProtocolError, match='magic'):
            await proto.recv()

    asyncio.run(main())


class _Sink:
    def __init__(self, size: int) -> None:
        self.size = size
        self.data = bytearray()
        self.aborted = False

    def __len__(self) -> int:
        return self.size

    def write(self, data: memoryview) -> None:
        self.data += data

    def abort(self) -> None:
        self.aborted = True


class _Transport:
    def __init__(self) -> None:
        self.aborted = False

    def abort(self) -> None:
        self.aborted = True

    def pause_reading(self) -> None:
        pass


@pytest.mark.parametrize('seed', range(5))
def test_a_router_takes_large_frames_as_they_arrive(seed: int) -> None:
    """Routed payloads reach their sinks in order, whatever the chunking; small ones do not."""
    rng = random.Random(seed)
    big = [rng.randbytes(300_000), rng.randbytes(5)]
    data = stream([(40, {'a': 1}, [b'small']), (41, {'b': 2}, big), (42, {}, [b'after'])])
    routed: list[tuple[int, dict[str, object], int, tuple[int, ...]]] = []
    sinks: list[_Sink] = []

    def router(
        mtype: int, header: dict[str, object], request_id: int, sizes: tuple[int, ...]
    ) -> list[object]:
        routed.append((mtype, header, request_id, sizes))
        sinks.extend(_Sink(n) for n in sizes)
        return list(sinks)

    async def main() -> None:
        proto = FrameProtocol(Limits(), 1)
        proto.router = router
        proto.route_min = 1000
        feed(proto, data, rng)
        frames = [await proto.recv() for _ in range(3)]
        assert [bytes(p) for p in frames[0].payloads] == [b'small']
        assert frames[1].payloads == sinks
        assert [bytes(s.data) for s in sinks] == big
        assert [bytes(p) for p in frames[2].payloads] == [b'after']

    asyncio.run(main())
    assert routed == [(41, {'b': 2}, 1, (300_000, 5))]


def _fire_stall_timer(proto: FrameProtocol) -> None:
    """Do what the armed ``frame_timeout`` timer does when it fires (no bytes came since)."""
    timer = proto._timer
    assert timer is not None, 'no stall timer armed'
    timer.cancel()
    proto._check_stall(proto._progress)


def test_an_abandoned_routed_frame_aborts_its_sinks_and_holding_is_not_a_stall() -> None:
    sink = _Sink(1_000_000)

    async def main() -> None:
        # The stall timer never fires by itself here: the test fires it (no waiting).
        proto = FrameProtocol(Limits(frame_timeout=3600), 1)
        transport = _Transport()
        proto.connection_made(transport)  # type: ignore[arg-type]
        proto.router = lambda *_: [sink]
        proto.route_min = 1000
        head = encode_head(40, {}, [1_000_000], request_id=1)
        feed(proto, head + b'x' * 1000, random.Random(0))
        # Held back on purpose (the bytes go on to a slower connection): kept.
        proto.held = True
        _fire_stall_timer(proto)
        assert not transport.aborted
        assert not proto.stalled
        # No longer held and still no bytes: a stall, dropped.
        proto.held = False
        _fire_stall_timer(proto)
        assert transport.aborted
        assert proto.stalled
        proto.connection_lost(None)
        proto.release_all()

    asyncio.run(main())
    assert bytes(sink.data) == b'x' * 1000
    assert sink.aborted


def test_prefix_sizes_and_header_are_read_in_place() -> None:
    from tether._wire._frame import PREFIX, check_sizes, decode_header, unpack_prefix

    head = encode_head(40, {'k': 'é'}, [3, 0, 5], request_id=9)
    # Inside a larger buffer, at an offset, without slicing copies.
    buf = bytearray(b'..' + head)
    version, _flags, mtype, rid, hlen, count = unpack_prefix(buf, Limits(), 2)
    assert (mtype, rid, count) == (40, 9, 3)
    assert check_sizes(buf, count, Limits(), 2 + PREFIX.size) == (3, 0, 5)
    start = 2 + PREFIX.size + 8 * count
    assert decode_header(memoryview(buf)[start : start + hlen]) == {'k': 'é'}
    assert check_sizes(encode_head(40, None, [7])[PREFIX.size :], 1, Limits()) == (7,)
    with pytest.raises(ProtocolError, match='not valid JSON'):
        decode_header(memoryview(b'\xff{}'))
    with pytest.raises(FrameTooLargeError):
        check_sizes(b'.' + struct.pack('!2Q', 1, 2), 2, Limits(max_frame=2), 1)
    assert version == 1


def test_a_server_takes_a_router_and_a_memory_budget(make_server: Any) -> None:
    """Frames the router leaves are allocated against the budget; its own are not."""
    from tether._wire import Connection, Frame, Reply, SyncConnection

    allocated: list[tuple[int, ...]] = []
    released: list[list[object]] = []
    routed: list[bytearray] = []

    class Memory:
        def allocate(self, sizes: tuple[int, ...]) -> list[object]:
            allocated.append(tuple(sizes))
            return [bytearray(n) for n in sizes]

        def release(self, payloads: list[object]) -> None:
            released.append(list(payloads))

    class Sink:
        def __init__(self, n: int) -> None:
            self.n = n
            self.data = bytearray()
            routed.append(self.data)

        def __len__(self) -> int:
            return self.n

        def write(self, data: memoryview) -> None:
            self.data += data

    def router(conn: Connection) -> Any:
        def route(mtype: int, header: Any, rid: int, sizes: tuple[int, ...]) -> Any:
            return [Sink(n) for n in sizes] if header.get('route') else None

        return route

    async def handler(conn: Connection, frame: Frame) -> Reply:
        return 50, {'n': sum(len(p) for p in frame.payloads)}, ()

    server = make_server(handler=handler, router=router, memory=Memory())
    conn = SyncConnection('127.0.0.1', server.port)
    big = bytes(2 << 20)
    assert conn.request(50, {'route': True}, [big]).header == {'n': len(big)}
    assert conn.request(50, {'route': False}, [big]).header == {'n': len(big)}
    assert conn.request(50, {}, [b'abc']).header == {'n': 3}
    conn.close()
    assert [s for s in allocated if s] == [(len(big),), (3,)]  # not the handshake's
    assert routed == [bytearray(big)]
    # Every frame is released, the routed one too (a budget ignores what it did not make).
    payloads = [p for p in released if p]
    assert [len(p) for p in payloads] == [1, 1, 1]
    assert isinstance(payloads[0][0], Sink)


def test_headers_round_trip_and_other_json_spellings_are_read() -> None:
    from tether._wire._frame import PREFIX, decode_header

    def header_of(head: bytes) -> bytes:
        return head[PREFIX.size + 8 :]

    header = {'v': 1, 's': 'é\n"', 'n': [1, 2.5, None, True], 'f': float('nan'), 3: 'k'}
    head = encode_head(40, header, [0])
    assert header_of(head) == json.dumps(header, separators=(',', ':')).encode()
    assert decode_header(header_of(head))['s'] == 'é\n"'
    # Another peer may write spaces, before, inside and after the object.
    assert decode_header(b' { "a" : [1, 2] }\n') == {'a': [1, 2]}
    with pytest.raises(ProtocolError, match='not valid JSON'):
        decode_header(b'{"a": 1} {"b": 2}')
    with pytest.raises(ProtocolError, match='not valid JSON'):
        decode_header(b'{"a": ')
    with pytest.raises(ProtocolError, match='must be a JSON object'):
        decode_header(b'[1]')


def test_headers_that_are_not_json_raise_as_json_does() -> None:
    looped: dict[str, object] = {}
    looped['self'] = looped
    with pytest.raises(ValueError, match='Circular reference'):
        encode_head(40, looped, [])
    with pytest.raises(TypeError, match='not JSON serializable'):
        encode_head(40, {'x': object()}, [])
    with pytest.raises(ValueError, match='Circular reference'):  # nothing left behind
        encode_head(40, looped, [])
    assert encode_head(40, {'x': 1}, []).endswith(b'{"x":1}')


def test_encode_one_is_the_frame_encode_head_gives() -> None:
    body = json.dumps({'ids': ['a-1'], 'found': [True]}, separators=(',', ':')).encode()
    for payload in (None, b'', b'xyz', bytearray(70_000), memoryview(b'view')):
        raw = encode_one(33, body, 9, payload)
        sizes = [] if payload is None else [len(payload)]
        expect = encode_head(33, json.loads(body), sizes, request_id=9)
        expect += b'' if payload is None else bytes(payload)
        assert bytes(raw) == expect

        async def main(raw: bytearray = raw, payload: object = payload) -> None:
            proto = FrameProtocol(Limits(), 1)
            feed(proto, bytes(raw), random.Random(0))
            frame = await proto.recv()
            assert (frame.type, frame.request_id) == (33, 9)
            assert frame.header == {'ids': ['a-1'], 'found': [True]}
            want = [] if payload is None else [bytes(payload)]  # type: ignore[call-overload]
            assert [bytes(p) for p in frame.payloads] == want

        asyncio.run(main())
