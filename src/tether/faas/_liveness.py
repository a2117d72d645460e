"""Which service replicas are alive: each writes the time into ``faas_replicas`` every
:data:`BEAT_S` seconds; one silent for :data:`STALE_S` is taken for dead (killed), and
the endpoints whose connection it held are shown offline until they reconnect."""

from __future__ import annotations

import time
from typing import Any

from tether.faas._drivers import Driver

__all__ = ['BEAT_S', 'STALE_S', 'beat', 'drop', 'mark_offline']

BEAT_S = 5.0
STALE_S = 20.0


async def beat(db: Driver, replica_id: str) -> None:
    await db.execute(
        'INSERT INTO faas_replicas (replica_id, seen) VALUES ($1, $2)'
        ' ON CONFLICT (replica_id) DO UPDATE SET seen = excluded.seen',
        replica_id,
        time.time(),
    )


async def drop(db: Driver, replica_id: str) -> None:
    await db.execute('DELETE FROM faas_replicas WHERE replica_id = $1', replica_id)


async def mark_offline(db: Driver, rows: list[dict[str, Any]]) -> None:
    """Endpoint rows held by a replica that is no longer alive: ``online`` False."""
    held = [r for r in rows if r['online'] and r['info'].get('replica')]
    if not held:
        return
    live = await db.fetch(
        'SELECT replica_id FROM faas_replicas WHERE seen > $1', time.time() - STALE_S
    )
    alive = {str(r['replica_id']) for r in live}
    for r in held:
        if r['info']['replica'] not in alive:
            r['online'] = False
