"""What the service does, independent of HTTP: submit, forward, store and stream results.

* :meth:`Service.submit` records a batch of tasks in one statement (idempotently: the
  SDK chooses task ids, so a retried request adds nothing) and publishes the tasks that
  are new, and only those, to each endpoint's queue as one broker message per endpoint
  (split above 8 MiB of payloads): a task runs once per task id. Tasks of an endpoint
  connected to the same replica skip the broker: they are handed to its session
  directly (marked ``direct`` in the database; while the session has room for them).
  When that session ends, those not yet with a worker are queued in the broker; if the
  replica died instead, the endpoint's next session queues them again from the database.
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
from collections.abc import Sequence
from typing import Any

from tether._wire import Limits
from tether.exceptions import (
    ConfigError,
    FaasBadRequestError,
    FaasNotFoundError,
    FaasPayloadTooLargeError,
    FunctionNotAllowedError,
    ProtocolError,
)
from tether.faas import _bulk, _frames
from tether.faas._broker import Broker
from tether.faas._config import ServiceConfig
from tether.faas._db import Repository
from tether.faas._queues import (
    MAX_CANCELLED,
    Entry,
    Socket,
)
from tether.faas._results import ResultSession
from tether.faas._session import EndpointSession
from tether.faas._submitted import only_new, refuse_deleted, task_message
from tether.faas._validate import check_submission

__all__ = ['Service', 'Socket']

logger = logging.getLogger(__name__)


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
        self.sessions: dict[str, EndpointSession] = {}
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
        # What the endpoint sessions ask of the database and the broker, merged across
        # sessions: one statement (or one publish per task group) per turn.
        self._handed: _bulk.Coalescer[tuple[str, str], None] = _bulk.Coalescer(
            lambda pairs: _bulk.mark_running(repo.db, pairs)
        )
        self._stored: _bulk.Coalescer[_bulk.Result, dict[str, str]] = _bulk.Coalescer(
            lambda rows: _bulk.store_results(repo.db, rows, time.time())
        )
        self._outbox: _bulk.Coalescer[tuple[str, Entry], None] = _bulk.Coalescer(self._publish_now)

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
        submission = _frames.decode_submission(header, len(payloads))
        tasks = submission.tasks
        limit = self.config.max_payload_bytes
        for i, payload in enumerate(payloads):
            if payload.nbytes > limit:
                raise FaasPayloadTooLargeError(
                    f'task {i} of the batch has {payload.nbytes} bytes of arguments, above '
                    f'the limit of {limit} bytes: pass large objects by reference '
                    '(Executor(endpoint_id, store=store) proxies them through a tether '
                    'Store, or pass store.proxy(obj) yourself)',
                )
        group = submission.task_group_id
        if group is None or not await self.repo.owns_task_group(group, user_id):
            group = await self.repo.add_task_group(user_id, group)
            if not await self.repo.owns_task_group(group, user_id):
                raise FaasNotFoundError(f'task group {group} not found')
        fids = sorted({t.function_id for t in tasks})
        eids = sorted({t.endpoint_id for t in tasks})
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
        tasks: list[_frames.SubmittedTask],
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
        rows: list[tuple[str, str, str, str, str, str, memoryview, int]] = []
        queued: dict[str, list[Entry]] = {}
        for task, payload in zip(tasks, payloads, strict=True):
            eid, fid = task.endpoint_id, task.function_id
            allowed = endpoints[eid].get('allowed_functions')
            if allowed is not None and fid not in allowed:
                raise FunctionNotAllowedError(
                    f'endpoint {eid} does not allow function {fid} (see its allowed_functions)',
                )
            msg_header = task_message(task, group, received)
            rows.append(
                (
                    msg_header['task_id'],
                    user_id,
                    group,
                    eid,
                    fid,
                    json.dumps(msg_header),
                    payload,
                    0,
                )
            )
            queued.setdefault(eid, []).append((msg_header, payload))
        # Endpoints connected to this replica take their tasks from here, not through the
        # broker (recorded as such: recovered from the database if this replica dies).
        local = {e: s for e, q in queued.items() if (s := self._local(e, q)) is not None}
        if local:
            rows = [(*r[:7], int(r[3] in local)) for r in rows]
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
            queued = only_new(queued, new)
        if self._precancelled:
            queued = await self._drop_precancelled(user_id, new, queued)
        await self._dispatch(queued, local)
        if len(new) < len(rows):
            repeats = [i for i in ids if i not in new]
            owners = await self.repo.task_owners(repeats)
            refuse_deleted(tasks, [i for i in repeats if i not in owners], len(new))
            foreign = [i for i in repeats if owners.get(i) != user_id]
            if foreign:
                raise FaasBadRequestError(
                    f'task id {foreign[0]} is already in use: choose new task ids (UUIDs); '
                    f'the {len(new)} new task(s) of the batch were queued'
                )
        return {'task_group_id': group, 'task_ids': ids}

    async def _dispatch(
        self, queued: dict[str, list[Entry]], local: dict[str, EndpointSession]
    ) -> None:
        """Recorded tasks to their endpoints: handed to the sessions in ``local`` (this
        replica's), published to the others' queues."""
        targets = []
        for e, entries in queued.items():
            session = local.get(e)
            if session is not None and session.hand([(h, bytes(p)) for h, p in entries]):
                continue
            if session is not None:  # its session ended meanwhile: through the broker
                for h, _ in entries:
                    h['again'] = True  # it may be recovered from the database too
            targets.append(e)
        # To every other endpoint's queue at once (each publish waits for its confirm).
        outcomes = await asyncio.gather(
            *(
                self.broker.publish(
                    self.task_queue(e), _frames.pack(_frames.TASKS, 'tasks', queued[e])
                )
                for e in targets
            ),
            return_exceptions=True,
        )
        failed = [
            e for e, o in zip(targets, outcomes, strict=True) if isinstance(o, BaseException)
        ]
        if failed:
            # Recorded but not queued (the broker is down: 503, which the SDK retries):
            # forgotten again, so that the retry, which only queues new ids, queues them.
            unqueued = [h['task_id'] for e in failed for h, _ in queued[e]]
            with contextlib.suppress(Exception):
                await self.repo.forget_waiting(unqueued)
            error = next(o for o in outcomes if isinstance(o, BaseException))
            raise error

    def _local(self, endpoint_id: str, entries: list[Entry]) -> EndpointSession | None:
        """The session of ``endpoint_id`` on this replica, if it takes ``entries`` handed
        to it directly (see :meth:`EndpointSession.hand`)."""
        session = dict.get(self.sessions, endpoint_id)
        nbytes = sum(len(p) for _, p in entries)
        if isinstance(session, EndpointSession) and session.takes(len(entries), nbytes):
            return session
        return None

    async def _drop_precancelled(
        self, user_id: str, new: set[str], queued: dict[str, list[Entry]]
    ) -> dict[str, list[Entry]]:
        """Tasks cancelled before their submission came (a cancel racing it): cancelled
        now, and not queued."""
        precancelled = {i for i in new if self._precancelled.pop((user_id, i), 0) is None}
        if not precancelled:
            return queued
        await self.cancel(user_id, sorted(precancelled))
        out = {}
        for eid, entries in queued.items():
            kept = [e for e in entries if e[0]['task_id'] not in precancelled]
            if kept:
                out[eid] = kept
        return out

    # Endpoints -------------------------------------------------------------------------

    async def endpoint_session(self, sock: Socket, endpoint_id: str, user_id: str) -> None:
        """Serve one connected endpoint until it disconnects."""
        hello = _frames.decode(await sock.recv(), self.limits)
        if hello.type != _frames.HELLO:
            raise ProtocolError(f'an endpoint must start with HELLO, not type {hello.type}')
        old = self.sessions.get(endpoint_id)
        if old is not None:
            await old.stop()
        session = EndpointSession(self, sock, endpoint_id, user_id, hello.header)
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
        while len(self.cancelled) > MAX_CANCELLED:
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
            while len(self._precancelled) > MAX_CANCELLED:
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
            self._stored.run([(endpoint_id, *r) for r in rows]),
            self._publish_results(early, groups),
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
        items = []
        for task_id, entry in results:
            entry[0]['task_group_id'] = groups[task_id]
            items.append((groups[task_id], entry))
        if items:
            await self._outbox.run(items)

    async def _publish_now(self, items: list[tuple[str, Entry]]) -> None:
        """Results of any endpoints: one message per task group, all published at once."""
        by_group: dict[str, list[Entry]] = {}
        now = time.time()
        for group, (header, payload) in items:
            header['t']['service_published'] = now
            by_group.setdefault(group, []).append((header, payload))
        await asyncio.gather(
            *(
                self.broker.publish(
                    self.result_queue(g), _frames.pack(_frames.RESULTS, 'results', entries)
                )
                for g, entries in by_group.items()
            )
        )

    async def mark_running(self, endpoint_id: str, task_ids: Sequence[str]) -> None:
        """Tasks handed to a worker of ``endpoint_id``: stored with those of every
        endpoint that reported some meanwhile, in one statement."""
        if task_ids:
            await self._handed.run([(endpoint_id, t) for t in task_ids])

    async def recover_lost(self, endpoint_id: str, held: set[str]) -> None:
        """Queue again the tasks the endpoint was running but no longer holds, and those
        handed to a session of it directly that it does not hold (the replica that held
        the session died, or could not queue them when it ended)."""
        direct = await self.repo.lost_direct(endpoint_id, held)
        if direct:
            logger.info(
                'endpoint %s: %d tasks handed to an earlier session queued again',
                endpoint_id,
                len(direct),
            )
            await self.requeue_direct(
                endpoint_id, [(json.loads(r['header']), r['payload'] or b'') for r in direct]
            )
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

    async def requeue_direct(self, endpoint_id: str, entries: list[Entry]) -> None:
        """Tasks handed directly to a session of ``endpoint_id`` that it did not pass on:
        queued in the broker (flagged, so that whichever session takes them first checks
        they still wait), then no longer marked as handed directly."""
        for h, _ in entries:
            h['again'] = True
        await self.broker.publish(
            self.task_queue(endpoint_id), _frames.pack(_frames.TASKS, 'tasks', entries)
        )
        await self.repo.undirect([str(h['task_id']) for h, _ in entries])

    # Results ---------------------------------------------------------------------------

    async def result_session(self, sock: Socket, user_id: str, task_group_id: str) -> None:
        """Stream a task group's results to its owner until the client disconnects
        (:class:`~tether.faas._results.ResultSession`)."""
        if not await self.repo.owns_task_group(task_group_id, user_id):
            raise FaasNotFoundError(f'task group {task_group_id} not found')
        await ResultSession(self, sock, user_id, task_group_id).run()

    async def acknowledge(self, user_id: str, task_ids: Sequence[str]) -> None:
        """Results taken through REST: drop their payloads (queue copies are skipped by
        clients, which ignore results they already have)."""
        await self.repo.acknowledge(user_id, list(task_ids))
