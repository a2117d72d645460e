"""Two SQL drivers behind one small interface: PostgreSQL (asyncpg) and SQLite.

The repository (:mod:`tether.faas._db`) writes its SQL once, with PostgreSQL's ``$1``
placeholders; the SQLite driver rewrites them to SQLite's ``?1``. Rows come back as
dictionaries in both. A list of ids is one parameter in both (:meth:`Driver.in_list`:
``= ANY($n)`` over a text array in PostgreSQL, ``IN (SELECT value FROM json_each(?n))``
over a JSON array in SQLite), so a statement about a whole batch is one statement, not
one per id. The few bulk statements whose rows differ (inserting tasks, storing results)
have one form per :attr:`Driver.dialect`.

Two statements about the same tasks from two connections (a replica handing tasks to a
worker while another stores their results) may lock the rows in different orders, and
PostgreSQL then aborts one of them as a deadlock. Each driver call is one atomic unit (a
statement, or one transaction), so the PostgreSQL driver runs an aborted unit again, a few
times, after a short random pause.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import random
import re
import sqlite3
from collections.abc import Sequence
from typing import Any, Protocol

from tether.exceptions import ConfigError

__all__ = ['Driver', 'PostgresDriver', 'SqliteDriver', 'first_row', 'open_driver']

_PLACEHOLDER = re.compile(r'\$(\d+)')
_RETRIED_STATES = frozenset({'40P01', '40001'})  # deadlock detected, serialization failure
_ATTEMPTS = 5


async def _again(run: Any) -> Any:
    """Await ``run()``; run it again if PostgreSQL aborted it as a deadlock."""
    for attempt in range(_ATTEMPTS):
        try:
            return await run()
        except Exception as e:
            if getattr(e, 'sqlstate', None) not in _RETRIED_STATES or attempt == _ATTEMPTS - 1:
                raise
            await asyncio.sleep(random.uniform(0.005, 0.02) * (attempt + 1))
    raise AssertionError('unreachable')  # pragma: no cover


class Driver(Protocol):
    """What the repository needs from a database."""

    dialect: str
    """``'postgresql'`` or ``'sqlite'``."""

    def in_list(self, n: int) -> str:
        """SQL testing a column against the id list passed as parameter ``$n`` (write
        ``task_id {db.in_list(2)}``; pass the ids as a list)."""

    async def execute(self, sql: str, *args: Any) -> int:
        """Run one statement; return the number of rows it changed."""

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run one statement for each row of arguments."""

    async def fetch(self, sql: str, *args: Any) -> list[dict[str, Any]]:
        """Run a query; return its rows."""

    async def fetch_each(self, sql: str, rows: Sequence[Sequence[Any]]) -> list[dict[str, Any]]:
        """Run a statement with ``RETURNING`` once per row of arguments, in one
        transaction; return every row it returned (SQLite's bulk form)."""

    async def script(self, sql: str) -> None:
        """Run several ``;``-separated statements (the schema)."""

    async def close(self) -> None:
        """Release the connections."""


async def first_row(db: Driver, sql: str, *args: Any) -> dict[str, Any] | None:
    """The first row of a query, or None if it returns none."""
    rows = await db.fetch(sql, *args)
    return rows[0] if rows else None


class PostgresDriver:
    """asyncpg connection pool (statements are prepared once per connection and cached
    by asyncpg)."""

    dialect = 'postgresql'

    def __init__(self, pool: Any) -> None:
        self._pool = pool

    @staticmethod
    def in_list(n: int) -> str:
        return f'= ANY(${n}::text[])'

    @classmethod
    async def connect(cls, url: str) -> PostgresDriver:
        import asyncpg

        # No reset query when a connection returns to the pool (asyncpg's default sends
        # one, a second round trip per statement): the repository changes no session
        # state (no SET, LISTEN, advisory lock or cursor), and a transaction left open by
        # an error is still rolled back by asyncpg before the connection is reused.
        pool = await asyncpg.create_pool(url, min_size=1, max_size=8, reset=_no_reset)
        return cls(pool)

    async def execute(self, sql: str, *args: Any) -> int:
        status: str = await _again(lambda: self._pool.execute(sql, *args))
        tail = status.rsplit(' ', 1)[-1]
        return int(tail) if tail.isdigit() else 0

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            await _again(lambda: self._pool.executemany(sql, rows))

    async def fetch(self, sql: str, *args: Any) -> list[dict[str, Any]]:
        return [dict(r) for r in await _again(lambda: self._pool.fetch(sql, *args))]

    async def fetch_each(self, sql: str, rows: Sequence[Sequence[Any]]) -> list[dict[str, Any]]:
        async def once() -> list[dict[str, Any]]:
            out: list[dict[str, Any]] = []
            async with self._pool.acquire() as conn, conn.transaction():
                for r in rows:
                    out.extend(dict(x) for x in await conn.fetch(sql, *r))
            return out

        result: list[dict[str, Any]] = await _again(once)
        return result

    async def script(self, sql: str) -> None:
        async with self._pool.acquire() as conn:
            await conn.execute(sql)

    async def close(self) -> None:
        await self._pool.close()


