"""Reply matching on the Redis connector's raw path: this tree against a baseline revision.

Until commit 1934fac each raw request started with an ``ECHO`` of a fresh nonce (to know
the replies answer it); now replies are matched by count (a connection is pooled only once
as many whole replies as commands were read, nothing left over). This script measures
the per-operation cost of both, sequential ``get``/``put`` of 1 KB, 10 KB and 100 KB
through ``RedisConnector``, with redis-py's ``get``/``set`` in the same process as the
reference (ProxyStore's Redis connector is redis-py). The baseline's ``src`` is taken
with ``git archive``; the two sides run in alternating processes against one private
``redis-server``; medians over the rounds.

    .venv/bin/python benchmarks/bench_redis_match.py [--quick] [--baseline e6ba04b] [--rounds 5]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap

from _common import print_table, write_json

SIZES = (1000, 10_000, 100_000)

_SIDE = textwrap.dedent(
    """
    import json, statistics, sys, time, uuid
    import redis
    from tether.connectors.redis import RedisConnector
    port, n = int(sys.argv[1]), int(sys.argv[2])
    def per_op(fn, n):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        return (time.perf_counter() - t0) / n
    c = RedisConnector('127.0.0.1', port, prefix=f'match-{uuid.uuid4().hex}:')
    r = redis.Redis('127.0.0.1', port)
    out = {}
    for size in (1000, 10_000, 100_000):
        v = b'x' * size
        key = c.put(v)
        r.set('k', v)
        for _ in range(3):
            out.setdefault(f'{size} tether get', []).append(per_op(lambda: c.get(key), n))
            out.setdefault(f'{size} redis-py get', []).append(per_op(lambda: r.get('k'), n))
            out.setdefault(f'{size} tether put', []).append(per_op(lambda: c.put(v), n // 2))
            ref = per_op(lambda: r.set('k', v), n // 2)
            out.setdefault(f'{size} redis-py put', []).append(ref)
    c.close(clear=True)
    print(json.dumps({k: statistics.median(v) for k, v in out.items()}))
    """
)


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--quick', action='store_true')
    parser.add_argument('--baseline', default='e6ba04b')
    parser.add_argument('--rounds', type=int, default=5)
    args = parser.parse_args()
    rounds, n = (1, 300) if args.quick else (args.rounds, 1000)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    from tether.testing import RedisServer

    with tempfile.TemporaryDirectory() as tmp, RedisServer() as server:
        archive = subprocess.run(
            ['git', '-C', root, 'archive', args.baseline, 'src'], check=True, capture_output=True
        ).stdout
        subprocess.run(['tar', '-x', '-C', tmp], input=archive, check=True)
        script = os.path.join(tmp, 'side.py')
        with open(script, 'w') as f:
            f.write(_SIDE)
        runs: dict[str, list[dict[str, float]]] = {'baseline': [], 'this tree': []}
        for _ in range(rounds):
            for side, side_runs in runs.items():
                env = dict(os.environ)
                if side == 'baseline':
                    env['PYTHONPATH'] = os.path.join(tmp, 'src')
                out = subprocess.run(
                    [sys.executable, script, str(server.port), str(n)],
                    env=env,
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
                side_runs.append(json.loads(out))
    rows = []
    data = {}
    for size in SIZES:
        for op in ('get', 'put'):
            base = statistics.median(r[f'{size} tether {op}'] for r in runs['baseline'])
            new = statistics.median(r[f'{size} tether {op}'] for r in runs['this tree'])
            ref = statistics.median(
                r[f'{size} redis-py {op}'] for side in runs.values() for r in side
            )
            label = f'{size // 1000} KB {op}'
            data[label] = {'baseline_s': base, 'this_tree_s': new, 'redis_py_s': ref}
            rows.append(
                [
                    label,
                    f'{base * 1e6:.1f} µs',
                    f'{new * 1e6:.1f} µs',
                    f'{new / base:.2f}',
                    f'{ref * 1e6:.1f} µs',
                    f'{ref / new:.2f}x',
                ]
            )
    md = print_table(
        f'Raw-path reply matching: ECHO ({args.baseline}) vs count, {rounds} alternated rounds',
        [
            '',
            'ECHO (baseline)',
            'count (this tree)',
            'this / baseline',
            'redis-py',
            'redis-py / this',
        ],
        rows,
    )
    write_json('redis_match', {'rounds': rounds, 'ops': n, 'rows': data}, md)


if __name__ == '__main__':
    main()
