"""Several service processes (replicas) on one database and one broker.

Tasks, results and their queues already live in PostgreSQL and RabbitMQ, so any replica
may take a submission or stream a task group's results whichever replica its endpoint is
connected to. What a replica keeps in memory is its endpoints' connections: an order for
one of them (cancel these tasks, close the connection) may come to another replica.
:class:`SessionTable` is the service's table of endpoint sessions: it looks up this
replica's own sessions, and for any other endpoint hands out a stand-in whose ``cancel``
and ``stop`` are broadcast to the other replicas (:meth:`Broker.broadcast`), where the
replica that holds the endpoint carries them out. A new connection of an endpoint stops
an older one wherever it is (the replica that held it does not then mark the endpoint
offline), and a deleted function's cached ownership is dropped everywhere. Every
replica also remembers the broadcast cancellations, so a cancelled
task's queued message is dropped by whichever replica the endpoint reaches next.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from typing import TYPE_CHECKING, Any

from tether.exceptions import FaasNotFoundError
from tether.faas._liveness import BEAT_S, beat, drop
from tether.faas._queues import MAX_CANCELLED

if TYPE_CHECKING:
    from tether.faas._broker import Consumer
    from tether.faas._core import Service
    from tether.faas._session import EndpointSession

__all__ = ['Control', 'SessionTable', 'forget_function']

logger = logging.getLogger(__name__)


class _Remote:
    """An endpoint session of another replica (if any): its orders are broadcast."""

    __slots__ = ('control', 'endpoint_id')

    def __init__(self, control: Control, endpoint_id: str) -> None:
        self.control = control
        self.endpoint_id = endpoint_id

    async def cancel(self, task_ids: list[str]) -> None:
        await self.control.send('cancel', self.endpoint_id, task_ids=list(task_ids))

    async def stop(self, error: Exception | None = None) -> None:
        await self.control.send(
            'stop', self.endpoint_id, error=None if error is None else str(error)
        )


class SessionTable(dict[str, 'EndpointSession']):
    """This replica's endpoint sessions; :meth:`get` of an endpoint that has none here
    returns a stand-in for the replica that may hold it."""

    def __init__(self) -> None:
        super().__init__()
        self.control: Control | None = None

    def get(self, key: str, default: Any = None) -> Any:
        session = super().get(key)
        if session is not None:
            return session
        if self.control is None:
            return default
        return _Remote(self.control, key)


class Control:
    """A replica's end of the control topic: sends orders, carries out those for its
    own endpoints."""

    def __init__(self, service: Service, table: SessionTable) -> None:
        self.service = service
        self.table = table
        self.replica_id = uuid.uuid4().hex
        self.topic = f'{service.config.queue_prefix}.control'
        self._listener: Consumer | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._beating: asyncio.Future[None] | None = None

    async def start(self) -> None:
        self._listener = await self.service.broker.listen(self.topic, self._heard)
        self.table.control = self
        await beat(self.service.repo.db, self.replica_id)
        self._beating = asyncio.ensure_future(self._beat())

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(BEAT_S)
            try:
                await beat(self.service.repo.db, self.replica_id)
            except Exception as e:  # the database is away: the next beat may pass
                logger.warning('replica heartbeat not stored: %s', e)

    async def close(self) -> None:
        self.table.control = None
        if self._beating is not None:
            self._beating.cancel()
            with contextlib.suppress(Exception):
                await drop(self.service.repo.db, self.replica_id)
        if self._listener is not None:
            listener, self._listener = self._listener, None
            await listener.close()

    async def send(self, kind: str, endpoint_id: str, **fields: Any) -> None:
        body = {'from': self.replica_id, 'kind': kind, 'endpoint_id': endpoint_id, **fields}
        try:
            await self.service.broker.broadcast(self.topic, json.dumps(body).encode())
        except Exception as e:  # the broker is away: the endpoint reconnects meanwhile
            logger.warning('control message %s for %s not sent: %s', kind, endpoint_id, e)

    def _heard(self, body: bytes) -> None:
        try:
            message = json.loads(body)
            if message.get('from') == self.replica_id:
                return
            kind, eid = str(message['kind']), str(message['endpoint_id'])
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            logger.warning('dropping a malformed control message: %r', e)
            return
        task = asyncio.ensure_future(self._carry_out(kind, eid, message))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _carry_out(self, kind: str, eid: str, message: dict[str, Any]) -> None:
        try:
            if kind == 'cancel':
                ids = [str(t) for t in message.get('task_ids') or []]
                cancelled = self.service.cancelled
                for t in ids:
                    cancelled[t] = None
                while len(cancelled) > MAX_CANCELLED:
                    cancelled.popitem(last=False)
                session = dict.get(self.table, eid)
                if session is not None:
                    await session.cancel(ids)
            elif kind == 'forget-function':
                self.service.repo.forget_function(
                    str(message['function_id']), str(message['user_id'])
                )
            elif kind == 'stop':
                error = message.get('error')
                if error is not None:  # deleted or stopped by its owner
                    self.service.repo.forget_endpoint(eid)
                    session = dict.get(self.table, eid)
                else:
                    # Out of the table first: a session stopped for a newer connection
                    # elsewhere does not mark its endpoint offline.
                    session = self.table.pop(eid, None)
                if session is not None:
                    await session.stop(None if error is None else FaasNotFoundError(str(error)))
        except Exception:
            logger.exception('control message %s for %s failed', kind, eid)


async def forget_function(service: Service, function_id: str, user_id: str) -> None:
    """A function was deleted here: the other replicas drop its cached ownership."""
    table = service.sessions
    if isinstance(table, SessionTable) and table.control is not None:
        await table.control.send('forget-function', '', function_id=function_id, user_id=user_id)
