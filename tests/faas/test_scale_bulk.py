"""The merging of endpoint sessions' work (tether.faas._bulk.Coalescer): calls made in
the same turn become one flush, and a merged flush that fails fails only the caller
whose items fail alone; and the plans of the merged statements on PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tether.exceptions import ProtocolError
from tether.faas import _bulk
from tether.faas._bulk import Coalescer


def test_calls_in_one_turn_are_one_flush_and_a_failure_is_only_its_callers() -> None:
    flushed: list[list[str]] = []

    async def flush(items: list[str]) -> int:
        flushed.append(items)
        if 'bad' in items:
            raise ProtocolError('bad item')
        return len(items)

    async def scenario() -> None:
        merged = Coalescer(flush)
        results = await asyncio.gather(merged.run(['a']), merged.run(['b', 'c']))
        assert results == [3, 3]  # one flush of all three
        assert flushed == [['a', 'b', 'c']]
        flushed.clear()
        outcome = await asyncio.gather(
            merged.run(['d']), merged.run(['bad']), merged.run(['e']), return_exceptions=True
        )
        assert outcome[0] == 1
        assert outcome[2] == 1
        assert isinstance(outcome[1], ProtocolError)
        assert flushed == [['d', 'bad', 'e'], ['d'], ['bad'], ['e']]
        with pytest.raises(ProtocolError):  # alone: its own error at once
            await merged.run(['bad'])

    asyncio.run(scenario())


class _Recording:
    """A driver that records the statements it is given and runs none."""

    dialect = 'postgresql'

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    @staticmethod
    def in_list(n: int) -> str:
        return f'= ANY(${n}::text[])'

    async def execute(self, sql: str, *args: Any) -> int:
        self.calls.append((sql, args))
        return 0

    async def fetch(self, sql: str, *args: Any) -> list[dict[str, Any]]:
        self.calls.append((sql, args))
        return []


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get('Plans', []):
        yield from _nodes(child)


@pytest.mark.parametrize('mode', ['force_custom_plan', 'force_generic_plan'])
def test_results_stored_and_acknowledged_by_primary_key_in_every_plan(
    pg_url: str, mode: str
) -> None:
    """The statements that store results and acknowledge them (every task's) find their
    rows by primary key whatever plan PostgreSQL picks (custom or generic, on a table
    never analyzed): no scan of the user's index, which reads every task of the user
    (at 100,000 tasks in flight the acknowledgement took most of the database's CPU),
    nor of the (endpoint, status) index, which reads every waiting task; no nested loop
    that filters every pair of rows (quadratic in the batch); no scan that tests each
    row against the whole id list. A batch of 50 among 5,000 tasks."""
    import asyncpg

    from tether.faas._db import Repository
    from tether.faas._drivers import PostgresDriver

    async def scenario() -> None:
        repo = Repository(await PostgresDriver.connect(pg_url))
        try:
            await repo.init()
            user, _ = await repo.create_user(f'u-{uuid.uuid4().hex[:10]}')
            fid = await repo.add_function(user, 'f', 'tether', uuid.uuid4().bytes)
            group = await repo.add_task_group(user)
            rows = [
                (str(uuid.uuid4()), user, group, f'e{i % 100}', fid, '{}', b'', 0)
                for i in range(5000)
            ]
            await repo.insert_tasks(rows)
        finally:
            await repo.close()
        some = rows[::100]  # 50 tasks
        recording = _Recording()
        results = [(r[3], r[0], 'success', '{}', b'') for r in some]
        await _bulk.store_results(recording, results, 1.0)  # type: ignore[arg-type]
        await _bulk.acknowledge(recording, user, [r[0] for r in some])  # type: ignore[arg-type]
        await _bulk.acknowledge(recording, user, [r[0] for r in some], ('success',))  # type: ignore[arg-type]
        assert len(recording.calls) == 3
        conn = await asyncpg.connect(pg_url)
        try:
            await conn.execute(f'SET plan_cache_mode = {mode}')
            for sql, args in recording.calls:
                found = await conn.fetchval(f'EXPLAIN (FORMAT JSON) {sql}', *args)
                plan = json.loads(found)[0]['Plan']
                for node in _nodes(plan):
                    where = f'{mode}: {node["Node Type"]} in the plan of {sql[:60]}...'
                    index = node.get('Index Name')
                    assert index not in (
                        'faas_tasks_user_created',
                        'faas_tasks_endpoint_status',
                    ), where
                    if node.get('Relation Name') == 'faas_tasks':
                        assert 'task_id = ANY' not in node.get('Filter', ''), where
                    assert not (node['Node Type'] == 'Nested Loop' and 'Join Filter' in node), (
                        where
                    )
        finally:
            await conn.close()

    asyncio.run(scenario())
