"""ThreadExchange: mailboxes in this process's memory, for agents in threads (and tests).

Messages are handed over as objects, without copying or encoding: the sender's thread
calls the receiver's delivery function (which only queues work), so a round trip costs
no serialization at all. Raw envelopes (:meth:`Transport.send_raw`) are decoded and
checked like on every other exchange.
"""

from __future__ import annotations

import collections
import threading
import uuid
import weakref
from typing import Any

from tether._clock import SYSTEM_CLOCK, Clock
from tether.agents._codec import Codec
from tether.agents.exchange._base import Deliver, Exchange, Listener, MailboxStatus, Transport
from tether.agents.message import Message, Rejected, decode
from tether.exceptions import AgentError, MailboxClosedError, UnknownMailboxError

__all__ = ['ThreadExchange']

_live: weakref.WeakValueDictionary[str, ThreadExchange] = weakref.WeakValueDictionary()


class _Box:
    __slots__ = ('deliver', 'mro', 'queue', 'status', 'why')

    def __init__(self, mro: list[str] | None) -> None:
        self.mro = mro
        self.status = MailboxStatus.ACTIVE
        self.queue: collections.deque[Message | Rejected] = collections.deque()
        self.deliver: Deliver | None = None
        self.why = ''  # why it was terminated (see Exchange.terminate)


class _ThreadListener(Listener):
    def __init__(self, transport: _ThreadTransport, mailbox_id: str, deliver: Deliver) -> None:
        self.transport = transport
        self.mailbox_id = mailbox_id
        self.deliver = deliver

    def close(self) -> None:
        with self.transport.lock:
            box = self.transport.boxes.get(self.mailbox_id)
            if box is not None and box.deliver is self.deliver:
                box.deliver = None


class _ThreadTransport(Transport):
    def __init__(self, codec: Codec) -> None:
        super().__init__(codec)
        self.lock = threading.Lock()
        self.boxes: dict[str, _Box] = {}

    def register(self, mailbox_id: str, mro: list[str] | None) -> None:
        with self.lock:
            box = self.boxes.get(mailbox_id)
            if box is None:
                self.boxes[mailbox_id] = _Box(mro)
            elif box.status is MailboxStatus.ACTIVE and mro is not None:
                box.mro = mro

    def terminate(self, mailbox_id: str) -> None:
        dropped: list[Message | Rejected] = []
        with self.lock:
            box = self.boxes.get(mailbox_id)
            if box is not None:
                box.status = MailboxStatus.TERMINATED
                why = self._why.get(mailbox_id)
                box.why = f' ({why})' if why else ''
                dropped = list(box.queue)
                box.queue.clear()
                box.deliver = None
        self.answer_dropped(mailbox_id, dropped)

    def status(self, mailbox_id: str) -> MailboxStatus:
        with self.lock:
            box = self.boxes.get(mailbox_id)
            return MailboxStatus.MISSING if box is None else box.status

    def discover(self, type_name: str, allow_subclasses: bool) -> list[str]:
        with self.lock:
            return [
                mid
                for mid, box in self.boxes.items()
                if box.status is MailboxStatus.ACTIVE
                and box.mro
                and (box.mro[0] == type_name or (allow_subclasses and type_name in box.mro))
            ]

    def _active(self, mailbox_id: str) -> _Box:
        """The mailbox, which must exist and not be terminated (the caller holds the lock)."""
        box = self.boxes.get(mailbox_id)
        if box is None:
            raise UnknownMailboxError(f'no mailbox {mailbox_id!r} in this ThreadExchange')
        if box.status is MailboxStatus.TERMINATED:
            raise MailboxClosedError(f'mailbox {mailbox_id!r} is terminated{box.why}')
        return box

    def _put(self, dest: str, item: Message | Rejected) -> None:
        with self.lock:
            box = self._active(dest)
            deliver = box.deliver
            if deliver is None:
                box.queue.append(item)
                return
        deliver(item)

    def send(self, msg: Message) -> None:
        self._put(msg.dest, msg)

    def send_raw(self, dest: str, data: bytes) -> None:
        self._put(dest, decode(data, self.codec))

    def listen(self, mailbox_id: str, deliver: Deliver) -> Listener:
        while True:
            with self.lock:
                box = self._active(mailbox_id)
                if not box.queue:
                    box.deliver = deliver
                    return _ThreadListener(self, mailbox_id, deliver)
                queued = list(box.queue)
                box.queue.clear()
            for item in queued:
                deliver(item)


class ThreadExchange(Exchange):
    """An exchange in this process's memory: agents run in threads of this process.

    Handles made from it work in this process only (pickling one into another process
    fails with a clear error when used).

    Args:
        clock: The clock of handle timeouts and agent timers (tests pass a
            :class:`tether.testing.FakeClock`).
    """

    def __init__(self, *, clock: Clock = SYSTEM_CLOCK) -> None:
        super().__init__(allow_pickle=True, clock=clock)
        self.uid = uuid.uuid4().hex
        self._transport = self._new_transport()
        _live[self.uid] = self

    def _new_transport(self) -> _ThreadTransport:
        transport = _ThreadTransport(Codec(allow_pickle=True))
        transport.clock = self.clock
        return transport

    def key(self) -> str:
        return f'thread:{self.uid}'

    def make_transport(self) -> Transport:
        if self._transport.closed:
            self._transport = self._new_transport()
        return self._transport

    def transport(self) -> Transport:
        return self.make_transport()

    def close(self) -> None:
        self._transport.close()

    def __reduce__(self) -> tuple[Any, ...]:
        return (_lookup, (self.uid,))


def _lookup(uid: str) -> ThreadExchange:
    exchange = _live.get(uid)
    if exchange is None:
        raise AgentError(
            'a ThreadExchange exists only in the process that created it: use a '
            'RedisExchange or HybridExchange for agents in other processes',
        )
    return exchange
