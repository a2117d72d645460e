"""Agents: the seed's figures 5.7-5.11 scaled to this machine, side by side with academy-py
1.0 (its own venv, run as a subprocess), Ray actors and Dask actors, in one run.

* round trip of an action whose argument and result are N bytes (1 KB to 10 MB), per
  exchange (figures 5.8 and 5.10 top);
* throughput of one client driving N worker agents with no-op actions (5.9, 5.10 middle);
* time to start N agents until each answers a ping (5.7 top);
* memory of idle agent processes (5.11);
* only with ``--only handoffs``: hand-offs (threads put to sleep and woken by another)
  and CPU time per 1 KB round trip on the hybrid exchange, counted from /proc rather
  than timed, so that they hold on a busy machine too.

Agents run in their own processes: tether's ProcessLauncher (fork server), academy-py's
Manager over a spawned ProcessPoolExecutor, Ray actors, Dask actors in a LocalCluster.
Redis is the shared server at 127.0.0.1:6379 (unique prefixes, cleaned afterwards).

Usage: python benchmarks/bench_agents.py [--quick] [--only roundtrip,throughput,...]
       [--skip academy,ray,dask]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _agents_common import Echo, RayDaskEcho  # noqa: E402
from _common import fmt_time, print_table, write_json  # noqa: E402

SIZES = [1_000, 100_000, 1_000_000, 10_000_000]
REPEATS = {1_000: 200, 100_000: 40, 1_000_000: 15, 10_000_000: 5}
QUICK_REPEATS = {1_000: 50, 100_000: 10, 1_000_000: 5, 10_000_000: 3}


WARMUP = 0.5
"""Seconds of warm-up calls before each measured series (at least 2 calls), the same for
every system (academy_backend.py does the same): the first calls after an agent starts
pay for its imports, connections and, on tether's hybrid exchange, for finding the
agent's direct address."""


def _median_calls(fn: Callable[[], Any], n: int) -> float:
    start = time.perf_counter()
    calls = 0
    while calls < 2 or time.perf_counter() - start < WARMUP:
        fn()
        calls += 1
    return median_time(fn, n)


def median_time(fn: Callable[[], Any], n: int) -> float:
    """The median of ``n`` timed calls of ``fn`` (seconds)."""
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def _cleanup(prefix: str) -> None:
    import redis

    client = redis.Redis('127.0.0.1', 6379)
    keys = list(client.scan_iter(match=f'{prefix}*', count=1000))
    if keys:
        client.delete(*keys)
    client.close()


# tether --------------------------------------------------------------------------------


def _tether_exchange(kind: str, prefix: str) -> Any:
    from tether.agents.exchange import HybridExchange, RedisExchange

    if kind == 'hybrid+shm':
        from tether.connectors.shared_memory import SharedMemoryConnector
        from tether.store import Store

        store = Store(f'bench-{prefix}', SharedMemoryConnector(f'ba{uuid.uuid4().hex[:8]}'))
        return HybridExchange(prefix=prefix, store=store, threshold=100_000)
    if kind == 'hybrid':
        return HybridExchange(prefix=prefix)
    return RedisExchange(prefix=prefix)


def echo_roundtrips(
    exchange: Any, prefix: str, sizes: list[int], repeats_of: Callable[[int], int]
) -> dict[int, float]:
    """Median round trip of an echo action per argument size, through ``exchange`` (one
    agent in its own process); closes the exchange and removes ``prefix``'s keys."""
    from tether.agents import Manager
    from tether.agents.launcher import ProcessLauncher

    out = {}
    try:
        with Manager(exchange, ProcessLauncher()) as manager:
            handle = manager.launch(Echo())
            handle.ping(timeout=120)
            for size in sizes:
                data = b'x' * size

                def call(data: bytes = data) -> None:
                    bytes(handle.echo(data).result(120))

                out[size] = _median_calls(call, repeats_of(size))
    finally:
        exchange.close()
        _cleanup(prefix)
    return out


def tether_roundtrip(kind: str, repeats: dict[int, int]) -> dict[str, float]:
    prefix = f'bench-agents-{uuid.uuid4().hex[:8]}:'
    got = echo_roundtrips(_tether_exchange(kind, prefix), prefix, SIZES, repeats.__getitem__)
    return {str(size): t for size, t in got.items()}


