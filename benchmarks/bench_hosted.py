"""The hosted exchange beside the Redis and hybrid exchanges (issue 28, item 2).

* round trip of a 1 KB action (argument and result of 1 KB each), median of N calls;
* actions per second: one client driving N Echo agents with no-op actions.

The hosted exchange runs as its own process (``tether agents exchange serve`` on a free
loopback port, plain ``ws://``); agents run in their own processes (ProcessLauncher) and
read their token from ``$TETHER_EXCHANGE_TOKEN``. Redis is the shared server at
127.0.0.1:6379 (unique prefixes, cleaned afterwards). The exchanges are measured in
alternating rounds (redis, hybrid, hosted, redis, ...) so that the load of the shared
machine falls on all of them; the table gives each one's median over the rounds.

Usage: python benchmarks/bench_hosted.py [--quick] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _agents_common import Echo  # noqa: E402
from _common import fmt_time, print_table, write_json  # noqa: E402
from bench_agents import _cleanup, _median_calls, _tether_exchange  # noqa: E402

KINDS = ['redis', 'hybrid', 'hosted']


@contextmanager
def hosted_server() -> Iterator[str]:
    """A served hosted exchange; sets $TETHER_EXCHANGE_TOKEN for this process and agents."""
    from tether.agents.exchange.hosted import add_user
    from tether.testing import ServerProcess, free_port

    with tempfile.TemporaryDirectory() as tmp:
        users = os.path.join(tmp, 'users.toml')
        os.environ['TETHER_EXCHANGE_TOKEN'] = add_user(users, 'bench')
        port = free_port()
        args = [sys.executable, '-c', 'from tether.cli import main; main()']
        args += ['agents', 'exchange', 'serve', '--users', users, '--port', str(port)]
        with ServerProcess(args, port):
            yield f'ws://127.0.0.1:{port}'


def _exchange(kind: str, prefix: str, url: str) -> Any:
    if kind == 'hosted':
        from tether.agents.exchange import HttpExchange

        return HttpExchange(url)
    return _tether_exchange(kind, prefix)


def measure(kind: str, url: str, calls: int, agents: int, actions: int) -> dict[str, float]:
    from tether.agents import Manager
    from tether.agents.launcher import ProcessLauncher

    prefix = f'bench-hosted-{uuid.uuid4().hex[:8]}:'
    exchange = _exchange(kind, prefix, url)
    try:
        with Manager(exchange, ProcessLauncher(start_method='spawn')) as manager:
            handles = [manager.launch(Echo(), max_concurrency=32) for _ in range(agents)]
            for h in handles:
                h.ping(timeout=120)
            data = b'x' * 1000
            rt = _median_calls(lambda: bytes(handles[0].echo(data).result(120)), calls)
            for f in [handles[i % agents].noop() for i in range(100)]:
                f.result(60)
            t0 = time.perf_counter()
            futures = [handles[i % agents].noop() for i in range(actions)]
            for f in futures:
                f.result(120)
            rate = actions / (time.perf_counter() - t0)
    finally:
        exchange.close()
        if kind != 'hosted':
            _cleanup(prefix)
    return {'roundtrip_1kb': rt, 'actions_per_s': rate}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--quick', action='store_true')
    parser.add_argument('--rounds', type=int, default=3)
    parser.add_argument('--agents', type=int, default=4)
    args = parser.parse_args()
    calls, actions = (100, 1000) if args.quick else (300, 4000)
    runs: dict[str, list[dict[str, float]]] = {k: [] for k in KINDS}
    with hosted_server() as url:
        for r in range(args.rounds):
            for kind in KINDS:
                runs[kind].append(measure(kind, url, calls, args.agents, actions))
                print(f'round {r + 1} {kind}: {runs[kind][-1]}', flush=True)
    med = {k: {m: statistics.median(x[m] for x in v) for m in v[0]} for k, v in runs.items()}
    rows = [
        [
            k,
            fmt_time(med[k]['roundtrip_1kb']),
            f'{med[k]["roundtrip_1kb"] / med["redis"]["roundtrip_1kb"]:.2f}',
            f'{med[k]["actions_per_s"]:.0f}',
            f'{med[k]["actions_per_s"] / med["redis"]["actions_per_s"]:.2f}',
            ' / '.join(f'{x["roundtrip_1kb"] * 1e3:.2f}' for x in runs[k]),
        ]
        for k in KINDS
    ]
    table = print_table(
        f'1 KB round trip and actions/s ({args.agents} agents), median of {args.rounds} '
        'alternating rounds',
        ['exchange', '1 KB round trip', 'vs redis', 'actions/s', 'vs redis', 'rounds (ms)'],
        rows,
    )
    write_json('hosted', {'median': med, 'runs': runs, 'args': vars(args)}, table)


if __name__ == '__main__':
    main()
