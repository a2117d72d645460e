"""The service's records: users, functions, endpoints, task groups and tasks.

One class, :class:`Repository`, over either SQL driver (PostgreSQL in production, SQLite
for ``tether faas dev``): the same SQL and the same code run on both. Tokens are stored
as SHA-256 digests only. Every read that takes an id from a request also takes the
authenticated user, so one user's ids never reach another user's rows.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
import uuid
from collections.abc import Sequence
from typing import Any, Literal

from tether._clock import SYSTEM_CLOCK, Clock
from tether.faas import _bulk
from tether.faas._drivers import Driver, first_row
from tether.faas._liveness import mark_offline
from tether.faas._schema import COLUMNS, SCHEMA
from tether.faas._shares import Shares

__all__ = ['FINISHED', 'Repository', 'function_id_of', 'hash_token', 'new_token']

FINISHED = ('success', 'failed', 'cancelled')


def new_token(kind: str) -> str:
    """A fresh random token (``tfu_...`` for users, ``tfe_...`` for endpoints)."""
    return f'{kind}_{secrets.token_urlsafe(32)}'


# Function ids are UUIDs of this namespace (RFC 4122 version 5) over the user, the
# serializer and the digest of the body: one function, one id per user.
_FUNCTIONS = uuid.UUID('5a0f6a55-33a4-4d0b-9a47-6b1d6a8f1f3e')


def function_id_of(user_id: str, serializer: str, body: bytes) -> str:
    """The id of a function registered by ``user_id`` (see :meth:`Repository.add_function`)."""
    digest = hashlib.sha256(body).hexdigest()
    return str(uuid.uuid5(_FUNCTIONS, f'{user_id}\n{serializer}\n{digest}'))


def hash_token(token: str) -> str:
    """The digest under which a token is stored and looked up."""
    return hashlib.sha256(token.encode()).hexdigest()


class Repository:
    """Every query the service makes."""

    def __init__(
        self, driver: Driver, token_ttl: float = 5.0, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self.db = driver
        self.shares = Shares(driver)
        self.clock = clock  # the caches' expiry
        # Small caches that keep a submission at one insert: positive ownership facts
        # (immutable), token lookups for ``token_ttl`` seconds (a rotated or revoked token
        # keeps working that long), endpoint info for one second.
        self.token_ttl = token_ttl
        self._tokens: dict[str, tuple[str, float]] = {}
        self._owned: set[tuple[str, str]] = set()
        self._endpoint_info: dict[str, tuple[str, dict[str, Any], float]] = {}
        # Bumped whenever an endpoint's info changes: a lookup under way then does not
        # cache what it read before the change.
        self._info_version = 0

    async def init(self) -> None:
        """Create the tables if they do not exist (and add the columns an older
        database lacks)."""
        await self.db.script(SCHEMA)
        for table, column, kind in COLUMNS:
            if self.db.dialect == 'postgresql':
                found = await self.db.fetch(
                    'SELECT column_name AS name FROM information_schema.columns'
                    ' WHERE table_schema = current_schema() AND table_name = $1',
                    table,
                )
                add = f'ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {column} {kind}'
            else:
                found = await self.db.fetch(f'SELECT name FROM pragma_table_info({table!r})')
                add = f'ALTER TABLE {table} ADD COLUMN {column} {kind}'
            if column not in {r['name'] for r in found}:
                await self.db.execute(add)

    async def close(self) -> None:
        await self.db.close()

    # Users and tokens ------------------------------------------------------------------

    async def create_user(self, name: str) -> tuple[str, str]:
        """Add a user; return ``(user_id, token)`` (the token is not stored)."""
        user_id, token = str(uuid.uuid4()), new_token('tfu')
        await self.db.execute(
            'INSERT INTO faas_users (user_id, name, token_hash, created) VALUES ($1, $2, $3, $4)',
            user_id,
            name,
            hash_token(token),
            time.time(),
        )
        return user_id, token

    async def rotate_user_token(self, name: str) -> str | None:
        token = new_token('tfu')
        n = await self.db.execute(
            'UPDATE faas_users SET token_hash = $1 WHERE name = $2', hash_token(token), name
        )
        return token if n else None

    async def user_by_token(self, token: str) -> str | None:
        digest = hash_token(token)
        now = self.clock.monotonic()
        hit = self._tokens.get(digest)
        if hit is not None and hit[1] > now:
            return hit[0]
        rows = await self.db.fetch('SELECT user_id FROM faas_users WHERE token_hash = $1', digest)
        if not rows:
            return None
        if len(self._tokens) > 10_000:
            self._tokens.clear()
        self._tokens[digest] = (str(rows[0]['user_id']), now + self.token_ttl)
        return str(rows[0]['user_id'])

    async def user_name(self, user_id: str) -> str:
        rows = await self.db.fetch('SELECT name FROM faas_users WHERE user_id = $1', user_id)
        return str(rows[0]['name']) if rows else ''

    async def endpoint_by_token(self, token: str) -> tuple[str, str] | None:
        rows = await self.db.fetch(
            'SELECT endpoint_id, user_id FROM faas_endpoints WHERE token_hash = $1',
            hash_token(token),
        )
        return (rows[0]['endpoint_id'], rows[0]['user_id']) if rows else None

    # Functions -------------------------------------------------------------------------

    async def add_function(self, user_id: str, name: str, serializer: str, body: bytes) -> str:
        """Register a function; return its id.

        The id is derived from the user, the serializer and the serialized body: the same
        function registered again by the same user (``Client.register_function`` or
        ``Executor.submit``, from any process) has the same id, so an endpoint's
        allowlist names it once. The first registration's name is kept."""
        function_id = function_id_of(user_id, serializer, body)
        await self.db.execute(
            'INSERT INTO faas_functions (function_id, user_id, name, serializer, body, created)'
            ' VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING',
            function_id,
            user_id,
            name,
            serializer,
            body,
            time.time(),
        )
        return function_id

    async def get_function(self, function_id: str, user_id: str) -> dict[str, Any] | None:
        return await first_row(
            self.db,
            'SELECT function_id, name, serializer, body FROM faas_functions'
            ' WHERE function_id = $1 AND user_id = $2',
            function_id,
            user_id,
        )

    async def delete_function(self, function_id: str, user_id: str) -> bool:
        """Delete the user's function; False if the user has no such function."""
        self._owned.discard((function_id, user_id))
        return await self._delete_owned('function', function_id, user_id)

    async def owned_functions(self, ids: Sequence[str], user_id: str) -> set[str]:
        """The functions among ``ids`` that ``user_id`` owns or that are shared with the
        user (ownership is cached; a share is looked up each time)."""
        known = {i for i in ids if (i, user_id) in self._owned}
        todo = [i for i in ids if i not in known]
        if not todo:
            return known
        rows = await self.db.fetch(
            f'SELECT function_id FROM faas_functions WHERE user_id = $1'
            f' AND function_id {self.db.in_list(2)}',
            user_id,
            todo,
        )
        found = {r['function_id'] for r in rows}
        self._owned.update((f, user_id) for f in found)
        rest = [i for i in todo if i not in found]
        shared = await self.shares.shared_with('function', rest, user_id) if rest else set()
        return known | found | shared

    async def endpoint_infos(self, user_id: str, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """``{endpoint_id: info}`` of the user's endpoints among ``ids``, and of those shared
        with the user (info at most one
        second old)."""
        now = self.clock.monotonic()
        out: dict[str, dict[str, Any]] = {}
        others: dict[str, dict[str, Any]] = {}  # other users' endpoints: shared?
        todo = []
        for eid in ids:
            hit = self._endpoint_info.get(eid)
            if hit is not None and hit[2] > now:
                if hit[0] == user_id:
                    out[eid] = hit[1]
                else:
                    others[eid] = hit[1]
            else:
                todo.append(eid)
        if todo:
            version = self._info_version
            rows = await self.db.fetch(
                'SELECT endpoint_id, user_id, info FROM faas_endpoints'
                f' WHERE endpoint_id {self.db.in_list(1)}',
                todo,
            )
            for r in rows:
                info = json.loads(r['info'])
                if version == self._info_version:
                    self._endpoint_info[r['endpoint_id']] = (r['user_id'], info, now + 1.0)
                if r['user_id'] == user_id:
                    out[r['endpoint_id']] = info
                else:
                    others[r['endpoint_id']] = info
        if others:
            for eid in await self.shares.shared_with('endpoint', list(others), user_id):
                out[eid] = others[eid]
        return out

    # Endpoints -------------------------------------------------------------------------

    async def add_endpoint(self, user_id: str, name: str) -> tuple[str, str]:
        endpoint_id, token = str(uuid.uuid4()), new_token('tfe')
        await self.db.execute(
            'INSERT INTO faas_endpoints (endpoint_id, user_id, name, token_hash, created)'
            ' VALUES ($1, $2, $3, $4, $5)',
            endpoint_id,
            user_id,
            name,
            hash_token(token),
            time.time(),
        )
        return endpoint_id, token

    async def endpoints(self, user_id: str, ids: Sequence[str] = ()) -> list[dict[str, Any]]:
        """The user's endpoints (all, or those of ``ids``), with queued-task counts."""
        sql = (
            'SELECT e.endpoint_id, e.name, e.online, e.last_seen, e.info,'
            ' (SELECT COUNT(*) FROM faas_tasks t WHERE t.endpoint_id = e.endpoint_id'
            " AND t.status = 'waiting-for-ep') AS queued,"
            ' (SELECT COUNT(*) FROM faas_tasks t WHERE t.endpoint_id = e.endpoint_id'
            " AND t.status = 'running') AS running"
            ' FROM faas_endpoints e WHERE e.user_id = $1'
        )
        args: list[Any] = [user_id]
        if ids:
            sql += f' AND e.endpoint_id {self.db.in_list(2)}'
            args.append(list(ids))
        rows = await self.db.fetch(sql + ' ORDER BY e.created', *args)
        for r in rows:
            r['info'] = json.loads(r['info'])
            r['online'] = bool(r['online'])
            r['queued'] = int(r['queued'])
            r['running'] = int(r['running'])
        await mark_offline(self.db, rows)  # held by a replica that died
        return rows

    async def set_endpoint_state(
        self, endpoint_id: str, online: bool, info: dict[str, Any]
    ) -> None:
        """Store an endpoint's state and what its HELLO said (its allowlist): submissions
        read it from here on (the cached info is dropped once it is stored)."""
        await self.db.execute(
            'UPDATE faas_endpoints SET online = $1, info = $2, last_seen = $3'
            ' WHERE endpoint_id = $4',
            int(online),
            json.dumps(info),
            time.time(),
            endpoint_id,
        )
        self._endpoint_info.pop(endpoint_id, None)
        self._info_version += 1

    def forget_function(self, function_id: str, user_id: str) -> None:
        """Drop the cached ownership of a function (deleted through another replica)."""
        self._owned.discard((function_id, user_id))

    def forget_endpoint(self, endpoint_id: str) -> None:
        """Drop what this process cached of an endpoint (another replica changed it)."""
        self._endpoint_info.pop(endpoint_id, None)
        self._info_version += 1

    async def delete_endpoint(self, endpoint_id: str, user_id: str) -> bool:
        self._endpoint_info.pop(endpoint_id, None)
        self._info_version += 1
        return await self._delete_owned('endpoint', endpoint_id, user_id)

    async def _delete_owned(
        self, kind: Literal['function', 'endpoint'], object_id: str, user_id: str
    ) -> bool:
        """Delete the user's ``kind`` (``'function'`` or ``'endpoint'``) and its shares;
        False if the user has no such object."""
        n = await self.db.execute(
            f'DELETE FROM faas_{kind}s WHERE {kind}_id = $1 AND user_id = $2', object_id, user_id
        )
        if n > 0:
            await self.shares.forget(kind, object_id)
        return n > 0

    # Task groups and tasks -------------------------------------------------------------

    async def add_task_group(self, user_id: str, task_group_id: str | None = None) -> str:
        task_group_id = task_group_id or str(uuid.uuid4())
        await self.db.execute(
            'INSERT INTO faas_task_groups (task_group_id, user_id, created) VALUES ($1, $2, $3)'
            ' ON CONFLICT DO NOTHING',
            task_group_id,
            user_id,
            time.time(),
        )
        return task_group_id

    async def owns_task_group(self, task_group_id: str, user_id: str) -> bool:
        if (task_group_id, user_id) in self._owned:
            return True
        rows = await self.db.fetch(
            'SELECT 1 AS x FROM faas_task_groups WHERE task_group_id = $1 AND user_id = $2',
            task_group_id,
            user_id,
        )
        if rows:
            self._owned.add((task_group_id, user_id))
        return bool(rows)

    async def insert_tasks(self, rows: Sequence[tuple[Any, ...]]) -> set[str]:
        """Insert ``(task_id, user_id, group, endpoint, function, header, payload,
        direct)`` rows in one statement (``direct``: 1 for a task handed to its
        endpoint's session here, not queued in the broker); ids already present are left
        as they are (submission is idempotent), and so are tasks of a function deleted
        meanwhile (through another replica: its row is locked until the tasks are in).
        Return the ids inserted now: only those may be queued."""
        if not rows:
            return set()
        now = time.time()
        if self.db.dialect == 'postgresql':
            columns = list(zip(*rows, strict=True))
            found = await self.db.fetch(
                'INSERT INTO faas_tasks (task_id, user_id, task_group_id, endpoint_id,'
                ' function_id, status, header, payload, direct, created)'
                " SELECT r.t, r.u, r.g, r.e, r.f, 'waiting-for-ep', r.h, r.p, r.d, $9"
                ' FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[],'
                ' $6::text[], $7::bytea[], $8::int[]) AS r(t, u, g, e, f, h, p, d)'
                ' WHERE r.f IN (SELECT'
                ' function_id FROM faas_functions WHERE function_id = ANY($5::text[])'
                ' FOR KEY SHARE) ON CONFLICT DO NOTHING RETURNING task_id',
                *(list(c) for c in columns),
                now,
            )
        else:
            found = await self.db.fetch_each(
                'INSERT INTO faas_tasks (task_id, user_id, task_group_id, endpoint_id,'
                ' function_id, status, header, payload, direct, created) SELECT $1, $2, $3,'
                " $4, $5, 'waiting-for-ep', $6, $7, $8, $9 WHERE EXISTS (SELECT 1 FROM"
                ' faas_functions WHERE function_id = $5) ON CONFLICT DO NOTHING'
                ' RETURNING task_id',
                [(*r, now) for r in rows],
            )
        return {str(r['task_id']) for r in found}

    async def forget_waiting(self, task_ids: Sequence[str]) -> None:
        """Delete tasks just inserted that could not be queued (still waiting)."""
        await self._on_tasks(
            "DELETE FROM faas_tasks WHERE status = 'waiting-for-ep' AND", task_ids
        )

    async def _on_tasks(self, sql: str, task_ids: Sequence[str]) -> None:
        """Run ``sql``, which ends in ``WHERE`` or ``AND``, on the rows of ``task_ids`` (one
        statement; none if there are no ids)."""
        if task_ids:
            await self.db.execute(f'{sql} task_id {self.db.in_list(1)}', list(task_ids))

    async def task_owners(self, task_ids: Sequence[str]) -> dict[str, str]:
        if not task_ids:
            return {}
        rows = await self.db.fetch(
            f'SELECT task_id, user_id FROM faas_tasks WHERE task_id {self.db.in_list(1)}',
            list(task_ids),
        )
        return {r['task_id']: r['user_id'] for r in rows}

    async def tasks(self, user_id: str, task_ids: Sequence[str]) -> list[dict[str, Any]]:
        """Status rows (without payloads) of the user's tasks among ``task_ids``."""
        if not task_ids:
            return []
        return await self.db.fetch(
            'SELECT task_id, task_group_id, endpoint_id, function_id, status, result_header,'
            ' acknowledged, attempts, created, finished FROM faas_tasks'
            f' WHERE user_id = $1 AND task_id {self.db.in_list(2)}',
            user_id,
            list(task_ids),
        )

    async def group_tasks(self, user_id: str, task_group_id: str) -> list[dict[str, Any]]:
        return await self.db.fetch(
            'SELECT task_id, status, acknowledged FROM faas_tasks'
            ' WHERE user_id = $1 AND task_group_id = $2 ORDER BY created',
            user_id,
            task_group_id,
        )

    async def recent_tasks(self, user_id: str, limit: int) -> list[dict[str, Any]]:
        return await self.db.fetch(
            'SELECT t.task_id, t.task_group_id, t.endpoint_id, t.function_id, t.status,'
            ' t.created, t.finished, f.name AS function_name FROM faas_tasks t'
            ' LEFT JOIN faas_functions f ON f.function_id = t.function_id'
            ' WHERE t.user_id = $1 ORDER BY t.created DESC LIMIT $2',
            user_id,
            limit,
        )

    async def result(self, user_id: str, task_id: str) -> dict[str, Any] | None:
        return await first_row(
            self.db,
            'SELECT status, result, result_header, acknowledged FROM faas_tasks'
            ' WHERE user_id = $1 AND task_id = $2',
            user_id,
            task_id,
        )

    async def waiting_ids(self, task_ids: Sequence[str]) -> set[str]:
        """Those of ``task_ids`` still waiting for their endpoint (neither handed to a
        worker nor finished)."""
        return await self._ids_in_status(task_ids, 'waiting-for-ep')

    async def _ids_in_status(
        self, task_ids: Sequence[str], status: Literal['waiting-for-ep', 'cancelled']
    ) -> set[str]:
        """Those of ``task_ids`` whose status is ``status`` (a constant of the schema,
        written into the statement as before, so its plan is the same)."""
        if not task_ids:
            return set()
        rows = await self.db.fetch(
            f"SELECT task_id FROM faas_tasks WHERE status = '{status}'"
            f' AND task_id {self.db.in_list(1)}',
            list(task_ids),
        )
        return {r['task_id'] for r in rows}

    async def store_results(
        self, endpoint_id: str, results: Sequence[tuple[str, str, str, bytes | memoryview]]
    ) -> dict[str, str]:
        """Record ``(task_id, status, result_header, result)`` of tasks of ``endpoint_id``
        (the first result of a task wins) in one statement; return the task group of each
        task whose result was stored now (:func:`tether.faas._bulk.store_results` stores
        those of many endpoints at once)."""
        rows = [(endpoint_id, *r) for r in results]
        return await _bulk.store_results(self.db, rows, time.time())

    async def result_targets(self, endpoint_id: str, task_ids: Sequence[str]) -> dict[str, str]:
        """Task group of each task of ``endpoint_id`` among ``task_ids`` whose result the
        client has not acknowledged yet."""
        if not task_ids:
            return {}
        rows = await self.db.fetch(
            'SELECT task_id, task_group_id FROM faas_tasks WHERE endpoint_id = $1'
            " AND acknowledged = 0 AND status <> 'cancelled'"
            f' AND task_id {self.db.in_list(2)}',
            endpoint_id,
            list(task_ids),
        )
        return {r['task_id']: r['task_group_id'] for r in rows}

    async def acknowledge(
        self, user_id: str, task_ids: Sequence[str], delivered: bool = False
    ) -> None:
        """The client has the results: forget them (status and timings stay).

        Through REST only finished tasks can be acknowledged; results taken from a result
        stream (``delivered``) were finished whether or not the database has stored them
        yet (a result is stored and published at once), and a result stored after it was
        acknowledged is not kept."""
        if not task_ids:
            return
        await _bulk.acknowledge(self.db, user_id, task_ids, () if delivered else FINISHED)

    async def acknowledged_ids(self, user_id: str, task_ids: Sequence[str]) -> set[str]:
        """Those of the user's ``task_ids`` whose result was acknowledged."""
        if not task_ids:
            return set()
        rows = await self.db.fetch(
            'SELECT task_id FROM faas_tasks WHERE user_id = $1 AND acknowledged = 1'
            f' AND task_id {self.db.in_list(2)}',
            user_id,
            list(task_ids),
        )
        return {r['task_id'] for r in rows}

    async def cancel(
        self, user_id: str, task_ids: Sequence[str], header: str
    ) -> list[dict[str, Any]]:
        """Mark the user's unfinished tasks among ``task_ids`` cancelled (with the result
        ``header``); return ``task_id``, ``endpoint_id`` and ``task_group_id`` of each."""
        if not task_ids:
            return []
        return await self.db.fetch(
            "UPDATE faas_tasks SET status = 'cancelled', result_header = $1, finished = $2,"
            " payload = NULL WHERE user_id = $3 AND status IN ('waiting-for-ep', 'running')"
            f' AND task_id {self.db.in_list(4)} RETURNING task_id, endpoint_id, task_group_id',
            header,
            time.time(),
            user_id,
            list(task_ids),
        )

    async def cancelled_ids(self, task_ids: Sequence[str]) -> set[str]:
        """Those of ``task_ids`` that were cancelled."""
        return await self._ids_in_status(task_ids, 'cancelled')

    async def cancelled_unhanded(self, endpoint_id: str, limit: int) -> list[str]:
        """The most recent tasks of ``endpoint_id`` cancelled before a worker had them
        (their broker message may still be queued)."""
        rows = await self.db.fetch(
            "SELECT task_id FROM faas_tasks WHERE endpoint_id = $1 AND status = 'cancelled'"
            ' AND attempts = 0 ORDER BY finished DESC LIMIT $2',
            endpoint_id,
            limit,
        )
        return [str(r['task_id']) for r in rows]

    async def unfinished_ids(self, endpoint_id: str) -> list[str]:
        """Ids of the tasks of ``endpoint_id`` that are queued or running."""
        rows = await self.db.fetch(
            'SELECT task_id FROM faas_tasks WHERE endpoint_id = $1'
            " AND status IN ('waiting-for-ep', 'running')",
            endpoint_id,
        )
        return [str(r['task_id']) for r in rows]

    async def lost_tasks(self, endpoint_id: str, held: set[str]) -> list[dict[str, Any]]:
        """Tasks handed to workers of ``endpoint_id`` that the endpoint no longer holds."""
        rows = await self.db.fetch(
            'SELECT task_id, user_id, task_group_id, header, payload, attempts FROM faas_tasks'
            " WHERE endpoint_id = $1 AND status = 'running'",
            endpoint_id,
        )
        return [r for r in rows if r['task_id'] not in held]

    async def lost_direct(self, endpoint_id: str, held: set[str]) -> list[dict[str, Any]]:
        """Tasks handed to a session of ``endpoint_id`` directly (not queued in the
        broker) and still waiting for it, that the endpoint does not hold: the replica
        that held them is gone, or its session ended. The caller queues them, then
        clears their mark (:meth:`undirect`)."""
        rows = await self.db.fetch(
            'SELECT task_id, header, payload FROM faas_tasks WHERE endpoint_id = $1'
            " AND status = 'waiting-for-ep' AND direct = 1",
            endpoint_id,
        )
        return [r for r in rows if r['task_id'] not in held]

    async def undirect(self, task_ids: Sequence[str]) -> None:
        """Tasks handed directly, now queued in the broker (no longer recovered from
        here when their endpoint reconnects)."""
        await self._on_tasks('UPDATE faas_tasks SET direct = 0 WHERE', task_ids)

    async def requeue(self, task_ids: Sequence[str]) -> None:
        await self._on_tasks(
            "UPDATE faas_tasks SET status = 'waiting-for-ep' WHERE status = 'running' AND",
            task_ids,
        )

    async def delete_user_data(self, user_id: str) -> None:
        for table in ('faas_tasks', 'faas_task_groups', 'faas_functions', 'faas_endpoints'):
            await self.db.execute(f'DELETE FROM {table} WHERE user_id = $1', user_id)
        await self.db.execute('DELETE FROM faas_users WHERE user_id = $1', user_id)

    async def all_queue_owners(self) -> tuple[list[str], list[str]]:
        """Every endpoint id and task group id (to delete their queues)."""
        eps = await self.db.fetch('SELECT endpoint_id FROM faas_endpoints')
        tgs = await self.db.fetch('SELECT task_group_id FROM faas_task_groups')
        return [r['endpoint_id'] for r in eps], [r['task_group_id'] for r in tgs]
