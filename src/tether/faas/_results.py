"""A task group's result stream (see :mod:`tether.faas._core`): results out in batches,
acknowledgements in, and submissions on the same WebSocket."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any

from tether.exceptions import ProtocolError
from tether.faas import _frames
from tether.faas._broker import Consumer, Delivery
from tether.faas._errors import status_of
from tether.faas._queues import Batcher, Entry, Socket, Tracker, parse, task_ids

if TYPE_CHECKING:
    from tether.faas._core import Service

__all__ = ['ResultSession']

logger = logging.getLogger('tether.faas._core')


class ResultSession:
    """Streams a task group's results to a client; a result message leaves the queue only
    once the client acknowledged every result in it."""

    def __init__(self, service: Service, sock: Socket, user_id: str, task_group_id: str) -> None:
        self.service = service
        self.sock = sock
        self.user_id = user_id
        self.task_group_id = task_group_id
        self.tracker = Tracker()
        self.consumer: Consumer | None = None
        self.failed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.submitting: set[asyncio.Future[None]] = set()
        # Acknowledgements in a pipeline of their own, a batch per statement: reading the
        # stream (the next submission) never waits for the database.
        self.taken: list[str] = []
        self.acking: asyncio.Future[None] | None = None

    def _on_error(self, e: Exception) -> None:
        if not self.failed.done():
            self.failed.set_exception(e)

    async def _flush(self, items: list[Delivery]) -> None:
        batches, again, stale = parse(items, 'results')
        repo = self.service.repo
        taken = await repo.acknowledged_ids(self.user_id, again) if again else set()
        out: list[Entry] = []
        for d, entries in batches:
            kept = entries
            if d.redelivered:
                kept = [e for e in entries if str(e[0]['task_id']) not in taken]
            if not self.tracker.hold(d.tag, (str(h['task_id']) for h, _ in kept)):
                stale.append(d.tag)
            out.extend(kept)
        if stale and self.consumer is not None:
            await self.consumer.ack(stale)
        now = time.time()
        for header, _ in out:
            header.setdefault('t', {})['service_sent'] = now
        for message in _frames.pack(_frames.RESULTS, 'results', out):
            await self.sock.send(message)

    async def _take(self) -> None:
        try:
            while self.taken:
                ids = self.taken[:]
                del self.taken[:]
                # The database first: a crash between the two delivers the message
                # again, and the results it holds are then known to be taken.
                await self.service.repo.acknowledge(self.user_id, ids, delivered=True)
                if self.consumer is not None:
                    await self.consumer.ack(self.tracker.done(ids))
        except Exception as e:
            self._on_error(e)

    async def run(self) -> None:
        s = self.service
        batcher = Batcher(self._flush, self._on_error)
        self.consumer = await s.broker.consume(
            s.result_queue(self.task_group_id), 4096, batcher.add
        )
        recv: asyncio.Future[bytes] | None = None
        try:
            while True:
                recv = asyncio.ensure_future(self.sock.recv())
                waiting: set[asyncio.Future[Any]] = {recv, self.failed}
                await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                if self.failed.done():
                    self.failed.result()
                frame = _frames.decode(recv.result(), s.limits)
                recv = None
                await self._handle(frame)
        finally:
            if recv is not None:
                recv.cancel()
            for pending in [*self.submitting, self.acking]:
                if pending is not None:
                    pending.cancel()
            await self.consumer.close()

    async def _handle(self, frame: Any) -> None:
        if frame.type == _frames.SUBMIT:
            job = asyncio.ensure_future(self._submit(frame))
            self.submitting.add(job)
            job.add_done_callback(self.submitting.discard)
            return
        if frame.type != _frames.ACK:
            raise ProtocolError(f'unexpected message type {frame.type} on a result stream')
        self.taken.extend(task_ids(frame.header))
        if self.acking is None or self.acking.done():
            self.acking = asyncio.ensure_future(self._take())
        sync = frame.header.get('sync')
        if sync is not None:
            await self._sync(str(sync)[:64])

    async def _sync(self, sync: str) -> None:
        """The client asks to hear once every acknowledgement so far is stored (an
        Executor shutting down): the next ones wait behind this answer."""
        while self.acking is not None and not self.acking.done():
            await asyncio.wait({self.acking, self.failed}, return_when=asyncio.FIRST_COMPLETED)
            if self.failed.done():
                self.failed.result()
            if self.taken and self.acking.done():
                self.acking = asyncio.ensure_future(self._take())
        await self.sock.send(_frames.encode(_frames.ACKED, {'sync': sync}))

    async def _submit(self, frame: Any) -> None:
        """A batch submitted on a result stream: to the stream's own task group."""
        request = frame.header.get('request')
        try:
            header = {'task_group_id': self.task_group_id, 'tasks': frame.header.get('tasks')}
            await self.service.submit(self.user_id, header, frame.payloads)
        except Exception as e:
            status, code = status_of(e)
            if status == 500:
                logger.exception('submission on a result stream failed')
            message = str(e) if status != 500 else 'internal error (see the service log)'
            reply = {'request': request, 'status': status, 'error': code, 'message': message}
            with contextlib.suppress(Exception):  # the client resends after reconnecting
                await self.sock.send(_frames.encode(_frames.SUBMIT_FAILED, reply))
            return
        with contextlib.suppress(Exception):
            await self.sock.send(_frames.encode(_frames.SUBMITTED, {'request': request}))
