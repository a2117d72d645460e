"""What the service does, independent of HTTP: submit, forward, store and stream results.

* :meth:`Service.submit` records a batch of tasks (idempotently: the SDK chooses task
  ids, so a retried request adds nothing) and publishes each to its endpoint's queue.
* :meth:`Service.endpoint_session` is the forwarder of one connected endpoint: it
  consumes the endpoint's queue (at most ``endpoint_prefetch`` unacknowledged), sends
  tasks in batches, acknowledges a task to the broker only when the endpoint reports it
  handed to a worker, stores results, and publishes them to their task group's queue.
  When an endpoint connects it says which tasks it still holds; tasks it was running but
  lost (it was killed) are queued again, up to ``max_task_attempts`` times.
* :meth:`Service.result_session` streams a task group's results to a client; a result
  leaves the queue (and its payload the database) only when the client acknowledges it.

Payloads stay opaque bytes here: the service deserializes no function, argument or
result. Ids that an endpoint sends back are checked against the database (a result is
stored only for a task sent to that endpoint, and published to the task group recorded
at submission, never to one the endpoint names).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from tether._wire._frame import Limits
from tether.exceptions import (
    FaasNotFoundError,
    FaasPayloadTooLargeError,
    FunctionNotAllowedError,
    ProtocolError,
)
from tether.faas import _frames
from tether.faas._broker import Broker, Consumer, Delivery
from tether.faas._config import ServiceConfig
from tether.faas._db import Repository

__all__ = ['Service', 'Socket']

logger = logging.getLogger(__name__)


class Socket:
    """One message-oriented connection (a WebSocket); sends are serialized."""

    def __init__(
        self, send: Callable[[bytes], Awaitable[None]], recv: Callable[[], Awaitable[bytes]]
    ) -> None:
        self._send = send
        self.recv = recv
        self._lock = asyncio.Lock()

    async def send(self, data: bytes) -> None:
        async with self._lock:
            await self._send(data)


class _Batcher:
    """Collects deliveries that arrive together and hands them on as one batch."""

    def __init__(self, flush: Callable[[list[Delivery]], Awaitable[None]]) -> None:
        self._flush = flush
        self._items: list[Delivery] = []
        self._task: asyncio.Task[None] | None = None
        self.error: BaseException | None = None

    def add(self, delivery: Delivery) -> None:
        self._items.append(delivery)
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        await asyncio.sleep(0)
        while self._items:
            items, self._items = self._items, []
            try:
                await self._flush(items)
            except Exception as e:
                logger.debug('batch not delivered: %r', e)
                self.error = e
                return


class Service:
    """The service's state: configuration, database and broker."""

    def __init__(self, config: ServiceConfig, repo: Repository, broker: Broker) -> None:
        self.config = config
        self.repo = repo
        self.broker = broker
        self.limits = Limits(max_frame=config.max_request_bytes)
        self.sessions: dict[str, _EndpointSession] = {}

    def task_queue(self, endpoint_id: str) -> str:
        return f'{self.config.queue_prefix}.tasks.{endpoint_id}'

    def result_queue(self, task_group_id: str) -> str:
        return f'{self.config.queue_prefix}.results.{task_group_id}'

    # Submission ------------------------------------------------------------------------

    async def submit(
        self, user_id: str, header: dict[str, Any], payloads: Sequence[memoryview]
    ) -> dict[str, Any]:
        """Record and queue a batch of tasks; return the task group and task ids."""
        received = time.time()
        tasks = header.get('tasks')
        if not isinstance(tasks, list) or len(tasks) != len(payloads):
            raise ProtocolError('a submission needs one payload per entry of "tasks"')
        limit = self.config.max_payload_bytes
        for i, payload in enumerate(payloads):
            if payload.nbytes > limit:
                raise FaasPayloadTooLargeError(
                    f'task {i} of the batch has {payload.nbytes} bytes of arguments, above '
                    f'the service limit of {limit} bytes: pass large objects by reference '
                    '(Executor(endpoint_id, store=store) proxies them through a tether '
                    'Store, or pass store.proxy(obj) yourself)',
                )
        group = header.get('task_group_id') or None
        if group is None or not await self.repo.owns_task_group(group, user_id):
            group = await self.repo.add_task_group(user_id, group)
            if not await self.repo.owns_task_group(group, user_id):
                raise FaasNotFoundError(f'task group {group} not found')
        fids = sorted({str(t.get('function_id')) for t in tasks})
        eids = sorted({str(t.get('endpoint_id')) for t in tasks})
        missing = set(fids) - await self.repo.owned_functions(fids, user_id)
        if missing:
            raise FaasNotFoundError(f'function {sorted(missing)[0]} not found')
        endpoints = await self.repo.endpoint_infos(user_id, eids)
        missing = set(eids) - set(endpoints)
        if missing:
            raise FaasNotFoundError(f'endpoint {sorted(missing)[0]} not found')
        rows = []
        messages: dict[str, list[bytes]] = {}
        for task, payload in zip(tasks, payloads, strict=True):
            eid = str(task['endpoint_id'])
            fid = str(task['function_id'])
            allowed = endpoints[eid].get('allowed_functions')
            if allowed is not None and fid not in allowed:
                raise FunctionNotAllowedError(
                    f'endpoint {eid} does not allow function {fid} (see its allowed_functions)',
                )
            stamps = dict(task.get('t') or {})
            stamps['service_received'] = received
            msg_header = {
                'task_id': str(task['task_id']),
                'function_id': fid,
                'task_group_id': group,
                'data_serializer': str(task.get('data_serializer', 'tether')),
                'result_store': task.get('result_store'),
                'result_threshold': task.get('result_threshold'),
                't': stamps,
            }
            text = json.dumps(msg_header)
            rows.append((msg_header['task_id'], user_id, group, eid, fid, text, bytes(payload)))
            stamps['service_queued'] = time.time()
            messages.setdefault(eid, []).append(
                _frames.encode(_frames.TASKS, msg_header, [payload])
            )
        await self.repo.insert_tasks(rows)
        for eid, bodies in messages.items():
            await self.broker.publish(self.task_queue(eid), bodies)
        return {'task_group_id': group, 'task_ids': [r[0] for r in rows]}

    # Endpoints -------------------------------------------------------------------------

    async def endpoint_session(self, sock: Socket, endpoint_id: str, user_id: str) -> None:
        """Serve one connected endpoint until it disconnects."""
        hello = _frames.decode(await sock.recv(), self.limits)
        if hello.type != _frames.HELLO:
            raise ProtocolError(f'an endpoint must start with HELLO, not type {hello.type}')
        old = self.sessions.get(endpoint_id)
        if old is not None:
            await old.stop()
        session = _EndpointSession(self, sock, endpoint_id, user_id, hello.header)
        self.sessions[endpoint_id] = session
        try:
            await session.run()
        finally:
            await session.stop()
            if self.sessions.get(endpoint_id) is session:
                del self.sessions[endpoint_id]
                await self.repo.set_endpoint_state(endpoint_id, False, session.info)

    async def publish_results(
        self, endpoint_id: str, results: list[tuple[dict[str, Any], memoryview | bytes]]
    ) -> None:
        """Store results of tasks sent to ``endpoint_id`` and queue them for their client."""
        ids = [str(h.get('task_id')) for h, _ in results]
        now = time.time()
        rows = []
        for header, payload in results:
            header.setdefault('t', {})['service_result'] = now
            status = 'success' if header.get('status') == 'success' else 'failed'
            header['status'] = status
            rows.append((str(header['task_id']), status, json.dumps(header), bytes(payload)))
        await self.repo.store_results(endpoint_id, rows)
        owners = await self.repo.result_targets(endpoint_id, ids)
        by_group: dict[str, list[bytes]] = {}
        for (header, payload), task_id in zip(results, ids, strict=True):
            group = owners.get(task_id)
            if group is None:
                continue  # not a task of this endpoint, or already acknowledged
            header['task_group_id'] = group
            header['t']['service_published'] = time.time()
            by_group.setdefault(group, []).append(
                _frames.encode(_frames.RESULTS, header, [payload])
            )
        for group, bodies in by_group.items():
            await self.broker.publish(self.result_queue(group), bodies)

    async def recover_lost(self, endpoint_id: str, held: set[str]) -> None:
        """Queue again the tasks the endpoint was running but no longer holds."""
        lost = await self.repo.lost_tasks(endpoint_id, held)
        if not lost:
            return
        again = [r for r in lost if r['attempts'] < self.config.max_task_attempts]
        failed = [r for r in lost if r['attempts'] >= self.config.max_task_attempts]
        if again:
            logger.info('endpoint %s lost %d running tasks: queued again', endpoint_id, len(again))
            await self.repo.requeue([r['task_id'] for r in again])
            await self.broker.publish(
                self.task_queue(endpoint_id),
                [
                    _frames.encode(_frames.TASKS, json.loads(r['header']), [r['payload'] or b''])
                    for r in again
                ],
            )
        if failed:
            results: list[tuple[dict[str, Any], memoryview | bytes]] = []
            for r in failed:
                message = (
                    f'endpoint {endpoint_id} was lost {r["attempts"]} times while running '
                    f'the task (max_task_attempts = {self.config.max_task_attempts})'
                )
                header = {
                    'task_id': r['task_id'],
                    'status': 'failed',
                    'error': {'type': 'WorkerLostError', 'message': message, 'traceback': ''},
                }
                results.append((header, b''))
            await self.publish_results(endpoint_id, results)

    # Results ---------------------------------------------------------------------------

    async def result_session(self, sock: Socket, user_id: str, task_group_id: str) -> None:
        """Stream a task group's results to its owner until the client disconnects."""
        if not await self.repo.owns_task_group(task_group_id, user_id):
            raise FaasNotFoundError(f'task group {task_group_id} not found')
        tags: dict[str, list[Any]] = {}

        async def flush(items: list[Delivery]) -> None:
            headers = []
            payloads = []
            for d in items:
                frame = _frames.decode(d.body)
                tags.setdefault(str(frame.header['task_id']), []).append(d.tag)
                frame.header.setdefault('t', {})['service_sent'] = time.time()
                headers.append(frame.header)
                payloads.append(frame.payloads[0] if frame.payloads else b'')
            await sock.send(_frames.encode(_frames.RESULTS, {'results': headers}, payloads))

        batcher = _Batcher(flush)
        consumer = await self.broker.consume(self.result_queue(task_group_id), 4096, batcher.add)
        try:
            while True:
                frame = _frames.decode(await sock.recv(), self.limits)
                if frame.type != _frames.ACK:
                    raise ProtocolError(f'unexpected message type {frame.type} on a result stream')
                ids = [str(t) for t in frame.header.get('task_ids', [])]
                done = [tag for t in ids for tag in tags.pop(t, [])]
                await consumer.ack(done)
                await self.repo.acknowledge(user_id, ids)
        finally:
            await consumer.close()

    async def acknowledge(self, user_id: str, task_ids: Sequence[str]) -> None:
        """Results taken through REST: drop their payloads (queue copies are skipped by
        clients, which ignore results they already have)."""
        await self.repo.acknowledge(user_id, list(task_ids))