def tether_throughput(kind: str, agents: list[int], actions: int) -> dict[str, float]:
    from tether.agents import Manager
    from tether.agents.launcher import ProcessLauncher

    out = {}
    for n in agents:
        prefix = f'bench-agents-{uuid.uuid4().hex[:8]}:'
        exchange = _tether_exchange(kind, prefix)
        try:
            with Manager(exchange, ProcessLauncher()) as manager:
                handles = [manager.launch(Echo(), max_concurrency=32) for _ in range(n)]
                for h in handles:
                    h.ping(timeout=120)
                for f in [handles[i % n].noop() for i in range(100)]:
                    f.result(60)
                t0 = time.perf_counter()
                futures = [handles[i % n].noop() for i in range(actions)]
                for f in futures:
                    f.result(120)
                out[str(n)] = actions / (time.perf_counter() - t0)
        finally:
            exchange.close()
            _cleanup(prefix)
    return out


def tether_startup(counts: list[int]) -> dict[str, float]:
    from tether.agents import Manager
    from tether.agents.launcher import ProcessLauncher

    out = {}
    prefix = f'bench-agents-{uuid.uuid4().hex[:8]}:'
    exchange = _tether_exchange('hybrid', prefix)
    try:
        with Manager(exchange, ProcessLauncher()) as manager:
            warm = manager.launch(Echo())  # starts the fork server (pre-warmed workers)
            warm.ping(timeout=120)
            manager.shutdown(warm, timeout=60)
            for n in counts:
                t0 = time.perf_counter()
                handles = [manager.launch(Echo()) for _ in range(n)]
                for h in handles:
                    h.ping(timeout=300)
                out[str(n)] = time.perf_counter() - t0
                for h in handles:
                    h.shutdown()
                manager.wait(handles, timeout=120)
    finally:
        exchange.close()
        _cleanup(prefix)
    return out


def _memory_of(pids: list[int]) -> dict[str, float]:
    import psutil

    infos = [psutil.Process(p).memory_full_info() for p in set(pids)]
    return {
        'processes': len(infos),
        'rss_mib': statistics.mean(i.rss for i in infos) / 2**20,
        'uss_mib': statistics.mean(i.uss for i in infos) / 2**20,
    }


def tether_memory(n: int) -> dict[str, float]:
    from tether.agents import Manager
    from tether.agents.launcher import ProcessLauncher

    prefix = f'bench-agents-{uuid.uuid4().hex[:8]}:'
    exchange = _tether_exchange('hybrid', prefix)
    try:
        with Manager(exchange, ProcessLauncher()) as manager:
            handles = [manager.launch(Echo()) for _ in range(n)]
            pids = [h.pid().result(120) for h in handles]
            time.sleep(2)
            return _memory_of(pids)
    finally:
        exchange.close()
        _cleanup(prefix)


def _thread_stats(pid: int) -> dict[int, tuple[int, int]]:
    """Each thread of ``pid``: (voluntary context switches, CPU time in ns) from /proc."""
    out = {}
    for tid in os.listdir(f'/proc/{pid}/task'):
        try:
            with open(f'/proc/{pid}/task/{tid}/status') as f:
                status = f.read()
            with open(f'/proc/{pid}/task/{tid}/schedstat') as f:
                cpu_ns = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended meanwhile
        switches = int(status.split('\nvoluntary_ctxt_switches:')[1].split()[0])
        out[int(tid)] = (switches, cpu_ns)
    return out


