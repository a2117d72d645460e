"""A pipelined direct link from one process to another process's exchange server.

A sender writes each envelope and returns at once; it does not wait for the receiver's
acknowledgement. A reader thread per link takes the acknowledgements as they come and
forgets the messages they acknowledge (the receiver acknowledges a burst of messages
with one frame naming the last of them; a refusal names its message). Whatever is not
acknowledged when the link breaks (the receiver died, the network failed, an
acknowledgement is overdue) or is refused by the receiver (it no longer serves that
mailbox, or cannot read the shared memory the message names) is handed to ``reroute``
(the Redis mailbox), so a message is never lost
between the two: at worst it arrives twice, and a receiver drops a request it has
already seen (same sender and tag).

At most ``window`` messages are in flight per link; a sender waits for room beyond that.
"""

from __future__ import annotations

import collections
import logging
import select
import threading
import time
from collections.abc import Callable
from typing import Any

from tether._wire import ERROR, SyncConnection
from tether.exceptions import WireError

__all__ = ['Link', 'Reroute', 'open_link']

logger = logging.getLogger(__name__)

Reroute = Callable[[str, dict[str, Any], list[Any], str, Any], None]
"""Called with (destination, header, payloads, why, extra) for each message the link gave
up (``extra`` is what the sender passed to :meth:`Link.send`)."""

_WINDOW = 1024


class Link:
    """One authenticated, pipelined connection to an exchange server.

    Args:
        conn: A connected, authenticated :class:`~tether._wire.SyncConnection`.
        mtype: Message type of the envelopes.
        reroute: Where messages go that were not acknowledged.
        on_broken: Called once when the link breaks.
        on_acked: Called with the ``extra`` of each acknowledged message that had one.
        timeout: Seconds an acknowledgement may be overdue before the link counts as broken.
        window: Most messages in flight.
    """

    def __init__(
        self,
        conn: SyncConnection,
        mtype: int,
        reroute: Reroute,
        on_broken: Callable[[Link], None],
        *,
        on_acked: Callable[[Any], None] | None = None,
        timeout: float = 10.0,
        window: int = _WINDOW,
    ) -> None:
        self.conn = conn
        self.on_acked = on_acked
        self.peer_info: dict[str, Any] = dict(getattr(conn, 'info', None) or {})
        # Whether large payloads may travel in this process's shared-memory slots (the
        # exchange decides when the link opens; a refusal turns it off).
        self.shm = False
        self.mtype = mtype
        self.reroute = reroute
        self.on_broken = on_broken
        self.timeout = timeout
        self.window = window
        self.broken = False
        self._next = 0
        self._inflight: collections.OrderedDict[
            int, tuple[str, dict[str, Any], list[Any], float, Any]
        ]
        self._inflight = collections.OrderedDict()
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)
        self._send_lock = threading.Lock()
        self._reader = threading.Thread(
            target=self._read, name=f'tether-agents-link-{conn.peer}', daemon=True
        )
        self._reader.start()

    @property
    def in_flight(self) -> int:
        """Messages sent and not yet acknowledged, refused or rerouted."""
        with self._lock:
            return len(self._inflight)

    def send(
        self, dest: str, header: dict[str, Any], payloads: list[Any], extra: Any = None
    ) -> bool:
        """Write one envelope; False if the link is broken (the caller reroutes it).

        ``extra`` goes with the message to ``on_acked`` or to ``reroute``.
        """
        with self._lock:  # the lock of _room (a plain lock is cheaper to enter)
            while len(self._inflight) >= self.window and not self.broken:
                self._room.wait(1.0)
                self._check_overdue()
            if self.broken:
                return False
            self._next += 1
            rid = self._next
            self._inflight[rid] = (dest, header, payloads, time.monotonic(), extra)
        try:
            with self._send_lock:
                self.conn.send(self.mtype, header, payloads, request_id=rid)
        except (OSError, WireError) as e:
            # Everything in flight (this message included) is rerouted by _break.
            self._break(f'send failed: {e!r}')
        return True

    def _check_overdue(self) -> None:
        """Close the connection if the oldest acknowledgement is overdue (lock held)."""
        if self._inflight:
            oldest = next(iter(self._inflight.values()))[3]
            if time.monotonic() - oldest > self.timeout:
                self.conn.close()

    def _read(self) -> None:
        conn = self.conn
        try:
            while True:
                if conn._rend <= conn._rstart:
                    ready, _, _ = select.select([conn.sock], [], [], 1.0)
                    if not ready:
                        with self._lock:
                            if self.broken:
                                return
                            self._check_overdue()
                        continue
                frame = conn.recv()
                rid = frame.request_id
                acked = []
                with self._room:
                    if frame.type == ERROR:
                        item = self._inflight.pop(rid, None)
                    else:
                        # An acknowledgement of N covers every message up to N.
                        item = None
                        inflight = self._inflight
                        while inflight and next(iter(inflight)) <= rid:
                            extra = inflight.popitem(last=False)[1][4]
                            if extra is not None:
                                acked.append(extra)
                    self._room.notify_all()
                if item is not None:
                    why = str(frame.header.get('message', frame.header.get('code')))
                    if frame.header.get('code') == 'shm':
                        self.shm = False  # the receiver cannot read our shared memory
                    try:
                        self.reroute(item[0], item[1], item[2], why, item[4])
                    except Exception:
                        logger.exception('could not reroute a message for %s', item[0])
                if acked and self.on_acked is not None:
                    for extra in acked:
                        self.on_acked(extra)
        except (OSError, ValueError, WireError) as e:
            self._break(f'connection lost: {e!r}')

    def _break(self, why: str) -> None:
        with self._room:
            first = not self.broken
            self.broken = True
            pending = list(self._inflight.values())
            self._inflight.clear()
            self._room.notify_all()
        self.conn.close()
        if first:
            logger.debug('direct link to %s broke (%s)', self.conn.peer, why)
            self.on_broken(self)
        for dest, header, payloads, _, extra in pending:
            try:
                self.reroute(dest, header, payloads, why, extra)
            except Exception:
                logger.exception('could not reroute a message for %s', dest)

    def close(self) -> None:
        """Wait briefly for outstanding acknowledgements, then close the connection."""
        deadline = time.monotonic() + 2.0
        with self._room:
            while self._inflight and not self.broken and time.monotonic() < deadline:
                self._room.wait(0.1)
        self._break('closed')
        self._reader.join(5)


def open_link(
    host: str,
    port: int,
    mtype: int,
    reroute: Reroute,
    on_broken: Callable[[Link], None],
    **kwargs: Any,
) -> Link:
    """Connect, authenticate and start a link.

    Raises:
        WireConnectionError: if the server cannot be reached or the TLS handshake fails.
        AuthenticationError: if the secrets differ.
    """
    timeout = float(kwargs.get('timeout', 10.0))
    on_acked = kwargs.pop('on_acked', None)
    conn = SyncConnection(host, port, **kwargs)
    try:
        return Link(conn, mtype, reroute, on_broken, on_acked=on_acked, timeout=timeout)
    except BaseException:
        conn.close()
        raise
