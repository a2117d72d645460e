"""The hosted exchange's server: mailboxes in memory, owned by users, over WebSocket.

One connection is one client process's transport. Its requests are handled in order, so
a sender waiting for its rate limit also stops reading (backpressure reaches its socket).
"""

from __future__ import annotations

import collections
import logging
import time
from typing import Any

from tether._clock import Clock
from tether._serve.metrics import ServerMetrics
from tether.agents.exchange._hosted_users import UserRecord
from tether.agents.exchange._hosted_wire import OVERHEAD, pack, unpack
from tether.exceptions import ProtocolError

__all__ = ['HostedState']

logger = logging.getLogger(__name__)


#: Terminated mailboxes a user's quota keeps, per mailbox it may have (older are forgotten).
TOMBSTONES = 10


class Refused(Exception):  # noqa: N818 - an answer, not a failure of the server
    """A request the server answers with an error of ``kind``."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class _Box:
    __slots__ = (
        'listener',
        'mro',
        'owner',
        'queue',
        'queued',
        'repliers',
        'shared',
        'status',
        'why',
    )

    def __init__(self, owner: str, mro: list[str] | None) -> None:
        self.owner = owner
        self.mro = mro
        self.status = 'active'
        self.why = ''
        self.queue: collections.deque[bytes] = collections.deque()
        self.queued = 0
        self.listener: Conn | None = None
        self.shared: set[str] = set()  # users who may send to it, see and discover it
        self.repliers: set[str] = set()  # users who may send to it (answers)


class _User:
    __slots__ = ('last', 'mailboxes', 'record', 'tokens', 'tombstones')

    def __init__(self, record: UserRecord, now: float) -> None:
        self.record = record
        self.mailboxes = 0
        # Terminated mailboxes, remembered as such (sending says so) up to a bound.
        self.tombstones: collections.deque[str] = collections.deque()
        self.tokens = float(record.limits.burst)
        self.last = now


class Conn:
    """One client connection (a process's transport) of a user."""

    def __init__(self, user: str, ws: Any) -> None:
        self.user = user
        self.ws = ws
        self.listening: set[str] = set()
        self.clients: set[str] = set()  # client mailboxes it made (removed with it)


class HostedState:
    """Every mailbox of the exchange and the users' quotas (one event loop uses it)."""

    def __init__(self, users: dict[str, UserRecord], clock: Clock) -> None:
        self.clock = clock
        self.records = users
        self.users: dict[str, _User] = {}
        self.boxes: dict[str, _Box] = {}
        self.throttled = 0  # sends that waited for their user's rate
        self.connections: dict[str, int] = {}  # open connections per user
        self.metrics: ServerMetrics | None = None  # set when metrics are on

    def user(self, name: str) -> _User:
        user = self.users.get(name)
        if user is None:
            user = self.users[name] = _User(self.records[name], self.clock.monotonic())
        return user

    def hello(self, conn: Conn) -> bytes:
        limits = self.user(conn.user).record.limits
        return pack(
            {
                'op': 'hello',
                'user': conn.user,
                'max_message_bytes': limits.max_message_bytes,
                'max_mailboxes': limits.max_mailboxes,
            }
        )

    # The connection's loop --------------------------------------------------------

    async def serve(self, conn: Conn) -> None:
        limit = self.user(conn.user).record.limits.max_connections
        if self.connections.get(conn.user, 0) >= limit:
            message = (
                f'user {conn.user!r} already has {limit} connections open, the limit '
                f'(max_connections = {limit}): close some first'
            )
            await conn.ws.send(pack({'op': 'error', 'error': 'quota', 'message': message}))
            await conn.ws.close(1008, 'max_connections')
            return
        self.connections[conn.user] = self.connections.get(conn.user, 0) + 1
        try:
            await self._serve(conn)
        finally:
            self.connections[conn.user] -= 1

    async def _serve(self, conn: Conn) -> None:
        await conn.ws.send(self.hello(conn))
        try:
            async for data in conn.ws:
                try:
                    header, body = unpack(data)
                except ProtocolError as e:
                    await conn.ws.close(1002, str(e)[:100])
                    return
                rid = header.get('id')
                start = time.perf_counter() if self.metrics is not None else 0.0
                refused = False
                try:
                    reply, rbody = await self.request(conn, header, body)
                except Refused as e:
                    reply, rbody = {'error': e.kind, 'message': str(e)}, b''
                    refused = True
                if self.metrics is not None:
                    seconds = time.perf_counter() - start
                    op = str(header.get('op'))
                    self.metrics.observe(op, seconds, len(body), len(rbody), error=refused)
                if not refused and header.get('noack'):
                    continue  # the sender does not wait (errors only are answered)
                reply['id'] = rid
                await conn.ws.send(pack(reply, rbody))
        finally:
            self.drop(conn)

    def drop(self, conn: Conn) -> None:
        for mailbox_id in conn.listening:
            box = self.boxes.get(mailbox_id)
            if box is not None and box.listener is conn:
                box.listener = None
        for mailbox_id in conn.clients:
            box = self.boxes.pop(mailbox_id, None)
            if box is not None and box.status == 'active':
                self.user(box.owner).mailboxes -= 1

    async def request(
        self, conn: Conn, h: dict[str, Any], body: memoryview
    ) -> tuple[dict[str, Any], bytes]:
        op = h.get('op')
        if op == 'send':
            await self.send(conn, _str(h, 'dest'), h.get('src'), body)
            return {}, b''
        if op == 'register':
            self.register(conn, _str(h, 'mb'), h.get('mro'))
            return {}, b''
        if op == 'status':
            box = self.visible(conn.user, _str(h, 'mb'))
            return {'status': 'missing' if box is None else box.status}, b''
        if op == 'discover':
            return {'ids': self.discover(conn.user, _str(h, 'type'), bool(h.get('sub')))}, b''
        if op == 'listen':
            await self.listen(conn, _str(h, 'mb'))
            return {}, b''
        if op == 'unlisten':
            box = self.boxes.get(_str(h, 'mb'))
            if box is not None and box.listener is conn:
                box.listener = None
            conn.listening.discard(_str(h, 'mb'))
            return {}, b''
        if op == 'terminate':
            dropped = self.terminate(conn.user, _str(h, 'mb'), str(h.get('why') or ''))
            return {'sizes': [len(d) for d in dropped]}, b''.join(dropped)
        if op in ('share', 'unshare'):
            box = self.owned(conn.user, _str(h, 'mb'))
            other = _str(h, 'user')
            if op == 'share':
                box.shared.add(other)
            else:
                box.shared.discard(other)
                box.repliers.discard(other)
            return {}, b''
        raise Refused('bad', f'unknown request {op!r}')

    # Mailboxes --------------------------------------------------------------------

    def visible(self, user: str, mailbox_id: str) -> _Box | None:
        box = self.boxes.get(mailbox_id)
        if box is None or (box.owner != user and user not in box.shared):
            return None
        return box

    def owned(self, user: str, mailbox_id: str) -> _Box:
        box = self.boxes.get(mailbox_id)
        if box is None or box.owner != user:
            raise Refused(
                'unknown', f'no mailbox {mailbox_id!r} of user {user!r} in this exchange'
            )
        return box

    def register(self, conn: Conn, mailbox_id: str, mro: Any) -> None:
        if mro is not None and not (
            isinstance(mro, list) and all(isinstance(m, str) for m in mro)
        ):
            raise Refused('bad', 'mro must be a list of class names')
        box = self.boxes.get(mailbox_id)
        if box is not None:
            if box.owner != conn.user:
                raise Refused('denied', f'mailbox id {mailbox_id!r} is taken: choose another')
            if box.status == 'active' and mro is not None:
                box.mro = mro
            return
        user = self.user(conn.user)
        limit = user.record.limits.max_mailboxes
        if user.mailboxes >= limit:
            raise Refused(
                'quota',
                f'user {conn.user!r} already has {user.mailboxes} active mailboxes, the '
                f'limit (max_mailboxes = {limit}): terminate some first',
            )
        user.mailboxes += 1
        self.boxes[mailbox_id] = _Box(conn.user, mro)
        if mro is None:
            conn.clients.add(mailbox_id)

    def discover(self, user: str, type_name: str, sub: bool) -> list[str]:
        return [
            mid
            for mid, box in self.boxes.items()
            if box.status == 'active'
            and box.mro
            and (box.owner == user or user in box.shared)
            and (box.mro[0] == type_name or (sub and type_name in box.mro))
        ]

    def terminate(self, user: str, mailbox_id: str, why: str) -> list[bytes]:
        box = self.owned(user, mailbox_id)
        if box.status != 'active':
            return []
        box.status = 'terminated'
        box.why = f' ({why[:1000]})' if why else ''
        dropped = list(box.queue)
        box.queue.clear()
        box.queued = 0
        box.listener = None
        box.shared.clear()
        box.repliers.clear()
        owner = self.user(user)
        owner.mailboxes -= 1
        owner.tombstones.append(mailbox_id)
        if len(owner.tombstones) > TOMBSTONES * owner.record.limits.max_mailboxes:
            old = owner.tombstones.popleft()  # forgotten: unknown from now on
            if (gone := self.boxes.get(old)) is not None and gone.status != 'active':
                del self.boxes[old]
        return dropped

    async def throttle(self, user: _User) -> None:
        """Wait until the user may send one more message (token bucket)."""
        limits = user.record.limits
        rate = limits.messages_per_second
        if rate is None:
            return
        now = self.clock.monotonic()
        user.tokens = min(float(limits.burst), user.tokens + (now - user.last) * rate)
        user.last = now
        user.tokens -= 1
        if user.tokens >= 0:
            return
        self.throttled += 1
        await self.clock.asleep(-user.tokens / rate)

    async def send(self, conn: Conn, dest: str, src: Any, body: memoryview) -> None:
        user = self.user(conn.user)
        limit = user.record.limits.max_message_bytes
        if body.nbytes > limit:
            raise Refused(
                'too_large',
                f'message of {body.nbytes} bytes to {dest!r} exceeds the limit of user '
                f'{conn.user!r} (max_message_bytes = {limit}): pass large values by proxy',
            )
        box = self.boxes.get(dest)
        if box is None or (
            box.owner != conn.user
            and conn.user not in box.shared
            and conn.user not in box.repliers
        ):
            raise Refused('unknown', f'no mailbox {dest!r} in this exchange')
        await self.throttle(user)
        if box.status != 'active':
            raise Refused('closed', f'mailbox {dest!r} is terminated{box.why}')
        if box.owner != conn.user and isinstance(src, str):
            # The receiver's owner may answer the sender's mailbox.
            back = self.boxes.get(src)
            if back is not None and back.owner == conn.user:
                back.repliers.add(box.owner)
        data = bytes(body)
        if box.listener is not None and await self.push(box.listener, dest, data):
            return
        owner_limit = self.user(box.owner).record.limits.max_queued_bytes
        if box.queued + len(data) > owner_limit:
            raise Refused(
                'quota',
                f'mailbox {dest!r} holds {box.queued} bytes waiting for its agent, the '
                f'limit of its owner (max_queued_bytes = {owner_limit}): try again later',
            )
        box.queue.append(data)
        box.queued += len(data)

    async def push(self, conn: Conn, mailbox_id: str, data: bytes) -> bool:
        try:
            await conn.ws.send(pack({'op': 'deliver', 'mb': mailbox_id}, data))
        except Exception:  # the listener's connection went away: queue it instead
            logger.debug('delivery to %s failed', mailbox_id, exc_info=True)
            return False
        return True

    async def listen(self, conn: Conn, mailbox_id: str) -> None:
        box = self.owned(conn.user, mailbox_id)
        if box.status != 'active':
            raise Refused('closed', f'mailbox {mailbox_id!r} is terminated{box.why}')
        while box.queue:
            data = box.queue.popleft()
            box.queued -= len(data)
            if not await self.push(conn, mailbox_id, data):
                box.queue.appendleft(data)
                box.queued += len(data)
                raise Refused('bad', 'the connection closed while listening')
        box.listener = conn
        conn.listening.add(mailbox_id)


def _str(h: dict[str, Any], name: str) -> str:
    value = h.get(name)
    if not isinstance(value, str) or not value or len(value) > 256:
        raise Refused('bad', f'request field {name!r} must be a non-empty string')
    return value


def frame_limit(record: UserRecord) -> int:
    """The largest frame a connection of this user may send (checked before reading it)."""
    return record.limits.max_message_bytes + OVERHEAD
