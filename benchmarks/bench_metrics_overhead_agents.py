"""Overhead of Prometheus metrics on a daemon agent's hot path (a no-op action's round
trip through the Redis exchange).

Two daemon agents run, one with metrics on (``DaemonLauncher(metrics=...)``, port 0)
and one without; one client times round trips to each in alternating rounds (A, B, A,
B ...) so the machine's load hits both alike. Prints a table and writes JSON.

    .venv/bin/python benchmarks/bench_metrics_overhead_agents.py --rounds 10 --calls 500
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _round(handle: Any, calls: int) -> float:
    start = time.perf_counter()
    for i in range(calls):
        handle.echo(i).result(60)
    return (time.perf_counter() - start) / calls * 1e6


def _block_cost(n: int = 200_000) -> float:
    """Nanoseconds the agent spends per call on metrics (the timer and the block)."""
    from tether.agents._metrics import StatsBlock

    with tempfile.TemporaryDirectory() as folder:
        block = StatsBlock(Path(folder) / 'agent-x.metrics', ['echo'], create=True)
        best = float('inf')
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(n):
                t0 = time.perf_counter()
                block.load(1, 0)
                block.action('echo', time.perf_counter() - t0, failed=False)
                block.load(0, 0)
            best = min(best, (time.perf_counter() - start) / n * 1e9)
        block.close()
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--rounds', type=int, default=10)
    parser.add_argument('--calls', type=int, default=500, help='round trips per round')
    parser.add_argument(
        '--out', default=str(ROOT / 'benchmarks' / 'results' / 'metrics_overhead_agents.json')
    )
    args = parser.parse_args()

    # The daemons import the behavior from the tests package.
    sys.path.insert(0, str(ROOT))
    extra = os.environ.get('PYTHONPATH')
    os.environ['PYTHONPATH'] = os.pathsep.join([str(ROOT), *([extra] if extra else [])])
    home = Path(tempfile.mkdtemp(prefix='bench-agent-metrics-'))
    os.environ['TETHER_AGENTS_HOME'] = str(home)

    from tests.agents._behaviors import Echo

    from tether._serve.metrics import MetricsOptions
    from tether.agents import Manager
    from tether.agents.exchange import RedisExchange
    from tether.agents.launcher import DaemonLauncher

    exchange = RedisExchange(prefix=f'bench-agent-metrics-{uuid.uuid4().hex[:8]}:')
    handles: dict[str, Any] = {}
    managers = {
        'off': Manager(exchange, DaemonLauncher(home=home)),
        'on': Manager(exchange, DaemonLauncher(home=home, metrics=MetricsOptions(port=0))),
    }
    try:
        for name, manager in managers.items():
            handles[name] = manager.launch(Echo())
            _round(handles[name], 50)  # warm up
        times: dict[str, list[float]] = {'off': [], 'on': []}
        for r in range(args.rounds):
            order = ('off', 'on') if r % 2 == 0 else ('on', 'off')
            for name in order:
                times[name].append(_round(handles[name], args.calls))
        scraped = None
        record = json.loads((home / 'daemons' / f'{handles["on"].agent_id}.json').read_text())
        if record.get('metrics'):
            import urllib.request

            with urllib.request.urlopen(record['metrics'], timeout=30) as response:
                text = response.read().decode()
            scraped = next(
                float(line.split()[-1])
                for line in text.splitlines()
                if line.startswith('tether_agent_actions_total{action="echo"}')
            )
    finally:
        for name, manager in managers.items():
            if name in handles:
                manager.shutdown(handles[name], blocking=True)
            manager.close()
        exchange.close()

    off, on = statistics.median(times['off']), statistics.median(times['on'])
    per_call_ns = _block_cost()
    print(f'{"metrics":8} {"median us/call":>15} {"min":>10} {"max":>10}')
    for name in ('off', 'on'):
        t = times[name]
        print(f'{name:8} {statistics.median(t):15.1f} {min(t):10.1f} {max(t):10.1f}')
    print(f'on/off = {on / off:.3f}  (calls counted by the daemon with metrics: {scraped})')
    print(f'what metrics add to each call in the agent: {per_call_ns:.0f} ns')
    result = {
        'benchmark': 'metrics_overhead_agents',
        'what': 'no-op action round trip to a daemon agent through the Redis exchange',
        'rounds': args.rounds,
        'calls_per_round': args.calls,
        'us_per_call': times,
        'median_off_us': off,
        'median_on_us': on,
        'on_over_off': on / off,
        'calls_counted': scraped,
        'recording_ns_per_call': per_call_ns,
        'load_average': os.getloadavg(),
        'when': time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + '\n')
    print(f'wrote {args.out}')


if __name__ == '__main__':
    main()
