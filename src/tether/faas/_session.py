"""The forwarder of one connected endpoint (see :mod:`tether.faas._core`)."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from tether.exceptions import ProtocolError
from tether.faas import _frames
from tether.faas._broker import Consumer, Delivery
from tether.faas._queues import (
    MAX_CANCELLED,
    Batcher,
    Entry,
    Socket,
    Tracker,
    parse,
    task_ids,
)

if TYPE_CHECKING:
    from tether.faas._core import Service

__all__ = ['DIRECT_BYTES', 'EndpointSession', 'too_large']

logger = logging.getLogger('tether.faas._core')

DIRECT_BYTES = 64 * 2**20
"""Payload bytes that may wait in one session's backlog when handed to it directly;
beyond, a submission goes through the broker (whose queue holds the excess, as it did
before the direct hand-off), so a user cannot make a replica hold more per endpoint."""


class _Backlog:
    """Tasks waiting to be sent to the endpoint, their payload bytes counted as they come
    and go (``nbytes``), so that bounding them costs no walk over the queue. Only these
    methods change it (a deque subclass would let any other deque method skip the count)."""

    __slots__ = ('_entries', 'nbytes')

    def __init__(self) -> None:
        self._entries: collections.deque[Entry] = collections.deque()
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[Entry]:
        return iter(self._entries)

    def extend(self, entries: Iterable[Entry]) -> None:
        for entry in entries:
            self._entries.append(entry)
            self.nbytes += len(entry[1])

    def popleft(self) -> Entry:
        entry = self._entries.popleft()
        self.nbytes -= len(entry[1])
        return entry

    def drop(self, ids: set[str]) -> None:
        """Forget the tasks of ``ids`` (cancelled before they were sent)."""
        kept = [e for e in self._entries if str(e[0]['task_id']) not in ids]
        if len(kept) < len(self._entries):
            self._entries = collections.deque(kept)
            self.nbytes = sum(len(p) for _, p in kept)


class EndpointSession:
    def __init__(
        self,
        service: Service,
        sock: Socket,
        endpoint_id: str,
        user_id: str,
        hello: dict[str, Any],
    ) -> None:
        self.service = service
        self.sock = sock
        self.endpoint_id = endpoint_id
        self.user_id = user_id
        self.held = {str(t) for t in hello.get('held', [])}
        self.info = _info(hello)
        control = getattr(service.sessions, 'control', None)
        if control is not None:  # the replica holding it (shown offline if it dies)
            self.info['replica'] = control.replica_id
        self.tracker = Tracker()
        self.consumer: Consumer | None = None
        self.batcher = Batcher(self._take, self._fail)
        self._stopped = asyncio.Event()
        self._backlog = _Backlog()
        self._forwarded: set[str] = set()  # sent to the endpoint, not yet with a worker
        self._groups: dict[str, str] = {}  # task group of each task sent, until its result
        self._pumper: asyncio.Task[None] | None = None
        self._acks: list[str] = []
        self._results: list[tuple[dict[str, Any], memoryview | bytes]] = []
        self._storing: asyncio.Task[None] | None = None
        self._marking: asyncio.Task[None] | None = None
        self._error: Exception | None = None
        # Tasks handed here directly by this replica's submissions (no broker message),
        # until the endpoint has them with a worker or finished: queued in the broker
        # again if the session ends first.
        self._direct: dict[str, Entry] = {}
        self._ready = False  # lost tasks recovered: direct hand-offs are taken
        self._final = False  # the endpoint was deleted: nothing is queued again
        self._requeued: asyncio.Future[None] | None = None

    def _fail(self, e: Exception) -> None:
        # The endpoint reconnects; the broker redelivers what was not acknowledged and the
        # endpoint resends what was not confirmed.
        if self._error is None:
            self._error = e
        self._stopped.set()

    async def run(self) -> None:
        s = self.service
        await s.repo.set_endpoint_state(self.endpoint_id, True, self.info)
        await s.recover_lost(self.endpoint_id, self.held)
        if self.endpoint_id not in s._seeded:
            # Tasks cancelled while queued, before this service process started: their
            # messages may still be in the queue (dropped when they come).
            s._seeded.add(self.endpoint_id)
            for tid in await s.repo.cancelled_unhanded(self.endpoint_id, MAX_CANCELLED):
                s.cancelled.setdefault(tid, None)
        if self.held:
            # Tasks cancelled while this endpoint was away, that it still runs.
            stale = await s.repo.cancelled_ids(sorted(self.held))
            if stale:
                await self.sock.send(_frames.encode(_frames.CANCEL, {'task_ids': sorted(stale)}))
        self.consumer = await s.broker.consume(
            s.task_queue(self.endpoint_id), s.config.endpoint_prefetch, self.batcher.add
        )
        self._ready = not self._stopped.is_set()
        # Only now is the endpoint connected: its allowlist is what submissions check.
        await self.sock.send(_frames.encode(_frames.WELCOME, {}))
        recv = asyncio.ensure_future(self._receive())
        stop = asyncio.ensure_future(self._stopped.wait())
        try:
            await asyncio.wait({recv, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in (recv, stop):
                t.cancel()
        if recv.done() and not recv.cancelled() and recv.exception() is not None:
            raise recv.exception()  # type: ignore[misc]
        if self._error is not None:
            raise self._error

    async def _receive(self) -> None:
        s = self.service
        while True:
            frame = _frames.decode(await self.sock.recv(), s.limits)
            if frame.type == _frames.ACK:
                self._acks.extend(task_ids(frame.header))
                self._kick()
            elif frame.type == _frames.RESULTS:
                headers = frame.header.get('results', [])
                if not isinstance(headers, list) or len(headers) != len(frame.payloads):
                    raise ProtocolError('RESULTS needs one payload per result')
                if not all(isinstance(h, dict) for h in headers):
                    raise ProtocolError('each result header must be an object')
                limit = s.config.max_payload_bytes
                for entry in zip(headers, frame.payloads, strict=True):
                    size = entry[1].nbytes
                    self._results.append(
                        entry if size <= limit else too_large(entry[0], size, limit)
                    )
                self._kick()
            elif frame.type == _frames.HEARTBEAT:
                self.info.update(_info(frame.header))
                await s.repo.set_endpoint_state(self.endpoint_id, True, self.info)
            else:
                raise ProtocolError(f'unexpected message type {frame.type} from an endpoint')
            if self._error is not None:
                raise self._error

    def _kick(self) -> None:
        """Process what arrived, in batches: while one batch is stored and published,
        the next accumulates (one statement and one publish per batch). Results and
        hand-offs have a pipeline each, so that a result never waits for the database
        update of hand-offs that arrived before it."""
        if self._results and (self._storing is None or self._storing.done()):
            self._storing = asyncio.ensure_future(self._store_results())
        if self._acks and (self._marking is None or self._marking.done()):
            self._marking = asyncio.ensure_future(self._mark_handed())

    async def _store_results(self) -> None:
        s = self.service
        try:
            while self._results:
                results, self._results = self._results, []
                stored = [str(h.get('task_id')) for h, _ in results]
                groups = {t: g for t in stored if (g := self._groups.pop(t, None))}
                await s.publish_results(self.endpoint_id, results, groups)
                # Stored: their tasks are done, and a message whose tasks are all done
                # (handed, with the database saying so, or stored) may leave its queue.
                self._done(stored)
                for t in stored:  # a result stands for its hand-off (no ACK needed)
                    self._direct.pop(t, None)
                await self._ack(self.tracker.done(stored))
                await self.sock.send(_frames.encode(_frames.RESULTS_OK, {'task_ids': stored}))
        except Exception as e:
            self._fail(e)

    async def _mark_handed(self) -> None:
        s = self.service
        try:
            while self._acks:
                acks, self._acks = self._acks, []
                self._done(acks)
                await s.mark_running(self.endpoint_id, acks)
                for t in acks:  # 'running' stored: recovered as such if the endpoint dies
                    self._direct.pop(t, None)
                await self._ack(self.tracker.done(acks))  # only once 'running' is stored
        except Exception as e:
            self._fail(e)

    def _done(self, ids: list[str]) -> None:
        """Tasks no longer waiting at the endpoint: room for more."""
        self._forwarded.difference_update(ids)
        self._pump()

    async def _ack(self, tags: list[Any]) -> None:
        if tags and self.consumer is not None:
            await self.consumer.ack(tags)

    async def cancel(self, task_ids: list[str]) -> None:
        """Tasks cancelled: drop those not sent yet, tell the endpoint to stop the others
        (it answers with a result, which is not stored or published)."""
        ids = set(task_ids)
        for t in ids:
            self._groups.pop(t, None)
            self._direct.pop(t, None)
        self._backlog.drop(ids)
        # Their broker messages may leave the queue once the rest of them is done.
        await self._ack(self.tracker.done([t for t in ids if t not in self._forwarded]))
        # The endpoint drops those it has not started and stops those running; ids it
        # does not hold are ignored.
        with contextlib.suppress(Exception):  # gone: told again when it reconnects
            await self.sock.send(_frames.encode(_frames.CANCEL, {'task_ids': task_ids}))

    def takes(self, n: int, nbytes: int) -> bool:
        """Whether :meth:`hand` would take ``n`` more tasks of ``nbytes`` payload bytes
        now (at most ``max(1024, 4 * endpoint_prefetch)`` tasks and :data:`DIRECT_BYTES`
        waiting)."""
        limit = max(1024, 4 * self.service.config.endpoint_prefetch)
        if not self._ready or self._stopped.is_set() or len(self._backlog) + n > limit:
            return False
        return self._backlog.nbytes + nbytes <= DIRECT_BYTES

    def hand(self, entries: list[Entry]) -> bool:
        """Tasks submitted through this replica, recorded in the database as handed here
        directly: forwarded like the broker's (no broker message, publish, delivery or
        acknowledgement per batch). False (nothing taken) once the session is ending.

        While fewer than ``max(1024, 4 * endpoint_prefetch)`` tasks and
        :data:`DIRECT_BYTES` wait here (:meth:`takes`); beyond, a submission goes through
        the broker, whose queue holds the excess."""
        if not self._ready or self._stopped.is_set():
            return False
        for entry in entries:
            self._direct[str(entry[0]['task_id'])] = entry
        self._backlog.extend(entries)
        self._pump()
        return True

    async def _take(self, items: list[Delivery]) -> None:
        """Deliveries from the endpoint's queue: track them, then forward their tasks."""
        batches, again, stale = parse(items, 'tasks')
        for d, entries in batches:
            if not d.redelivered:  # queued again from a direct hand-off: checked too
                again.extend(str(h['task_id']) for h, _ in entries if h.get('again'))
        # Tasks of a message delivered again that are running (the endpoint holds them, or
        # they were queued again when it reconnected) or finished are not sent again.
        waiting = await self.service.repo.waiting_ids(again) if again else set()
        # Here already (sent, or waiting to be): a copy queued again is not sent again.
        sent: set[str] = set()
        if again:
            sent = self._groups.keys() | self._direct.keys()
            sent.update(str(h['task_id']) for h, _ in self._backlog)
        cancelled = self.service.cancelled
        for d, entries in batches:
            kept = entries
            if d.redelivered or any('again' in h for h, _ in entries):
                kept = []
                for e in entries:
                    tid = str(e[0]['task_id'])
                    if (e[0].pop('again', None) is None and not d.redelivered) or (
                        tid in waiting and tid not in sent
                    ):
                        kept.append(e)
                        sent.add(tid)  # a second copy (queued twice in a race) is not
            if cancelled:
                kept = [e for e in kept if cancelled.pop(str(e[0]['task_id']), 0) is not None]
            if not self.tracker.hold(d.tag, (str(h['task_id']) for h, _ in kept)):
                stale.append(d.tag)
            self._backlog.extend(kept)
        if stale and self.consumer is not None:
            await self.consumer.ack(stale)
        self._pump()

    def _pump(self) -> None:
        if self._backlog and (self._pumper is None or self._pumper.done()):
            self._pumper = asyncio.ensure_future(self._forward())

    async def _forward(self) -> None:
        """Send waiting tasks to the endpoint while fewer than ``endpoint_prefetch`` are
        sent but not yet in a worker's hands (always at least one batch)."""
        limit = self.service.config.endpoint_prefetch
        try:
            while self._backlog:
                room = limit - len(self._forwarded)
                if room <= 0:
                    return  # the endpoint's acknowledgements pump again
                entries: list[Entry] = []
                now = time.time()
                while self._backlog and len(entries) < room:
                    header, payload = self._backlog.popleft()
                    header.setdefault('t', {})['service_dispatched'] = now
                    entries.append((header, payload))
                    self._forwarded.add(str(header['task_id']))
                    if isinstance(header.get('task_group_id'), str):
                        self._groups[str(header['task_id'])] = header['task_group_id']
                # Cut into messages the endpoint accepts (payload bytes, entries, header).
                for message in _frames.pack(_frames.TASKS, 'tasks', entries):
                    await self.sock.send(message)
        except Exception as e:
            self._fail(e)

    async def stop(self, error: Exception | None = None) -> None:
        """End the session; with ``error``, its connection is closed with that error's
        code (an endpoint deleted: ``4404``, which its agent takes as final)."""
        if error is not None:
            self._final = True
            self._fail(error)
        self._stopped.set()
        if self.consumer is not None:
            consumer, self.consumer = self.consumer, None
            await consumer.close()
        if self._requeued is None:
            self._requeued = asyncio.ensure_future(self._requeue())
        # Every caller (the connection's end, a newer connection) waits for it: a next
        # session recovers from the database only what is not queued by then.
        await asyncio.shield(self._requeued)

    async def _requeue(self) -> None:
        """Tasks handed here but not yet with a worker: to the endpoint's queue, for its
        next session (if this fails, that session recovers them from the database)."""
        if not self._direct or self._final:
            return
        entries, self._direct = list(self._direct.values()), {}
        try:
            await self.service.requeue_direct(self.endpoint_id, entries)
        except Exception as e:
            logger.warning(
                'endpoint %s: %d tasks handed to its session not queued again (%r): '
                'recovered when it reconnects',
                self.endpoint_id,
                len(entries),
                e,
            )


def too_large(header: dict[str, Any], size: int, limit: int) -> Entry:
    """A failed result instead of one above the service's payload limit: it would not fit
    a broker message (and is refused again after every reconnect), so it is not kept."""
    error = (
        f'the result is {size} bytes, above the service limit of {limit} bytes '
        '(max_payload_bytes): return it by reference instead. Give the task a result_store '
        '(Executor(endpoint_id, store=store) does: results above its proxy_threshold come '
        'back as proxies of that store), or return store.proxy(value) from the function'
    )
    failed: dict[str, Any] = {k: header[k] for k in ('task_id', 't') if k in header}
    failed['status'] = 'failed'
    failed['error'] = {
        'type': 'tether.exceptions.FaasPayloadTooLargeError',
        'message': error,
        'traceback': '',
    }
    return failed, b''


def _info(header: dict[str, Any]) -> dict[str, Any]:
    keys = (
        'engine',
        'min_workers',
        'max_workers',
        'workers',
        'idle',
        'pending',
        'allowed_functions',
        'warm',
        'environments',
    )
    return {k: header[k] for k in keys if k in header}