def tether_handoffs(calls: int) -> dict[str, Any]:
    """Hand-offs and CPU time per 1 KB round trip on the hybrid exchange, counted rather
    than timed (Linux only).

    A hand-off is a thread going to sleep until another one wakes it: the voluntary
    context switches of the client's and the agent's threads, per call. Unlike the round
    trip's time, neither count depends much on which vCPU a wake-up lands on or on what
    else the machine runs, so a change that saves a hand-off shows on a busy machine too.
    """
    from tether.agents import Manager
    from tether.agents.launcher import ProcessLauncher

    if not os.path.exists(f'/proc/{os.getpid()}/task'):
        return {'error': 'needs /proc (Linux)'}
    prefix = f'bench-agents-{uuid.uuid4().hex[:8]}:'
    exchange = _tether_exchange('hybrid', prefix)
    data = b'x' * 1_000
    try:
        with Manager(exchange, ProcessLauncher()) as manager:
            handle = manager.launch(Echo())
            handle.ping(timeout=120)
            agent_pid = handle.pid().result(120)
            for _ in range(200):  # warm-up: connections, addresses, threads
                bytes(handle.echo(data).result(120))
            sides = {'client': os.getpid(), 'agent': agent_pid}
            before = {side: _thread_stats(pid) for side, pid in sides.items()}
            for _ in range(calls):
                bytes(handle.echo(data).result(120))
            after = {side: _thread_stats(pid) for side, pid in sides.items()}
    finally:
        exchange.close()
        _cleanup(prefix)
    out: dict[str, Any] = {}
    for side in sides:
        switches = cpu = 0
        busy = 0  # threads that slept at least once per ten calls
        for tid, (s1, c1) in after[side].items():
            s0, c0 = before[side].get(tid, (0, 0))
            switches += s1 - s0
            cpu += c1 - c0
            busy += (s1 - s0) >= calls / 10
        out[side] = {
            'handoffs': switches / calls,
            'cpu_us': cpu / calls / 1e3,
            'threads': busy,
        }
    out['handoffs'] = out['client']['handoffs'] + out['agent']['handoffs']
    out['cpu_us'] = out['client']['cpu_us'] + out['agent']['cpu_us']
    return out


# academy-py 1.0 --------------------------------------------------------------------------


def academy(what: str, **kwargs: Any) -> Any:
    python = subprocess.run(
        ['bash', os.path.join(HERE, 'peer_academy_env.sh')],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    args = [python, os.path.join(HERE, 'peer', 'academy_backend.py'), '--what', what]
    for key, value in kwargs.items():
        args += [f'--{key}', value if isinstance(value, str) else json.dumps(value)]
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=900, check=False)
    except subprocess.TimeoutExpired:
        return {'error': 'timed out after 900 s'}
    if proc.returncode != 0:
        return {'error': proc.stderr.strip().splitlines()[-1][:300] if proc.stderr else 'failed'}
    return json.loads(proc.stdout)


# Ray and Dask ----------------------------------------------------------------------------


def ray_all(
    sizes_repeats: dict[int, int], agents: list[int], actions: int, counts: list[int], mem_n: int
) -> Any:
    import ray

    ray.init(
        num_cpus=2,
        include_dashboard=False,
        object_store_memory=80 * 2**20,
        logging_level='ERROR',
        log_to_driver=False,
    )
    actor_cls = ray.remote(RayDaskEcho)
    out: dict[str, Any] = {}
    try:
        a = actor_cls.remote()
        ray.get(a.noop.remote())
        rt = {}
        for size in SIZES:
            data = b'x' * size
            rt[str(size)] = _median_calls(
                lambda data=data: ray.get(a.echo.remote(data)), sizes_repeats[size]
            )
        out['roundtrip'] = rt
        ray.kill(a)
        thr = {}
        for n in agents:
            actors = [actor_cls.remote() for _ in range(n)]
            ray.get([x.noop.remote() for x in actors])
            t0 = time.perf_counter()
            ray.get([actors[i % n].noop.remote() for i in range(actions)])
            thr[str(n)] = actions / (time.perf_counter() - t0)
            for x in actors:
                ray.kill(x)
        out['throughput'] = thr
        st = {}
        for n in counts:
            t0 = time.perf_counter()
            actors = [actor_cls.remote() for _ in range(n)]
            ray.get([x.noop.remote() for x in actors])
            st[str(n)] = time.perf_counter() - t0
            for x in actors:
                ray.kill(x)
        out['startup'] = st
        actors = [actor_cls.remote() for _ in range(mem_n)]
        pids = ray.get([x.pid.remote() for x in actors])
        time.sleep(2)
        out['memory'] = _memory_of(pids)
    finally:
        ray.shutdown()
    return out


