"""Sharing (the funcX paper's model): a function may be shared with named users or
groups, and an endpoint's owner may let named users or groups run tasks on it.

Groups are named and owned by the user who created them; only the owner changes their
members. A share names users and groups; it is replaced whole (taking a name out of it
revokes that name's access at once: submissions check it, uncached). Everything not
shared stays private: another user's function or endpoint looks missing (404).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from tether.exceptions import FaasBadRequestError, FaasNotFoundError
from tether.faas._drivers import Driver, first_row

__all__ = ['KINDS', 'Shares', 'check_share_body', 'not_found']

KINDS = ('endpoint', 'function')


class Shares:
    """The sharing queries (the tables of :mod:`tether.faas._schema`)."""

    def __init__(self, db: Driver) -> None:
        self.db = db

    async def _named(self, what: str, names: Sequence[str], column: str) -> dict[str, str]:
        """``{name: column}`` of the users or groups (``what``) named ``names``; a bad
        request naming the first that does not exist."""
        found: dict[str, str] = {}
        if names:
            rows = await self.db.fetch(
                f'SELECT name, {column} AS value FROM faas_{what}s'
                f' WHERE name {self.db.in_list(1)}',
                list(names),
            )
            found = {str(r['name']): str(r['value']) for r in rows}
        missing = sorted(set(names) - set(found))
        if missing:
            raise FaasBadRequestError(f'no {what} named {missing[0]!r}')
        return found

    async def set_group(self, owner: str, name: str, members: Sequence[str]) -> list[str]:
        """Create the group ``name`` owned by ``owner``, or replace its members (only its
        owner may); return the member names."""
        rows = await self.db.fetch('SELECT owner FROM faas_groups WHERE name = $1', name)
        if rows and str(rows[0]['owner']) != owner:
            raise FaasBadRequestError(f'the group {name!r} belongs to another user')
        ids = await self._named('user', sorted(set(members)), 'user_id')
        if not rows:
            await self.db.execute(
                'INSERT INTO faas_groups (name, owner, created) VALUES ($1, $2, $3)'
                ' ON CONFLICT (name) DO NOTHING',
                name,
                owner,
                time.time(),
            )
            again = await self.db.fetch('SELECT owner FROM faas_groups WHERE name = $1', name)
            if str(again[0]['owner']) != owner:  # created by another user meanwhile
                raise FaasBadRequestError(f'the group {name!r} belongs to another user')
        await self.db.execute('DELETE FROM faas_group_members WHERE name = $1', name)
        if ids:
            await self.db.executemany(
                'INSERT INTO faas_group_members (name, user_id) VALUES ($1, $2)',
                [(name, uid) for uid in ids.values()],
            )
        return sorted(ids)

    async def set_shares(
        self, kind: str, object_id: str, users: Sequence[str], groups: Sequence[str]
    ) -> None:
        """Replace who ``object_id`` (of ``kind``) is shared with (names checked)."""
        ids = await self._named('user', sorted(set(users)), 'user_id')
        wanted = sorted(await self._named('group', sorted(set(groups)), 'name'))
        principals = [f'user:{u}' for u in ids.values()] + [f'group:{g}' for g in wanted]
        await self.db.execute(
            'DELETE FROM faas_shares WHERE kind = $1 AND object_id = $2', kind, object_id
        )
        if principals:
            await self.db.executemany(
                'INSERT INTO faas_shares (kind, object_id, principal) VALUES ($1, $2, $3)',
                [(kind, object_id, p) for p in principals],
            )

    async def shares(self, kind: str, object_id: str) -> dict[str, list[str]]:
        """``{"users": [names], "groups": [names]}`` that ``object_id`` is shared with."""
        rows = await self.db.fetch(
            'SELECT principal FROM faas_shares WHERE kind = $1 AND object_id = $2',
            kind,
            object_id,
        )
        principals = [str(r['principal']) for r in rows]
        user_ids = [p[5:] for p in principals if p.startswith('user:')]
        names: list[str] = []
        if user_ids:
            found = await self.db.fetch(
                f'SELECT name FROM faas_users WHERE user_id {self.db.in_list(1)}', user_ids
            )
            names = sorted(str(r['name']) for r in found)
        groups = sorted(p[6:] for p in principals if p.startswith('group:'))
        return {'users': names, 'groups': groups}

    async def shared_with(self, kind: str, ids: Sequence[str], user_id: str) -> set[str]:
        """The ids among ``ids`` (of ``kind``) shared with ``user_id``, by name or by a
        group the user is a member of (never cached: a revocation holds at once)."""
        if not ids:
            return set()
        rows = await self.db.fetch(
            'SELECT DISTINCT object_id FROM faas_shares WHERE kind = $1'
            f' AND object_id {self.db.in_list(2)} AND (principal = $3 OR principal IN'
            " (SELECT 'group:' || name FROM faas_group_members WHERE user_id = $4))",
            kind,
            list(ids),
            f'user:{user_id}',
            user_id,
        )
        return {str(r['object_id']) for r in rows}

    async def shared_function(self, function_id: str, user_id: str) -> dict[str, Any] | None:
        """The function, if ``user_id`` owns it or it is shared with the user."""
        rows = await self.db.fetch(
            'SELECT function_id, name, serializer, body, user_id FROM faas_functions'
            ' WHERE function_id = $1',
            function_id,
        )
        if not rows:
            return None
        if rows[0]['user_id'] == user_id or await self.shared_with(
            'function', [function_id], user_id
        ):
            return rows[0]
        return None

    async def function_for_endpoint(
        self, function_id: str, endpoint_id: str, owner: str
    ) -> dict[str, Any] | None:
        """A function an endpoint may fetch: its owner's, or one a task sent to it runs
        (a function shared with the task's submitter)."""
        rows = await self.db.fetch(
            'SELECT function_id, name, serializer, body FROM faas_functions'
            ' WHERE function_id = $1 AND user_id = $2',
            function_id,
            owner,
        )
        if rows:
            return rows[0]
        sent = await self.db.fetch(
            'SELECT 1 AS x FROM faas_tasks WHERE endpoint_id = $1 AND function_id = $2 LIMIT 1',
            endpoint_id,
            function_id,
        )
        if not sent:
            return None
        return await first_row(
            self.db,
            'SELECT function_id, name, serializer, body FROM faas_functions'
            ' WHERE function_id = $1',
            function_id,
        )

    async def forget(self, kind: str, object_id: str) -> None:
        """The object was deleted: its shares go with it."""
        await self.db.execute(
            'DELETE FROM faas_shares WHERE kind = $1 AND object_id = $2', kind, object_id
        )


def check_share_body(data: Any) -> tuple[list[str], list[str]]:
    """``users`` and ``groups`` of a share request (lists of names)."""
    out = []
    for key in ('users', 'groups'):
        value = data.get(key, []) if isinstance(data, dict) else None
        if not isinstance(value, list) or not all(
            isinstance(v, str) and 0 < len(v) <= 200 for v in value
        ):
            raise FaasBadRequestError(f'"{key}" must be a list of names')
        if len(value) > 10_000:
            raise FaasBadRequestError(f'"{key}" may name at most 10000')
        out.append(value)
    return out[0], out[1]


def not_found(kind: str, object_id: str) -> FaasNotFoundError:
    return FaasNotFoundError(f'{kind} {object_id} not found')
