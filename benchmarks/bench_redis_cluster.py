"""RedisConnector on a Redis Cluster (3 masters + 3 replicas) against one Redis server.

Both run on this host, started by the script (private ``redis-server`` processes on free
loopback ports, no persistence), in the same invocation, alternating round by round:

* ``one by one``: ``put`` then ``get`` of each 100 KB object (one round trip each);
* ``batches of 64``: ``put_batch`` then ``get_batch`` (one request per server: on the
  cluster, one per shard, the shards in parallel);
* ``4 threads, batches of 64``: the same from four threads at once.

Objects/s = objects moved in (put + get) / time. Medians over the rounds.

    .venv/bin/python benchmarks/bench_redis_cluster.py [--quick]
"""

from __future__ import annotations

import os
import statistics
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from _common import parse_args, print_table, write_json
from tether.connectors.redis import RedisConnector
from tether.testing import RedisServer
from tether.testing.redis_cluster import RedisClusterServers


def _one_by_one(c: RedisConnector, values: list[bytes], keys: list[Any]) -> None:
    for v in values:
        key = c.put(v)
        assert c.get(key) is not None
        keys.append(key)


def _batches(c: RedisConnector, values: list[bytes], keys: list[Any], size: int = 64) -> None:
    for i in range(0, len(values), size):
        batch = c.put_batch(values[i : i + size])
        assert None not in c.get_batch(batch)
        keys.extend(batch)


def _threads(c: RedisConnector, values: list[bytes], keys: list[Any], n: int = 4) -> None:
    share = len(values) // n
    threads = [
        threading.Thread(target=_batches, args=(c, values[i * share : (i + 1) * share], keys))
        for i in range(n)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _rate(fn: Callable[..., None], c: RedisConnector, values: list[bytes]) -> float:
    keys: list[Any] = []
    t0 = time.perf_counter()
    fn(c, values, keys)
    rate = len(values) / (time.perf_counter() - t0)
    for key in keys:  # (not timed)
        c.evict(key)
    return rate


def main() -> None:
    args = parse_args(__doc__)
    n = 512 if args.quick else 2048
    rounds = 1 if args.quick else 5
    values = [os.urandom(100_000) for _ in range(n)]
    cases = {
        'one by one': _one_by_one,
        'batches of 64': _batches,
        '4 threads, batches of 64': _threads,
    }
    rates: dict[tuple[str, str], list[float]] = {}
    with RedisServer() as server, RedisClusterServers() as cluster:
        single = RedisConnector(server.host, server.port, prefix=f'b-{uuid.uuid4().hex[:6]}:')
        sharded = RedisConnector(
            cluster.host, cluster.port, cluster=True, prefix=f'b-{uuid.uuid4().hex[:6]}:'
        )
        try:
            for _ in range(rounds):
                for case, fn in cases.items():
                    for side, c in (('one server', single), ('cluster', sharded)):
                        rates.setdefault((case, side), []).append(_rate(fn, c, values))
        finally:
            single.close(clear=True)
            sharded.close(clear=True)
    med = {k: statistics.median(v) for k, v in rates.items()}
    rows = [
        [
            case,
            f'{med[(case, "one server")]:,.0f}',
            f'{med[(case, "cluster")]:,.0f}',
            f'{med[(case, "cluster")] / med[(case, "one server")]:.2f}',
        ]
        for case in cases
    ]
    md = print_table(
        f'100 KB objects/s through Redis (put + get), {n} objects, medians of {rounds} rounds',
        ['', 'one server', 'cluster 3+3', 'cluster / one'],
        rows,
    )
    write_json(
        'redis_cluster',
        {'objects': n, 'rounds': rounds, 'rates': {'|'.join(k): v for k, v in rates.items()}},
        md,
    )


if __name__ == '__main__':
    main()
