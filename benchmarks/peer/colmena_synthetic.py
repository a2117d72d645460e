"""The synthetic application on Colmena 0.7.2, for bench_steer.py (run in the Colmena venv).

Same application as the tether side: a Thinker (a submitting agent and a receiving
agent sharing one slot per worker), 2 Parsl HTEX workers on loopback, T
zero-length tasks with unique inputs of SIZE bytes and no output; Redis queues; inputs
proxied through ProxyStore's Redis store when a threshold is given. Prints one JSON line
with the per-component medians (seconds). Not imported by tether.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import uuid
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from _unique_input import unique_input


def noop(data: Any) -> None:
    """The synthetic task."""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument('--size', type=int, required=True)
    parser.add_argument('--tasks', type=int, required=True)
    parser.add_argument('--port', type=int, required=True)
    parser.add_argument('--threshold', default='none')
    args = parser.parse_args()

    from colmena.queue.redis import RedisQueues
    from colmena.task_server import ParslTaskServer
    from colmena.thinker import BaseThinker, agent
    from colmena.thinker.resources import ResourceCounter
    from parsl.config import Config
    from parsl.executors import HighThroughputExecutor
    from parsl.providers import LocalProvider
    from proxystore.connectors.redis import RedisConnector
    from proxystore.store import Store, register_store

    prefix = f'bench-colmena-{uuid.uuid4().hex}'
    threshold = None if args.threshold == 'none' else int(args.threshold)
    name = None
    if threshold is not None:
        name = prefix
        register_store(Store(name, RedisConnector('127.0.0.1', args.port)))
    queues = RedisQueues(
        topics=['default'],
        hostname='127.0.0.1',
        port=args.port,
        prefix=prefix,
        keep_inputs=False,
        proxystore_name=name,
        proxystore_threshold=threshold,
    )
    config = Config(
        executors=[
            HighThroughputExecutor(
                label='htex',
                address='127.0.0.1',
                max_workers_per_node=2,
                provider=LocalProvider(init_blocks=1, max_blocks=1),
                encrypted=False,
            ),
        ],
        run_dir=tempfile.mkdtemp(prefix='bench-colmena-'),
        strategy='none',
        # The setting docs/steer.md recommends (both sides): no DEBUG log of every task
        # in the task server's process (parsl.log), ~1 ms per task on this machine.
        initialize_logging=False,
    )
    n_tasks, size = args.tasks, args.size

    class Synthetic(BaseThinker):
        """The same two agents as the tether side: one submits, one receives."""

        def __init__(self, queues: Any) -> None:
            super().__init__(queues, ResourceCounter(2))
            self.results: list[Any] = []

        @agent(startup=True)
        def producer(self) -> None:
            for _ in range(n_tasks):
                if not self.rec.acquire(None, 1, cancel_if=self.done):
                    return
                self.queues.send_inputs(unique_input(size), method='noop')

        @agent
        def consumer(self) -> None:
            while len(self.results) < n_tasks:
                self.results.append(self.queues.get_result(timeout=600))
                self.rec.release(None, 1)

    server = ParslTaskServer([noop], queues, config)
    server.start()
    try:
        warm = Synthetic(queues)
        warm.run()
        thinker = Synthetic(queues)
        thinker.run()
    finally:
        queues.send_kill_signal()
        server.join()
    rows = []
    for r in thinker.results:
        if not r.success:
            raise RuntimeError(f'task failed: {r.failure_info}')
        t, s = r.timestamp, r.time
        running = s.running if s.running == s.running else 0.0
        ser = (s.serialize_inputs or 0.0) + (s.deserialize_results or 0.0)
        lifetime = t.result_received - t.created
        rows.append(
            {
                'lifetime': lifetime,
                'overhead': lifetime - running,
                'thinker_serialize': ser,
                'thinker_to_server': t.input_received - t.created - (s.serialize_inputs or 0.0),
                'server_to_worker': t.compute_started - t.input_received,
                'on_worker': t.compute_ended - t.compute_started,
                'worker_to_thinker': t.result_received - t.compute_ended,
            },
        )
    print(json.dumps({k: statistics.median(row[k] for row in rows) for k in rows[0]}))


if __name__ == '__main__':
    main()
