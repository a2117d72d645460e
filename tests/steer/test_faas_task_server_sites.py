"""Steering across endpoints: FaaSTaskServer's per-endpoint resource counter.

Unit tests of :class:`KindResourceCounter`, then two real endpoints of different sizes on
the function service over PostgreSQL and RabbitMQ: the counter learns each one's slots
from what it advertised, and a Thinker's pools draw only on their own endpoint's slots.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.faas.conftest import (  # noqa: F401 (fixtures)
    AgentThread,
    new_endpoint,
    new_user,
    pg_url,
    prod_service,
    queue_prefix,
    start_endpoint,
)
from tests.steer import _tasks
from tether.exceptions import ConfigError
from tether.faas._server import ServiceThread
from tether.steer import BaseThinker, PipeQueues, Result, result_processor, task_submitter
from tether.steer.task_server import FaaSTaskServer
from tether.steer.task_server.faas import endpoint_slots
from tether.steer.thinker import KindResourceCounter, ResourceCounter
from tether.steer.thinker.resources import ReallocatorThread
from tether.testing.steer import serving


def test_slots_of_one_kind_never_go_to_another() -> None:
    rec = KindResourceCounter({'a': 1, 'b': 3}, {'sim': 'a', 'train': 'b', 'infer': 'b'})
    assert isinstance(rec, ResourceCounter)
    assert rec.kinds == {'a': 1, 'b': 3}
    assert rec.total_slots == 4
    assert rec.unallocated_slots == 4
    assert rec.task_types == ['sim', 'train', 'infer']
    # None is the unallocated pool of the other pool's kind: 'all' of kind a is one.
    assert rec.reallocate(None, 'sim', 'all')
    assert rec.allocated_slots('sim') == 1
    assert rec.unallocated('a') == 0
    # Only one slot of kind a exists, though three of kind b are unallocated.
    with pytest.raises(ConfigError, match='cannot move'):
        rec.reallocate(None, 'sim', 1)
    assert rec.reallocate(None, 'train', 2)
    assert rec.reallocate('train', 'infer', 1)
    assert (rec.allocated_slots('train'), rec.allocated_slots('infer')) == (1, 1)
    assert rec.unallocated_slots == 1
    assert rec.unallocated('b') == 1
    with pytest.raises(ConfigError, match='do not move between kinds'):
        rec.reallocate('sim', 'train', 1)
    assert rec.acquire('sim', 1)
    assert not rec.acquire('sim', 1, timeout=0.01)
    assert rec.active_slots('sim') == 1
    rec.release('sim', 1)
    assert rec.available_slots('sim') == 1
    with pytest.raises(ConfigError, match='exceeds its allocation'):
        rec.release('sim', 1)
    assert 'KindResourceCounter(a:' in repr(rec)


def test_pool_none_and_bad_definitions() -> None:
    rec = KindResourceCounter({'a': 2, 'b': 1}, {'sim': 'a', 'train': 'b'})
    with pytest.raises(ConfigError, match='ambiguous'):
        rec.acquire(None, 1)
    with pytest.raises(ConfigError, match='unknown task pool'):
        rec.acquire('nope', 1)
    with pytest.raises(ConfigError, match='unknown kind'):
        rec.unallocated('c')
    one = KindResourceCounter({'a': 2}, {'sim': 'a'})
    assert one.acquire(None, 2)  # one kind: None is its unallocated pool
    assert one.available_slots(None) == 0
    with pytest.raises(ConfigError, match='unknown kind'):
        KindResourceCounter({'a': 1}, {'sim': 'gpu'})
    with pytest.raises(ConfigError, match='at least one kind'):
        KindResourceCounter({}, {})
    with pytest.raises(ConfigError, match='slots must be an int'):
        KindResourceCounter({'a': -1}, {})


def test_reallocator_thread_moves_slots_within_a_kind() -> None:
    rec = KindResourceCounter({'a': 3, 'b': 1}, {'sim': 'a', 'more': 'a', 'train': 'b'})
    rec.reallocate(None, 'sim', 3)
    stop = threading.Event()
    thread = ReallocatorThread(rec, 'sim', 'more', 'sim', max_slots=2, stop_event=stop)
    thread.start()
    assert rec.acquire('more', 2, timeout=60)  # gathered, then taken
    rec.release('more', 2)
    stop.set()
    thread.join(60)
    assert (rec.allocated_slots('sim'), rec.allocated_slots('more')) == (3, 0)
    assert rec.allocated_slots('train') == 0


class TwoSites(BaseThinker):
    """Submit simulations and trainings while their pools have slots; count in flight."""

    def __init__(self, queues: Any, rec: ResourceCounter, n: int) -> None:
        super().__init__(queues, rec)
        self.n = n
        self.sent = {'simulate': 0, 'train': 0}
        self.got: list[Result] = []
        self.inflight = {'simulate': 0, 'train': 0}
        self.most = {'simulate': 0, 'train': 0}
        self.lock = threading.Lock()

    def _submit(self, pool: str, method: str, *args: int) -> None:
        with self.lock:
            if self.sent[pool] >= self.n:
                self.rec.release(pool, 1)
                return
            self.sent[pool] += 1
            self.inflight[pool] += 1
            self.most[pool] = max(self.most[pool], self.inflight[pool])
        self.queues.send_inputs(*args, method=method, task_info={'pool': pool})

    @task_submitter(task_type='simulate')
    def simulate(self) -> None:
        self._submit('simulate', 'add', 1, 1)

    @task_submitter(task_type='train')
    def train(self) -> None:
        self._submit('train', 'echo', 2)

    @result_processor()
    def collect(self, result: Result) -> None:
        pool = result.task_info['pool']
        with self.lock:
            self.inflight[pool] -= 1
            self.got.append(result)
            done = len(self.got) == 2 * self.n
        self.rec.release(pool, 1)
        if done:
            self.done.set()


@pytest.mark.slow
def test_two_endpoints_of_different_sizes(
    prod_service: ServiceThread,  # noqa: F811
    start_endpoint: Any,  # noqa: F811
) -> None:
    user_id, token = new_user(prod_service)
    small = start_endpoint(prod_service, user_id, name='site-a', max_workers=1, min_workers=1)
    big = start_endpoint(prod_service, user_id, name='site-b', max_workers=3, min_workers=3)
    eid_a, eid_b = small.config.endpoint_id, big.config.endpoint_id
    queues = PipeQueues()
    server = FaaSTaskServer(
        {_tasks.add: eid_a, _tasks.echo: eid_b},
        queues,
        service_url=prod_service.url,
        token=token,
    )
    assert endpoint_slots([eid_a, eid_b], service_url=prod_service.url, token=token) == {
        eid_a: 1,
        eid_b: 3,
    }
    rec = server.resource_counter({'simulate': _tasks.add, 'train': 'echo'})
    assert rec.kinds == {eid_a: 1, eid_b: 3}
    assert (rec.kind_of('simulate'), rec.kind_of('train')) == (eid_a, eid_b)
    # Given slots win over advertised ones; a pool of an unknown method is refused.
    assert server.resource_counter(slots={eid_b: 8}).kinds == {eid_a: 1, eid_b: 8}
    with pytest.raises(ConfigError, match='not one of this task server'):
        server.resource_counter({'x': 'nope'})
    rec.reallocate(None, 'simulate', 1)
    rec.reallocate(None, 'train', 3)
    with pytest.raises(ConfigError, match='do not move between kinds'):
        rec.reallocate('train', 'simulate', 1)
    thinker = TwoSites(queues, rec, 6)
    with serving(server):
        thinker.run()
    assert all(r.success for r in thinker.got), [r.failure_info for r in thinker.got]
    values = sorted((r.method, r.value) for r in thinker.got)
    assert values == [('add', 2)] * 6 + [('echo', 2)] * 6
    assert thinker.most['simulate'] == 1  # site A has one worker: never two at once
    assert thinker.most['train'] <= 3
    # Each method ran on its own endpoint's workers.
    pids = {name: {w.pid for w in a.agent.engine._workers} for name, a in
            (('a', small), ('b', big))}  # fmt: skip
    ran = {r.method: set() for r in thinker.got}  # type: ignore[var-annotated]
    for r in thinker.got:
        ran[r.method].add(r.worker_info['pid'])
    assert ran['add'] <= pids['a'], (ran, pids)
    assert ran['echo'] <= pids['b'], (ran, pids)


def test_an_endpoint_that_never_connected_needs_its_slots(
    prod_service: ServiceThread,  # noqa: F811
) -> None:
    user_id, token = new_user(prod_service)
    eid, _ = new_endpoint(prod_service, user_id, 'never')
    server = FaaSTaskServer({_tasks.add: eid}, PipeQueues(), service_url=prod_service.url,
                            token=token)  # fmt: skip
    with pytest.raises(ConfigError, match='never connected'):
        server.resource_counter()
    assert server.resource_counter(slots={eid: 4}).kinds == {eid: 4}
