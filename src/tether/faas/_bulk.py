"""Work of many endpoint sessions merged into one statement or one publish per turn.

A replica serves many endpoints at once. When each holds few tasks (1,000 endpoints, a
few tasks each), batching per session collapses to a statement and a broker publish for
every handful of tasks. :class:`Coalescer` merges what the sessions of a replica ask for
in the same turn of the event loop (and whatever arrives while one flush is under way)
into one call: one ``UPDATE`` of the tasks handed to workers of every endpoint, one
``UPDATE`` storing the results of every endpoint, one publish per task group of the
results of every endpoint. Nothing waits on a timer: a flush starts as soon as the loop
turns, and the next one collects what came meanwhile.

The statements here name the endpoint of every row (a row is changed only for the
endpoint the task was sent to). On PostgreSQL they lock their rows in task id order
first (``ORDER BY task_id FOR UPDATE``), as the result acknowledgements do, so that two
statements about the same tasks (a replica storing results while a client acknowledges
them) never deadlock. A merged flush that fails anyway is run again per caller, so
that one caller's failure is not every caller's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, TypeVar

from tether.faas._drivers import Driver

__all__ = ['Coalescer', 'Result', 'acknowledge', 'mark_running', 'store_results']

T = TypeVar('T')
R = TypeVar('R')


class Coalescer(Generic[T, R]):
    """Calls of ``flush(items)`` from many callers merged: :meth:`run` adds its items
    and returns the result of the flush that took them (every caller of one flush gets
    the same result). At most one flush runs at a time. A merged flush that fails is
    run again for each caller's items alone: a caller gets its own exception only."""

    def __init__(self, flush: Callable[[list[T]], Awaitable[R]]) -> None:
        self._flush = flush
        self._calls: list[tuple[Sequence[T], asyncio.Future[R]]] = []
        self._task: asyncio.Task[None] | None = None

    async def run(self, items: Sequence[T]) -> R:
        waiter: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._calls.append((items, waiter))
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._drain())
        return await waiter

    async def _drain(self) -> None:
        while self._calls:
            calls, self._calls = self._calls, []
            try:
                result = await self._flush([i for items, _ in calls for i in items])
            except Exception as e:
                if len(calls) == 1:
                    _settle(calls[0][1], error=e)
                    continue
                for items, w in calls:  # alone: only the caller at fault fails
                    try:
                        _settle(w, await self._flush(list(items)))
                    except Exception as e_alone:
                        _settle(w, error=e_alone)
            else:
                for _, w in calls:
                    _settle(w, result)


def _settle(waiter: asyncio.Future[Any], result: Any = None, error: Any = None) -> None:
    if waiter.done():
        return
    if error is not None:
        waiter.set_exception(error)
    else:
        waiter.set_result(result)


async def mark_running(db: Driver, pairs: Sequence[tuple[str, str]]) -> None:
    """``(endpoint_id, task_id)`` pairs: tasks handed to a worker of that endpoint."""
    if not pairs:
        return
    rows = sorted(set(pairs), key=lambda p: p[1])
    if db.dialect == 'postgresql':
        await db.execute(
            'WITH l AS (SELECT t.task_id FROM faas_tasks AS t'
            ' JOIN unnest($1::text[], $2::text[]) AS r(i, e)'
            " ON t.task_id = r.i AND t.endpoint_id = r.e WHERE t.status = 'waiting-for-ep'"
            ' ORDER BY t.task_id FOR UPDATE OF t)'
            " UPDATE faas_tasks AS t SET status = 'running', attempts = t.attempts + 1"
            " FROM l WHERE t.task_id = l.task_id AND t.status = 'waiting-for-ep'",
            [t for _, t in rows],
            [e for e, _ in rows],
        )
        return
    await db.executemany(
        "UPDATE faas_tasks SET status = 'running', attempts = attempts + 1"
        " WHERE task_id = $1 AND endpoint_id = $2 AND status = 'waiting-for-ep'",
        [(t, e) for e, t in rows],
    )


Result = tuple[str, str, str, str, Any]
"""``(endpoint_id, task_id, status, result_header, result)``."""