def dask_all(
    sizes_repeats: dict[int, int], agents: list[int], actions: int, counts: list[int], mem_n: int
) -> Any:
    from distributed import Client, LocalCluster

    out: dict[str, Any] = {}
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        a = client.submit(RayDaskEcho, actor=True).result()
        rt = {}
        for size in SIZES:
            data = b'x' * size
            rt[str(size)] = _median_calls(
                lambda data=data: a.echo(data).result(), sizes_repeats[size]
            )
        out['roundtrip'] = rt
        thr = {}
        for n in agents:
            actors = [
                client.submit(RayDaskEcho, actor=True, pure=False).result() for _ in range(n)
            ]
            [x.noop().result() for x in actors]
            t0 = time.perf_counter()
            futures = [actors[i % n].noop() for i in range(actions)]
            for f in futures:
                f.result()
            thr[str(n)] = actions / (time.perf_counter() - t0)
        out['throughput'] = thr
        st = {}
        for n in counts:
            t0 = time.perf_counter()
            actors = [
                client.submit(RayDaskEcho, actor=True, pure=False).result() for _ in range(n)
            ]
            [x.noop().result() for x in actors]
            st[str(n)] = time.perf_counter() - t0
        out['startup'] = st
        pids = [x.pid().result() for x in actors]
        out['memory'] = _memory_of(pids)
        out['memory']['note'] = f'{len(set(pids))} worker processes host {len(pids)} actors'
    return out


def _cell(data: dict[str, Any], size: int) -> str:
    value = data.get(str(size))
    if isinstance(value, dict):
        value = value.get('median', value.get('error'))
    if isinstance(value, float):
        return fmt_time(value)
    return str(value if value is not None else data.get('error', '-'))[:40]


# Main ------------------------------------------------------------------------------------


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--quick', action='store_true')
    parser.add_argument('--only', default='roundtrip,throughput,startup,memory')
    parser.add_argument('--skip', default='')
    parser.add_argument('--counts', default=None, help='agent counts for startup (1,8,32)')
    return parser.parse_args()


def _run_tether(
    only: set[str], results: dict[str, Any], plan: dict[str, Any], quick: bool
) -> None:
    repeats, agents, actions = plan['repeats'], plan['agents'], plan['actions']
    if 'roundtrip' in only:
        results['roundtrip'] = {
            f'tether {k}': tether_roundtrip(k, repeats) for k in ('hybrid', 'hybrid+shm', 'redis')
        }
    if 'throughput' in only:
        results['throughput'] = {
            f'tether {k}': tether_throughput(k, agents, actions) for k in ('hybrid', 'redis')
        }
    if 'startup' in only:
        results['startup'] = {'tether process': tether_startup(plan['counts'])}
    if 'memory' in only:
        results['memory'] = {'tether process': tether_memory(plan['mem_n'])}
    if 'handoffs' in only:
        results['handoffs'] = {'tether hybrid': tether_handoffs(500 if quick else 2000)}


