"""The PostgreSQL driver runs a statement again when PostgreSQL aborts it as a deadlock.

Two replicas (or two connections of one) updating the same tasks may lock their rows in
different orders; PostgreSQL then aborts one statement. Here a real deadlock is made on
purpose: the driver's statement locks row ``b`` then waits for ``a``, held by another
transaction, which then asks for ``b``. The other session waits 10 s before it checks for
deadlocks, so PostgreSQL aborts the driver's statement (checked after 1 s); run again, it
completes once the other transaction commits.
"""

from __future__ import annotations

import asyncio
import uuid

from tether.faas._drivers import PostgresDriver


def test_a_statement_aborted_as_a_deadlock_runs_again(pg_url: str) -> None:
    import asyncpg

    async def main() -> dict[str, int]:
        driver = await PostgresDriver.connect(pg_url)
        table = f'deadlock_{uuid.uuid4().hex[:8]}'
        other = await asyncpg.connect(pg_url)
        try:
            await driver.script(f'CREATE TABLE {table} (id text PRIMARY KEY, v int)')
            # Inserted b first: a scan of the little table meets b, then a.
            await driver.execute(f"INSERT INTO {table} VALUES ('b', 0)")
            await driver.execute(f"INSERT INTO {table} VALUES ('a', 0)")
            await other.execute("SET deadlock_timeout = '10s'")
            transaction = other.transaction()
            await transaction.start()
            await other.execute(f"UPDATE {table} SET v = v + 10 WHERE id = 'a'")
            statement = asyncio.ensure_future(
                driver.execute(
                    f'UPDATE {table} SET v = v + 1 WHERE id = ANY($1::text[])', ['a', 'b']
                )
            )
            # Wait until the driver's statement holds b and waits for a.
            async with driver._pool.acquire() as probe:
                while True:
                    waiting = await probe.fetch(
                        'SELECT pid FROM pg_stat_activity WHERE wait_event_type = $1'
                        ' AND query LIKE $2',
                        'Lock',
                        f'UPDATE {table}%',
                    )
                    if waiting:
                        break
                    await asyncio.sleep(0.005)  # polling a condition, not a fixed wait
            await other.execute(f"UPDATE {table} SET v = v + 10 WHERE id = 'b'")
            await transaction.commit()
            assert await asyncio.wait_for(statement, 60) == 2
            rows = await driver.fetch(f'SELECT id, v FROM {table}')
            return {r['id']: r['v'] for r in rows}
        finally:
            await other.close()
            await driver.script(f'DROP TABLE IF EXISTS {table}')
            await driver.close()

    assert asyncio.run(main()) == {'a': 11, 'b': 11}
