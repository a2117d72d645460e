"""academy-py 1.0 side of benchmarks/bench_agents.py (runs in the peer venv only).

Prints one JSON object: action round trips per payload size, throughput from one client
to N agents, time to start N agents, and memory of idle agent processes. Agents run in
spawned processes (a ProcessPoolExecutor), as the issue measured academy-py.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import sys
import time
import uuid
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from academy.agent import Agent, action


class Echo(Agent):
    @action
    async def echo(self, data: bytes) -> bytes:
        return bytes(data)

    @action
    async def noop(self) -> None:
        return None

    @action
    async def pid(self) -> int:
        import os

        return os.getpid()


_UIDS: list[str] = []
_NAMESPACES: list[str] = []


def _cleanup(port: int) -> None:
    """Delete the keys this run left in the shared Redis (academy-py keeps them)."""
    import redis

    client = redis.Redis('127.0.0.1', port)
    patterns = [f'{ns}:*' for ns in _NAMESPACES] + [f'*{uid}*' for uid in _UIDS]
    for pattern in patterns:
        keys = list(client.scan_iter(match=pattern, count=1000))
        if keys:
            client.delete(*keys)
    client.close()


def _remember(*handles: Any) -> None:
    for h in handles:
        uid = getattr(getattr(h, 'agent_id', None), 'uid', None)
        if uid is not None:
            _UIDS.append(str(uid))
            _UIDS.append(str(uid).replace('-', ''))


def _factory(kind: str, port: int) -> Any:
    ns = f'bench{uuid.uuid4().hex[:8]}'
    _NAMESPACES.append(ns)
    if kind == 'hybrid':
        from academy.exchange.hybrid import HybridExchangeFactory

        return HybridExchangeFactory('127.0.0.1', port, namespace=ns, interface='lo')
    from academy.exchange.redis import RedisExchangeFactory

    return RedisExchangeFactory('127.0.0.1', port)


async def _manager(kind: str, port: int, workers: int) -> Any:
    from academy.manager import Manager

    pool = ProcessPoolExecutor(
        max_workers=workers, mp_context=multiprocessing.get_context('spawn')
    )
    return await Manager.from_exchange_factory(factory=_factory(kind, port), executors=pool)


async def roundtrip(kind: str, port: int, sizes: list[int], repeats: dict[str, int]) -> Any:
    out = {}
    async with await _manager(kind, port, 1) as manager:
        handle = await manager.launch(Echo)
        _remember(handle)
        await handle.ping(timeout=120)
        for size in sizes:
            data = b'x' * size
            n = repeats[str(size)]
            # Warm-up as in bench_agents.py: at least 2 calls and 0.5 s.
            warm_start, calls, failed = time.perf_counter(), 0, False
            while calls < 2 or time.perf_counter() - warm_start < 0.5:
                calls += 1
                try:
                    await asyncio.wait_for(handle.echo(data), 120)
                except Exception as e:
                    out[str(size)] = {'error': repr(e)[:200]}
                    failed = True
                    break
            if not failed:
                samples = []
                for _ in range(n):
                    t0 = time.perf_counter()
                    await handle.echo(data)
                    samples.append(time.perf_counter() - t0)
                out[str(size)] = {'median': statistics.median(samples), 'n': n}
        await handle.shutdown()
    return out


async def throughput(kind: str, port: int, agents: list[int], actions: int) -> Any:
    out = {}
    for n in agents:
        async with await _manager(kind, port, n) as manager:
            handles = [await manager.launch(Echo) for _ in range(n)]
            _remember(*handles)
            for h in handles:
                await h.ping(timeout=120)
            await asyncio.gather(*(h.noop() for h in handles for _ in range(10)))
            t0 = time.perf_counter()
            await asyncio.gather(*(handles[i % n].noop() for i in range(actions)))
            out[str(n)] = actions / (time.perf_counter() - t0)
    return out


async def startup(kind: str, port: int, counts: list[int]) -> Any:
    out = {}
    for n in counts:
        async with await _manager(kind, port, n) as manager:
            t0 = time.perf_counter()
            handles = [await manager.launch(Echo) for _ in range(n)]
            await asyncio.gather(*(h.ping(timeout=300) for h in handles))
            _remember(*handles)
            out[str(n)] = time.perf_counter() - t0
    return out


async def memory(kind: str, port: int, n: int) -> Any:
    import psutil

    async with await _manager(kind, port, n) as manager:
        handles = [await manager.launch(Echo) for _ in range(n)]
        _remember(*handles)
        pids = [await h.pid() for h in handles]
        await asyncio.sleep(2)
        infos = [psutil.Process(p).memory_full_info() for p in set(pids)]
    return {
        'processes': len(infos),
        'rss_mib': statistics.mean(i.rss for i in infos) / 2**20,
        'uss_mib': statistics.mean(i.uss for i in infos) / 2**20,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument('--exchange', default='hybrid')
    parser.add_argument('--port', type=int, default=6379)
    parser.add_argument('--what', required=True)
    parser.add_argument('--sizes', default='1000')
    parser.add_argument('--repeats', default='{}')
    parser.add_argument('--agents', default='1,4')
    parser.add_argument('--actions', type=int, default=1000)
    parser.add_argument('--counts', default='1,8,32')
    args = parser.parse_args()
    if args.what == 'roundtrip':
        sizes = [int(s) for s in args.sizes.split(',')]
        result = asyncio.run(roundtrip(args.exchange, args.port, sizes, json.loads(args.repeats)))
    elif args.what == 'throughput':
        agents = [int(s) for s in args.agents.split(',')]
        result = asyncio.run(throughput(args.exchange, args.port, agents, args.actions))
    elif args.what == 'startup':
        counts = [int(s) for s in args.counts.split(',')]
        result = asyncio.run(startup(args.exchange, args.port, counts))
    else:
        result = asyncio.run(memory(args.exchange, args.port, int(args.counts)))
    try:
        _cleanup(args.port)
    except Exception as e:  # best effort
        print(f'cleanup failed: {e!r}', file=sys.stderr)
    json.dump(result, sys.stdout)


if __name__ == '__main__':
    main()
