"""Cost of capturing tasks' stdout and stderr on the faas workers (issue 31 item 4).

Two measurements:

* in the worker: microseconds per task of ``run_task`` with the capture on (64 KiB)
  and off (``max_output_bytes = 0``), for a no-op and for a task that prints a line;
* end to end: the no-op round trip through one service (SQLite, in-process queues)
  to two endpoints of one user, one capturing and one not, in alternating rounds of
  sequential tasks (so both see the same load on this shared machine).

    .venv/bin/python benchmarks/bench_faas_output.py [--quick]
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import threading
import time
import timeit
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import parse_args, print_table, write_json


def noop() -> None:
    return None


def chatty() -> None:
    print('one line of output')


def in_worker(n: int) -> dict[str, float]:
    """Microseconds per task of run_task, capture on and off."""
    from tether.faas._payload import pack_args, pack_function
    from tether.faas.endpoint import _worker
    from tether.faas.endpoint._output import OutputCapture

    out: dict[str, float] = {}
    devnull = os.open(os.devnull, os.O_WRONLY)
    saved = os.dup(1)
    os.dup2(devnull, 1)  # the capture-off runs print to /dev/null, not the table
    try:
        for name, fn in (('noop', noop), ('print', chatty)):
            message = ('t', name, 'pickle', pack_function(fn), 'tether', pack_args((), {}))
            message += (None, None)
            functions: dict[str, Any] = {}
            for mode, limit in (('off', 0), ('on', 64 * 1024)):
                _worker._capture = OutputCapture(limit)
                _worker.run_task(message, functions)  # type: ignore[arg-type]
                best = min(
                    timeit.repeat(
                        lambda m=message, f=functions: _worker.run_task(m, f),  # type: ignore[misc]
                        number=n,
                        repeat=7,
                    )
                )
                out[f'{name}_{mode}_us'] = best / n * 1e6
    finally:
        os.dup2(saved, 1)
        os.close(devnull)
        os.close(saved)
    return out


class _Agent:
    def __init__(self, config: Any, token: str) -> None:
        from tether.faas.endpoint import Agent

        self.agent = Agent(config, token)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.stop_event: asyncio.Event | None = None
        self.thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.agent.connected.is_set():
            if time.monotonic() > deadline:
                raise RuntimeError('the endpoint did not connect')
            self.thread.join(0.05)

    async def _main(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.stop_event = asyncio.Event()
        await self.agent.run(self.stop_event)

    def stop(self) -> None:
        if self.loop is not None and self.stop_event is not None:
            self.loop.call_soon_threadsafe(self.stop_event.set)
        self.thread.join(60)


def end_to_end(rounds: int, per_round: int) -> dict[str, Any]:
    from tether.faas import EndpointConfig, Executor, ServiceConfig
    from tether.faas._server import ServiceThread

    st = ServiceThread(ServiceConfig(port=0, database='sqlite://', broker='memory://')).start()
    assert st.service is not None
    agents = []
    try:
        user, token = st.call(st.service.repo.create_user('bench-output'))
        executors = {}
        limits = (('off', 0), ('on', 64 * 1024))
        if os.environ.get('BENCH_SWAP'):  # the same two endpoints, capture settings swapped
            limits = (('off', 64 * 1024), ('on', 0))
        for mode, limit in limits:
            eid, etoken = st.call(st.service.repo.add_endpoint(user, f'ep-{mode}'))
            config = EndpointConfig(
                name=f'ep-{mode}',
                endpoint_id=eid,
                service_url=st.url,
                max_workers=1,
                min_workers=1,
                max_output_bytes=limit,
            )
            agents.append(_Agent(config, etoken))
            executors[mode] = Executor(eid, service_url=st.url, token=token)
        samples: dict[str, list[float]] = {'off': [], 'on': []}
        round_medians: dict[str, list[float]] = {'off': [], 'on': []}
        for ex in executors.values():
            for _ in range(20):
                ex.submit(noop).result(timeout=60)
        for r in range(rounds):  # task by task in turn: both see the same load
            order = ('off', 'on') if r % 2 == 0 else ('on', 'off')
            these: dict[str, list[float]] = {'off': [], 'on': []}
            for _ in range(per_round):
                for mode in order:
                    t0 = time.perf_counter()
                    executors[mode].submit(noop).result(timeout=60)
                    these[mode].append(time.perf_counter() - t0)
            for mode in order:
                samples[mode] += these[mode]
                round_medians[mode].append(statistics.median(these[mode]))
        for ex in executors.values():
            ex.shutdown()
    finally:
        for agent in agents:
            agent.stop()
        st.stop()
    ratios = [a / b for a, b in zip(round_medians['on'], round_medians['off'], strict=True)]
    return {
        'median_off_ms': statistics.median(samples['off']) * 1e3,
        'median_on_ms': statistics.median(samples['on']) * 1e3,
        'ratio_of_medians': statistics.median(samples['on']) / statistics.median(samples['off']),
        'round_ratios': ratios,
        'rounds': rounds,
        'tasks_per_round': per_round,
    }


def main() -> None:
    args = parse_args(__doc__)
    load_before = os.getloadavg()
    worker = in_worker(2000 if args.quick else 20000)
    e2e = end_to_end(6 if args.quick else 12, 50 if args.quick else 100)
    results = {'in_worker': worker, 'end_to_end': e2e}
    results['load'] = {'before': load_before, 'after': os.getloadavg()}
    rows = [
        ['run_task, no-op (µs)', f'{worker["noop_off_us"]:.1f}', f'{worker["noop_on_us"]:.1f}'],
        [
            'run_task, one print (µs)',
            f'{worker["print_off_us"]:.1f}',
            f'{worker["print_on_us"]:.1f}',
        ],
        [
            'no-op round trip (ms, median)',
            f'{e2e["median_off_ms"]:.3f}',
            f'{e2e["median_on_ms"]:.3f}',
        ],
    ]
    md = print_table('Capture of task output: off vs on', ['measure', 'off', 'on'], rows)
    spread = sorted(e2e['round_ratios'])
    md += (
        f'\n\non/off of the round trip: {e2e["ratio_of_medians"]:.3f} (rounds from '
        f'{spread[0]:.2f} to {spread[-1]:.2f}); load average before {load_before[0]:.1f}, '
        f'after {os.getloadavg()[0]:.1f}'
    )
    print(md.split('\n\n')[-1])
    write_json('faas_output', results, md)


if __name__ == '__main__':
    main()
