"""Steering overheads: figures 3.18 and 3.12 of the dissertation, scaled to this machine.

The seed's synthetic application (dissertation section 3.6.1): a Thinker and N workers;
T zero-length tasks, each with a unique (so not cacheable) input of I bytes and no
output; the Thinker submits one task per worker, then a new one for each result (as
Colmena's synthetic app: a submitting agent and a receiving agent sharing one slot per
worker, so a result is read while the next input is made and stored). Per task it
records the life cycle (Thinker serialization, Thinker -> task server, task server ->
worker, time on the worker, back to the Thinker) and the overhead (round trip minus the
time in the method), without proxies and with every input proxied (threshold 0) or at a
default threshold (100 kB: tether compares a value's payload with it, so the
100,000-byte input goes inline and larger ones by proxy). tether's queues sign every
message (the default); Colmena's do not. Parsl runs with ``initialize_logging=False``
on both sides.

* figure 3.18 (top left): the components at I = 1 MB, with and without proxies;
* figure 3.18 (bottom left): the overhead reduction with proxies, I from 1 KB to 10 MB;
* figure 3.12: the round-trip improvement with proxies at 1 MB and 100 MB.

Sides, in one invocation: tether with Redis queues and its process-pool task server,
tether with Redis queues and its Parsl (HTEX, loopback) task server, and Colmena 0.7.2
(Redis queues, Parsl HTEX task server, ProxyStore's Redis store) from its own venv
(``benchmarks/peer_colmena_env.sh``; ``--no-peer`` skips it). N = 2 workers.

    python benchmarks/bench_steer.py [--quick] [--no-peer] [--shared-redis]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import uuid
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import HERE, parse_args, print_table, redis_server, write_json
from _unique_input import unique_input

KB = 1000
MB = 1000 * KB
DEFAULT_THRESHOLD = 100 * KB
COLMENA_ENV = os.path.join(HERE, 'peer_colmena_env.sh')
COLMENA_SCRIPT = os.path.join(HERE, 'peer', 'colmena_synthetic.py')


def noop(data: Any) -> None:
    """The synthetic task: zero length, no output."""


def _tasks_for(size: int, quick: bool) -> int:
    if size >= 100 * MB:
        return 4 if quick else 8
    if size >= 10 * MB:
        return 10 if quick else 30
    return 30 if quick else 100


def _components(r: Any) -> dict[str, float]:
    t, s = r.timestamp, r.time
    running = s.running or 0.0
    lifetime = t.result_received - t.created
    return {
        'lifetime': lifetime,
        'overhead': lifetime - running,
        'thinker_serialize': (s.serialize_inputs or 0.0) + (s.deserialize_results or 0.0),
        'thinker_to_server': t.input_received - t.created - (s.serialize_inputs or 0.0),
        'server_to_worker': t.compute_started - t.input_received,
        'on_worker': t.compute_ended - t.compute_started,
        'worker_to_thinker': t.result_received - t.compute_ended,
    }


def _medians(rows: list[dict[str, float]]) -> dict[str, float]:
    return {k: statistics.median(r[k] for r in rows) for k in rows[0]}


def run_tether(server: str, size: int, threshold: int | None, tasks: int, port: int) -> Any:
    """Run the synthetic application once; return the per-component medians."""
    from tether.connectors.redis import RedisConnector
    from tether.steer import BaseThinker, RedisQueues, ResourceCounter, agent
    from tether.steer.task_server import LocalTaskServer, ParslTaskServer
    from tether.store import Store

    prefix = f'bench-steer-{uuid.uuid4().hex}'
    store = Store(prefix, RedisConnector('127.0.0.1', port, prefix=prefix), register=True)
    queues = RedisQueues(
        hostname='127.0.0.1',
        port=port,
        prefix=prefix,
        proxystore_name=prefix if threshold is not None else None,
        proxystore_threshold=threshold,
        keep_inputs=False,
    )
    n_workers = 2

    class Synthetic(BaseThinker):
        """Colmena's synthetic Thinker: one agent submits, another receives.

        The submitter holds one slot per worker: it takes a slot before it makes and
        sends each input, and the receiver gives one back per result. So one task per
        worker goes first, then a new one per result (as in the dissertation), and a
        finished task's result is read while the next input is being made and stored,
        not after.
        """

        results: list[Any]

        def __init__(self, queues: Any) -> None:
            super().__init__(queues, ResourceCounter(n_workers))
            self.results = []

        @agent(startup=True)
        def producer(self) -> None:
            for _ in range(tasks):
                if not self.rec.acquire(None, 1, cancel_if=self.done):
                    return
                self.queues.send_inputs(unique_input(size), method='noop')

        @agent
        def consumer(self) -> None:
            while len(self.results) < tasks:
                self.results.append(self.queues.get_result(timeout=600))
                self.rec.release(None, 1)

    run_dir = tempfile.mkdtemp(prefix='bench-steer-')
    if server == 'local':
        task_server: Any = LocalTaskServer(queues, [noop], num_workers=n_workers)
    else:
        task_server = ParslTaskServer([noop], queues, _htex(run_dir, n_workers))
    task_server.start()
    try:
        # Warm up (worker start, imports), then measure.
        warm = Synthetic(queues)
        warm.run()
        thinker = Synthetic(queues)
        thinker.run()
    finally:
        queues.send_kill_signal()
        task_server.join(300)
        if task_server.is_alive():
            task_server.terminate()
        queues.flush()
        queues.close()
        store.close()
    failed = [r for r in thinker.results if not r.success]
    if failed:
        raise RuntimeError(f'{len(failed)} tasks failed: {failed[0].failure_info}')
    return _medians([_components(r) for r in thinker.results])


def _htex(run_dir: str, workers: int) -> Any:
    from parsl.config import Config
    from parsl.executors import HighThroughputExecutor
    from parsl.providers import LocalProvider

    return Config(
        executors=[
            HighThroughputExecutor(
                label='htex',
                address='127.0.0.1',
                max_workers_per_node=workers,
                provider=LocalProvider(init_blocks=1, max_blocks=1),
                encrypted=False,
            ),
        ],
        run_dir=run_dir,
        strategy='none',
        # The setting docs/steer.md recommends (both sides): no DEBUG log of every task
        # in the task server's process (parsl.log), ~1 ms per task on this machine.
        initialize_logging=False,
    )


def run_colmena(size: int, threshold: int | None, tasks: int, port: int) -> Any:
    out = subprocess.run(['bash', COLMENA_ENV], capture_output=True, text=True, check=True)
    python = out.stdout.strip().splitlines()[-1]
    proc = subprocess.run(
        [
            python,
            COLMENA_SCRIPT,
            '--size',
            str(size),
            '--tasks',
            str(tasks),
            '--port',
            str(port),
            '--threshold',
            'none' if threshold is None else str(threshold),
        ],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
        env={**os.environ, 'PATH': os.path.dirname(python) + os.pathsep + os.environ['PATH']},
    )
    if proc.returncode != 0:
        raise RuntimeError(f'colmena side failed:\n{proc.stderr[-3000:]}')
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _ms(x: float | None) -> str:
    return '-' if x is None else f'{x * 1e3:.2f}'


def _pct(base: float | None, new: float | None) -> str:
    if not base or new is None:
        return '-'
    return f'{(1 - new / base) * 100:+.0f}%'


def _measure(args: Any, sides: list[str], sizes: list[int], big: list[int]) -> dict[str, Any]:
    configs = [('none', None), ('all', 0), ('default', DEFAULT_THRESHOLD)]
    data: dict[str, Any] = {'sizes': sizes, 'sides': sides, 'runs': []}
    with tempfile.TemporaryDirectory(), redis_server(args.shared_redis) as port:
        for side in sides:
            for size in sorted(set(sizes + big)):
                for label, threshold in configs:
                    if size == 100 * MB and label == 'default':
                        continue
                    tasks = _tasks_for(size, args.quick)
                    if side == 'colmena':
                        med = run_colmena(size, threshold, tasks, port)
                    else:
                        med = run_tether(side.split('-')[1], size, threshold, tasks, port)
                    data['runs'].append(
                        {'side': side, 'size': size, 'proxy': label, 'tasks': tasks, **med},
                    )
                    print(
                        f'{side:13s} {size:>10d} B proxy={label:8s} '
                        f'round trip {_ms(med["lifetime"])} ms overhead {_ms(med["overhead"])} ms',
                        file=sys.stderr,
                    )
    return data


def main() -> None:
    args = parse_args(__doc__)
    # Parsl's interchange and worker commands live next to this interpreter.
    os.environ['PATH'] = os.pathsep.join([os.path.dirname(sys.executable), os.environ['PATH']])
    sides = ['tether-local', 'tether-parsl']
    if not args.no_peer:
        sides.append('colmena')
    sizes = [1 * KB, 10 * KB, 100 * KB, 1 * MB, 10 * MB]
    big = [1 * MB, 100 * MB]
    data = _measure(args, sides, sizes, big)

    def get(side: str, size: int, proxy: str, key: str) -> float | None:
        for run in data['runs']:
            if (run['side'], run['size'], run['proxy']) == (side, size, proxy):
                return float(run[key])
        return None

    md = []
    # Figure 3.18 top left: components at 1 MB.
    comps = [
        'thinker_serialize',
        'thinker_to_server',
        'server_to_worker',
        'on_worker',
        'worker_to_thinker',
        'overhead',
        'lifetime',
    ]
    rows = []
    for side in sides:
        for proxy in ('none', 'all'):
            rows.append([f'{side} proxy={proxy}', *(_ms(get(side, MB, proxy, c)) for c in comps)])
    md.append(
        print_table('Figure 3.18 (top left): median ms per task, I = 1 MB', ['side', *comps], rows)
    )
    # Figure 3.18 bottom left: overhead reduction vs size.
    rows = []
    for side in sides:
        row = [side]
        for size in sizes:
            base = get(side, size, 'none', 'overhead')
            row.append(
                f'{_pct(base, get(side, size, "all", "overhead"))} / '
                f'{_pct(base, get(side, size, "default", "overhead"))}',
            )
        rows.append(row)
    md.append(
        print_table(
            'Figure 3.18 (bottom left): overhead reduction with proxies (all / default threshold)',
            ['side', *(f'{s // KB} KB' for s in sizes)],
            rows,
        ),
    )
    # Round trips and figure 3.12.
    rows = []
    for side in sides:
        for size in [1 * KB, *big, 10 * MB]:
            base = get(side, size, 'none', 'lifetime')
            proxied = get(side, size, 'all', 'lifetime')
            rows.append([side, f'{size // KB} KB', _ms(base), _ms(proxied), _pct(base, proxied)])
    md.append(
        print_table(
            'Round trip (median ms) and figure 3.12 improvement with every input proxied',
            ['side', 'input', 'no proxy', 'proxy', 'improvement'],
            rows,
        ),
    )
    write_json('bench_steer', data, '\n\n'.join(md))


if __name__ == '__main__':
    main()