async def _no_reset(connection: Any) -> None:
    """Nothing to reset (see :meth:`PostgresDriver.connect`)."""


class SqliteDriver:
    """One SQLite connection used from one worker thread (WAL, synchronous=NORMAL)."""

    dialect = 'sqlite'

    @staticmethod
    def in_list(n: int) -> str:
        return f'IN (SELECT value FROM json_each(${n}))'

    def __init__(self, path: str) -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix='faas-sqlite')
        self._conn = self._pool.submit(self._open, path).result()

    @staticmethod
    def _open(path: str) -> sqlite3.Connection:
        conn = sqlite3.connect(path or ':memory:', isolation_level=None)
        conn.row_factory = sqlite3.Row
        conn.execute('PRAGMA journal_mode=WAL')
        conn.execute('PRAGMA synchronous=NORMAL')
        return conn

    async def _run(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    @staticmethod
    def _sql(sql: str) -> str:
        return _PLACEHOLDER.sub(r'?\1', sql)

    @staticmethod
    def _arg(value: Any) -> Any:
        if isinstance(value, list | tuple):
            return json.dumps(list(value))  # an id list (see in_list)
        return bytes(value) if isinstance(value, memoryview | bytearray) else value

    async def execute(self, sql: str, *args: Any) -> int:
        def run() -> int:
            return self._conn.execute(self._sql(sql), [self._arg(a) for a in args]).rowcount

        return int(await self._run(run))

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        def run() -> None:
            conn = self._conn
            conn.execute('BEGIN')
            try:
                conn.executemany(self._sql(sql), [[self._arg(a) for a in r] for r in rows])
            except BaseException:
                conn.execute('ROLLBACK')
                raise
            conn.execute('COMMIT')

        if rows:
            await self._run(run)

    async def fetch(self, sql: str, *args: Any) -> list[dict[str, Any]]:
        def run() -> list[dict[str, Any]]:
            cur = self._conn.execute(self._sql(sql), [self._arg(a) for a in args])
            return [dict(r) for r in cur.fetchall()]

        result: list[dict[str, Any]] = await self._run(run)
        return result

    async def fetch_each(self, sql: str, rows: Sequence[Sequence[Any]]) -> list[dict[str, Any]]:
        def run() -> list[dict[str, Any]]:
            conn = self._conn
            out: list[dict[str, Any]] = []
            conn.execute('BEGIN')
            try:
                stmt = self._sql(sql)
                for r in rows:
                    cur = conn.execute(stmt, [self._arg(a) for a in r])
                    out.extend(dict(x) for x in cur.fetchall())
            except BaseException:
                conn.execute('ROLLBACK')
                raise
            conn.execute('COMMIT')
            return out

        if not rows:
            return []
        result: list[dict[str, Any]] = await self._run(run)
        return result

    async def script(self, sql: str) -> None:
        await self._run(self._conn.executescript, sql)

    async def close(self) -> None:
        await self._run(self._conn.close)
        self._pool.shutdown(wait=False)


async def open_driver(url: str) -> Driver:
    """Open the database a service configuration names."""
    if url.startswith(('postgresql://', 'postgres://')):
        return await PostgresDriver.connect(url)
    if url.startswith('sqlite://'):
        path = url[len('sqlite://') :].removeprefix('/')
        return SqliteDriver(path)
    raise ConfigError(f'unsupported database URL {url!r}: use postgresql:// or sqlite://')