def _run_academy(only: set[str], results: dict[str, Any], plan: dict[str, Any]) -> None:
    rep = json.dumps({str(k): v for k, v in plan['repeats'].items()})
    sizes = ','.join(str(s) for s in SIZES)
    for kind in ('hybrid', 'redis'):
        if 'roundtrip' in only:
            results['roundtrip'][f'academy {kind}'] = academy(
                'roundtrip', exchange=kind, sizes=sizes, repeats=rep
            )
        if 'throughput' in only:
            results['throughput'][f'academy {kind}'] = academy(
                'throughput', exchange=kind, agents='1,4', actions=str(plan['actions'] // 3)
            )
    if 'startup' in only:
        results['startup']['academy process'] = academy(
            'startup', exchange='hybrid', counts=','.join(map(str, plan['counts']))
        )
    if 'memory' in only:
        results['memory']['academy process'] = academy(
            'memory', exchange='hybrid', counts=str(plan['mem_n'])
        )


def _run_actor_peers(
    only: set[str], skip: set[str], results: dict[str, Any], plan: dict[str, Any], checkpoint: Any
) -> None:
    for name, fn in (('ray', ray_all), ('dask', dask_all)):
        if name in skip:
            continue
        try:
            res = fn(
                plan['repeats'], plan['agents'], plan['actions'], plan['counts'], plan['mem_n']
            )
        except Exception as e:  # a peer that fails is reported, not fatal
            res = {'error': repr(e)[:300]}
        for section in ('roundtrip', 'throughput', 'startup', 'memory'):
            if section in only and section in res:
                results.setdefault(section, {})[f'{name} actor'] = res[section]
            elif section in only and 'error' in res:
                results.setdefault(section, {})[f'{name} actor'] = {'error': res['error']}
        checkpoint(f'after_{name}')


def _count_cells(data: dict[str, Any], keys: list[int], number: bool) -> list[str]:
    cells = []
    for n in keys:
        value = data.get(str(n))
        if isinstance(value, float):
            cells.append(f'{value:,.0f}' if number else fmt_time(value))
        else:
            cells.append(str(data.get('error', '-'))[:40] if number else '-')
    return cells


def _handoff_row(name: str, d: dict[str, Any]) -> list[str]:
    if 'error' in d:
        return [name, str(d['error'])[:40], '-', '-', '-']
    return [
        name,
        f'{d["handoffs"]:.2f}',
        f'{d["client"]["handoffs"]:.2f} ({d["client"]["threads"]} threads)',
        f'{d["agent"]["handoffs"]:.2f} ({d["agent"]["threads"]} threads)',
        f'{d["cpu_us"]:.0f} us',
    ]


def _tables(results: dict[str, Any], plan: dict[str, Any]) -> list[str]:
    agents, counts, mem_n = plan['agents'], plan['counts'], plan['mem_n']
    md = []
    if 'roundtrip' in results:
        rows = [
            [name, *[_cell(data, s) for s in SIZES]] for name, data in results['roundtrip'].items()
        ]
        md.append(
            print_table(
                'action round trip (median)', ['system', '1 KB', '100 KB', '1 MB', '10 MB'], rows
            )
        )
    if 'throughput' in results:
        rows = [
            [name, *_count_cells(data, agents, number=True)]
            for name, data in results['throughput'].items()
        ]
        md.append(
            print_table(
                'no-op actions/s, one client', ['system', *[f'{n} agents' for n in agents]], rows
            )
        )
    if 'startup' in results:
        rows = [
            [name, *_count_cells(data, counts, number=False)]
            for name, data in results['startup'].items()
        ]
        md.append(
            print_table(
                'time to start N agents (all answer a ping)',
                ['system', *[f'N={n}' for n in counts]],
                rows,
            )
        )
    if 'memory' in results:
        rows = [
            [
                name,
                str(d.get('processes', '-')),
                f'{d.get("rss_mib", 0):.1f}',
                f'{d.get("uss_mib", 0):.1f}',
            ]
            for name, d in results['memory'].items()
        ]
        md.append(
            print_table(
                f'memory of {mem_n} idle agents, per process',
                ['system', 'processes', 'RSS MiB', 'USS MiB'],
                rows,
            )
        )
    if 'handoffs' in results:
        rows = [_handoff_row(name, d) for name, d in results['handoffs'].items()]
        md.append(
            print_table(
                'hand-offs (threads woken) and CPU time per 1 KB round trip',
                ['system', 'hand-offs', 'client', 'agent', 'CPU'],
                rows,
            )
        )
    return md


def main() -> None:
    args = _parse_args()
    only = set(args.only.split(','))
    skip = set(filter(None, args.skip.split(',')))
    counts = [1, 8] if args.quick else [1, 8, 32]
    if args.counts:
        counts = [int(c) for c in args.counts.split(',')]
    plan: dict[str, Any] = {
        'repeats': QUICK_REPEATS if args.quick else REPEATS,
        'agents': [1, 4],
        'actions': 1000 if args.quick else 3000,
        'counts': counts,
        'mem_n': 8,
    }
    load_before = os.getloadavg()
    results: dict[str, Any] = {'load_before': load_before}

    def checkpoint(stage: str) -> None:
        # Partial results survive an interrupted run.
        results['load_' + stage] = os.getloadavg()
        write_json('agents_partial', results)

    _run_tether(only, results, plan, args.quick)
    checkpoint('after_tether')
    if 'academy' not in skip:
        _run_academy(only, results, plan)
    checkpoint('after_academy')
    _run_actor_peers(only, skip, results, plan, checkpoint)
    results['load_after'] = os.getloadavg()
    md = _tables(results, plan)
    md.append(f'load average before {load_before}, after {results["load_after"]}')
    write_json('agents', results, '\n\n'.join(md))


if __name__ == '__main__':
    main()
