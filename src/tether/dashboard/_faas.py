"""Reading a function service's REST API with the user's token.

The dashboard shows only what the service answers to that token: the service decides
what the user may see (their own endpoints and tasks, and endpoints shared with them).
"""

from __future__ import annotations

import re
from typing import Any

import httpx

from tether.exceptions import FaasAuthenticationError, FaasConnectionError, FaasError

__all__ = ['TASK_STATES', 'FaasReader', 'filter_tasks']

TASK_STATES = ('waiting-for-ep', 'running', 'success', 'failed', 'cancelled')
_ID = re.compile(r'^[0-9a-fA-F-]{8,64}$')


class FaasReader:
    """GETs of the service's ``/v1`` routes."""

    def __init__(self, url: str, token: str | None) -> None:
        self.url = url.rstrip('/')
        self.token = token
        self._client: httpx.AsyncClient | None = None

    async def get(self, path: str, **params: Any) -> Any:
        """The JSON of ``GET path``; ``None`` for a 404.

        Raises:
            FaasAuthenticationError: no token, or the service refused it.
            FaasConnectionError: the service is unreachable.
            FaasError: it answered with another error.
        """
        if not self.token:
            raise FaasAuthenticationError(
                'no token for the function service: give --faas-token-file, set '
                'TETHER_FAAS_TOKEN, or faas_token_file in the configuration'
            )
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=10.0)
        try:
            response = await self._client.get(
                self.url + path,
                params=params,
                headers={'Authorization': f'Bearer {self.token}'},
            )
        except httpx.HTTPError as e:
            raise FaasConnectionError(f'{self.url} is unreachable: {type(e).__name__}: {e}') from e
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            try:
                message = response.json().get('message', '')
            except ValueError:
                message = response.text[:200]
            cls = FaasAuthenticationError if response.status_code in (401, 403) else FaasError
            raise cls(f'{self.url}{path}: HTTP {response.status_code} {message}')
        return response.json()

    async def whoami(self) -> dict[str, Any]:
        return dict(await self.get('/v1/whoami') or {})

    async def endpoints(self) -> list[dict[str, Any]]:
        return list((await self.get('/v1/endpoints') or {}).get('endpoints', []))

    async def tasks(self, limit: int = 1000) -> list[dict[str, Any]]:
        """The user's latest ``limit`` tasks, newest first."""
        return list((await self.get('/v1/tasks', limit=limit) or {}).get('tasks', []))

    async def task(self, task_id: str) -> dict[str, Any] | None:
        """A task's record (``None``: not one of the user's)."""
        if not _ID.match(task_id):
            return None
        found = await self.get(f'/v1/tasks/{task_id}')
        return dict(found) if found else None

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


def filter_tasks(
    tasks: list[dict[str, Any]], state: str = '', function: str = '', endpoint: str = ''
) -> list[dict[str, Any]]:
    """Tasks in ``state`` (exact), of a function whose name or id contains
    ``function``, on the endpoint whose id is ``endpoint`` (empty: any)."""
    needle = function.lower()
    return [
        t
        for t in tasks
        if (not state or t.get('status') == state)
        and (
            not needle
            or needle in str(t.get('function_name') or '').lower()
            or needle in str(t.get('function_id') or '').lower()
        )
        and (not endpoint or t.get('endpoint_id') == endpoint)
    ]