class _EndpointSession:
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
        self.tags: dict[str, Any] = {}
        self.consumer: Consumer | None = None
        self.batcher = _Batcher(self._send_tasks)
        self._stopped = asyncio.Event()
        self._acks: list[str] = []
        self._results: list[tuple[dict[str, Any], memoryview | bytes]] = []
        self._processor: asyncio.Task[None] | None = None
        self._error: Exception | None = None

    async def run(self) -> None:
        s = self.service
        await s.repo.set_endpoint_state(self.endpoint_id, True, self.info)
        await s.recover_lost(self.endpoint_id, self.held)
        self.consumer = await s.broker.consume(
            s.task_queue(self.endpoint_id), s.config.endpoint_prefetch, self.batcher.add
        )
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
                self._acks.extend(str(t) for t in frame.header.get('task_ids', []))
                self._kick()
            elif frame.type == _frames.RESULTS:
                headers = frame.header.get('results', [])
                if len(headers) != len(frame.payloads):
                    raise ProtocolError('RESULTS needs one payload per result')
                self._results.extend(zip(headers, frame.payloads, strict=True))
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
        the next accumulates (one database round trip and one publish per batch)."""
        if self._processor is None or self._processor.done():
            self._processor = asyncio.ensure_future(self._process())

    async def _process(self) -> None:
        s = self.service
        try:
            while self._acks or self._results:
                acks, self._acks = self._acks, []
                results, self._results = self._results, []
                if acks:
                    tags = [self.tags.pop(t) for t in acks if t in self.tags]
                    await s.repo.mark_running(self.endpoint_id, acks)
                    if self.consumer is not None:
                        await self.consumer.ack(tags)
                if results:
                    await s.publish_results(self.endpoint_id, results)
                    ids = [str(h.get('task_id')) for h, _ in results]
                    await self.sock.send(_frames.encode(_frames.RESULTS_OK, {'task_ids': ids}))
        except Exception as e:
            # The endpoint reconnects and resends what was not confirmed.
            self._error = e
            self._stopped.set()

    async def _send_tasks(self, items: list[Delivery]) -> None:
        frames = [(_frames.decode(d.body), d) for d in items]
        again = [str(f.header['task_id']) for f, d in frames if d.redelivered]
        finished = await self.service.repo.finished_ids(again) if again else set()
        headers = []
        payloads = []
        stale = []
        now = time.time()
        for frame, d in frames:
            task_id = str(frame.header['task_id'])
            if task_id in finished:
                stale.append(d.tag)
                continue
            self.tags[task_id] = d.tag
            frame.header.setdefault('t', {})['service_dispatched'] = now
            headers.append(frame.header)
            payloads.append(frame.payloads[0] if frame.payloads else b'')
        if stale and self.consumer is not None:
            await self.consumer.ack(stale)
        if headers:
            await self.sock.send(_frames.encode(_frames.TASKS, {'tasks': headers}, payloads))

    async def stop(self) -> None:
        self._stopped.set()
        if self.consumer is not None:
            consumer, self.consumer = self.consumer, None
            await consumer.close()


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
    )
    return {k: header[k] for k in keys if k in header}
