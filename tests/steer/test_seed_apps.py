"""The seeds' Colmena programs, end to end on Redis queues and a Parsl HTEX task server.

The 003 paper describes its Thinkers in prose (agents as threads that submit simulations
as resources free up and consume results); the dissertation's section 3.6.1 gives the
synthetic application: a Thinker plus N workers, T tasks with inputs of size I, one task
per worker first and a new one for each result until T were submitted.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest

from tests.conftest import REDIS_HOST, REDIS_PORT
from tests.parsl_env import parsl_environment
from tests.steer import _tasks
from tests.steer.test_task_servers import _htex_config
from tether.proxy import Proxy
from tether.steer import (
    BaseThinker,
    ParslTaskServer,
    RedisQueues,
    ResourceCounter,
    Result,
    agent,
    result_processor,
    task_submitter,
)
from tether.testing.steer import serving


class Synthetic(BaseThinker):
    """Section 3.6.1's synthetic application: keep N workers busy until T tasks ran."""

    def __init__(self, queues: Any, n_workers: int, n_tasks: int, size: int) -> None:
        super().__init__(queues, ResourceCounter(n_workers, ['task']))
        self.n_tasks = n_tasks
        self.size = size
        self.submitted = 0
        self.results: list[Result] = []
        self.lock = threading.Lock()

    @agent(startup=True)
    def allocate(self) -> None:
        self.rec.reallocate(None, 'task', 'all')

    @task_submitter(task_type='task', n_slots=1)
    def submit(self) -> None:
        with self.lock:
            if self.submitted >= self.n_tasks:
                self.rec.release('task', 1)
                self.done.wait()
                return
            self.submitted += 1
        # Unique (so not cacheable) input of the given size.
        payload = uuid.uuid4().bytes * (self.size // 16)
        self.queues.send_inputs(payload, method='nbytes', topic='task')

    @result_processor(topic='task')
    def receive(self, result: Result) -> None:
        self.results.append(result)
        self.rec.release('task', 1)
        if len(self.results) == self.n_tasks:
            self.done.set()


class Batch(BaseThinker):
    """The "run a large batch in parallel" Thinker: one agent sends, then collects."""

    def __init__(self, queues: Any, to_run: list[int]) -> None:
        super().__init__(queues)
        self.to_run = to_run
        self.best: int | None = None

    @agent
    def run_batch(self) -> None:
        for x in self.to_run:
            self.queues.send_inputs(x, 3, method='add')
        results = [self.queues.get_result() for _ in range(len(self.to_run))]
        self.best = min(r.value for r in results)


@pytest.mark.slow
def test_synthetic_application_on_redis_and_parsl(store: Any) -> None:
    queues = RedisQueues(
        topics=['task'],
        hostname=REDIS_HOST,
        port=REDIS_PORT,
        prefix=f'steer-test-{uuid.uuid4().hex}',
        proxystore_name=store.name,
        proxystore_threshold=10_000,
    )
    methods = [_tasks.nbytes, _tasks.add]
    try:
        with (
            parsl_environment('tether-steer-') as run_dir,
            serving(ParslTaskServer(methods, queues, _htex_config(run_dir))),
        ):
            synthetic = Synthetic(queues, n_workers=2, n_tasks=8, size=1_000_000)
            synthetic.run()
            batch = Batch(queues, [5, -2, 9])
            batch.run()
    finally:
        queues.flush()
        queues.close()
    assert len(synthetic.results) == 8
    assert all(r.success for r in synthetic.results)
    assert {r.value for r in synthetic.results} == {1_000_000}
    # Inputs went by proxy: the task server moved small messages only.
    assert all(r.message_sizes['inputs'] < 10_000 for r in synthetic.results)
    assert all(isinstance(r.args[0], Proxy) for r in synthetic.results)
    assert batch.best == 1
