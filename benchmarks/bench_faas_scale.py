"""The function service at scale, by simulation (issue 27, item 7).

Simulated endpoints (benchmarks/_faas_sim.py: asyncio clients speaking the real endpoint
protocol, answering each task at once with a no-op result, many per process) connect to
one ``tether faas serve`` replica on PostgreSQL + RabbitMQ, then to two (endpoint ``i``
on replica ``i % 2``). For 10, 100 and 1,000 endpoints:

* memory per idle connected endpoint: RSS of the service process(es) with the endpoints
  connected and idle, minus just before they connected, divided by their number;
* tasks/s and p50/p99 round trip of ``--tasks`` no-op tasks all submitted at once (all
  in flight), spread round-robin over the endpoints by two client processes (client
  ``c`` talks to replica ``c % replicas``).

Then the shape of the funcX paper's strong and weak scaling (its figure 5) with simulated
managers of 8 workers each on one replica: no-op, sleep and stress (CPU in the
simulator's process) tasks; strong: a fixed number of tasks over more managers; weak:
10 tasks per worker.

    .venv/bin/python benchmarks/bench_faas_scale.py [--quick] [--tasks N] [--no-scaling]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import multiprocessing
import os
import statistics
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import print_table, process_cpu_s, write_json
from _faas_sim import Fleet, rss_kb, service_stack


def noop() -> None:
    return None


def _client_main(  # noqa: PLR0917
    url: str, token: str, fid: str, endpoints: list[str], n: int, go: Any, out: Any
) -> None:
    from tether.faas import Client, Executor

    with Client(url, token) as client, Executor(client=client) as ex:
        for i in range(min(200, n)):  # warm the stream and the endpoints' queues
            ex.endpoint_id = endpoints[i % len(endpoints)]
            ex.submit_to_registered_function(fid).result(timeout=300)
        go.wait()
        import resource

        use = resource.getrusage(resource.RUSAGE_SELF)
        cpu_at_go = use.ru_utime + use.ru_stime
        submitted: list[float] = []
        rtt: list[float] = []
        start = time.time()

        def done(t0: float, _: Any) -> None:
            rtt.append(time.time() - t0)

        futures = []
        for i in range(n):
            ex.endpoint_id = endpoints[i % len(endpoints)]
            t0 = time.time()
            f = ex.submit_to_registered_function(fid)
            f.add_done_callback(functools.partial(done, t0))
            submitted.append(t0)
            futures.append(f)
        for f in futures:
            f.result(timeout=1800)
        end = time.time()
        use = resource.getrusage(resource.RUSAGE_SELF)
    cpu = use.ru_utime + use.ru_stime - cpu_at_go
    out.put({'start': start, 'end': end, 'rtt': rtt, 'cpu_s': cpu})


def _cpu_s(pids: list[int]) -> float:
    """CPU seconds (user + system) used so far by the live processes ``pids``."""
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError):  # gone: its CPU time is no longer counted
            total += sum(process_cpu_s(pid))
    return total


def _pids_named(name: str) -> list[int]:
    pids = []
    for entry in os.listdir('/proc'):
        if entry.isdigit():
            try:
                with open(f'/proc/{entry}/comm') as f:
                    if f.read().strip() == name:
                        pids.append(int(entry))
            except OSError:
                continue
    return pids


def _components(stack: dict[str, Any], fleet: Any) -> dict[str, list[int]]:
    return {
        'service': list(stack['pids']),
        'postgres': _pids_named('postgres'),
        'rabbitmq': _pids_named('beam.smp'),
        'endpoints': fleet.pids if fleet is not None else [],
    }


def run_tasks(  # noqa: PLR0917
    stack: dict[str, Any],
    fid: str,
    endpoint_ids: list[str],
    n: int,
    clients: int = 2,
    fleet: Any = None,
) -> dict[str, Any]:
    """``n`` no-op tasks from ``clients`` processes at once; tasks/s, round trips, the
    CPU seconds per 1,000 tasks of each part (service, PostgreSQL, RabbitMQ, simulated
    endpoints, clients) from the go signal to the clients' reports (the clients' own
    from the go signal to their last result), and the cores they kept busy."""
    ctx = multiprocessing.get_context('spawn')
    go, out = ctx.Event(), ctx.Queue()
    urls = stack['urls']
    procs = []
    for c in range(clients):
        mine = endpoint_ids[c::clients] or endpoint_ids
        args = (urls[c % len(urls)], stack['token'], fid, mine, n // clients, go, out)
        procs.append(ctx.Process(target=_client_main, args=args))
    for p in procs:
        p.start()
    time.sleep(0.5)
    parts_pids = _components(stack, fleet)
    cpu_before = {k: _cpu_s(v) for k, v in parts_pids.items()}
    window = time.monotonic()
    go.set()
    parts = [out.get(timeout=3600) for _ in procs]
    cpu = {k: _cpu_s(v) - cpu_before[k] for k, v in parts_pids.items()}
    window = time.monotonic() - window
    cpu['clients'] = sum(p['cpu_s'] for p in parts)
    for p in procs:
        p.join(60)
    rtt = sorted(x for part in parts for x in part['rtt'])
    elapsed = max(p['end'] for p in parts) - min(p['start'] for p in parts)
    return {
        'tasks': len(rtt),
        'tasks_per_s': len(rtt) / elapsed,
        'p50_ms': 1e3 * statistics.median(rtt),
        'p99_ms': 1e3 * rtt[int(0.99 * (len(rtt) - 1))],
        'cpu_s_per_1000': {k: round(1e3 * v / len(rtt), 3) for k, v in cpu.items()},
        'cpu_busy': round(sum(cpu.values()) / window, 2),
    }


def rss(stack: dict[str, Any]) -> int:
    return sum(rss_kb(pid) for pid in stack['pids'])


def settle_rss(stack: dict[str, Any]) -> int:
    """RSS once it stops moving (the service idle)."""
    last = rss(stack)
    for _ in range(10):
        time.sleep(1.0)
        now = rss(stack)
        if abs(now - last) < 64:
            return now
        last = now
    return last


def scale_rows(
    replicas: int,
    counts: list[int],
    n: int,
    replica_cores: float | None = None,
    more_settings: str = '',
) -> list[dict[str, Any]]:
    from tether.faas import Client

    rows = []
    with service_stack(
        replicas, replica_cores=replica_cores, more_settings=more_settings
    ) as stack:
        with Client(stack['urls'][0], stack['token']) as client:
            fid = client.register_function(noop)
            eps = [client.register_endpoint(f'sim{i}') for i in range(max(counts))]
        # Memory first, on a service that has run no task (a heap grown by tasks would
        # hide the endpoints' cost), then throughput. So each endpoint is registered once
        # and connects twice for every count that includes it (a fleet per phase and
        # count; the first ``counts[0]`` endpoints connect 2 * len(counts) times): a
        # profile of the whole run sees about three endpoint registrations and
        # connections per endpoint at 1,000, by this design, not by the service.
        memory = {}
        for count in counts:
            before = settle_rss(stack)
            with Fleet(stack['urls'], [t for _, t in eps[:count]], processes=2):
                memory[count] = (before, settle_rss(stack))
        for count in counts:
            ids = [e for e, _ in eps[:count]]
            with Fleet(stack['urls'], [t for _, t in eps[:count]], processes=2) as fleet:
                row = run_tasks(stack, fid, ids, n, fleet=fleet)
            before, connected = memory[count]
            row.update(
                replicas=replicas,
                replica_cores=replica_cores,
                endpoints=count,
                kb_per_endpoint=(connected - before) / count,
                rss_before_kb=before,
                rss_connected_kb=connected,
            )
            print(row, file=sys.stderr)
            rows.append(row)
    return rows


def scaling_rows(quick: bool) -> list[dict[str, Any]]:
    """Strong and weak scaling with simulated managers of 8 workers each (one replica)."""
    from tether.faas import Client

    workers = 8
    managers = [1, 4, 16] if quick else [1, 2, 4, 8, 16, 32, 64]
    kinds = {'noop': 0.0, 'sleep': 0.1, 'stress': 0.01}
    strong_n = 1000 if quick else 10_000
    rows = []
    with service_stack(1) as stack:
        with Client(stack['urls'][0], stack['token']) as client:
            fid = client.register_function(noop)
            eps = [client.register_endpoint(f'm{i}') for i in range(max(managers))]
        for kind, duration in kinds.items():
            for m in managers:
                tokens = [t for _, t in eps[:m]]
                ids = [e for e, _ in eps[:m]]
                fleet = Fleet(stack['urls'], tokens, processes=2, kind=kind, duration=duration)
                with fleet:
                    for mode, n in (('strong', strong_n), ('weak', 10 * workers * m)):
                        r = run_tasks(stack, fid, ids, n, fleet=fleet)
                        r.update(kind=kind, mode=mode, managers=m, workers=m * workers)
                        r['completion_s'] = r['tasks'] / r['tasks_per_s']
                        print(r, file=sys.stderr)
                        rows.append(r)
    return rows


def _cores(row: dict[str, Any]) -> str:
    cap = row.get('replica_cores')
    return 'any' if cap is None else f'{cap:g}'


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument('--quick', action='store_true', help='10,000 tasks, fewer managers')
    parser.add_argument('--tasks', type=int, default=0, help='tasks in flight per run')
    parser.add_argument('--endpoints', default='10,100,1000')
    parser.add_argument('--replicas', default='1,2')
    parser.add_argument('--no-scaling', action='store_true', help='skip strong/weak scaling')
    parser.add_argument(
        '--replica-cores',
        default='',
        help='comma-separated CPU caps per replica to run besides uncapped ("" none): '
        'each replica held to that many cores by a cgroup, as on a host of its own',
    )
    parser.add_argument(
        '--gc-young-threshold',
        type=int,
        default=None,
        help="the service's gc_young_threshold (default: the service's own default)",
    )
    args = parser.parse_args()
    more = (
        f'gc_young_threshold = {args.gc_young_threshold}\n'
        if args.gc_young_threshold is not None
        else ''
    )
    n = args.tasks or (10_000 if args.quick else 100_000)
    counts = [int(x) for x in args.endpoints.split(',')]
    load_before = os.getloadavg()
    results: dict[str, Any] = {'tasks': n, 'rows': []}
    caps: list[float | None] = [None, *(float(x) for x in args.replica_cores.split(',') if x)]
    for cap in caps:
        for r in (int(x) for x in args.replicas.split(',') if x):
            results['rows'].extend(scale_rows(r, counts, n, cap, more))
    md = print_table(
        f'Simulated endpoints: {n:,} no-op tasks in flight (PostgreSQL + RabbitMQ)',
        [
            'replicas',
            'cores each',
            'endpoints',
            'tasks/s',
            'p50 ms',
            'p99 ms',
            'KB per idle endpoint',
        ],
        [
            [
                str(row['replicas']),
                _cores(row),
                f'{row["endpoints"]:,}',
                f'{row["tasks_per_s"]:,.0f}',
                f'{row["p50_ms"]:,.0f}',
                f'{row["p99_ms"]:,.0f}',
                f'{row["kb_per_endpoint"]:,.0f}',
            ]
            for row in results['rows']
        ],
    )
    parts = ['service', 'postgres', 'rabbitmq', 'endpoints', 'clients']
    md += '\n\n' + print_table(
        'CPU ms per task of each part, from the go signal to the last result',
        ['replicas', 'cores each', 'endpoints', *parts, 'cores busy'],
        [
            [
                str(row['replicas']),
                _cores(row),
                f'{row["endpoints"]:,}',
                *(f'{row["cpu_s_per_1000"][p]:.3f}' for p in parts),
                f'{row["cpu_busy"]:.2f}',
            ]
            for row in results['rows']
        ],
    )
    if not args.no_scaling:
        results['scaling'] = scaling_rows(args.quick)
        md += '\n\n' + print_table(
            'Strong and weak scaling, simulated managers of 8 workers (one replica)',
            ['function', 'mode', 'managers', 'workers', 'tasks', 'completion s', 'tasks/s'],
            [
                [
                    r['kind'],
                    r['mode'],
                    str(r['managers']),
                    str(r['workers']),
                    f'{r["tasks"]:,}',
                    f'{r["completion_s"]:.2f}',
                    f'{r["tasks_per_s"]:,.0f}',
                ]
                for r in results['scaling']
            ],
        )
    results['load'] = {'before': load_before, 'after': os.getloadavg()}
    md += (
        f'\n\nload average before {load_before[0]:.1f}, after {os.getloadavg()[0]:.1f} '
        f'(2 cores shared with other work)'
    )
    write_json('faas_scale', results, md)


if __name__ == '__main__':
    main()