async def store_results(db: Driver, results: Sequence[Result], now: float) -> dict[str, str]:
    """Record results of tasks sent to their endpoints (the first result of a task wins)
    in one statement; return the task group of each task whose result was stored now."""
    if not results:
        return {}
    first: dict[str, Result] = {}
    for r in results:
        first.setdefault(r[1], r)  # a task's first result in the batch
    rows = sorted(first.values(), key=lambda r: r[1])
    if db.dialect == 'postgresql':
        eids, ids, statuses, headers, payloads = (list(c) for c in zip(*rows, strict=True))
        found = await db.fetch(
            # The rows locked (in task id order) carry their new values, so that the
            # update joins them to the table by primary key alone: joined to the batch
            # again, a plan may test every pair (a minute for 20,000 results). Tasks not
            # finished, in words no index matches: with a large batch a plan may
            # otherwise read every unfinished task through the (endpoint, status) index.
            'WITH r AS MATERIALIZED (SELECT * FROM unnest($1::text[], $2::text[],'
            ' $3::text[], $4::text[], $5::bytea[]) AS r(i, e, s, h, p)),'
            ' l AS (SELECT t.task_id, r.s, r.h, r.p FROM faas_tasks AS t'
            ' JOIN r ON t.task_id = r.i AND t.endpoint_id = r.e WHERE t.status NOT IN'
            " ('success', 'failed', 'cancelled') ORDER BY t.task_id FOR UPDATE OF t)"
            ' UPDATE faas_tasks AS t SET status = l.s, result_header = l.h,'
            ' result = CASE WHEN t.acknowledged = 1 THEN NULL ELSE l.p END,'
            ' finished = $6, payload = NULL FROM l WHERE t.task_id = l.task_id'
            " AND t.status NOT IN ('success', 'failed', 'cancelled')"
            ' RETURNING t.task_id, t.task_group_id',
            ids,
            eids,
            statuses,
            headers,
            payloads,
            now,
        )
    else:
        found = await db.fetch_each(
            'UPDATE faas_tasks SET status = $1, result_header = $2,'
            ' result = CASE WHEN acknowledged = 1 THEN NULL ELSE $3 END,'
            ' finished = $4, payload = NULL WHERE task_id = $5 AND endpoint_id = $6'
            " AND status IN ('waiting-for-ep', 'running') RETURNING task_id, task_group_id",
            [(s, h, r, now, t, e) for e, t, s, h, r in rows],
        )
    return {r['task_id']: r['task_group_id'] for r in found}


async def acknowledge(
    db: Driver, user_id: str, task_ids: Sequence[str], statuses: Sequence[str] = ()
) -> None:
    """Results of the user's ``task_ids`` taken by the client: marked acknowledged and
    dropped (only tasks in one of ``statuses``, if any are given).

    On PostgreSQL the rows are found by joining the ids to the primary key, and the user
    and status are checked on the rows found. Written as ``user_id = $1 AND task_id =
    ANY($2)``, a plan may scan the ``(user_id, created)`` index whole (every task of the
    user at each statement), or test every row it reads against the whole id list (a
    list of 20,000 ids against 100,000 rows: a minute); either grew with the tasks
    stored, and took most of the database's CPU with 100,000 tasks in flight."""
    if not task_ids:
        return
    ids = sorted(set(task_ids))
    marks = ', '.join(f'${i}' for i in range(3, 3 + len(statuses)))
    if db.dialect == 'postgresql':
        await db.execute(
            'WITH c AS MATERIALIZED (SELECT t.task_id, t.user_id, t.status'
            ' FROM unnest($2::text[]) AS r(i) JOIN faas_tasks AS t ON t.task_id = r.i),'
            ' l AS (SELECT t.task_id FROM c JOIN faas_tasks AS t ON t.task_id = c.task_id'
            f' WHERE c.user_id = $1{f" AND c.status IN ({marks})" if statuses else ""}'
            ' ORDER BY t.task_id FOR UPDATE OF t) UPDATE faas_tasks AS t'
            ' SET acknowledged = 1, result = NULL FROM l WHERE t.task_id = l.task_id',
            user_id,
            ids,
            *statuses,
        )
        return
    await db.execute(
        'UPDATE faas_tasks SET acknowledged = 1, result = NULL WHERE user_id = $1'
        f' AND task_id {db.in_list(2)}{f" AND status IN ({marks})" if statuses else ""}',
        user_id,
        ids,
        *statuses,
    )
