"""What the service does, independent of HTTP: submit, forward, store and stream results.

* :meth:`Service.submit` records a batch of tasks in one statement (idempotently: the
  SDK chooses task ids, so a retried request adds nothing) and publishes the tasks that
  are new, and only those, to each endpoint's queue as one broker message per endpoint
  (split above 8 MiB of payloads): a task runs once per task id.
* :meth:`Service.endpoint_session` is the forwarder of one connected endpoint: it
  consumes the endpoint's queue, sends tasks in batches while fewer than
  ``endpoint_prefetch`` sent tasks are not yet in a worker's hands, and acknowledges a
  broker message only when the endpoint has reported every task in it handed to a worker
  (and the database says so). It stores results (one statement per batch) and publishes
  them to their task group's queue, one message per group and batch. When an endpoint
  connects it says which tasks it still holds; tasks it was running but lost (it was
  killed) are queued again, up to ``max_task_attempts`` times.
* :meth:`Service.result_session` streams a task group's results to a client; a result
  message leaves the queue (and the payloads the database) only when the client has
  acknowledged every result in it. The client may submit tasks to the group on the same
  WebSocket (``SUBMIT``, answered ``SUBMITTED`` or ``SUBMIT_FAILED``): the SDK's
  Executor does, which spares each batch an HTTP request.

:meth:`Service.cancel` marks tasks cancelled in the database, drops those still queued
(in the session's backlog, or when their broker message comes), tells the endpoint to stop
the others (``CANCEL``) and publishes a cancelled result to their clients;
:meth:`Service.delete_endpoint` closes the endpoint's connection and fails its unfinished
tasks. Results above ``max_payload_bytes`` are failed here, never published: no message
the service builds exceeds what its broker accepts (checked against ``max_payload_bytes``
at start).

A message that the broker delivers again (its consumer went away before acknowledging
it) is filtered first: tasks that are no longer waiting for their endpoint, and results
that the client already acknowledged, are not sent again.

Payloads stay opaque bytes here: the service deserializes no function, argument or
result. Ids that an endpoint sends back are checked against the database (a result is
stored only for a task sent to that endpoint, and published to the task group recorded
at submission, never to one the endpoint names).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from tether._wire._frame import Limits
from tether.exceptions import (
    ConfigError,
    FaasBadRequestError,
    FaasNotFoundError,
    FaasPayloadTooLargeError,
    FunctionNotAllowedError,
    ProtocolError,
    WireError,
)
from tether.faas import _frames
from tether.faas._broker import Broker, Consumer, Delivery
from tether.faas._config import ServiceConfig
from tether.faas._db import Repository
from tether.faas._errors import status_of
from tether.faas._validate import check_submission

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


Entry = tuple[dict[str, Any], memoryview | bytes]


def _entries(body: bytes | memoryview, key: str) -> list[Entry]:
    """The ``(header, payload)`` entries of a queued message: ``{key: [headers]}`` with one
    payload each, or (messages queued by an earlier version) one header and payload."""
    frame = _frames.decode(body)
    headers = frame.header.get(key)
    if headers is None and 'task_id' in frame.header:
        return [(frame.header, frame.payloads[0] if frame.payloads else b'')]
    if not isinstance(headers, list) or len(headers) != len(frame.payloads):
        raise ProtocolError(f'a queued message needs one payload per entry of {key!r}')
    for h in headers:
        if not isinstance(h, dict) or 'task_id' not in h:
            raise ProtocolError(f'an entry of {key!r} without a task_id')
    return list(zip(headers, frame.payloads, strict=True))


def _parse(
    items: Sequence[Delivery], key: str
) -> tuple[list[tuple[Delivery, list[Entry]]], list[str], list[Any]]:
    """Deliveries' entries (``_entries``), the task ids of those delivered again, and the
    tags of malformed messages (logged; their caller acknowledges them to drop them)."""
    batches = []
    again: list[str] = []
    stale = []
    for d in items:
        try:
            entries = _entries(d.body, key)
        except WireError as e:
            logger.warning('dropping a malformed message of a %s queue: %s', key[:-1], e)
            stale.append(d.tag)
            continue
        batches.append((d, entries))
        if d.redelivered:
            again.extend(str(h['task_id']) for h, _ in entries)
    return batches, again, stale


class _Held:
    __slots__ = ('remaining', 'tag')

    def __init__(self, tag: Any, remaining: set[str]) -> None:
        self.tag = tag
        self.remaining = remaining


class _Tracker:
    """Broker deliveries that each carry several tasks (or results): a delivery may be
    acknowledged once every id in it is done."""

    def __init__(self) -> None:
        self._by_id: dict[str, list[_Held]] = {}

    def hold(self, tag: Any, ids: Iterable[str]) -> bool:
        """Track a delivery of ``ids``; False if there is nothing to wait for."""
        held = _Held(tag, set(ids))
        for i in held.remaining:
            self._by_id.setdefault(i, []).append(held)
        return bool(held.remaining)

    def done(self, ids: Iterable[str]) -> list[Any]:
        """Mark ``ids`` done; return the tags of the deliveries now complete."""
        tags = []
        for i in ids:
            for held in self._by_id.pop(i, ()):
                held.remaining.discard(i)
                if not held.remaining:
                    tags.append(held.tag)
        return tags

    def __len__(self) -> int:
        return len(self._by_id)


class _Batcher:
    """Collects deliveries that arrive together and hands them on as one batch; a failed
    batch calls ``on_error`` (the session ends, and its deliveries return to the queue)."""

    def __init__(
        self,
        flush: Callable[[list[Delivery]], Awaitable[None]],
        on_error: Callable[[Exception], None],
    ) -> None:
        self._flush = flush
        self._on_error = on_error
        self._items: list[Delivery] = []
        self._task: asyncio.Task[None] | None = None

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
                self._on_error(e)
                return


# The longest time limit a task may have (30 days), and how many cancelled ids the
# service remembers to drop their queued messages.
_MAX_TIMEOUT = 30 * 86400
_MAX_CANCELLED = 100_000

# Framing and header bytes a message may add to its payloads (HEADER_BUDGET and then some).
_MESSAGE_OVERHEAD = _frames.HEADER_BUDGET + 2**16


class Service:
    """The service's state: configuration, database and broker."""

    def __init__(self, config: ServiceConfig, repo: Repository, broker: Broker) -> None:
        accepted = getattr(broker, 'max_message_bytes', None)
        largest = max(config.max_payload_bytes, _frames.MESSAGE_BYTES) + _MESSAGE_OVERHEAD
        if accepted is not None and largest > accepted:
            # Every message the service builds (a batch of tasks, a batch of results)
            # holds one payload above MESSAGE_BYTES alone, plus a header of at most
            # HEADER_BUDGET: it must fit what the broker accepts, or it is refused (and
            # a result refused is resent by its endpoint forever).
            raise ConfigError(
                f'max_payload_bytes = {config.max_payload_bytes} does not fit the '
                f"broker's largest message ({accepted} bytes, with "
                f'{_MESSAGE_OVERHEAD} bytes of headers): lower max_payload_bytes to at '
                f'most {accepted - _MESSAGE_OVERHEAD} (larger data travels by reference)'
            )
        self.config = config
        self.repo = repo
        self.broker = broker
        self.limits = Limits(max_frame=config.max_request_bytes)
        self.sessions: dict[str, _EndpointSession] = {}
        # Cancelled tasks whose broker message may still come (dropped when it does),
        # and ids cancelled before their submission arrived (a cancel racing it): both
        # bounded, oldest forgotten first. Checked only while not empty.
        self.cancelled: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._precancelled: collections.OrderedDict[tuple[str, str], None] = (
            collections.OrderedDict()
        )
        self._seeded: set[str] = set()  # endpoints whose cancelled tasks were loaded
        # Deleting an endpoint and submitting to it exclude each other: submissions in
        # progress per endpoint, and endpoints being deleted (with what their deletion
        # waits on), so that no task is queued to a deleted endpoint's queue.
        self._submitting: dict[str, int] = {}
        self._deleting: dict[str, asyncio.Event] = {}

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
        check_submission(header, len(payloads))  # types, lengths, nesting: 400 otherwise
        tasks = header.get('tasks')
        if not isinstance(tasks, list) or len(tasks) != len(payloads):
            raise ProtocolError('a submission needs one payload per entry of "tasks"')
        if not all(isinstance(t, dict) for t in tasks):
            raise ProtocolError('each entry of "tasks" must be an object')
        limit = self.config.max_payload_bytes
        for i, payload in enumerate(payloads):
            if payload.nbytes > limit:
                raise FaasPayloadTooLargeError(
                    f'task {i} of the batch has {payload.nbytes} bytes of arguments, above '
                    f'the limit of {limit} bytes: pass large objects by reference '
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
        for eid in eids:
            if eid in self._deleting:
                raise FaasNotFoundError(f'endpoint {eid} not found')
        for eid in eids:
            self._submitting[eid] = self._submitting.get(eid, 0) + 1
        try:
            return await self._submit(
                user_id,
                group,
                tasks=tasks,
                payloads=payloads,
                eids=eids,
                fids=fids,
                received=received,
            )
        finally:
            for eid in eids:
                n = self._submitting.pop(eid) - 1
                if n:
                    self._submitting[eid] = n
                elif eid in self._deleting:
                    self._deleting[eid].set()

    async def _submit(
        self,
        user_id: str,
        group: str,
        *,
        tasks: list[dict[str, Any]],
        payloads: Sequence[memoryview],
        eids: list[str],
        fids: list[str],
        received: float,
    ) -> dict[str, Any]:
        missing = set(fids) - await self.repo.owned_functions(fids, user_id)
        if missing:
            raise FaasNotFoundError(f'function {sorted(missing)[0]} not found')
        endpoints = await self.repo.endpoint_infos(user_id, eids)
        missing = set(eids) - set(endpoints)
        if missing:
            raise FaasNotFoundError(f'endpoint {sorted(missing)[0]} not found')
        rows: list[tuple[str, str, str, str, str, str, memoryview]] = []
        queued: dict[str, list[Entry]] = {}
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
            msg_header: dict[str, Any] = {
                'task_id': str(task['task_id']),
                'function_id': fid,
                'task_group_id': group,
                'data_serializer': str(task.get('data_serializer', 'tether')),
                'result_store': task.get('result_store'),
                'result_threshold': task.get('result_threshold'),
                't': stamps,
            }
            timeout = task.get('timeout')
            if timeout is not None:
                if (
                    isinstance(timeout, bool)
                    or not isinstance(timeout, int | float)
                    or not 0 < timeout <= _MAX_TIMEOUT
                ):
                    raise FaasBadRequestError(
                        f'a task\'s "timeout" must be a number of seconds in (0, {_MAX_TIMEOUT}]'
                    )
                msg_header['timeout'] = float(timeout)
            rows.append(
                (msg_header['task_id'], user_id, group, eid, fid, json.dumps(msg_header), payload)
            )
            queued.setdefault(eid, []).append((msg_header, payload))
        now = time.time()
        for entries in queued.values():
            for h, _ in entries:
                h['t']['service_queued'] = now
        ids = [r[0] for r in rows]
        new = await self.repo.insert_tasks(rows)
        if len(new) < len(rows):
            # Task ids the service already has (a retried request, a batch sent again
            # after a reconnect): the task stands as first submitted and is not queued
            # again. A task runs once per task id.
            first = set(new)  # an id repeated within the batch is queued once
            for eid in list(queued):
                kept = []
                for entry in queued[eid]:
                    if entry[0]['task_id'] in first:
                        first.discard(entry[0]['task_id'])
                        kept.append(entry)
                if kept:
                    queued[eid] = kept
                else:
                    del queued[eid]
        precancelled = []
        if self._precancelled:
            precancelled = [i for i in new if self._precancelled.pop((user_id, i), 0) is None]
            if precancelled:
                for eid in list(queued):
                    queued[eid] = [e for e in queued[eid] if e[0]['task_id'] not in precancelled]
                    if not queued[eid]:
                        del queued[eid]
                await self.cancel(user_id, precancelled)
        published = set()
        try:
            for eid, entries in queued.items():
                await self.broker.publish(
                    self.task_queue(eid), _frames.pack(_frames.TASKS, 'tasks', entries)
                )
                published.add(eid)
        except Exception:
            # Recorded but not queued (the broker is down: 503, which the SDK retries):
            # forgotten again, so that the retry, which only queues new ids, queues them.
            unqueued = [h['task_id'] for e in queued if e not in published for h, _ in queued[e]]
            with contextlib.suppress(Exception):
                await self.repo.forget_waiting(unqueued)
            raise
        if len(new) < len(rows):
            repeats = [i for i in ids if i not in new]
            owners = await self.repo.task_owners(repeats)
            foreign = [i for i in repeats if owners.get(i) != user_id]
            if foreign:
                raise FaasBadRequestError(
                    f'task id {foreign[0]} is already in use: choose new task ids (UUIDs); '
                    f'the {len(new)} new task(s) of the batch were queued'
                )
        return {'task_group_id': group, 'task_ids': ids}

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

    async def cancel(self, user_id: str, task_ids: Sequence[str]) -> dict[str, str]:
        """Cancel the user's tasks: a queued one is removed (its message is dropped when
        it comes), a running one is stopped on its worker (the endpoint replaces the
        worker). Return each id's outcome: ``'cancelled'`` (now), else its status
        (``'success'``, ``'failed'`` or ``'cancelled'``: it finished first), or
        ``'unknown'`` (not submitted yet: it is cancelled when it comes)."""
        ids = list(dict.fromkeys(task_ids))
        header: dict[str, Any] = {
            'status': 'cancelled',
            'error': {
                'type': 'TaskCancelledError',
                'message': 'the task was cancelled before it finished',
                'traceback': '',
            },
            't': {'service_cancelled': time.time()},
        }
        rows = await self.repo.cancel(user_id, ids, json.dumps(header))
        out = {str(r['task_id']): 'cancelled' for r in rows}
        by_endpoint: dict[str, list[str]] = {}
        groups = {}
        for r in rows:
            tid = str(r['task_id'])
            by_endpoint.setdefault(str(r['endpoint_id']), []).append(tid)
            groups[tid] = str(r['task_group_id'])
            self.cancelled[tid] = None
        while len(self.cancelled) > _MAX_CANCELLED:
            self.cancelled.popitem(last=False)
        for eid, cancelled in by_endpoint.items():
            session = self.sessions.get(eid)
            if session is not None:
                await session.cancel(cancelled)
        # Their clients hear it like a result (an Executor's future is cancelled).
        await self._publish_results(
            [(t, ({**header, 'task_id': t, 't': dict(header['t'])}, b'')) for t in out],
            groups,
        )
        rest = [i for i in ids if i not in out]
        if rest:
            found = {
                str(r['task_id']): str(r['status']) for r in await self.repo.tasks(user_id, rest)
            }
            for i in rest:
                out[i] = found.get(i, 'unknown')
                if i not in found:
                    self._precancelled[(user_id, i)] = None
            while len(self._precancelled) > _MAX_CANCELLED:
                self._precancelled.popitem(last=False)
        return out

    async def delete_endpoint(self, user_id: str, endpoint_id: str) -> None:
        """Delete the user's endpoint: close its connection (the agent is told the endpoint
        was deleted, and stops), delete its task queue, and fail every task it had not
        finished (queued or running) with ``EndpointDeletedError``, published to the
        tasks' clients like any result."""
        if endpoint_id not in await self.repo.endpoint_infos(user_id, [endpoint_id]):
            raise FaasNotFoundError(f'endpoint {endpoint_id} not found')
        if endpoint_id in self._deleting:  # deleted by a request under way
            await self._deleting[endpoint_id].wait()
            raise FaasNotFoundError(f'endpoint {endpoint_id} not found')
        # New submissions to it are refused from now; those under way are waited for
        # (their tasks are then failed below with the others).
        drained = self._deleting[endpoint_id] = asyncio.Event()
        try:
            if self._submitting.get(endpoint_id):
                await drained.wait()
            await self._delete_endpoint(user_id, endpoint_id)
        finally:
            del self._deleting[endpoint_id]
            drained.set()

    async def _delete_endpoint(self, user_id: str, endpoint_id: str) -> None:
        if not await self.repo.delete_endpoint(endpoint_id, user_id):
            raise FaasNotFoundError(f'endpoint {endpoint_id} not found')
        deleted = FaasNotFoundError(f'endpoint {endpoint_id} was deleted')
        session = self.sessions.get(endpoint_id)
        if session is not None:
            await session.stop(deleted)
        await self.broker.delete(self.task_queue(endpoint_id))
        await self.fail_unfinished(
            endpoint_id,
            'EndpointDeletedError',
            f'endpoint {endpoint_id} was deleted before the task finished',
        )

    async def fail_unfinished(self, endpoint_id: str, kind: str, message: str) -> None:
        """End every task of ``endpoint_id`` not finished yet with a failed result."""
        ids = await self.repo.unfinished_ids(endpoint_id)
        if not ids:
            return
        error = {'type': kind, 'message': message, 'traceback': ''}
        now = time.time()
        results: list[tuple[dict[str, Any], memoryview | bytes]] = [
            (
                {'task_id': t, 'status': 'failed', 'error': error, 't': {'service_failed': now}},
                b'',
            )
            for t in ids
        ]
        await self.publish_results(endpoint_id, results)

    async def publish_results(
        self,
        endpoint_id: str,
        results: list[tuple[dict[str, Any], memoryview | bytes]],
        groups: dict[str, str] | None = None,
    ) -> None:
        """Store results of tasks sent to ``endpoint_id`` and queue them for their client
        (one statement, one message per task group; a result stored earlier but not yet
        acknowledged is queued again, one already acknowledged is not).

        ``groups`` maps the ids of tasks this service sent to the endpoint to their task
        group, as its own task messages recorded it: those results are stored and
        published at once (a client may see one before the database has it: taking it
        then still marks it acknowledged). The others' groups come from the database.
        """
        groups = groups or {}
        ids = [str(h.get('task_id')) for h, _ in results]
        now = time.time()
        rows = []
        for task_id, (header, payload) in zip(ids, results, strict=True):
            header.setdefault('t', {})['service_result'] = now
            status = 'success' if header.get('status') == 'success' else 'failed'
            header['status'] = status
            rows.append((task_id, status, json.dumps(header), payload))
        early = [(t, r) for t, r in zip(ids, results, strict=True) if t in groups]
        stored, _ = await asyncio.gather(
            self.repo.store_results(endpoint_id, rows), self._publish_results(early, groups)
        )
        rest = [(t, r) for t, r in zip(ids, results, strict=True) if t not in groups]
        if rest:
            owners = dict(stored)
            again = [t for t, _ in rest if t not in owners]
            if again:
                owners.update(await self.repo.result_targets(endpoint_id, again))
            # Not a task of this endpoint, or already acknowledged: not queued.
            await self._publish_results([(t, r) for t, r in rest if t in owners], owners)

    async def _publish_results(
        self, results: list[tuple[str, Entry]], groups: dict[str, str]
    ) -> None:
        by_group: dict[str, list[Entry]] = {}
        now = time.time()
        for task_id, (header, payload) in results:
            group = groups[task_id]
            header['task_group_id'] = group
            header['t']['service_published'] = now
            by_group.setdefault(group, []).append((header, payload))
        for group, entries in by_group.items():
            await self.broker.publish(
                self.result_queue(group), _frames.pack(_frames.RESULTS, 'results', entries)
            )

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
                _frames.pack(
                    _frames.TASKS,
                    'tasks',
                    ((json.loads(r['header']), r['payload'] or b'') for r in again),
                ),
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
        tracker = _Tracker()
        consumer: Consumer | None = None
        failed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        async def flush(items: list[Delivery]) -> None:
            batches, again, stale = _parse(items, 'results')
            taken = await self.repo.acknowledged_ids(user_id, again) if again else set()
            out: list[Entry] = []
            for d, entries in batches:
                kept = entries
                if d.redelivered:
                    kept = [e for e in entries if str(e[0]['task_id']) not in taken]
                if not tracker.hold(d.tag, (str(h['task_id']) for h, _ in kept)):
                    stale.append(d.tag)
                out.extend(kept)
            if stale and consumer is not None:
                await consumer.ack(stale)
            now = time.time()
            for header, _ in out:
                header.setdefault('t', {})['service_sent'] = now
            for message in _frames.pack(_frames.RESULTS, 'results', out):
                await sock.send(message)

        def on_error(e: Exception) -> None:
            if not failed.done():
                failed.set_exception(e)

        batcher = _Batcher(flush, on_error)
        consumer = await self.broker.consume(self.result_queue(task_group_id), 4096, batcher.add)
        recv: asyncio.Future[bytes] | None = None
        submitting: set[asyncio.Future[None]] = set()
        # Acknowledgements in a pipeline of their own, a batch per statement: reading the
        # stream (the next submission) never waits for the database.
        taken: list[str] = []
        acking: asyncio.Future[None] | None = None

        async def take() -> None:
            try:
                while taken:
                    ids = taken[:]
                    del taken[:]
                    # The database first: a crash between the two delivers the message
                    # again, and the results it holds are then known to be taken.
                    await self.repo.acknowledge(user_id, ids, delivered=True)
                    if consumer is not None:
                        await consumer.ack(tracker.done(ids))
            except Exception as e:
                on_error(e)

        try:
            while True:
                recv = asyncio.ensure_future(sock.recv())
                waiting: set[asyncio.Future[Any]] = {recv, failed}
                await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                if failed.done():
                    failed.result()
                frame = _frames.decode(recv.result(), self.limits)
                recv = None
                if frame.type == _frames.SUBMIT:
                    job = asyncio.ensure_future(
                        self._submit_on_stream(sock, user_id, task_group_id, frame)
                    )
                    submitting.add(job)
                    job.add_done_callback(submitting.discard)
                    continue
                if frame.type != _frames.ACK:
                    raise ProtocolError(f'unexpected message type {frame.type} on a result stream')
                taken.extend(_task_ids(frame.header))
                if acking is None or acking.done():
                    acking = asyncio.ensure_future(take())
                sync = frame.header.get('sync')
                if sync is not None:
                    # The client asks to hear once every acknowledgement so far is stored
                    # (an Executor shutting down): the next ones wait behind this answer.
                    while acking is not None and not acking.done():
                        await asyncio.wait({acking, failed}, return_when=asyncio.FIRST_COMPLETED)
                        if failed.done():
                            failed.result()
                        if taken and acking.done():
                            acking = asyncio.ensure_future(take())
                    await sock.send(_frames.encode(_frames.ACKED, {'sync': str(sync)[:64]}))
        finally:
            if recv is not None:
                recv.cancel()
            for pending in [*submitting, acking]:
                if pending is not None:
                    pending.cancel()
            await consumer.close()

    async def _submit_on_stream(
        self, sock: Socket, user_id: str, task_group_id: str, frame: Any
    ) -> None:
        """A batch submitted on a result stream: to the stream's own task group."""
        request = frame.header.get('request')
        try:
            header = {'task_group_id': task_group_id, 'tasks': frame.header.get('tasks')}
            await self.submit(user_id, header, frame.payloads)
        except Exception as e:
            status, code = status_of(e)
            if status == 500:
                logger.exception('submission on a result stream failed')
            message = str(e) if status != 500 else 'internal error (see the service log)'
            reply = {'request': request, 'status': status, 'error': code, 'message': message}
            with contextlib.suppress(Exception):  # the client resends after reconnecting
                await sock.send(_frames.encode(_frames.SUBMIT_FAILED, reply))
            return
        with contextlib.suppress(Exception):
            await sock.send(_frames.encode(_frames.SUBMITTED, {'request': request}))

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
        self.tracker = _Tracker()
        self.consumer: Consumer | None = None
        self.batcher = _Batcher(self._take, self._fail)
        self._stopped = asyncio.Event()
        self._backlog: collections.deque[Entry] = collections.deque()
        self._forwarded: set[str] = set()  # sent to the endpoint, not yet with a worker
        self._groups: dict[str, str] = {}  # task group of each task sent, until its result
        self._pumper: asyncio.Task[None] | None = None
        self._acks: list[str] = []
        self._results: list[tuple[dict[str, Any], memoryview | bytes]] = []
        self._storing: asyncio.Task[None] | None = None
        self._marking: asyncio.Task[None] | None = None
        self._error: Exception | None = None

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
            for tid in await s.repo.cancelled_unhanded(self.endpoint_id, _MAX_CANCELLED):
                s.cancelled.setdefault(tid, None)
        if self.held:
            # Tasks cancelled while this endpoint was away, that it still runs.
            stale = await s.repo.cancelled_ids(sorted(self.held))
            if stale:
                await self.sock.send(_frames.encode(_frames.CANCEL, {'task_ids': sorted(stale)}))
        self.consumer = await s.broker.consume(
            s.task_queue(self.endpoint_id), s.config.endpoint_prefetch, self.batcher.add
        )
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
                self._acks.extend(_task_ids(frame.header))
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
                        entry if size <= limit else _too_large(entry[0], size, limit)
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
                await s.repo.mark_running(self.endpoint_id, acks)
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
        if self._backlog:
            kept = [e for e in self._backlog if str(e[0]['task_id']) not in ids]
            if len(kept) < len(self._backlog):
                self._backlog = collections.deque(kept)
        # Their broker messages may leave the queue once the rest of them is done.
        await self._ack(self.tracker.done([t for t in ids if t not in self._forwarded]))
        # The endpoint drops those it has not started and stops those running; ids it
        # does not hold are ignored.
        with contextlib.suppress(Exception):  # gone: told again when it reconnects
            await self.sock.send(_frames.encode(_frames.CANCEL, {'task_ids': task_ids}))

    async def _take(self, items: list[Delivery]) -> None:
        """Deliveries from the endpoint's queue: track them, then forward their tasks."""
        batches, again, stale = _parse(items, 'tasks')
        # Tasks of a message delivered again that are running (the endpoint holds them, or
        # they were queued again when it reconnected) or finished are not sent again.
        waiting = await self.service.repo.waiting_ids(again) if again else set()
        cancelled = self.service.cancelled
        for d, entries in batches:
            kept = entries
            if d.redelivered:
                kept = [e for e in entries if str(e[0]['task_id']) in waiting]
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
            self._fail(error)
        self._stopped.set()
        if self.consumer is not None:
            consumer, self.consumer = self.consumer, None
            await consumer.close()


def _too_large(header: dict[str, Any], size: int, limit: int) -> Entry:
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


def _task_ids(header: dict[str, Any]) -> list[str]:
    """The ``task_ids`` of an ACK frame."""
    ids = header.get('task_ids', [])
    if not isinstance(ids, list) or not all(isinstance(t, str) for t in ids):
        raise ProtocolError('"task_ids" must be a list of task id strings')
    return ids


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
